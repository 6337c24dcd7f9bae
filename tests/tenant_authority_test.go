package tests

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/mneme-memory/mneme/sidecar/dbtest"
)

// A bound admin stays in its tenant: it may not unbind or rebind itself,
// bind or unbind other logins, create tenants or change the settings (they
// are global), and it reads no other tenant's memories; what stays inside
// its tenant (search, erase, cleanup) works. Both directions: an admin
// bound to ta against tb, and one bound to tb against ta. An unbound admin
// (the operator) may do all of it. Each refusal leaves the bindings and
// settings as they were.
func TestBoundAdminStaysInItsTenant(t *testing.T) {
	t.Parallel()
	for _, variant := range variants(t) {
		t.Run(variant, func(t *testing.T) {
			ctx := context.Background()
			db := dbtest.New(t, dbtest.WithVector(variant))
			op, _ := db.PoolAs(t, "mneme_admin")
			boundA, boundAURL := db.PoolAs(t, "mneme_admin")
			boundB, boundBURL := db.PoolAs(t, "mneme_admin")
			_, appAURL := db.PoolAs(t, "mneme_app")
			_, appBURL := db.PoolAs(t, "mneme_app")
			_, freeURL := db.PoolAs(t, "mneme_app")
			app, _ := db.PoolAs(t, "mneme_app")
			for _, tn := range []string{"ta", "tb"} {
				_, err := op.Exec(ctx, `SELECT mneme.create_tenant($1)`, tn)
				require.NoError(t, err, "an unbound admin creates tenants")
			}
			conv := map[string]uuid.UUID{"ta": uuid.New(), "tb": uuid.New()}
			mem := map[string]uuid.UUID{}
			for tn, color := range map[string]string{"ta": "blue", "tb": "red"} {
				var id uuid.UUID
				require.NoError(t, inTenant(t, app, tn, func(tx pgx.Tx) error {
					return tx.QueryRow(ctx, `SELECT mneme.remember($1, $2)`, conv[tn], "The ledger is in the "+color+" cabinet.").Scan(&id)
				}))
				mem[tn] = id
			}
			logins := map[string]string{loginOf(t, boundAURL): "ta", loginOf(t, boundBURL): "tb",
				loginOf(t, appAURL): "ta", loginOf(t, appBURL): "tb"}
			for login, tn := range logins {
				_, err := op.Exec(ctx, `SELECT mneme.bind_login($1, $2)`, login, tn)
				require.NoError(t, err, "an unbound admin binds logins")
			}
			bindings := func() string {
				var s string
				require.NoError(t, db.Pool.QueryRow(ctx, `SELECT coalesce(string_agg(login || '=' || tenant_id, ',' ORDER BY login), '') FROM mneme.tenant_logins`).Scan(&s))
				return s
			}
			settings := func() string {
				var s string
				require.NoError(t, db.Pool.QueryRow(ctx, `SELECT md5(string_agg(key || value::text, ',' ORDER BY key)) FROM mneme.settings`).Scan(&s))
				return s
			}
			beforeB, beforeS := bindings(), settings()

			for _, c := range []struct {
				name             string
				pool             *pgxpool.Pool
				own, other       string
				ownApp, otherApp string
			}{
				{"bound to ta", boundA, "ta", "tb", loginOf(t, appAURL), loginOf(t, appBURL)},
				{"bound to tb", boundB, "tb", "ta", loginOf(t, appBURL), loginOf(t, appAURL)},
			} {
				t.Run(c.name, func(t *testing.T) {
					for _, q := range []struct {
						sql  string
						args []any
					}{
						{`SELECT mneme.unbind_login(session_user)`, nil},
						{`SELECT mneme.bind_login(session_user, $1)`, []any{c.other}},
						{`SELECT mneme.bind_login(session_user, $1)`, []any{c.own}},
						{`SELECT mneme.bind_login($1, $2)`, []any{c.otherApp, c.own}},
						{`SELECT mneme.unbind_login($1)`, []any{c.otherApp}},
						{`SELECT mneme.unbind_login($1)`, []any{c.ownApp}},
						{`SELECT mneme.bind_login($1, $2)`, []any{loginOf(t, freeURL), c.own}},
						{`SELECT mneme.create_tenant('tc')`, nil},
						{`SELECT mneme.set_setting('inactive_below_r', '0.99')`, nil},
						{`SELECT mneme.set_setting('purge_after_days', '0.00001')`, nil},
						{`SELECT mneme.set_tenant($1)`, []any{c.other}},
					} {
						_, err := c.pool.Exec(ctx, q.sql, q.args...)
						require.Equal(t, "42501", sqlState(t, err), "%s %v", q.sql, q.args)
					}
					require.Equal(t, beforeB, bindings(), "no binding changed")
					require.Equal(t, beforeS, settings(), "no setting changed")
					require.Zero(t, rowCount(t, db, `SELECT count(*) FROM mneme.tenants WHERE id = 'tc'`))

					// Inside its tenant it works; the other tenant is not there.
					var got string
					require.NoError(t, c.pool.QueryRow(ctx, `SELECT coalesce(string_agg(content, ' '), '') FROM mneme.search($1, 'ledger cabinet', 5)`,
						conv[c.other]).Scan(&got))
					require.Empty(t, got, "the other tenant's memories do not exist for it")
					_, err := c.pool.Exec(ctx, `SELECT mneme.erase($1, 'tenant admin request')`, mem[c.other])
					require.Equal(t, "P0002", sqlState(t, err), "nor can it erase them")
					require.NoError(t, c.pool.QueryRow(ctx, `SELECT coalesce(string_agg(content, ' '), '') FROM mneme.search($1, 'ledger cabinet', 5)`,
						conv[c.own]).Scan(&got))
					require.Contains(t, got, "cabinet")
					_, err = c.pool.Exec(ctx, `SELECT * FROM mneme.cleanup(dry_run => true)`)
					require.NoError(t, err)
					_, err = c.pool.Exec(ctx, `SELECT mneme.erase($1, 'tenant admin request')`, mem[c.own])
					require.NoError(t, err, "a bound admin erases in its tenant")
				})
			}
			require.Equal(t, 2, rowCount(t, db, `SELECT count(*) FROM mneme.memory_events WHERE event = 'erased' AND memory_id = ANY ($1)`,
				[]uuid.UUID{mem["ta"], mem["tb"]}), "each erased by its own tenant's admin")

			// The operator may do what the bound admins may not.
			_, err := op.Exec(ctx, `SELECT mneme.set_setting('inactive_below_r', '0.4')`)
			require.NoError(t, err)
			var was bool
			require.NoError(t, op.QueryRow(ctx, `SELECT mneme.unbind_login($1)`, loginOf(t, boundAURL)).Scan(&was))
			require.True(t, was)
			_, err = boundA.Exec(ctx, `SELECT mneme.create_tenant('tc')`)
			require.NoError(t, err, "unbound again, it is an operator")
		})
	}
}

