package tests

import (
	"context"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/mneme-memory/mneme/sidecar/dbtest"
)

// TestFindMemoriesPlans: mneme.find_memories (the memories view of mneme
// ui) reads what its scope holds, by index, whatever else the database
// holds: 20,000 memories of another tenant (analyzed) beside a small
// tenant of 200 memories in two conversations. The small tenant's list,
// one conversation's, a word search and a sort by retrievability each touch
// a bounded number of buffers (a scan of the other tenant's rows would touch
// thousands).
func TestFindMemoriesPlans(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := dbtest.New(t, dbtest.WithVector("array"))
	exec := execer(t, db.Pool)
	exec(`ALTER TABLE mneme.memories SET (autovacuum_enabled = off)`)
	exec(`SELECT mneme.create_tenant('big')`)
	huge, a, b := uuid.New(), uuid.New(), uuid.New()
	// (the conversation first: a memory's conversation is of its tenant,
	// sql/015-invariants.sql)
	exec(`INSERT INTO mneme.message_queue (id, tenant_id) VALUES ($1, 'big')`, huge)
	exec(`INSERT INTO mneme.memories (conversation_id, tenant_id, content, created_at, last_reviewed_at)
		SELECT $1, 'big', 'the big tenant''s memory number ' || g, now() - make_interval(mins => g), now() FROM generate_series(1, 20000) g`, huge)
	exec(`ANALYZE mneme.memories`)
	for _, c := range []uuid.UUID{a, b} {
		exec(`SELECT mneme.add_message($1, 'user', 'hello', now())`, c)
		exec(`INSERT INTO mneme.memories (conversation_id, content, created_at, last_reviewed_at, stability)
			SELECT $1, 'small memory ' || g || CASE WHEN g % 10 = 0 THEN ' about tea' ELSE '' END,
			       now() - make_interval(hours => g), now() - make_interval(days => g), 1 + g
			FROM generate_series(1, 100) g`, c)
	}
	exec(`DELETE FROM mneme.jobs`)

	limits := map[string][]any{
		`SELECT * FROM mneme.find_memories()`:                                           nil,
		`SELECT * FROM mneme.find_memories(sort => 'r')`:                                nil,
		`SELECT * FROM mneme.find_memories(words => 'TEA', only_status => 'active')`:    nil,
		`SELECT * FROM mneme.find_memories($1::uuid)`:                                   {a},
		`SELECT * FROM mneme.find_memories($1::uuid, 'tea', sort => 'said', page => 2)`: {a},
		`SELECT * FROM mneme.find_memories(only_pinned => true, r_max => 0.5)`:          nil,
	}
	for q, args := range limits {
		for i := 0; i < 7; i++ { // past PL/pgSQL's five custom plans: the generic plan too
			_, err := db.Pool.Exec(ctx, q, args...)
			require.NoError(t, err, q)
		}
		n := buffersOf(t, db, q, args...)
		t.Logf("%s: %d buffers", q, n)
		require.LessOrEqual(t, n, 400, "%s touched %d buffers for a tenant of 200 memories", q, n)
	}
	var rows, total int64
	require.NoError(t, db.Pool.QueryRow(ctx, `SELECT count(*), max(total) FROM mneme.find_memories(words => 'tea')`).Scan(&rows, &total))
	require.Equal(t, int64(20), rows)
	require.Equal(t, int64(20), total)
}
