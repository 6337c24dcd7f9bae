package tests

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand"
	randv2 "math/rand/v2"
	"net/url"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/mneme-memory/mneme/sidecar/config"
	"github.com/mneme-memory/mneme/sidecar/dbtest"
	"github.com/mneme-memory/mneme/sidecar/embed"
	"github.com/mneme-memory/mneme/sidecar/migrate"
	"github.com/mneme-memory/mneme/sidecar/pipeline"
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

// appWithTenants creates the tenants (as the superuser) and returns a pool
// of a mneme_app login.
func appWithTenants(t *testing.T, db *dbtest.DB, tenants ...string) *pgxpool.Pool {
	t.Helper()
	for _, tn := range tenants {
		_, err := db.Pool.Exec(context.Background(), `SELECT mneme.create_tenant($1)`, tn)
		require.NoError(t, err)
	}
	app, _ := db.PoolAs(t, "mneme_app")
	return app
}

// ownedDatabase is an empty database owned by a new login that is a member
// of mneme_owner and nothing more, as an admin prepares it for `mneme
// migrate` by its owner; it returns the database and the owner's URL.
func ownedDatabase(t *testing.T, db *dbtest.DB) (name, dsn string) {
	t.Helper()
	ctx := context.Background()
	name, _ = dbtest.NewEmpty(t)
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
	return name, u.String()
}

// TestTenantIsolation: for each of three tenants (acme, globex and the
// default one), an application role (mneme_app) of each other tenant calls
// every function mneme_app may EXECUTE (read from pg_proc with
// has_function_privilege, not a hand list) with the victim's conversation
// and memory ids and seeded random values for the other arguments,
// optional ones (scope => 'tenant', include_history, as_of, ...) included
// at random and once each for sure; it sees nothing of the victim's (no
// secret word, no memory id in any result or error) and changes nothing
// (every tenant's rows, counted and hashed table by table from pg_class,
// equal before and after). The application reaches no table, view or
// sequence (every privilege of pg_class refused, and tried), and no other
// function of the schema. Seed: MNEME_TEST_SEED, else the clock (logged).
func TestTenantIsolation(t *testing.T) {
	t.Parallel()
	seed := time.Now().UnixNano()
	if s := os.Getenv("MNEME_TEST_SEED"); s != "" {
		var err error
		seed, err = strconv.ParseInt(s, 10, 64)
		require.NoError(t, err)
	}
	t.Logf("seed %d (MNEME_TEST_SEED=%d reproduces this run)", seed, seed)
	for _, variant := range variants(t) {
		t.Run(variant, func(t *testing.T) {
			t.Parallel()
			db := dbtest.New(t, dbtest.WithVector(variant))
			ctx := context.Background()
			app := appWithTenants(t, db, "acme", "globex")
			tenants := []*tenantData{seedTenant(t, db, app, "acme"), seedTenant(t, db, app, "globex"), seedTenant(t, db, app, "")}

			before := tenantFingerprints(t, db)
			require.Len(t, before, 4, "three tenants and the global tables")
			fns := appFunctions(t, db)
			require.Greater(t, len(fns), 30)

			t.Run("attacks", func(t *testing.T) {
				for i, attacker := range tenants {
					for j, victim := range tenants {
						if i == j {
							continue
						}
						rng := rand.New(rand.NewSource(seed + int64(10*i+j)))
						t.Run(attacker.label()+"->"+victim.label(), func(t *testing.T) {
							t.Parallel()
							calls := 0
							for _, f := range fns {
								for _, q := range f.calls(rng, victim) {
									calls++
									attack(t, app, attacker, victim, q)
								}
							}
							t.Logf("%d calls of %d functions", calls, len(fns))
						})
					}
				}
				t.Run("tables", func(t *testing.T) {
					t.Parallel()
					appReachesNoTable(t, db, app, tenants)
				})
				t.Run("other functions", func(t *testing.T) {
					t.Parallel()
					appCallsNoOtherFunction(t, db, app)
				})
			})
			after := tenantFingerprints(t, db)
			for tn, fp := range before {
				require.Equal(t, fp, after[tn], "tenant %q: nothing of its rows changed", tn)
			}

			// What each tenant sees of its own: the attacks did not hide it.
			for _, tn := range tenants {
				var n int
				require.NoError(t, inTenant(t, app, tn.name, func(tx pgx.Tx) error {
					return tx.QueryRow(ctx, `SELECT count(*) FROM mneme.search($1, $2, 10)`, tn.convs[0], tn.secret).Scan(&n)
				}))
				require.Positive(t, n, "%s finds its memories", tn.label())
			}
			// An unknown tenant is an error, not a fresh empty one.
			err := inTenant(t, app, "nobody", func(pgx.Tx) error { return nil })
			require.Equal(t, "22023", sqlState(t, err))
		})
	}
}