// A job touches only rows of its own conversation's tenant: a review job
// (or a revise job) of a conversation of ta that names a memory of tb
// fails, and the memory is neither rated nor revised. Reachable only with
// the worker role (here the test's superuser, as the sidecar).
func TestJobsTouchOnlyTheirTenant(t *testing.T) {
	t.Parallel()
	for _, variant := range variants(t) {
		t.Run(variant, func(t *testing.T) {
			ctx := context.Background()
			e := newPipelineEnv(t, false, dbtest.WithVector(variant))
			for _, tn := range []string{"ta", "tb"} {
				_, err := e.db.Pool.Exec(ctx, `SELECT mneme.create_tenant($1)`, tn)
				require.NoError(t, err)
			}
			convA, convB := uuid.New(), uuid.New()
			var memB uuid.UUID
			require.NoError(t, inTenant(t, e.db.Pool, "tb", func(tx pgx.Tx) error {
				return tx.QueryRow(ctx, `SELECT mneme.remember($1, 'Tb keeps the ledger in the red cabinet.', at => $2)`, convB, day1).Scan(&memB)
			}))
			require.NoError(t, inTenant(t, e.db.Pool, "ta", func(tx pgx.Tx) error {
				_, err := tx.Exec(ctx, `SELECT mneme.add_message($1, 'user', 'Hello from ta.')`, convA)
				return err
			}))
			e.drain()
			events := rowCount(t, e.db, `SELECT count(*) FROM mneme.memory_events WHERE memory_id = $1`, memB)

			reviews, _ := json.Marshal([]map[string]any{{"query": "ledger", "memory_ids": []uuid.UUID{memB}}})
			review, _ := json.Marshal(map[string]any{"reviews": json.RawMessage(reviews), "reviewed_at": day3,
				"context": []map[string]any{{"id": 1, "role": "user", "content": "the red cabinet ledger again", "at": day3}}})
			revise, _ := json.Marshal(map[string]any{"memory_id": memB})
			enqueued := 0
			for kind, payload := range map[string][]byte{"review": review, "revise": revise} {
				err := inTenant(t, e.db.Pool, "ta", func(tx pgx.Tx) error {
					_, err := tx.Exec(ctx, `SELECT mneme.enqueue_job($1, $2, $3)`, kind, convA, payload)
					return err
				})
				if err != nil { // refused when enqueued: as good
					require.Contains(t, []string{"42501", "22023", "23503"}, sqlState(t, err), kind)
					continue
				}
				enqueued++
			}
			e.drain()
			require.Equal(t, enqueued, rowCount(t, e.db, `SELECT count(*) FROM mneme.jobs WHERE conversation_id = $1 AND state = 'failed'
				AND last_error LIKE '%another tenant%'`, convA), "each fails, saying why")
			require.Zero(t, rowCount(t, e.db, `SELECT count(*) FROM mneme.review_log WHERE memory_id = $1`, memB), "tb's memory is not rated")
			require.Equal(t, events, rowCount(t, e.db, `SELECT count(*) FROM mneme.memory_events WHERE memory_id = $1`, memB),
				"tb's memory is not revised")
			require.Zero(t, rowCount(t, e.db, `SELECT count(*) FROM mneme.jobs WHERE conversation_id = $1 AND state = 'done'`, convA),
				"no job of ta that names tb's memory completes")
		})
	}
}

