package tests

import (
	"context"
	"net/url"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/mneme-memory/mneme/sidecar/dbtest"
)

// loginOf is the role name of a dbtest login URL.
func loginOf(t *testing.T, u string) string {
	t.Helper()
	p, err := url.Parse(u)
	require.NoError(t, err)
	return p.User.Username()
}

// A login an admin bound to a tenant acts for that tenant only: set_tenant
// of another, a raw SET of mneme.tenant, a role default and a
// transaction-local set_config all end in 42501 before any row is read or
// written; without setting anything it acts for its own tenant. Both
// directions (a bound to ta, b bound to tb), and an unbound login keeps the
// session's choice, as one trusted application server needs. Unbinding
// gives the choice back.
func TestLoginBoundTenants(t *testing.T) {
	t.Parallel()
	for _, variant := range variants(t) {
		t.Run(variant, func(t *testing.T) {
			ctx := context.Background()
			db := dbtest.New(t, dbtest.WithVector(variant))
			admin, _ := db.PoolAs(t, "mneme_admin")
			for _, tn := range []string{"ta", "tb"} {
				_, err := admin.Exec(ctx, `SELECT mneme.create_tenant($1)`, tn)
				require.NoError(t, err)
			}
			aPool, aURL := db.PoolAs(t, "mneme_app")
			bPool, bURL := db.PoolAs(t, "mneme_app")
			free, _ := db.PoolAs(t, "mneme_app")
			convA, convB := uuid.New(), uuid.New()
			secret := map[uuid.UUID]string{convA: "Ta's codeword is quillfeather.", convB: "Tb's codeword is marrowbone."}
			for c, tn := range map[uuid.UUID]string{convA: "ta", convB: "tb"} {
				require.NoError(t, inTenant(t, free, tn, func(tx pgx.Tx) error {
					_, err := tx.Exec(ctx, `SELECT mneme.remember($1, $2)`, c, secret[c])
					return err
				}))
			}
			for login, tn := range map[string]string{loginOf(t, aURL): "ta", loginOf(t, bURL): "tb"} {
				_, err := admin.Exec(ctx, `SELECT mneme.bind_login($1, $2)`, login, tn)
				require.NoError(t, err)
			}

			found := func(p *pgxpool.Pool, conv uuid.UUID) (string, error) {
				var out string
				err := p.QueryRow(ctx, `SELECT coalesce(string_agg(content, ' '), '') FROM mneme.search($1, 'codeword', 5)`, conv).Scan(&out)
				return out, err
			}
			for _, c := range []struct {
				name         string
				pool         *pgxpool.Pool
				url          string
				own, other   uuid.UUID
				ownT, otherT string
			}{
				{"a bound to ta", aPool, aURL, convA, convB, "ta", "tb"},
				{"b bound to tb", bPool, bURL, convB, convA, "tb", "ta"},
			} {
				t.Run(c.name, func(t *testing.T) {
					// Without setting anything: its own tenant.
					got, err := found(c.pool, c.own)
					require.NoError(t, err)
					require.Equal(t, secret[c.own], got)
					got, err = found(c.pool, c.other)
					require.NoError(t, err)
					require.Empty(t, got, "the other tenant's conversation does not exist for it")
					// Every way of choosing the other tenant is refused.
					for _, q := range []string{
						`SELECT mneme.set_tenant('` + c.otherT + `')`,
						`SELECT set_config('mneme.tenant', '` + c.otherT + `', false), mneme.search('` + c.other.String() + `', 'codeword')`,
					} {
						_, err := c.pool.Exec(ctx, q)
						require.Equal(t, "42501", sqlState(t, err), q)
					}
					err = pgx.BeginFunc(ctx, c.pool, func(tx pgx.Tx) error {
						if _, err := tx.Exec(ctx, `SET LOCAL mneme.tenant = '`+c.otherT+`'`); err != nil {
							return err
						}
						_, err := tx.Exec(ctx, `SELECT mneme.remember($1, 'planted by a bound login')`, c.other)
						return err
					})
					require.Equal(t, "42501", sqlState(t, err), "a raw SET LOCAL of the tenant")
					conn, err := pgx.Connect(ctx, c.url+"&options=-c%20mneme.tenant%3D"+c.otherT)
					require.NoError(t, err)
					_, err = conn.Exec(ctx, `SELECT * FROM mneme.search($1, 'codeword')`, c.other)
					require.Equal(t, "42501", sqlState(t, err), "the tenant set at connection")
					require.NoError(t, conn.Close(ctx))
					// Its own tenant, named explicitly, is fine; a new
					// conversation it writes to is its tenant's.
					newConv := uuid.New()
					require.NoError(t, inTenant(t, c.pool, c.ownT, func(tx pgx.Tx) error {
						_, err := tx.Exec(ctx, `SELECT mneme.add_message($1, 'user', 'hello from a bound login')`, newConv)
						return err
					}))
					var tenant string
					require.NoError(t, db.Pool.QueryRow(ctx, `SELECT tenant_id FROM mneme.message_queue WHERE id = $1`, newConv).Scan(&tenant))
					require.Equal(t, c.ownT, tenant)
				})
			}
			// Nothing was planted in the other tenants' conversations.
			require.Equal(t, 1, rowCount(t, db, `SELECT count(*) FROM mneme.memories WHERE conversation_id = $1`, convA))
			require.Equal(t, 1, rowCount(t, db, `SELECT count(*) FROM mneme.memories WHERE conversation_id = $1`, convB))

			// An unbound login chooses per transaction.
			for c, tn := range map[uuid.UUID]string{convA: "ta", convB: "tb"} {
				var got string
				require.NoError(t, inTenant(t, free, tn, func(tx pgx.Tx) error {
					return tx.QueryRow(ctx, `SELECT coalesce(string_agg(content, ' '), '') FROM mneme.search($1, 'codeword', 5)`, c).Scan(&got)
				}))
				require.Equal(t, secret[c], got)
			}
			// Unbound again, a chooses like any application login.
			var was bool
			require.NoError(t, admin.QueryRow(ctx, `SELECT mneme.unbind_login($1)`, loginOf(t, aURL)).Scan(&was))
			require.True(t, was)
			var got string
			require.NoError(t, inTenant(t, aPool, "tb", func(tx pgx.Tx) error {
				return tx.QueryRow(ctx, `SELECT coalesce(string_agg(content, ' '), '') FROM mneme.search($1, 'codeword', 5)`, convB).Scan(&got)
			}))
			require.Equal(t, secret[convB], got)

			// Bad input and the wrong role: clear errors, no binding.
			_, workerURL := db.PoolAs(t, "mneme_worker")
			for _, c := range []struct {
				q    string
				args []any
				code string
			}{
				{`SELECT mneme.bind_login(NULL, 'ta')`, nil, "22004"},
				{`SELECT mneme.bind_login('no_such_login_x', 'ta')`, nil, "22023"},
				{`SELECT mneme.bind_login($1, 'no_such_tenant')`, []any{loginOf(t, aURL)}, "22023"},
				{`SELECT mneme.bind_login($1, 'ta')`, []any{loginOf(t, workerURL)}, "22023"},
			} {
				_, err := admin.Exec(ctx, c.q, c.args...)
				require.Equal(t, c.code, sqlState(t, err), c.q)
			}
			_, err := free.Exec(ctx, `SELECT mneme.bind_login($1, 'tb')`, loginOf(t, aURL))
			require.Equal(t, "42501", sqlState(t, err), "an application login may not bind")
			require.Zero(t, rowCount(t, db, `SELECT count(*) FROM mneme.tenant_logins WHERE login = $1`, loginOf(t, aURL)))
		})
	}
}

