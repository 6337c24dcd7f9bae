package tests

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/mneme-memory/mneme/sidecar/dbtest"
)

// Issue 53: indexes that manage themselves, on Citus. A conversation of a
// distributed mneme (pgvector) that grows past vector_scope_index_min gets
// its own HNSW index from the running sidecar, with no command run: the
// sidecar's CREATE INDEX CONCURRENTLY on the distributed table, which
// Citus runs on every shard (docs/scale.md, "Per-scope HNSW indexes on
// Citus", says why every shard and not only the conversation's). The plan
// the worker makes for the conversation's shard then walks that shard's
// copy of the index, both for the query alone and inside mneme.search
// (delegated to the worker). Below half the minimum the index is dropped.
func TestCitusVectorIndexesManageThemselves(t *testing.T) {
	if !dbtest.OnCitus() {
		t.Skip("the citus deployment (MNEME_TEST_DEPLOYMENT=citus) runs this test")
	}
	db := dbtest.New(t, dbtest.WithVector("pgvector"))
	require.Equal(t, "pgvector", db.Variant)
	ctx := context.Background()
	for _, s := range []string{
		`SELECT mneme.set_setting('embedder', '"external"')`,
		`SELECT mneme.set_setting('vector_scope_index_min', '300')`,
	} {
		_, err := db.Pool.Exec(ctx, s)
		require.NoError(t, err, s)
	}
	conv := uuid.New()
	_, err := db.Pool.Exec(ctx, `INSERT INTO mneme.message_queue (id, tenant_id) VALUES ($1, 'default')`, conv)
	require.NoError(t, err)
	g := newGrowingScope(t, db, 2)
	index := g.index(conv)
	ready := func() bool { return g.ready(conv) }
	workerPool, _, stop := startIndexingSidecar(t, db, "poll", time.Second)

	ids := g.add(conv, 250)
	time.Sleep(time.Second)
	require.False(t, ready(), "below the minimum: no index")

	// The conversation grows past it: its index comes, no command run.
	ids = append(ids, g.add(conv, 100)...)
	deadline := time.Now().Add(90 * time.Second)
	for !ready() {
		require.True(t, time.Now().Before(deadline), "no index 90 s after the conversation passed vector_scope_index_min")
		time.Sleep(200 * time.Millisecond)
	}
	require.Equal(t, map[string]string{index: "ready"}, vectorIndexRows(t, workerPool))

	// Every shard has its copy, valid (the conversation's holds its rows).
	var shards, valid int
	require.NoError(t, db.Pool.QueryRow(ctx, `SELECT count(*), count(*) FILTER (WHERE result = 't')
		FROM run_command_on_placements('mneme.memories',
		     $$SELECT coalesce((SELECT indisvalid FROM pg_index WHERE indexrelid = to_regclass('mneme.`+index+`_' || split_part('%s', '_', 2))), false)$$)`).Scan(&shards, &valid))
	require.Positive(t, shards)
	require.Equal(t, shards, valid, "the index on every shard, valid")

	// The worker's plan of the conversation's shard walks the index, with
	// the vector leg's settings (sorting off: on a shard this small the
	// planner would rather sort; SET LOCAL reaches the worker with
	// citus.propagate_set_commands = local).
	q := vecLiteral(g.corpus.point(0))
	tx, err := db.Pool.Begin(ctx)
	require.NoError(t, err)
	for _, s := range []string{`SET LOCAL citus.propagate_set_commands = 'local'`, `SET LOCAL enable_sort = off`, `SET LOCAL hnsw.iterative_scan = relaxed_order`} {
		_, err = tx.Exec(ctx, s)
		require.NoError(t, err, s)
	}
	plan := explainText(t, tx, `EXPLAIN (COSTS OFF) SELECT m.id FROM mneme.memories m
		WHERE m.conversation_id = '`+conv.String()+`'::uuid AND m.status = 'active'
		ORDER BY m.embedding OPERATOR(public.<=>) '`+q+`'::public.vector LIMIT 10`)
	require.NoError(t, tx.Rollback(ctx))
	require.Contains(t, plan, "Index Scan using "+index+"_", "the shard's plan:\n%s", plan)

	// mneme.search (delegated to the worker) reads the shard's index.
	scans := func() int64 {
		var n int64
		require.NoError(t, db.Pool.QueryRow(ctx, `SELECT coalesce(sum(result::bigint), 0) FROM run_command_on_placements('mneme.memories',
			$$SELECT coalesce(pg_stat_get_numscans(to_regclass('mneme.`+index+`_' || split_part('%s', '_', 2))), 0)$$)`).Scan(&n))
		return n
	}
	before := scans()
	app, _ := db.PoolAs(t, "mneme_app")
	var n int
	require.NoError(t, app.QueryRow(ctx, `SELECT count(*) FROM mneme.search($1, 'memory', 10, $2::real[])`, conv, g.corpus.point(0)).Scan(&n))
	require.Equal(t, 10, n)
	require.Eventually(t, func() bool { return scans() > before }, 40*time.Second, time.Second,
		"search walked the conversation's index on its shard")

	// Below half the minimum: the next pass drops it, on every shard.
	_, err = db.Pool.Exec(ctx, `UPDATE mneme.memories SET status = 'inactive' WHERE conversation_id = $1 AND id = ANY ($2)`, conv, ids[:250])
	require.NoError(t, err)
	gone := func() bool {
		var ok bool
		require.NoError(t, db.Pool.QueryRow(ctx, `SELECT to_regclass('mneme.' || $1) IS NULL`, index).Scan(&ok))
		return ok
	}
	deadline = time.Now().Add(60 * time.Second)
	for !gone() {
		require.True(t, time.Now().Before(deadline), "the index stays 60 s after the conversation shrank")
		time.Sleep(200 * time.Millisecond)
	}
	stop()
	var left string
	require.NoError(t, db.Pool.QueryRow(ctx, `SELECT string_agg(result, ' ') FROM run_command_on_workers(
		$$SELECT coalesce(string_agg(relname, ','), '-') FROM pg_class WHERE starts_with(relname, '`+index+`')$$)`).Scan(&left))
	require.Equal(t, "- -", left, "no worker keeps a copy")
}

func vecLiteral(v []float32) string {
	var b strings.Builder
	b.WriteByte('[')
	for i, x := range v {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(strconv.FormatFloat(float64(x), 'g', -1, 32))
	}
	b.WriteByte(']')
	return b.String()
}

// explainText is EXPLAIN's output as one text.
func explainText(t *testing.T, q interface {
	Query(context.Context, string, ...any) (pgx.Rows, error)
}, sql string) string {
	t.Helper()
	rows, err := q.Query(context.Background(), sql)
	require.NoError(t, err)
	lines, err := pgx.CollectRows(rows, pgx.RowTo[string])
	require.NoError(t, err)
	return strings.Join(lines, "\n")
}