// The audit trail takes its time and its reasons from mneme, not from the
// caller: an event is dated at the real time of the write (remember's `at`
// stays the memory's time: when the thing was said), and a caller's SET
// of the settings mneme's functions pass reasons through is ignored.
func TestEventsTakeNoTimeOrReasonFromTheCaller(t *testing.T) {
	t.Parallel()
	for _, variant := range variants(t) {
		t.Run(variant, func(t *testing.T) {
			ctx := context.Background()
			db := dbtest.New(t, dbtest.WithVector(variant))
			app, _ := db.PoolAs(t, "mneme_app")
			conv := uuid.New()
			var old, ahead uuid.UUID
			require.NoError(t, app.QueryRow(ctx, `SELECT mneme.remember($1, 'The mill was built by my great-grandfather.', at => '1901-02-03')`, conv).Scan(&old))
			require.NoError(t, app.QueryRow(ctx, `SELECT mneme.remember($1, 'The meeting starts in an hour.', at => now() + interval '59 minutes')`, conv).Scan(&ahead))
			for _, id := range []uuid.UUID{old, ahead} {
				var late bool
				require.NoError(t, db.Pool.QueryRow(ctx, `SELECT abs(extract(epoch FROM e.at - now())) > 300
					FROM mneme.memory_events e WHERE e.memory_id = $1 AND e.event = 'created'`, id).Scan(&late))
				require.False(t, late, "the created event of %s is dated now", id)
			}
			require.Equal(t, "1901-02-03", rowText(t, db, `SELECT to_char(created_at AT TIME ZONE 'UTC', 'YYYY-MM-DD') FROM mneme.memories WHERE id = $1`, old),
				"the memory keeps when it was said")

			// A reason planted through the session's settings is not recorded.
			_, err := db.Pool.Exec(ctx, `UPDATE mneme.memories SET status = 'inactive', status_reason = 'faded' WHERE id = $1`, old)
			require.NoError(t, err)
			conn, err := app.Acquire(ctx)
			require.NoError(t, err)
			defer conn.Release()
			for _, q := range []string{`SET mneme.event_reason = 'planted by the app'`, `SET mneme.delete_reason = 'planted by the app'`,
				`SET mneme.delete_event = 'erased'`, `SET mneme.erasing = 'on'`} {
				_, err = conn.Exec(ctx, q)
				require.NoError(t, err)
			}
			_, err = conn.Exec(ctx, `SELECT mneme.pin($1)`, old)
			require.NoError(t, err)
			require.Zero(t, rowCount(t, db, `SELECT count(*) FROM mneme.memory_events WHERE reason LIKE '%planted%'`))
			require.Equal(t, "pinned", rowText(t, db, `SELECT reason FROM mneme.memory_events WHERE memory_id = $1 AND event = 'reactivated'`, old))
			_, err = conn.Exec(ctx, `SELECT mneme.forget($1, 'no longer true')`, ahead)
			require.NoError(t, err)
			require.Equal(t, 1, rowCount(t, db, `SELECT count(*) FROM mneme.memory_events WHERE memory_id = $1 AND event = 'forgotten' AND reason LIKE '%no longer true%'`, ahead),
				"a reason given as an argument is recorded")
			// mneme's own reasons still are: reactivate by hand, as an admin
			// whose session planted another.
			var third uuid.UUID
			require.NoError(t, app.QueryRow(ctx, `SELECT mneme.remember($1, 'The gate code changes monthly.')`, conv).Scan(&third))
			_, err = db.Pool.Exec(ctx, `UPDATE mneme.memories SET status = 'inactive', status_reason = 'faded' WHERE id = $1`, third)
			require.NoError(t, err)
			admin, _ := db.PoolAs(t, "mneme_admin")
			aconn, err := admin.Acquire(ctx)
			require.NoError(t, err)
			defer aconn.Release()
			_, err = aconn.Exec(ctx, `SET mneme.event_reason = 'planted by the admin'`)
			require.NoError(t, err)
			_, err = aconn.Exec(ctx, `SELECT mneme.reactivate($1)`, third)
			require.NoError(t, err)
			require.Equal(t, "reactivated by hand", rowText(t, db, `SELECT reason FROM mneme.memory_events WHERE memory_id = $1 AND event = 'reactivated'`, third))
		})
	}
}

