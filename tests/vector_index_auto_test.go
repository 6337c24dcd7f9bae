package tests

import (
	"context"
	"log/slog"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/mneme-memory/mneme/sidecar/config"
	"github.com/mneme-memory/mneme/sidecar/daemon"
	"github.com/mneme-memory/mneme/sidecar/dbtest"
	"github.com/mneme-memory/mneme/sidecar/embed"
	"github.com/mneme-memory/mneme/sidecar/metrics"
	"github.com/mneme-memory/mneme/sidecar/vectorindex"
)

// vectorIndexRows is mneme.vector_index_status as the given pool sees it:
// index name -> state.
func vectorIndexRows(t *testing.T, pool *pgxpool.Pool) map[string]string {
	t.Helper()
	rows, err := pool.Query(context.Background(), `SELECT index_name, state FROM mneme.vector_index_status()`)
	require.NoError(t, err)
	out := map[string]string{}
	for rows.Next() {
		var n, s string
		require.NoError(t, rows.Scan(&n, &s))
		out[n] = s
	}
	require.NoError(t, rows.Err())
	return out
}

// growingScope is a test's scope that grows past vector_scope_index_min
// while a sidecar runs: memories on clustered vectors written as an
// application's writes come (one statement each, in a batch), and whether
// a conversation's own HNSW index is ready.
type growingScope struct {
	t      *testing.T
	db     *dbtest.DB
	r      *rand.Rand
	corpus *clusteredCorpus
}

func newGrowingScope(t *testing.T, db *dbtest.DB, seed uint64) *growingScope {
	r := rand.New(rand.NewPCG(53, seed))
	return &growingScope{t: t, db: db, r: r, corpus: newClusteredCorpus(r, embed.DefaultDim, 20)}
}

// add writes n memories to conversation c and returns their ids.
func (g *growingScope) add(c uuid.UUID, n int) []uuid.UUID {
	ids := make([]uuid.UUID, n)
	b := &pgx.Batch{}
	for i := range ids {
		ids[i] = uuid.New()
		b.Queue(`INSERT INTO mneme.memories (id, conversation_id, content, embedding) VALUES ($1, $2, 'memory', $3::real[]::mneme.embedding)`,
			ids[i], c, g.corpus.point(g.r.IntN(len(g.corpus.centres))))
	}
	require.NoError(g.t, g.db.Pool.SendBatch(context.Background(), b).Close())
	return ids
}

// index is the name of conversation c's own index.
func (g *growingScope) index(c uuid.UUID) string {
	var name string
	require.NoError(g.t, g.db.Pool.QueryRow(context.Background(), `SELECT mneme._vector_index_name('conversation', $1)`, c.String()).Scan(&name))
	return name
}

// ready says whether conversation c's index is made and valid.
func (g *growingScope) ready(c uuid.UUID) bool {
	var ok bool
	require.NoError(g.t, g.db.Pool.QueryRow(context.Background(), `SELECT mneme._vector_index_ready('conversation', $1)`, c.String()).Scan(&ok))
	return ok
}

// startIndexingSidecar runs the sidecar as `mneme run` starts it, as a
// mneme_worker login with its index connection as the tables' owner
// (MNEME_INDEX_DATABASE_URL), a pass every 200 ms. It returns a pool of
// the worker login, its URL, and stop (also deferred by the test).
func startIndexingSidecar(t *testing.T, db *dbtest.DB, events string, poll time.Duration) (*pgxpool.Pool, string, func()) {
	ctx := context.Background()
	worker, workerURL := db.PoolAs(t, "mneme_worker")
	pool, err := pgxpool.New(ctx, workerURL)
	require.NoError(t, err)
	cfg := config.Config{DatabaseURL: workerURL, Events: events, Concurrency: 1, PollEvery: poll,
		SlotName: "unused", LLMTimeout: 5 * time.Second, IndexURL: db.URL, IndexEvery: 200 * time.Millisecond}
	d, err := daemon.New(ctx, cfg, pool, slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelInfo})))
	require.NoError(t, err)
	runCtx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- d.Serve(runCtx); pool.Close() }()
	var once sync.Once
	stop := func() {
		once.Do(func() {
			cancel()
			require.NoError(t, <-done)
		})
	}
	t.Cleanup(stop)
	return worker, workerURL, stop
}