// tenantData is what one tenant wrote: the ids another tenant attacks with
// and the word that must never reach that other tenant.
type tenantData struct {
	name   string // "" = the default tenant (no set_tenant)
	secret string // a word of every message and memory, in the attacks' queries
	canary string // a word of every message and memory, never sent by an attacker
	convs  []uuid.UUID
	mems   []uuid.UUID
}

func (d *tenantData) label() string {
	if d.name == "" {
		return "default"
	}
	return d.name
}

// seedTenant writes, as the application in the tenant, two conversations:
// messages cut into episodes by the sidecar's pipeline, explicit memories
// (one pinned, one superseded, one forgotten) and pending reviews.
func seedTenant(t *testing.T, db *dbtest.DB, app *pgxpool.Pool, tenant string) *tenantData {
	t.Helper()
	ctx := context.Background()
	name := tenant
	if name == "" {
		name = "default"
	}
	d := &tenantData{name: tenant, secret: name + "vault", canary: name + "canary", convs: []uuid.UUID{uuid.New(), uuid.New()}}
	require.NoError(t, inTenant(t, app, tenant, func(tx pgx.Tx) error {
		for c, conv := range d.convs {
			for i := 0; i < 6; i++ {
				if _, err := tx.Exec(ctx, `SELECT mneme.add_message($1, $2, $3, $4)`, conv, []string{"user", "assistant"}[i%2],
					fmt.Sprintf("%s: the %s opens with a linden key, %s step %d of chat %d", name, d.secret, d.canary, i, c), day1.Add(time.Duration(i)*time.Minute)); err != nil {
					return err
				}
			}
			if _, err := tx.Exec(ctx, `SELECT mneme.add_message($1, 'user', $2, $3)`, conv, "much later about the "+d.secret+" and "+d.canary, day3); err != nil {
				return err
			}
			var old, m uuid.UUID
			if err := tx.QueryRow(ctx, `SELECT mneme.remember($1, $2, 'user_profile', pinned => true)`, conv,
				fmt.Sprintf("Alice of %s keeps the %s in Paris %s", name, d.secret, d.canary)).Scan(&old); err != nil {
				return err
			}
			if err := tx.QueryRow(ctx, `SELECT mneme.remember($1, $2, supersedes => $3)`, conv,
				fmt.Sprintf("Alice of %s moved the %s to Rome %s", name, d.secret, d.canary), old).Scan(&m); err != nil {
				return err
			}
			var gone uuid.UUID
			if err := tx.QueryRow(ctx, `SELECT mneme.remember($1, $2)`, conv, fmt.Sprintf("the %s code was 1234 %s", d.secret, d.canary)).Scan(&gone); err != nil {
				return err
			}
			if _, err := tx.Exec(ctx, `SELECT mneme.forget($1, 'changed')`, gone); err != nil {
				return err
			}
			d.mems = append(d.mems, old, m, gone)
		}
		return nil
	}))
	e := &pipelineEnv{t: t, db: db, log: slog.New(slog.DiscardHandler)}
	e.deps = pipeline.Deps{Embedder: embed.NewHash(config.DefaultEmbedDim), Log: e.log}
	var err error
	e.p, err = pipeline.New(e.deps)
	require.NoError(t, err)
	e.drain()
	rows, err := db.Pool.Query(ctx, `SELECT id FROM mneme.memories WHERE conversation_id = ANY ($1) AND kind = 'episodic'`, d.convs)
	require.NoError(t, err)
	eps, err := pgx.CollectRows(rows, pgx.RowTo[uuid.UUID])
	require.NoError(t, err)
	require.NotEmpty(t, eps, "%s: episodes", name)
	d.mems = append(d.mems, eps...)
	require.NoError(t, inTenant(t, app, tenant, func(tx pgx.Tx) error {
		_, err := tx.Exec(ctx, `SELECT count(*) FROM mneme.retrieve($1, $2, 5)`, d.convs[0], d.secret+" linden")
		return err
	}))
	return d
}

