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
// connection was given; through PgBouncer it is not.
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
}
