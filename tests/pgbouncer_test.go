package tests

import (
	"context"
	"sync"
	"testing"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/mneme-memory/mneme/sidecar/dbtest"
	"github.com/mneme-memory/mneme/sidecar/events"
)

// pooledConn connects to url (a PgBouncer URL) with pgx in exec mode, the
// working configuration before PgBouncer 1.21: no named statements.
func pooledConn(t *testing.T, url string) *pgx.Conn {
	t.Helper()
	cfg, err := pgx.ParseConfig(url)
	require.NoError(t, err)
	cfg.DefaultQueryExecMode = pgx.QueryExecModeExec
	conn, err := pgx.ConnectConfig(context.Background(), cfg)
	require.NoError(t, err)
	t.Cleanup(func() { _ = conn.Close(context.Background()) })
	return conn
}

// Through PgBouncer 1.18 in transaction pooling with one server
// connection: two clients of one application login, each transaction
// naming its tenant, interleave over that one server connection, and each
// transaction sees only its tenant's memory; a transaction that names none
// after another tenant's sees the default tenant, never the previous
// transaction's (set_tenant is transaction-local). A session-level setting
// is what leaks: shown, and the reason the tenant is set per transaction.
func TestPgBouncerTenantsInterleaved(t *testing.T) {
	t.Parallel()
	for _, variant := range variants(t) {
		t.Run(variant, func(t *testing.T) {
			ctx := context.Background()
			db := dbtest.New(t, dbtest.WithVector(variant))
			for _, tn := range []string{"ta", "tb"} {
				_, err := db.Pool.Exec(ctx, `SELECT mneme.create_tenant($1)`, tn)
				require.NoError(t, err)
			}
			appURL := db.As(t, "mneme_app")
			bouncer := dbtest.PgBouncer(t, loginOf(t, appURL))
			viaPool, err := bouncer.URL(appURL)
			require.NoError(t, err)
			a, b := pooledConn(t, viaPool), pooledConn(t, viaPool)

			conv := map[string]uuid.UUID{"ta": uuid.New(), "tb": uuid.New()}
			secret := map[string]string{"ta": "Ta's codeword is quillfeather.", "tb": "Tb's codeword is marrowbone."}
			for tn, c := range map[string]*pgx.Conn{"ta": a, "tb": b} {
				require.NoError(t, pgx.BeginFunc(ctx, c, func(tx pgx.Tx) error {
					if _, err := tx.Exec(ctx, `SELECT mneme.set_tenant($1)`, tn); err != nil {
						return err
					}
					_, err := tx.Exec(ctx, `SELECT mneme.remember($1, $2)`, conv[tn], secret[tn])
					return err
				}))
			}
			// seen: the codewords one transaction finds in both tenants'
			// conversations, and the backend that ran it.
			seen := func(c *pgx.Conn, tenant string) (string, int32) {
				var found string
				var pid int32
				require.NoError(t, pgx.BeginFunc(ctx, c, func(tx pgx.Tx) error {
					if tenant != "" {
						if _, err := tx.Exec(ctx, `SELECT mneme.set_tenant($1)`, tenant); err != nil {
							return err
						}
					}
					return tx.QueryRow(ctx, `SELECT coalesce(string_agg(content, ' ' ORDER BY content), ''), pg_backend_pid()
						FROM (SELECT content FROM mneme.search($1, 'codeword', 5)
						      UNION ALL SELECT content FROM mneme.search($2, 'codeword', 5)) s`,
						conv["ta"], conv["tb"]).Scan(&found, &pid)
				}))
				return found, pid
			}
			const rounds = 25
			pids := make(chan int32, 2*rounds)
			var wg sync.WaitGroup
			for tn, c := range map[string]*pgx.Conn{"ta": a, "tb": b} {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for range rounds {
						found, pid := seen(c, tn)
						if found != secret[tn] {
							t.Errorf("a transaction of tenant %s saw %q", tn, found)
						}
						pids <- pid
					}
				}()
			}
			wg.Wait()
			close(pids)
			backends := map[int32]bool{}
			for pid := range pids {
				backends[pid] = true
			}
			require.Len(t, backends, 1, "all 50 transactions ran on PgBouncer's one server connection")

			// Strictly alternating, and a transaction that names no tenant:
			// the default tenant's (nothing), never the one before it.
			for range 5 {
				for tn, c := range map[string]*pgx.Conn{"ta": a, "tb": b} {
					found, _ := seen(c, tn)
					require.Equal(t, secret[tn], found)
					found, _ = seen(a, "")
					require.Empty(t, found, "after %s's transaction, one without set_tenant", tn)
					found, _ = seen(b, "")
					require.Empty(t, found, "after %s's transaction, one without set_tenant", tn)
				}
			}

			// What leaks: a session-level setting stays on the server
			// connection for the next client. Never set the tenant outside
			// a transaction behind a pool.
			_, err = a.Exec(ctx, `SELECT set_config('mneme.tenant', 'ta', false)`)
			require.NoError(t, err)
			found, _ := seen(b, "")
			require.Equal(t, secret["ta"], found, "a session SET by one client is the next client's tenant through the pool")
			_, err = b.Exec(ctx, `RESET mneme.tenant`)
			require.NoError(t, err)
			found, _ = seen(a, "")
			require.Empty(t, found)
		})
	}
}