// tenantFingerprints counts and hashes, per tenant, the rows of every table
// of schema mneme (from pg_class): by its tenant_id, else its
// conversation's tenant, else its memory's; tables with none of these are
// hashed whole under "global".
func tenantFingerprints(t *testing.T, db *dbtest.DB) map[string]string {
	t.Helper()
	ctx := context.Background()
	rows, err := db.Pool.Query(ctx, `
		SELECT c.relname, coalesce((SELECT a.attname FROM pg_attribute a WHERE a.attrelid = c.oid AND NOT a.attisdropped
		                             AND a.attname IN ('tenant_id', 'conversation_id', 'memory_id')
		                           ORDER BY array_position(ARRAY['tenant_id', 'conversation_id', 'memory_id'], a.attname::text) LIMIT 1), '')
		FROM pg_class c WHERE c.relnamespace = 'mneme'::regnamespace AND c.relkind IN ('r', 'p') ORDER BY 1`)
	require.NoError(t, err)
	type table struct{ name, key string }
	tables, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (table, error) {
		var tb table
		return tb, r.Scan(&tb.name, &tb.key)
	})
	require.NoError(t, err)
	require.Greater(t, len(tables), 10)
	out := map[string]string{}
	for _, tb := range tables {
		owner := map[string]string{
			"tenant_id":       "x.tenant_id",
			"conversation_id": "(SELECT q.tenant_id FROM mneme.message_queue q WHERE q.id = x.conversation_id)",
			"memory_id":       "(SELECT m.tenant_id FROM mneme.memories m WHERE m.id = x.memory_id)",
			"":                "'global'",
		}[tb.key]
		rows, err := db.Pool.Query(ctx, fmt.Sprintf(`SELECT coalesce(%s, 'none'), count(*) || ':' || md5(string_agg(x::text, E'\n' ORDER BY x::text))
			FROM mneme.%s x GROUP BY 1`, owner, pgx.Identifier{tb.name}.Sanitize()))
		require.NoError(t, err)
		for rows.Next() {
			var tn, fp string
			require.NoError(t, rows.Scan(&tn, &fp))
			out[tn] += tb.name + "=" + fp + " "
		}
		require.NoError(t, rows.Err())
	}
	return out
}

// appFn is a function mneme_app may execute, with its input parameters.
type appFn struct {
	name     string
	argNames []string
	argTypes []string
	defaults int // the last `defaults` parameters are optional
}

func appFunctions(t *testing.T, db *dbtest.DB) []appFn {
	t.Helper()
	rows, err := db.Pool.Query(context.Background(), `
		SELECT p.proname, (coalesce(p.proargnames, '{}'::text[]))[1:p.pronargs],
		       coalesce(ARRAY(SELECT format_type(a, NULL) FROM unnest(p.proargtypes::oid[]) WITH ORDINALITY AS u(a, n) ORDER BY n), '{}'),
		       p.pronargdefaults
		FROM pg_proc p
		WHERE p.pronamespace = 'mneme'::regnamespace AND has_function_privilege('mneme_app', p.oid, 'EXECUTE')
		ORDER BY 1, 2`)
	require.NoError(t, err)
	fns, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (appFn, error) {
		var f appFn
		return f, r.Scan(&f.name, &f.argNames, &f.argTypes, &f.defaults)
	})
	require.NoError(t, err)
	for _, f := range fns {
		require.Len(t, f.argNames, len(f.argTypes), "%s: every parameter is named", f.name)
	}
	return fns
}

