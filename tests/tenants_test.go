package tests

import (
	"context"
	"fmt"
	"net/url"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/mneme-memory/mneme/sidecar/dbtest"
	"github.com/mneme-memory/mneme/sidecar/migrate"
)

// inTenant runs fn in a transaction of the given tenant (mneme.set_tenant).
func inTenant(t *testing.T, pool *pgxpool.Pool, tenant string, fn func(tx pgx.Tx) error) error {
	t.Helper()
	return pgx.BeginFunc(context.Background(), pool, func(tx pgx.Tx) error {
		if tenant != "" {
			if _, err := tx.Exec(context.Background(), `SELECT mneme.set_tenant($1)`, tenant); err != nil {
				return err
			}
		}
		return fn(tx)
	})
}

// TestTenantIsolation: an application role (mneme_app) of tenant globex
// calls every public function on tenant acme's conversation and memories
// and tries the tables directly: it sees nothing of acme's, changes
// nothing, and reaches no table, job or worker function.
func TestTenantIsolation(t *testing.T) {
	t.Parallel()
	for _, variant := range variants(t) {
		t.Run(variant, func(t *testing.T) {
			db := dbtest.New(t, dbtest.WithVector(variant))
			ctx := context.Background()
			for _, tn := range []string{"acme", "globex"} {
				_, err := db.Pool.Exec(ctx, `SELECT mneme.create_tenant($1)`, tn)
				require.NoError(t, err)
			}
			app, err := pgxpool.New(ctx, db.As(t, "mneme_app"))
			require.NoError(t, err)
			t.Cleanup(app.Close)

			convA, convB := uuid.New(), uuid.New()
			var memA uuid.UUID
			at := time.Now().Add(-time.Hour)
			require.NoError(t, inTenant(t, app, "acme", func(tx pgx.Tx) error {
				for i := 0; i < 6; i++ {
					if _, err := tx.Exec(ctx, `SELECT mneme.add_message($1, 'user', $2, $3)`, convA,
						fmt.Sprintf("acme secret number %d: the vault opens with a linden key", i), at.Add(time.Duration(i)*time.Minute)); err != nil {
						return err
					}
				}
				return tx.QueryRow(ctx, `SELECT mneme.remember($1, 'Alice of acme lives in Paris', 'user_profile')`, convA).Scan(&memA)
			}))
			require.NoError(t, inTenant(t, app, "globex", func(tx pgx.Tx) error {
				_, err := tx.Exec(ctx, `SELECT mneme.remember($1, 'Bob of globex lives in Rome')`, convB)
				return err
			}))

			// What acme sees of its own.
			var n int
			require.NoError(t, inTenant(t, app, "acme", func(tx pgx.Tx) error {
				return tx.QueryRow(ctx, `SELECT count(*) FROM mneme.search($1, 'Paris linden vault', 10)`, convA).Scan(&n)
			}))
			require.Equal(t, 1, n, "acme finds its memory")

			state := func() string {
				var s string
				require.NoError(t, db.Pool.QueryRow(ctx, `SELECT format('%s/%s/%s/%s/%s', (SELECT count(*) FROM mneme.messages),
					(SELECT md5(string_agg(m::text, ',' ORDER BY id)) FROM mneme.memories m), (SELECT count(*) FROM mneme.jobs),
					(SELECT md5(string_agg(q::text, ',' ORDER BY id)) FROM mneme.message_queue q), (SELECT count(*) FROM mneme.memory_events))`).Scan(&s))
				return s
			}
			before := state()
			for _, tenant := range []string{"globex", ""} { // another tenant, and the default one
				// Reads: nothing of acme's.
				for _, q := range []string{
					`SELECT count(*) FROM mneme.search($1, 'Paris linden vault', 10)`,
					`SELECT count(*) FROM mneme.retrieve($1, 'Paris linden vault', 10)`,
					`SELECT count(*) FROM mneme.search($1, 'Paris linden vault', 10, at => now() + interval '1 day')`,
					`SELECT count(*) FROM mneme.bm25_search($1, 'Paris linden vault', 10)`,
					`SELECT count(*) FROM mneme.vector_search($1, mneme.hash_embed('Paris linden vault'), 10)`,
				} {
					require.NoError(t, inTenant(t, app, tenant, func(tx pgx.Tx) error {
						return tx.QueryRow(ctx, q, convA).Scan(&n)
					}), q)
					require.Zero(t, n, "%s as %q", q, tenant)
				}
				for _, q := range []string{`SELECT count(*) FROM mneme.inspect($1)`, `SELECT count(*) FROM mneme.history($1)`} {
					err := inTenant(t, app, tenant, func(tx pgx.Tx) error { return tx.QueryRow(ctx, q, memA).Scan(&n) })
					require.Error(t, err, "%s as %q: another tenant's memory does not exist", q, tenant)
					require.Equal(t, "P0002", sqlState(t, err), q)
				}
				// Writes: refused, nothing changed.
				for _, c := range []struct {
					q    string
					arg  any
					code string
				}{
					{`SELECT mneme.add_message($1, 'user', 'injected by another tenant')`, convA, "42501"},
					{`SELECT mneme.remember($1, 'injected by another tenant')`, convA, "42501"},
					{`SELECT mneme.set_speakers($1, ARRAY['Mallory'])`, convA, "42501"},
					{`SELECT mneme.pin($1)`, memA, "P0002"},
					{`SELECT mneme.unpin($1)`, memA, "P0002"},
					{`SELECT mneme.forget($1, 'by another tenant')`, memA, "P0002"},
					{`SELECT mneme.remember($1, 'supersede it', supersedes => $2)`, memA, "P0002"},
				} {
					args := []any{c.arg}
					if c.q == `SELECT mneme.remember($1, 'supersede it', supersedes => $2)` {
						args = []any{uuid.New(), memA}
					}
					err := inTenant(t, app, tenant, func(tx pgx.Tx) error { _, err := tx.Exec(ctx, c.q, args...); return err })
					require.Error(t, err, "%s as %q", c.q, tenant)
					require.Equal(t, c.code, sqlState(t, err), "%s as %q: %v", c.q, tenant, err)
				}
				require.NoError(t, inTenant(t, app, tenant, func(tx pgx.Tx) error {
					var id *int64
					return tx.QueryRow(ctx, `SELECT mneme.segment_now($1)`, convA).Scan(&id)
				}))
			}
			require.Equal(t, before, state(), "nothing of acme's changed")

			// The tables, the job queue and the worker and admin functions
			// are out of the application's reach, whatever its tenant.
			for _, q := range []string{
				`SELECT count(*) FROM mneme.memories`, `SELECT count(*) FROM mneme.messages`, `SELECT count(*) FROM mneme.jobs`,
				`SELECT count(*) FROM mneme.message_queue`, `SELECT count(*) FROM mneme.review_log`, `SELECT count(*) FROM mneme.memory_events`,
				`SELECT count(*) FROM mneme.bm25_postings`, `SELECT count(*) FROM mneme.bm25_terms`, `SELECT count(*) FROM mneme.settings`,
				`SELECT count(*) FROM mneme.tenants`,
				`UPDATE mneme.memories SET content = 'rewritten'`, `DELETE FROM mneme.messages`,
				`INSERT INTO mneme.memories (conversation_id, content) VALUES (gen_random_uuid(), 'x')`,
				`CREATE TRIGGER evil BEFORE UPDATE ON mneme.memories FOR EACH ROW EXECUTE FUNCTION mneme.tenant_fill_trg()`,
				`SELECT * FROM mneme.claim_jobs('me', 10, interval '1 minute')`,
				`SELECT mneme.set_setting('message_max_chars', '10')`,
				`SELECT mneme.take_pending_reviews(gen_random_uuid())`,
				`SELECT mneme.add_pending_review(gen_random_uuid(), ARRAY[gen_random_uuid()], 'q')`,
				`SELECT mneme.erase(gen_random_uuid(), 'x')`,
				`SELECT mneme.create_tenant('mine')`,
				`SELECT * FROM mneme.review_targets(ARRAY[gen_random_uuid()])`,
			} {
				_, err := app.Exec(ctx, q)
				require.Error(t, err, q)
				require.Equal(t, "42501", sqlState(t, err), "%s: %v", q, err)
			}
			require.Equal(t, before, state())

			// An unknown tenant is an error, not a fresh empty one.
			err = inTenant(t, app, "nobody", func(pgx.Tx) error { return nil })
			require.Equal(t, "22023", sqlState(t, err))
		})
	}
}

