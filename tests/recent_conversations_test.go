package tests

import (
	"context"
	"testing"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/mneme-memory/mneme/sidecar/dbtest"
)

// mneme.recent_conversations (mneme ui's conversation chooser) lists what
// mneme.conversations lists, in its order, with the titles of
// mneme.conversation_titles, and reads only the queue rows and the first
// messages: on a tenant whose conversations hold 5,000 messages, 10,000
// memories and 20,000 jobs (analyzed) it touches a bounded number of
// buffers, where mneme.conversations, which counts them, touches
// thousands. Bad k: 22004 / 22023.
func TestRecentConversations(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := dbtest.New(t, dbtest.WithVector("array"))
	exec := execer(t, db.Pool)
	big, small, other := uuid.New(), uuid.New(), uuid.New()
	exec(`SELECT mneme.add_message($1, 'user', 'message 1', now() - interval '2 days')`, big)
	exec(`INSERT INTO mneme.messages (conversation_id, role, content, created_at, tenant_id)
	        SELECT $1, CASE WHEN g % 2 = 0 THEN 'user' ELSE 'assistant' END, 'message ' || g, now() - interval '2 days' + g * interval '1 second', 'default'
	        FROM generate_series(2, 5000) g`, big)
	exec(`UPDATE mneme.message_queue SET last_message_at = now() - interval '2 hours' WHERE id = $1`, big)
	exec(`INSERT INTO mneme.memories (conversation_id, content, created_at, last_reviewed_at)
	        SELECT $1, 'memory ' || g, now() - interval '3 days', now() - interval '3 days' FROM generate_series(1, 10000) g`, big)
	exec(`INSERT INTO mneme.jobs (kind, conversation_id, state, attempts, tenant_id, finished_at)
	        SELECT 'segment', $1, 'done', 1, 'default', now() FROM generate_series(1, 20000) g`, big)
	exec(`SELECT mneme.set_speakers($1, ARRAY['Ann', 'Bob'])`, small)
	exec(`SELECT mneme.add_message($1, 'Ann', 'Hello Bob, long time no see.', now() - interval '1 hour')`, small)
	exec(`SELECT mneme.create_tenant('other')`)
	require.NoError(t, pgx.BeginFunc(ctx, db.Pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `SELECT mneme.set_tenant('other')`); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, `SELECT mneme.add_message($1, 'user', 'another tenant', now())`, other)
		return err
	}))
	exec(`ANALYZE`)

	type row struct {
		ID       uuid.UUID
		Speakers []string
		First    string
	}
	read := func(q string) []row {
		rows, err := db.Pool.Query(ctx, q)
		require.NoError(t, err, q)
		out, err := pgx.CollectRows(rows, pgx.RowToStructByPos[row])
		require.NoError(t, err, q)
		return out
	}
	got := read(`SELECT conversation_id, speakers, first_message FROM mneme.recent_conversations(500)`)
	require.Equal(t, []row{{small, []string{"Ann", "Bob"}, "Hello Bob, long time no see."}, {big, []string{"user", "assistant"}, "message 1"}}, got)
	order := read(`SELECT c.conversation_id, t.speakers, t.first_message FROM mneme.conversations(500) c
		JOIN mneme.conversation_titles(ARRAY(SELECT conversation_id FROM mneme.conversations(500))) t USING (conversation_id)
		ORDER BY (SELECT o FROM mneme.conversations(500) WITH ORDINALITY AS x(conversation_id, a, b, c, d, e, f, g, h, o) WHERE x.conversation_id = c.conversation_id)`)
	require.Equal(t, order, got, "the order and titles of conversations and conversation_titles")
	require.Len(t, read(`SELECT conversation_id, speakers, first_message FROM mneme.recent_conversations(1)`), 1)

	q := `SELECT * FROM mneme.recent_conversations(500)`
	for range 7 { // past PL/pgSQL's five custom plans: the generic plan too
		exec(q)
	}
	recent, counted := buffersOf(t, db, q), buffersOf(t, db, `SELECT * FROM mneme.conversations(500)`)
	t.Logf("recent_conversations: %d buffers; conversations: %d", recent, counted)
	require.LessOrEqual(t, recent, 100, "recent_conversations reads no message, memory or job beyond the first messages")
	require.Greater(t, counted, 10*recent, "conversations counts them")

	_, err := db.Pool.Exec(ctx, `SELECT * FROM mneme.recent_conversations(NULL)`)
	requirePgError(t, err, "22004")
	_, err = db.Pool.Exec(ctx, `SELECT * FROM mneme.recent_conversations(0)`)
	requirePgError(t, err, "22023")
}