// calls returns the statements that attack victim with f: a few with
// seeded random arguments, optional ones included at random, and one per
// optional parameter with it for sure. set_tenant is left out: choosing
// the tenant is the application's (its argument is the tenant, not an id).
func (f appFn) calls(rng *rand.Rand, victim *tenantData) []string {
	if f.name == "set_tenant" {
		return nil
	}
	n := 1
	for _, typ := range f.argTypes {
		if typ == "uuid" || typ == "uuid[]" {
			n = 4 // the functions that take the victim's ids get more
		}
	}
	var out []string
	for i := 0; i < n+f.defaults; i++ {
		var args []string
		for k, name := range f.argNames {
			optional := k >= len(f.argNames)-f.defaults
			force := i >= n && k == len(f.argNames)-f.defaults+(i-n)
			if optional && !force && rng.Intn(2) == 0 {
				continue
			}
			args = append(args, fmt.Sprintf("%s => %s", pgx.Identifier{name}.Sanitize(), attackArg(rng, name, f.argTypes[k], victim)))
		}
		out = append(out, fmt.Sprintf("SELECT coalesce(string_agg(r::text, E'\n'), '') FROM mneme.%s(%s) AS r", f.name, strings.Join(args, ", ")))
	}
	switch f.name {
	case "search", "retrieve", "retrieve_markdown", "context", "context_items":
		for _, c := range victim.convs {
			extra := ""
			if f.name != "context" && f.name != "context_items" {
				extra = ", include_history => true, as_of => now()"
			}
			arg := "k"
			if strings.HasPrefix(f.name, "context") {
				arg = "budget"
			}
			out = append(out, fmt.Sprintf(`SELECT coalesce(string_agg(r::text, E'\n'), '') FROM mneme.%s('%s', '%s linden key Paris Rome', %s => 50, scope => 'tenant'%s) AS r`,
				f.name, c, victim.secret, arg, extra))
		}
	}
	return out
}

// attackArg is a value for one parameter: the victim's ids for ids, its
// secret word in texts, and otherwise a valid value picked at random.
func attackArg(rng *rand.Rand, name, typ string, victim *tenantData) string {
	pick := func(vs ...string) string { return vs[rng.Intn(len(vs))] }
	switch typ {
	case "uuid":
		if name == "conversation_id" || name == "conversation" {
			return fmt.Sprintf("'%s'::uuid", victim.convs[rng.Intn(len(victim.convs))])
		}
		return fmt.Sprintf("'%s'::uuid", victim.mems[rng.Intn(len(victim.mems))])
	case "uuid[]":
		if name == "conversation_ids" {
			return fmt.Sprintf("ARRAY['%s']::uuid[]", victim.convs[rng.Intn(len(victim.convs))])
		}
		return fmt.Sprintf("ARRAY['%s']::uuid[]", victim.mems[rng.Intn(len(victim.mems))])
	case "text":
		switch name {
		case "scope":
			return pick("'conversation'", "'tenant'")
		case "role":
			return pick("'user'", "'assistant'")
		case "label", "only_label":
			return pick("'general'", "'user_profile'", "'important'")
		case "sort":
			return pick("'created'", "'r'", "'said_asc'")
		case "only_status":
			return pick("'active'", "'superseded'")
		case "only_kind":
			return pick("'episodic'", "'semantic'")
		case "key":
			return pick("'rrf_k'", "'message_max_chars'", "'label_weights'")
		}
		return pick(fmt.Sprintf("'%s linden key'", victim.secret), fmt.Sprintf("'where is the %s'", victim.secret), "'Alice Paris Rome'")
	case "text[]":
		return pick("ARRAY['Mallory']", fmt.Sprintf("ARRAY['the %s', 'Paris']", victim.secret))
	case "integer":
		if name == "dim" {
			return "16"
		}
		if name == "budget" {
			return pick("50", "400")
		}
		return pick("1", "5", "100")
	case "double precision":
		return pick("0.5", "3")
	case "boolean":
		return pick("true", "false")
	case "real[]":
		return fmt.Sprintf("mneme.hash_embed('%s linden key')", victim.secret)
	case "timestamp with time zone":
		return pick("now()", "now() - interval '1 day'", "now() + interval '1 day'", "'2026-03-01 08:03+00'", "'2026-03-03 09:00+00'")
	}
	panic("no attack value for type " + typ)
}