// TestWorkerServesEveryTenant: the sidecar connected as a mneme_worker role
// (not a superuser) segments and reviews the conversations of two tenants;
// each memory belongs to its conversation's tenant, and each tenant finds
// its own memories only.
func TestWorkerServesEveryTenant(t *testing.T) {
	t.Parallel()
	db := dbtest.New(t)
	ctx := context.Background()
	for _, tn := range []string{"acme", "globex"} {
		_, err := db.Pool.Exec(ctx, `SELECT mneme.create_tenant($1)`, tn)
		require.NoError(t, err)
	}
	app, err := pgxpool.New(ctx, db.As(t, "mneme_app"))
	require.NoError(t, err)
	t.Cleanup(app.Close)
	worker, err := pgxpool.New(ctx, db.As(t, "mneme_worker"))
	require.NoError(t, err)
	t.Cleanup(worker.Close)

	convs := map[string]uuid.UUID{"acme": uuid.New(), "globex": uuid.New()}
	for tenant, conv := range convs {
		require.NoError(t, inTenant(t, app, tenant, func(tx pgx.Tx) error {
			for i := 0; i < 6; i++ {
				if _, err := tx.Exec(ctx, `SELECT mneme.add_message($1, 'user', $2, $3)`, conv,
					fmt.Sprintf("%s talks about its %s garden plan, step %d", tenant, tenant, i), day1.Add(time.Duration(i)*time.Minute)); err != nil {
					return err
				}
			}
			_, err := tx.Exec(ctx, `SELECT mneme.add_message($1, 'user', 'much later', $2)`, conv, day3) // the gap cuts
			return err
		}))
	}
	e := &pipelineEnv{t: t, db: &dbtest.DB{Name: db.Name, URL: db.URL, Pool: worker, Variant: db.Variant}}
	base := newPipelineEnv(t, false)
	e.deps, e.log, e.p = base.deps, base.log, base.p
	e.drain()

	var rows []string
	r, err := db.Pool.Query(ctx, `SELECT m.tenant_id || ':' || q.tenant_id FROM mneme.memories m JOIN mneme.message_queue q ON q.id = m.conversation_id`)
	require.NoError(t, err)
	rows, err = pgx.CollectRows(r, pgx.RowTo[string])
	require.NoError(t, err)
	require.ElementsMatch(t, []string{"acme:acme", "globex:globex"}, rows, "each memory belongs to its conversation's tenant")
	require.Zero(t, e.count(`SELECT count(*) FROM mneme.jobs WHERE state <> 'done'`))

	for tenant := range convs {
		for other, oconv := range convs {
			var n int
			require.NoError(t, inTenant(t, app, tenant, func(tx pgx.Tx) error {
				return tx.QueryRow(ctx, `SELECT count(*) FROM mneme.search($1, 'garden plan', 10)`, oconv).Scan(&n)
			}))
			if other == tenant {
				require.Equal(t, 1, n, "%s finds its episode", tenant)
			} else {
				require.Zero(t, n, "%s finds nothing of %s's", tenant, other)
			}
		}
	}
}