// The pooler probe: directly the backend's process id is the one the
// connection was given; through PgBouncer it is not. The server_version
// PgBouncer reports is the server's, so it cannot tell.
func TestPooledDetectsPgBouncer(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := dbtest.New(t)
	bouncer := dbtest.PgBouncer(t, "postgres")
	pooled, err := events.Pooled(ctx, db.Pool)
	require.NoError(t, err)
	require.False(t, pooled, "a direct connection")
	viaPool, err := bouncer.URL(db.URL)
	require.NoError(t, err)
	pool, err := pgxpool.New(ctx, viaPool)
	require.NoError(t, err)
	defer pool.Close()
	pooled, err = events.Pooled(ctx, pool)
	require.NoError(t, err)
	require.True(t, pooled, "through PgBouncer")

	// What does not tell: PgBouncer passes the server's version on.
	direct, err := db.Pool.Acquire(ctx)
	require.NoError(t, err)
	defer direct.Release()
	viaBouncer, err := pool.Acquire(ctx)
	require.NoError(t, err)
	defer viaBouncer.Release()
	version := direct.Conn().PgConn().ParameterStatus("server_version")
	require.NotEmpty(t, version)
	require.Equal(t, version, viaBouncer.Conn().PgConn().ParameterStatus("server_version"))
}

// What fails through PgBouncer 1.18 in transaction pooling, and the working
// configuration. pgx's default mode (cache_statement) prepares a named
// statement per query on the server connection it happens to get; another
// client's connection that prepares the same query on that server
// connection fails (prepared statements in transaction pooling need
// PgBouncer 1.21 and max_prepared_statements). pgx's exec and
// simple_protocol modes name no statement: uuids, text and a real[]
// embedding pass as parameters, interleaved over the one server connection.
func TestPgBouncerPreparedStatements(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := dbtest.New(t)
	appURL := db.As(t, "mneme_app")
	bouncer := dbtest.PgBouncer(t, loginOf(t, appURL))
	viaPool, err := bouncer.URL(appURL)
	require.NoError(t, err)
	conv := uuid.New()
	_, err = db.Pool.Exec(ctx, `SELECT mneme.remember($1, 'Alice lives in Lisbon')`, conv)
	require.NoError(t, err)
	const q = `SELECT count(*) FROM mneme.search($1, $2, 5, $3)`
	query := "where does Alice live?"
	var embedding []float32
	require.NoError(t, db.Pool.QueryRow(ctx, `SELECT mneme.hash_embed($1)`, query).Scan(&embedding))

	connect := func(mode string) *pgx.Conn {
		conn, err := pgx.Connect(ctx, viaPool+"&default_query_exec_mode="+mode)
		require.NoError(t, err)
		t.Cleanup(func() { _ = conn.Close(ctx) })
		return conn
	}
	t.Run("default cache_statement fails", func(t *testing.T) {
		a, b := connect("cache_statement"), connect("cache_statement")
		var n int
		require.NoError(t, a.QueryRow(ctx, q, conv, query, embedding).Scan(&n))
		require.Equal(t, 1, n)
		err := b.QueryRow(ctx, q, conv, query, embedding).Scan(&n)
		require.Error(t, err, "a second client prepares the same statement on the same server connection")
		t.Logf("pgx cache_statement through PgBouncer 1.18: %v", err)
		require.Equal(t, "42P05", sqlState(t, err))
		require.Contains(t, err.Error(), "prepared statement \"stmtcache_")
	})
	for _, mode := range []string{"exec", "simple_protocol"} {
		t.Run(mode+" works", func(t *testing.T) {
			a, b := connect(mode), connect(mode)
			for range 10 {
				for _, c := range []*pgx.Conn{a, b} {
					var n int
					require.NoError(t, c.QueryRow(ctx, q, conv, query, embedding).Scan(&n))
					require.Equal(t, 1, n)
				}
			}
		})
	}
}