// attack runs q as the application in attacker's tenant: it succeeds or
// raises a documented SQLSTATE, and neither result nor error holds
// anything of the victim's (its canary word, its memory ids).
func attack(t *testing.T, app *pgxpool.Pool, attacker, victim *tenantData, q string) {
	t.Helper()
	var out string
	err := inTenant(t, app, attacker.name, func(tx pgx.Tx) error {
		if _, err := tx.Exec(context.Background(), `SET LOCAL statement_timeout = '20s'`); err != nil {
			return err
		}
		return tx.QueryRow(context.Background(), q).Scan(&out)
	})
	if err != nil {
		var pgErr *pgconn.PgError
		require.True(t, errors.As(err, &pgErr), "%s: %v", q, err)
		require.True(t, documented[pgErr.Code], "%s: undocumented %s %s", q, pgErr.Code, pgErr.Message)
		out = pgErr.Message + " " + pgErr.Detail + " " + pgErr.Hint
	}
	require.NotContains(t, out, victim.canary, "%s as %s: the victim's words", q, attacker.label())
	for _, m := range victim.mems {
		if !strings.Contains(q, m.String()) { // an error may name the id it was given
			require.NotContains(t, out, m.String(), "%s as %s: the victim's memory ids", q, attacker.label())
		}
	}
}

// appReachesNoTable: mneme_app holds no privilege on any relation of the
// schema (pg_class), and SELECT, INSERT, UPDATE, DELETE and TRUNCATE of
// each, tried in every tenant, are refused.
func appReachesNoTable(t *testing.T, db *dbtest.DB, app *pgxpool.Pool, tenants []*tenantData) {
	ctx := context.Background()
	rows, err := db.Pool.Query(ctx, `
		SELECT c.relname, c.relkind::text, (SELECT a.attname FROM pg_attribute a WHERE a.attrelid = c.oid AND a.attnum > 0
		                                    AND NOT a.attisdropped ORDER BY a.attnum LIMIT 1)
		FROM pg_class c WHERE c.relnamespace = 'mneme'::regnamespace AND c.relkind IN ('r', 'p', 'v', 'm', 'f', 'S') ORDER BY 1`)
	require.NoError(t, err)
	type rel struct{ name, kind, col string }
	rels, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (rel, error) {
		var x rel
		return x, r.Scan(&x.name, &x.kind, &x.col)
	})
	require.NoError(t, err)
	// The BM25 statistics have no tenant column and no row security
	// (docs/retrieval.md, "Tenants and the BM25 statistics"): the
	// application must not reach them at all.
	for _, bm := range []string{"bm25_docs", "bm25_postings", "bm25_terms", "bm25_stats"} {
		require.True(t, slices.ContainsFunc(rels, func(r rel) bool { return r.name == bm }), "%s is checked", bm)
	}
	tried := 0
	for _, r := range rels {
		q := "mneme." + pgx.Identifier{r.name}.Sanitize()
		if r.kind == "S" {
			for _, priv := range []string{"USAGE", "SELECT", "UPDATE"} {
				var has bool
				require.NoError(t, db.Pool.QueryRow(ctx, `SELECT has_sequence_privilege('mneme_app', $1, $2)`, q, priv).Scan(&has))
				require.False(t, has, "%s on %s", priv, q)
			}
			continue
		}
		for _, priv := range []string{"SELECT", "INSERT", "UPDATE", "DELETE", "TRUNCATE", "REFERENCES", "TRIGGER"} {
			var has bool
			require.NoError(t, db.Pool.QueryRow(ctx, `SELECT has_table_privilege('mneme_app', $1, $2)`, q, priv).Scan(&has))
			require.False(t, has, "%s on %s", priv, q)
		}
		col := pgx.Identifier{r.col}.Sanitize()
		for _, stmt := range []string{
			`SELECT count(*) FROM ` + q,
			`INSERT INTO ` + q + ` DEFAULT VALUES`,
			`UPDATE ` + q + ` SET ` + col + ` = ` + col,
			`DELETE FROM ` + q,
			`TRUNCATE ` + q,
		} {
			for _, tn := range tenants {
				err := inTenant(t, app, tn.name, func(tx pgx.Tx) error { _, err := tx.Exec(ctx, stmt); return err })
				require.Error(t, err, "%s as %s", stmt, tn.label())
				want := []string{"42501"}
				if r.kind == "v" {
					// A view that cannot take writes says so (55000; TRUNCATE:
					// 42809) before its privileges, refused above, are checked.
					want = append(want, "55000", "42809")
				}
				require.Contains(t, want, sqlState(t, err), "%s as %s: %v", stmt, tn.label(), err)
				tried++
			}
		}
	}
	require.Greater(t, tried, 200)
	_, err = app.Exec(ctx, `CREATE TRIGGER evil BEFORE UPDATE ON mneme.memories FOR EACH ROW EXECUTE FUNCTION mneme.tenant_fill_trg()`)
	require.Equal(t, "42501", sqlState(t, err))
}

