package tests

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/mneme-memory/mneme/sidecar/dbtest"
)

// buffersOf runs EXPLAIN (ANALYZE, BUFFERS) of q and returns the shared
// buffers it touched (hit + read), the function's nested statements
// included.
func buffersOf(t *testing.T, db *dbtest.DB, q string, args ...any) int {
	t.Helper()
	var plan []byte
	require.NoError(t, db.Pool.QueryRow(context.Background(), `EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) `+q, args...).Scan(&plan))
	var out []struct {
		Plan struct {
			Hit  int `json:"Shared Hit Blocks"`
			Read int `json:"Shared Read Blocks"`
		} `json:"Plan"`
	}
	require.NoError(t, json.Unmarshal(plan, &out))
	return out[0].Plan.Hit + out[0].Plan.Read
}

// A call for a small conversation costs what the small conversation
// holds, whatever the rest of the database holds and whatever the planner's
// statistics say: one huge conversation (20,000 memories, analyzed) and a
// small one the statistics have never seen (the planner estimates it at one
// row), whose words are the huge one's. Every BM25 lookup is by
// conversation and term, so the buffers a search, a BM25 leg and a context
// touch stay within a bound set by the small conversation alone; a plan
// that scans a conversation's postings filtered by term (what statistics
// made the planner choose before) touches tens of thousands.
func TestSmallConversationCostIgnoresTheRest(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := dbtest.New(t, dbtest.WithVector("array"))
	// A transaction that stays open while the data is written holds the
	// xmin horizon, as a long transaction, a slot being created or a
	// replica's feedback do in a deployment (and other tests did in the
	// pgvector deployment's full run): every per-term row of bm25_terms then
	// keeps each of its versions, and a plan that reads the term statistics
	// once per turn instead of once per call touches ten thousand buffers.
	hold, err := db.Pool.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.RepeatableRead})
	require.NoError(t, err)
	defer func() { _ = hold.Rollback(ctx) }()
	var xid int64
	require.NoError(t, hold.QueryRow(ctx, `SELECT txid_current()`).Scan(&xid))
	exec := execer(t, db.Pool)
	// (every table the calls read or the writes below fill: an autovacuum
	// ANALYZE of one of them in the middle changed the plans, once in a
	// loaded CI run)
	for _, tbl := range []string{"memories", "messages", "bm25_postings", "bm25_terms", "bm25_docs", "bm25_stats",
		"message_queue", "jobs", "job_refs", "memory_events", "review_log", "review_queries"} {
		exec(fmt.Sprintf(`ALTER TABLE mneme.%s SET (autovacuum_enabled = off)`, tbl))
	}
	// A vocabulary of 400 words; each memory 30 of them.
	vocab := `(SELECT string_agg('w' || ((g * 7919 + i * 104729) % 400), ' ') FROM generate_series(1, 30) i)`
	huge, small := uuid.New(), uuid.New()
	exec(`INSERT INTO mneme.memories (conversation_id, content, created_at, last_reviewed_at)
		SELECT $1, `+vocab+`, now(), now() FROM generate_series(1, 20000) g`, huge)
	exec(`ANALYZE mneme.memories`)
	exec(`ANALYZE mneme.bm25_postings`)
	exec(`ANALYZE mneme.bm25_terms`)
	// The small conversation: 300 episodes with their messages, after the
	// statistics were taken.
	for e := 0; e < 300; e++ {
		var ids []int64
		for m := 0; m < 3; m++ {
			var id int64
			require.NoError(t, db.Pool.QueryRow(ctx, `SELECT mneme.add_message($1, 'user', `+
				`(SELECT string_agg('w' || ((($2::int * 3 + $3::int) * 7919 + i * 104729) % 400), ' ') FROM generate_series(1, 10) i), `+
				`'2026-01-01'::timestamptz + make_interval(hours => $2::int, mins => $3::int))`, small, e, m).Scan(&id))
			ids = append(ids, id)
		}
		exec(`SELECT mneme.create_episode($1, $2, (SELECT string_agg(content, E'\n' ORDER BY id) FROM mneme.messages WHERE id = ANY ($2)),
			'episode', mneme.hash_embed('x'), 0, 'general', false, 900, 5)`, small, ids)
	}
	exec(`DELETE FROM mneme.jobs`)

	const query = "w17 w203 w388"
	limits := map[string]int{
		`SELECT * FROM mneme.bm25_search($1, $2, 100)`:           1500,
		`SELECT * FROM mneme.search($1, $2, 50)`:                 3000,
		`SELECT * FROM mneme.context_items($1, $2, 1000)`:        5000,
		`SELECT * FROM mneme.search($1, $2, 10, as_of => now())`: 8000,
	}
	for q, limit := range limits {
		b := buffersOf(t, db, q, small, query)
		t.Logf("%s: %d buffers", q, b)
		require.LessOrEqual(t, b, limit, "%s touched %d buffers for a conversation of 300 episodes", q, b)
	}
}

// Locking a retrieval's memories (add_pending_review, and _lock_memories
// for the review and revision writers) reads them by their key, whatever
// the planner believes of their conversation. Statistics taken while every
// conversation was small, then one grown to 30,000 memories: the planner
// estimates it at a handful of rows, and a lock read by conversation and id
// ANDed a bitmap of the whole conversation (1.5 ms a retrieve on a
// 50,000-memory conversation at 1,000,000 memories, docs/performance.md).
func TestLockingReadsByKeyAlone(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := dbtest.New(t, dbtest.WithVector("array"))
	exec := execer(t, db.Pool)
	for _, tbl := range []string{"memories", "bm25_postings", "bm25_terms", "bm25_docs", "bm25_stats", "message_queue"} {
		exec(fmt.Sprintf(`ALTER TABLE mneme.%s SET (autovacuum_enabled = off)`, tbl))
	}
	exec(`INSERT INTO mneme.memories (conversation_id, content, created_at, last_reviewed_at)
		SELECT ('00000000-0000-0000-0000-' || lpad((g % 500)::text, 12, '0'))::uuid, 'small ' || g, now(), now()
		FROM generate_series(1, 5000) g`)
	exec(`ANALYZE mneme.memories`)
	huge := uuid.New()
	exec(`INSERT INTO mneme.memories (conversation_id, content, created_at, last_reviewed_at)
		SELECT $1, 'huge ' || g, now(), now() FROM generate_series(1, 30000) g`, huge)
	var ids []uuid.UUID
	require.NoError(t, db.Pool.QueryRow(ctx, `SELECT array_agg(id) FROM (SELECT id FROM mneme.memories
		WHERE conversation_id = $1 ORDER BY content LIMIT 10) x`, huge).Scan(&ids))
	// Past the plan cache's five custom plans, so the generic plan is the
	// one measured.
	for i := 0; i < 8; i++ {
		exec(`SELECT mneme.add_pending_review($1, $2, 'q')`, huge, ids)
		exec(`UPDATE mneme.message_queue SET pending_reviews = NULL`)
		exec(`SELECT mneme._lock_memories($1)`, ids)
	}
	for q, limit := range map[string]int{
		`SELECT mneme.add_pending_review($1, $2, 'q')`:             75,
		`SELECT mneme._lock_memories($2) FROM (SELECT $1::uuid) x`: 60,
	} {
		b := buffersOf(t, db, q, huge, ids)
		t.Logf("%s: %d buffers", q, b)
		require.LessOrEqual(t, b, limit, "%s touched %d buffers to lock 10 memories of a 30,000-memory conversation", q, b)
	}
}