// The smaller rules of issue 38: since and until outside years 1 to 9999
// (±infinity) are 22008 like every time argument; a NULL where a value is
// needed is 22004 (k, query), a wrong value 22023; and
// erase_vacuum_targets reports an erase in any tenant, also to an admin
// that is not in that tenant.
func TestArgumentRulesAndVacuumTargetsAcrossTenants(t *testing.T) {
	t.Parallel()
	for _, variant := range variants(t) {
		t.Run(variant, func(t *testing.T) {
			ctx := context.Background()
			db := dbtest.New(t, dbtest.WithVector(variant))
			app := appWithTenants(t, db, "ta")
			conv := uuid.New()
			var id uuid.UUID
			require.NoError(t, inTenant(t, app, "ta", func(tx pgx.Tx) error {
				return tx.QueryRow(ctx, `SELECT mneme.remember($1, 'The spare key is under the third flowerpot.')`, conv).Scan(&id)
			}))
			for _, c := range []struct{ q, code string }{
				{`SELECT * FROM mneme.search($1, 'key', since => '-infinity')`, "22008"},
				{`SELECT * FROM mneme.search($1, 'key', until => 'infinity')`, "22008"},
				{`SELECT * FROM mneme.retrieve($1, 'key', 5, since => '-infinity', until => 'infinity')`, "22008"},
				{`SELECT mneme.context($1, 'key', 100, since => 'infinity')`, "22008"},
				{`SELECT * FROM mneme.bm25_search($1, 'key', 5, since => '-infinity')`, "22008"},
				{`SELECT * FROM mneme.search($1, 'key', k => NULL)`, "22004"},
				{`SELECT * FROM mneme.search($1, NULL)`, "22004"},
				{`SELECT * FROM mneme.search($1, 'key', k => 0)`, "22023"},
				{`SELECT * FROM mneme.search($1, '   ')`, "22023"},
				{`SELECT mneme.remember($1, NULL)`, "22004"},
			} {
				err := inTenant(t, app, "ta", func(tx pgx.Tx) error {
					_, err := tx.Exec(ctx, c.q, conv)
					return err
				})
				require.Equal(t, c.code, sqlState(t, err), c.q)
			}

			admin, _ := db.PoolAs(t, "mneme_admin") // unbound, no tenant set: tenant default
			targets := func() int {
				return func() int {
					var n int
					require.NoError(t, admin.QueryRow(ctx, `SELECT count(*) FROM mneme.erase_vacuum_targets()`).Scan(&n))
					return n
				}()
			}
			_, err := db.Pool.Exec(ctx, `VACUUM mneme.memories`)
			require.NoError(t, err)
			require.Zero(t, targets(), "no erase since the last vacuum")
			require.NoError(t, inTenant(t, app, "ta", func(tx pgx.Tx) error {
				_, err := tx.Exec(ctx, `SELECT mneme.remember($1, 'A second thing to erase.')`, conv)
				return err
			}))
			err = inTenant(t, admin, "ta", func(tx pgx.Tx) error {
				_, err := tx.Exec(ctx, `SELECT mneme.erase($1, 'user request')`, id)
				return err
			})
			require.NoError(t, err)
			require.Positive(t, targets(), "an erase in ta is seen by an admin outside ta")
		})
	}
}