// appCallsNoOtherFunction: every other function of the schema (the job
// queue, the worker's, the admin's, the internal ones) refuses mneme_app
// before it runs.
func appCallsNoOtherFunction(t *testing.T, db *dbtest.DB, app *pgxpool.Pool) {
	ctx := context.Background()
	rows, err := db.Pool.Query(ctx, `
		SELECT format('SELECT %s(%s)', p.oid::regproc,
		              -- (a polymorphic argument, of the per-shard trigger copies on Citus, as text)
		              coalesce((SELECT string_agg('NULL::' || CASE WHEN a = 'anyelement'::regtype THEN 'text' ELSE format_type(a, NULL) END, ', ' ORDER BY n)
		                        FROM unnest(p.proargtypes::oid[]) WITH ORDINALITY AS u(a, n)), ''))
		FROM pg_proc p
		WHERE p.pronamespace = 'mneme'::regnamespace AND p.prokind = 'f'
		  AND NOT has_function_privilege('mneme_app', p.oid, 'EXECUTE')
		ORDER BY 1`)
	require.NoError(t, err)
	qs, err := pgx.CollectRows(rows, pgx.RowTo[string])
	require.NoError(t, err)
	require.Greater(t, len(qs), 40)
	for _, name := range []string{"claim_jobs", "enqueue_job", "set_setting", "take_pending_reviews", "add_pending_review",
		"review_targets", "erase", "create_tenant", "apply_review", "fail_job"} {
		require.True(t, slices.ContainsFunc(qs, func(q string) bool { return strings.HasPrefix(q, "SELECT mneme."+name+"(") }),
			"%s is out of the application's reach", name)
	}
	for _, q := range qs {
		_, err := app.Exec(ctx, q)
		require.Error(t, err, q)
		require.Equal(t, "42501", sqlState(t, err), "%s: %v", q, err)
	}
}