// A login an admin bound to a tenant works through PgBouncer as directly:
// PgBouncer logs into the server as the client's login (a pool per login),
// so session_user, which the binding keys on, is the login itself.
func TestPgBouncerBoundLogin(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := dbtest.New(t)
	for _, tn := range []string{"ta", "tb"} {
		_, err := db.Pool.Exec(ctx, `SELECT mneme.create_tenant($1)`, tn)
		require.NoError(t, err)
	}
	boundURL, freeURL := db.As(t, "mneme_app"), db.As(t, "mneme_app")
	_, err := db.Pool.Exec(ctx, `SELECT mneme.bind_login($1, 'ta')`, loginOf(t, boundURL))
	require.NoError(t, err)
	bouncer := dbtest.PgBouncer(t, loginOf(t, boundURL), loginOf(t, freeURL))
	viaBound, err := bouncer.URL(boundURL)
	require.NoError(t, err)
	viaFree, err := bouncer.URL(freeURL)
	require.NoError(t, err)
	bound, free := pooledConn(t, viaBound), pooledConn(t, viaFree)

	convA, convB := uuid.New(), uuid.New()
	var id uuid.UUID
	require.NoError(t, bound.QueryRow(ctx, `SELECT mneme.remember($1, 'Ta''s codeword is quillfeather.')`, convA).Scan(&id),
		"a bound login writes its tenant's memory without naming it")
	require.NoError(t, pgx.BeginFunc(ctx, free, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `SELECT mneme.set_tenant('tb')`); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, `SELECT mneme.remember($1, 'Tb''s codeword is marrowbone.')`, convB)
		return err
	}))
	var tenant string
	require.NoError(t, db.Pool.QueryRow(ctx, `SELECT tenant_id FROM mneme.memories WHERE id = $1`, id).Scan(&tenant))
	require.Equal(t, "ta", tenant)

	for range 3 {
		var got string
		require.NoError(t, bound.QueryRow(ctx, `SELECT coalesce(string_agg(content, ' '), '') FROM mneme.search($1, 'codeword', 5)`, convA).Scan(&got))
		require.Equal(t, "Ta's codeword is quillfeather.", got)
		require.NoError(t, bound.QueryRow(ctx, `SELECT coalesce(string_agg(content, ' '), '') FROM mneme.search($1, 'codeword', 5)`, convB).Scan(&got))
		require.Empty(t, got, "tb's conversation does not exist for ta's login")
		err := pgx.BeginFunc(ctx, bound, func(tx pgx.Tx) error {
			_, err := tx.Exec(ctx, `SELECT mneme.set_tenant('tb')`)
			return err
		})
		require.Equal(t, "42501", sqlState(t, err), "a bound login cannot choose another tenant through the pool")
	}
}