// Issue 53: indexes that manage themselves. A conversation that grows past
// vector_scope_index_min gets its own HNSW index from the running sidecar
// (`mneme run`, as a mneme_worker login, its index connection as the
// tables' owner: MNEME_INDEX_DATABASE_URL), with no command run; the vector
// leg then searches through it, and mneme.vector_index_status shows it to
// the worker. Below half the minimum the next pass drops it, counted in the
// sidecar's metrics. A login that may not create indexes makes none and
// says why (ErrNoPrivilege), and the application may not read the status.
func TestVectorIndexesManageThemselves(t *testing.T) {
	t.Parallel()
	if !slices.Contains(variants(t), "pgvector") {
		t.Skip("pgvector is not installed on the test server (scripts/extensions.sh; docs/tests.md)")
	}
	db := dbtest.New(t, dbtest.WithVector("pgvector"))
	ctx := context.Background()
	for _, s := range []string{
		`SELECT mneme.create_tenant('grow')`,
		`SELECT mneme.set_setting('embedder', '"external"')`,
		`SELECT mneme.set_setting('vector_scope_index_min', '300')`,
	} {
		_, err := db.Pool.Exec(ctx, s)
		require.NoError(t, err, s)
	}
	conv, small := uuid.New(), uuid.New()
	// (each in a tenant of its own: a tenant of several conversations past
	// the minimum gets an index too, TestVectorScopeIndexes)
	_, err := db.Pool.Exec(ctx, `SELECT mneme.create_tenant('small')`)
	require.NoError(t, err)
	for c, tenant := range map[uuid.UUID]string{conv: "grow", small: "small"} {
		_, err := db.Pool.Exec(ctx, `INSERT INTO mneme.message_queue (id, tenant_id) VALUES ($1, $2)`, c, tenant)
		require.NoError(t, err)
	}
	g := newGrowingScope(t, db, 1)
	index := g.index(conv)
	ready := func() bool { return g.ready(conv) }
	worker, workerURL, stop := startIndexingSidecar(t, db, "notify", 100*time.Millisecond)

	// Below the minimum: passes run, nothing is made.
	ids := g.add(conv, 250)
	g.add(small, 40)
	time.Sleep(time.Second)
	require.False(t, ready())
	require.Empty(t, vectorIndexRows(t, worker))

	// The conversation grows past it: its index comes, no command run.
	ids = append(ids, g.add(conv, 100)...)
	deadline := time.Now().Add(60 * time.Second)
	for !ready() {
		require.True(t, time.Now().Before(deadline), "no index 60 s after the conversation passed vector_scope_index_min")
		time.Sleep(100 * time.Millisecond)
	}
	require.Equal(t, map[string]string{index: "ready"}, vectorIndexRows(t, worker), "the worker sees the index, ready; the small conversation has none")
	before := indexScans(t, db, index)
	leg := scopeLeg(t, db.Pool, []uuid.UUID{conv}, g.corpus.point(0), 40)
	require.Len(t, leg, 40)
	require.Greater(t, indexScans(t, db, index), before, "the vector leg searches through the new index")

	// The application may not read the installation's indexes.
	app, _ := db.PoolAs(t, "mneme_app")
	_, err = app.Exec(ctx, `SELECT * FROM mneme.vector_index_status()`)
	require.Equal(t, "42501", sqlState(t, err))

	// A login that may not create indexes (the worker) makes none, and
	// says why.
	_, err = vectorindex.New(vectorindex.Options{URL: workerURL, Every: time.Hour}).Once(ctx)
	require.ErrorIs(t, err, vectorindex.ErrNoPrivilege)

	// The scope shrinks below half the minimum: the next pass drops the
	// index (here a pass of its own, with a registry to read the counts;
	// the sidecar's passes stopped first so that one of them cannot take
	// the drop).
	stop()
	_, err = db.Pool.Exec(ctx, `UPDATE mneme.memories SET status = 'inactive' WHERE id = ANY ($1)`, ids[:250])
	require.NoError(t, err)
	reg := metrics.New()
	m := vectorindex.New(vectorindex.Options{URL: db.URL, Every: time.Hour, Metrics: reg})
	steps, err := m.Once(ctx)
	require.NoError(t, err)
	require.Len(t, steps, 1)
	require.Equal(t, "drop", steps[0].Action)
	require.Equal(t, 1.0, reg.Counter(metrics.VectorIndexSteps, "drop", "done"))
	require.False(t, ready())
	require.Empty(t, vectorIndexRows(t, worker))
	var n int
	require.NoError(t, db.Pool.QueryRow(ctx, `SELECT count(*) FROM pg_catalog.pg_class WHERE relname = $1`, index).Scan(&n))
	require.Zero(t, n)
}