// TestWorkerServesEveryTenant: the sidecar connected as a mneme_worker role
// (not a superuser) segments, reviews and revises the conversations of two tenants;
// each memory belongs to its conversation's tenant, and each tenant finds
// its own memories only.
func TestWorkerServesEveryTenant(t *testing.T) {
	t.Parallel()
	db := dbtest.New(t)
	ctx := context.Background()
	app := appWithTenants(t, db, "acme", "globex")
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

	// Revision as the worker: the application's writes are revised by the
	// revise jobs the worker runs (candidates, the decision, its write).
	var paris, berlin uuid.UUID
	require.NoError(t, inTenant(t, app, "acme", func(tx pgx.Tx) error {
		return tx.QueryRow(ctx, `SELECT mneme.remember($1, 'I live in Paris', at => $2)`, convs["acme"], day3).Scan(&paris)
	}))
	e.drain()
	require.NoError(t, inTenant(t, app, "acme", func(tx pgx.Tx) error {
		return tx.QueryRow(ctx, `SELECT mneme.remember($1, 'I moved to Berlin', at => $2)`, convs["acme"], day3.Add(time.Hour)).Scan(&berlin)
	}))
	e.drain()
	require.Zero(t, e.count(`SELECT count(*) FROM mneme.jobs WHERE state <> 'done'`))
	var status string
	var supersedes uuid.UUID
	require.NoError(t, db.Pool.QueryRow(ctx, `SELECT status FROM mneme.memories WHERE id = $1`, paris).Scan(&status))
	require.Equal(t, "superseded", status)
	require.NoError(t, db.Pool.QueryRow(ctx, `SELECT supersedes_id FROM mneme.memories WHERE id = $1`, berlin).Scan(&supersedes))
	require.Equal(t, paris, supersedes)
}