// Events record who called: an application or admin login cannot name
// another actor or date an event through the settings mneme's own jobs use.
func TestEventsRecordTheRealCaller(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := dbtest.New(t)
	admin, adminURL := db.PoolAs(t, "mneme_admin")
	var id uuid.UUID
	require.NoError(t, admin.QueryRow(ctx, `SELECT mneme.remember(gen_random_uuid(), 'The spare key is under the mat.')`).Scan(&id))
	before := time.Now()
	conn, err := admin.Acquire(ctx)
	require.NoError(t, err)
	defer conn.Release()
	_, err = conn.Exec(ctx, `SET mneme.actor = 'cleanup'`)
	require.NoError(t, err)
	_, err = conn.Exec(ctx, `SET mneme.event_at = '1999-12-31'`)
	require.NoError(t, err)
	_, err = conn.Exec(ctx, `SELECT mneme.forget($1, 'x')`, id)
	require.NoError(t, err)
	var actor, caller string
	var at time.Time
	require.NoError(t, db.Pool.QueryRow(ctx, `SELECT actor, caller, at FROM mneme.memory_events WHERE memory_id = $1 AND event = 'forgotten'`, id).
		Scan(&actor, &caller, &at))
	require.Equal(t, loginOf(t, adminURL), actor)
	require.Equal(t, loginOf(t, adminURL), caller)
	require.WithinDuration(t, before, at, time.Minute, "the real time, not 1999")

	// Nor the sidecar's login: the actor and time of mneme's own work are
	// marks of the functions that do it (docs/sql-api.md, "Who is writing"),
	// not settings a session can set.
	worker, workerURL := db.PoolAs(t, "mneme_worker")
	require.NoError(t, admin.QueryRow(ctx, `SELECT mneme.remember(gen_random_uuid(), 'The bike is in the shed.')`).Scan(&id))
	wconn, err := worker.Acquire(ctx)
	require.NoError(t, err)
	defer wconn.Release()
	_, err = wconn.Exec(ctx, `SET mneme.actor = 'cleanup'`)
	require.NoError(t, err)
	_, err = wconn.Exec(ctx, `SET mneme.event_at = '1999-12-31'`)
	require.NoError(t, err)
	_, err = wconn.Exec(ctx, `SELECT mneme.pin($1)`, id)
	require.NoError(t, err)
	require.NoError(t, db.Pool.QueryRow(ctx, `SELECT actor, at FROM mneme.memory_events WHERE memory_id = $1 AND event = 'pinned'`, id).
		Scan(&actor, &at))
	require.Equal(t, loginOf(t, workerURL), actor)
	require.WithinDuration(t, before, at, time.Minute, "the real time, not 1999")
}

func rowCount(t *testing.T, db *dbtest.DB, q string, args ...any) int {
	t.Helper()
	var n int
	require.NoError(t, db.Pool.QueryRow(context.Background(), q, args...).Scan(&n))
	return n
}