// TestMigrateAsDatabaseOwner: `mneme migrate` by a role that is no superuser
// and only owns its database (the group roles created once by an admin, who
// made it a member of mneme_owner), then the API works for an application
// role and the sidecar's worker role, twice over (migrate is idempotent).
func TestMigrateAsDatabaseOwner(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := dbtest.New(t) // the group roles exist (any migrate made them)
	name, _ := dbtest.NewEmpty(t)
	owner := "dbo_" + uuid.NewString()[:8]
	for _, q := range []string{
		fmt.Sprintf(`CREATE ROLE %s LOGIN`, owner),
		fmt.Sprintf(`ALTER DATABASE %s OWNER TO %s`, name, owner),
		fmt.Sprintf(`GRANT mneme_owner TO %s`, owner),
	} {
		_, err := db.Pool.Exec(ctx, q)
		require.NoError(t, err, q)
	}
	t.Cleanup(func() {
		_, _ = db.Pool.Exec(context.Background(), fmt.Sprintf(`DROP DATABASE IF EXISTS %s WITH (FORCE)`, name))
		_, _ = db.Pool.Exec(context.Background(), fmt.Sprintf(`DROP ROLE IF EXISTS %s`, owner))
	})
	u, err := url.Parse(db.URL)
	require.NoError(t, err)
	u.User, u.Path = url.User(owner), "/"+name
	for i := 0; i < 2; i++ {
		_, err = migrate.Run(ctx, u.String(), migrate.Options{Vector: "auto"})
		require.NoError(t, err, "migrate as the database owner, run %d", i+1)
	}
	var superuser bool
	conn, err := pgx.Connect(ctx, u.String())
	require.NoError(t, err)
	defer conn.Close(ctx)
	require.NoError(t, conn.QueryRow(ctx, `SELECT rolsuper FROM pg_roles WHERE rolname = current_user`).Scan(&superuser))
	require.False(t, superuser)
	var id int64
	require.NoError(t, conn.QueryRow(ctx, `SELECT mneme.add_message(gen_random_uuid(), 'user', 'hello from the owner')`).Scan(&id))
	var owners []string
	rows, err := conn.Query(ctx, `SELECT DISTINCT pg_get_userbyid(proowner) FROM pg_proc WHERE pronamespace = 'mneme'::regnamespace
		AND prosecdef`)
	require.NoError(t, err)
	owners, err = pgx.CollectRows(rows, pgx.RowTo[string])
	require.NoError(t, err)
	require.Equal(t, []string{"mneme_owner"}, owners, "the API runs as mneme_owner")
}