// TestMigrateAsDatabaseOwner: `mneme migrate` by a role that is no superuser
// and only owns its database (the group roles created once by an admin, who
// made it a member of mneme_owner), then the API works for an application
// role and the sidecar's worker role, twice over (migrate is idempotent).
func TestMigrateAsDatabaseOwner(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := dbtest.New(t) // the group roles exist (any migrate made them)
	_, dsn := ownedDatabase(t, db)
	var err error
	for i := 0; i < 2; i++ {
		_, err = migrate.Run(ctx, dsn, migrate.Options{Vector: "auto"})
		require.NoError(t, err, "migrate as the database owner, run %d", i+1)
	}
	var superuser bool
	conn, err := pgx.Connect(ctx, dsn)
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

// TestMigrateAsDatabaseOwnerWithPgvector: pgvector is not a trusted
// extension, so a database owner cannot create it. With MNEME_VECTOR auto
// its first migrate takes the array variant; with pgvector it is told what
// an admin runs; once an admin created the extension, auto takes pgvector.
func TestMigrateAsDatabaseOwnerWithPgvector(t *testing.T) {
	t.Parallel()
	if len(variants(t)) < 2 {
		t.Skip("pgvector not installed on the test server")
	}
	ctx := context.Background()
	db := dbtest.New(t)
	_, dsn := ownedDatabase(t, db)
	_, err := migrate.Run(ctx, dsn, migrate.Options{Vector: "pgvector"})
	require.ErrorContains(t, err, "CREATE EXTENSION vector", "pgvector asked for: say what an admin runs")
	res, err := migrate.Run(ctx, dsn, migrate.Options{Vector: "auto"})
	require.NoError(t, err)
	require.Equal(t, "array", res.Variant, "auto without the right to create pgvector: the array variant")

	name, dsn := ownedDatabase(t, db)
	u, err := url.Parse(db.URL)
	require.NoError(t, err)
	u.Path = "/" + name
	admin, err := pgx.Connect(ctx, u.String())
	require.NoError(t, err)
	_, err = admin.Exec(ctx, `CREATE EXTENSION vector`)
	require.NoError(t, err)
	require.NoError(t, admin.Close(ctx))
	for i := 0; i < 2; i++ {
		res, err = migrate.Run(ctx, dsn, migrate.Options{Vector: "auto"})
		require.NoError(t, err, "run %d", i+1)
		require.Equal(t, "pgvector", res.Variant)
	}
}

// TestHNSWUnderRowSecurityReturnsFullK: a conversation large enough for the
// HNSW path (over vector_exact_max memories) beside another tenant's as
// large one: as mneme_app, under row security, the vector leg and search
// still return the full k of the app's own conversation, through the index.
func TestHNSWUnderRowSecurityReturnsFullK(t *testing.T) {
	t.Parallel()
	if !dbtest.HasPgvector(t) {
		t.Skip("pgvector not installed on the test server")
	}
	ctx := context.Background()
	db := dbtest.New(t, dbtest.WithVector("pgvector"))
	_, err := db.Pool.Exec(ctx, `SELECT mneme.create_tenant('globex')`)
	require.NoError(t, err)
	mine, theirs := uuid.New(), uuid.New()
	_, err = db.Pool.Exec(ctx, `SELECT mneme.add_message($1, 'user', 'hello')`, mine)
	require.NoError(t, err)
	tx, err := db.Pool.Begin(ctx)
	require.NoError(t, err)
	_, err = tx.Exec(ctx, `SELECT mneme.set_tenant('globex')`)
	require.NoError(t, err)
	_, err = tx.Exec(ctx, `SELECT mneme.add_message($1, 'user', 'hello')`, theirs)
	require.NoError(t, err)
	require.NoError(t, tx.Commit(ctx))

	const n = 3000
	r := randv2.New(randv2.NewPCG(7, 8))
	h := embed.NewHash(embed.DefaultDim)
	conv := make([]uuid.UUID, 2*n)
	texts := make([]string, 2*n)
	embs := make([][]float32, 2*n)
	for i := range conv {
		conv[i] = mine
		if i >= n {
			conv[i] = theirs
		}
		texts[i] = randomText(r, 6+r.IntN(10))
		embs[i], err = h.EmbedOne(texts[i])
		require.NoError(t, err)
	}
	bulkMemories(t, db.Pool, "pgvector", conv, texts, embs)
	var tenants int
	require.NoError(t, db.Pool.QueryRow(ctx, `SELECT count(DISTINCT tenant_id) FROM mneme.memories`).Scan(&tenants))
	require.Equal(t, 2, tenants, "each conversation's memories carry its tenant")

	app, _ := db.PoolAs(t, "mneme_app")
	for i := 0; i < 5; i++ {
		q := randomText(r, 3)
		qe, err := h.EmbedOne(q)
		require.NoError(t, err)
		tx, err := app.Begin(ctx)
		require.NoError(t, err)
		defer func() { _ = tx.Rollback(ctx) }() // a failed assertion must not hold the pool's connection
		_, err = tx.Exec(ctx, `SELECT mneme.set_tenant('default')`)
		require.NoError(t, err)
		var before, after int64
		scans := `SELECT pg_stat_get_xact_numscans('mneme.memories_embedding_hnsw'::regclass)`
		require.NoError(t, tx.QueryRow(ctx, scans).Scan(&before))
		var legRows, searchRows, foreign int
		require.NoError(t, tx.QueryRow(ctx, `SELECT count(*) FROM mneme.vector_search($1, $2, 100)`, mine, qe).Scan(&legRows))
		require.NoError(t, tx.QueryRow(ctx, scans).Scan(&after))
		if !dbtest.OnCitus() { // (on Citus the shards' indexes count their scans, on the workers)
			require.Greater(t, after, before, "the HNSW index served the leg")
		}
		var got []uuid.UUID
		require.NoError(t, tx.QueryRow(ctx, `SELECT array_agg(memory_id) FROM mneme.search($1, $2, 100, $3)`, mine, q, qe).Scan(&got))
		searchRows = len(got)
		require.NoError(t, db.Pool.QueryRow(ctx, `SELECT count(*) FROM mneme.memories WHERE id = ANY ($1) AND conversation_id <> $2`,
			got, mine).Scan(&foreign))
		require.Equal(t, 100, legRows, "the vector leg returns the full k under row security")
		require.Equal(t, 100, searchRows, "search returns the full k under row security")
		require.Zero(t, foreign)
		require.NoError(t, tx.Rollback(ctx))
	}
}
