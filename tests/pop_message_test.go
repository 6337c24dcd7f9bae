package tests

import (
	"context"
	"math/rand"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"
)

// mneme.pop_message, as a mneme_app login of tenant acme: it removes and
// returns the latest message while no memory holds it, leaving no copy of
// its words in any table (the marker scan of the erase tests), and moves
// the conversation's last message time back, so a message may again be
// given a time as early as the one before. An empty, unknown or another
// tenant's conversation pops nothing and loses nothing. Once segmentation
// stored the message in an episode, pop is refused (55000, naming the
// episode) and nothing changes; a segment job that read the popped
// message before finds it gone (lock_queued is false) and stores nothing
// of it.
func TestPopMessage(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := newPipelineEnv(t, false)
	for _, tn := range []string{"acme", "beta"} {
		_, err := e.db.Pool.Exec(ctx, `SELECT mneme.create_tenant($1)`, tn)
		require.NoError(t, err)
	}
	app, err := pgxpool.New(ctx, e.db.As(t, "mneme_app"))
	require.NoError(t, err)
	t.Cleanup(app.Close)
	as := func(tenant string, fn func(tx pgx.Tx) error) error {
		return pgx.BeginFunc(ctx, app, func(tx pgx.Tx) error {
			if _, err := tx.Exec(ctx, `SELECT mneme.set_tenant($1)`, tenant); err != nil {
				return err
			}
			return fn(tx)
		})
	}
	type popped struct {
		ID      int64
		Role    string
		Content string
		At      time.Time
	}
	pop := func(tenant string, conv uuid.UUID) ([]popped, error) {
		var out []popped
		err := as(tenant, func(tx pgx.Tx) error {
			rows, err := tx.Query(ctx, `SELECT message_id, role, content, created_at FROM mneme.pop_message($1)`, conv)
			if err != nil {
				return err
			}
			out, err = pgx.CollectRows(rows, pgx.RowToStructByPos[popped])
			return err
		})
		return out, err
	}
	add := func(tenant string, conv uuid.UUID, role, content string, at time.Time) int64 {
		t.Helper()
		var id int64
		require.NoError(t, as(tenant, func(tx pgx.Tx) error {
			return tx.QueryRow(ctx, `SELECT mneme.add_message($1, $2, $3, $4)`, conv, role, content, at).Scan(&id)
		}))
		return id
	}
	messages := func(conv uuid.UUID) []string {
		t.Helper()
		rows, err := e.db.Pool.Query(ctx, `SELECT content FROM mneme.messages WHERE conversation_id = $1 ORDER BY id`, conv)
		require.NoError(t, err)
		out, err := pgx.CollectRows(rows, pgx.RowTo[string])
		require.NoError(t, err)
		return out
	}

	marker := markerWord(rand.New(rand.NewSource(time.Now().UnixNano())))
	conv := uuid.New()
	t0 := time.Now().UTC().Add(-time.Hour).Truncate(time.Second)
	add("acme", conv, "user", "I am planning a trip to Lisbon.", t0)
	add("acme", conv, "assistant", "Lisbon is lovely in spring.", t0.Add(time.Minute))
	last := add("acme", conv, "user", "Oops, the code is "+marker+", take that back.", t0.Add(2*time.Minute))

	// Bad input and others' conversations: an error or no row, nothing lost.
	_, err = pop("acme", uuid.Nil)
	require.NoError(t, err, "an unknown conversation pops nothing")
	err = as("acme", func(tx pgx.Tx) error { _, err := tx.Exec(ctx, `SELECT * FROM mneme.pop_message(NULL)`); return err })
	requirePgError(t, err, "22004")
	got, err := pop("beta", conv)
	require.NoError(t, err)
	require.Empty(t, got, "another tenant's conversation pops nothing")
	got, err = pop("acme", uuid.New())
	require.NoError(t, err)
	require.Empty(t, got)
	require.Len(t, messages(conv), 3)

	// A segment job read the three queued messages before the pop.
	var ids []int64
	require.NoError(t, e.db.Pool.QueryRow(ctx, `SELECT array_agg(id ORDER BY id) FROM mneme.messages WHERE conversation_id = $1`, conv).Scan(&ids))

	got, err = pop("acme", conv)
	require.NoError(t, err)
	require.Equal(t, []popped{{ID: last, Role: "user", Content: "Oops, the code is " + marker + ", take that back.", At: t0.Add(2 * time.Minute)}},
		[]popped{{got[0].ID, got[0].Role, got[0].Content, got[0].At.UTC()}})
	require.Equal(t, []string{"I am planning a trip to Lisbon.", "Lisbon is lovely in spring."}, messages(conv))
	require.Empty(t, markerHits(t, e.db, []string{marker}), "no table holds the popped words")
	var stillQueued bool
	require.NoError(t, e.db.Pool.QueryRow(ctx, `SELECT mneme.lock_queued($1, $2)`, conv, ids).Scan(&stillQueued))
	require.False(t, stillQueued, "a job that read the popped message stores nothing of it")
	// The time of the message before is the conversation's last again.
	add("acme", conv, "user", "I fly on Friday.", t0.Add(90*time.Second))

	// Popped down to nothing, then nothing more.
	for range 3 {
		got, err = pop("acme", conv)
		require.NoError(t, err)
		require.Len(t, got, 1)
	}
	got, err = pop("acme", conv)
	require.NoError(t, err)
	require.Empty(t, got)
	var lastAt *time.Time
	require.NoError(t, e.db.Pool.QueryRow(ctx, `SELECT last_message_at FROM mneme.message_queue WHERE id = $1`, conv).Scan(&lastAt))
	require.Nil(t, lastAt)

	// Stored in an episode: refused, naming it; nothing changes.
	e.conv = uuid.New()
	var before string
	for i, m := range []string{"My dog is called Rufus.", "Rufus loves the riverbank.", "We walk there every morning.",
		"The river is cold in winter.", "Rufus does not mind the cold."} {
		add("acme", e.conv, []string{"user", "assistant"}[i%2], m, t0.Add(time.Duration(i)*time.Minute))
	}
	_, err = e.db.Pool.Exec(ctx, `SELECT mneme.segment_now($1)`, e.conv)
	require.NoError(t, err)
	e.drain()
	var episode uuid.UUID
	require.NoError(t, e.db.Pool.QueryRow(ctx, `SELECT memory_id FROM mneme.messages WHERE conversation_id = $1 ORDER BY id DESC LIMIT 1`,
		e.conv).Scan(&episode), "segmentation stored the last message")
	before = counts(t, e.db)
	_, err = pop("acme", e.conv)
	pgErr := requirePgError(t, err, "55000")
	require.Contains(t, pgErr.Message, episode.String())
	require.Contains(t, pgErr.Hint, "mneme.erase")
	require.Equal(t, before, counts(t, e.db), "a refused pop changes nothing")
	require.Len(t, messages(e.conv), 5)
}
