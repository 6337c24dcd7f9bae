package bench

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"math"
	mrand "math/rand/v2"
	"net/url"
	"sort"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/mneme-memory/mneme/sidecar/pghybrid"
)

// appLogin creates a mneme_app login for the run (what an application
// connects as) and returns the database URL with it, and how to drop it.
func appLogin(ctx context.Context, conn *pgx.Conn, dsn string) (string, func(), error) {
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	role := "mneme_bench_app_" + hex.EncodeToString(b)
	if _, err := conn.Exec(ctx, fmt.Sprintf(`CREATE ROLE %s LOGIN IN ROLE mneme_app`, role)); err != nil {
		return "", nil, fmt.Errorf("create the application role (the benchmark needs CREATEROLE): %w", err)
	}
	drop := func() { _, _ = conn.Exec(context.Background(), fmt.Sprintf(`DROP ROLE IF EXISTS %s`, role)) }
	u, err := url.Parse(dsn)
	if err != nil {
		drop()
		return "", nil, err
	}
	u.User = url.User(role)
	return u.String(), drop, nil
}

// scaleApp creates a mneme_app login for the run and connects as it.
func scaleApp(ctx context.Context, conn *pgx.Conn, dsn string) (*pgx.Conn, func(), error) {
	appURL, drop, err := appLogin(ctx, conn, dsn)
	if err != nil {
		return nil, nil, err
	}
	app, err := pgx.Connect(ctx, appURL)
	if err != nil {
		drop()
		return nil, nil, fmt.Errorf("connect as the application role: %w", err)
	}
	return app, func() { app.Close(context.Background()); drop() }, nil
}

// scaleBound creates a second mneme_app login for the run, bound to the
// probe conversations' tenant (mneme.bind_login), and connects as it: its
// calls need no set_tenant, so each is made alone, outside a transaction,
// as SELECT mneme.f(...), as an application with one login per tenant
// makes it (what Citus delegates to the conversation's worker whole).
func scaleBound(ctx context.Context, conn *pgx.Conn, dsn string) (*pgx.Conn, func(), error) {
	boundURL, drop, err := appLogin(ctx, conn, dsn)
	if err != nil {
		return nil, nil, err
	}
	u, err := url.Parse(boundURL)
	if err != nil {
		drop()
		return nil, nil, err
	}
	role := u.User.Username()
	if _, err := conn.Exec(ctx, `SELECT mneme.bind_login($1, $2)`, role, probeTenant); err != nil {
		drop()
		return nil, nil, fmt.Errorf("bind the application role to tenant %s: %w", probeTenant, err)
	}
	unbind := func() {
		_, _ = conn.Exec(context.Background(), `SELECT mneme.unbind_login($1)`, role)
		drop()
	}
	bound, err := pgx.Connect(ctx, boundURL)
	if err != nil {
		unbind()
		return nil, nil, fmt.Errorf("connect as the bound application role: %w", err)
	}
	return bound, func() { bound.Close(context.Background()); unbind() }, nil
}

// The calls timed on each conversation. $1 conversation, $2 query text;
// @qv@, @qa@ and @qe@ the query's vector, filled by scaleVectors.sql ($3
// with --vectors clustered).
var scaleCalls = []struct {
	name, sql string
	owner     bool     // run as the database owner (the bare index lookup: mneme_app reads no table)
	on        []string // conversations it runs on
	// bound: made alone (no transaction, no set_tenant) by the login bound
	// to the probe tenant (scaleBound); only on its conversations.
	bound bool
	// prep: run first in the same transaction, not timed (the owner's
	// session settings of a bare lookup).
	prep string
	// byTenant: $1 is the conversation's tenant, not the conversation.
	byTenant bool
}{
	// The bare pgvector top 10 as pgvector's documentation writes a
	// filtered query: the HNSW index with iterative scans (relaxed order,
	// pgvector's default ef_search 40 and max_scan_tuples 20,000), so the
	// filter does not empty the result, planned for the values given
	// (force_custom_plan: the planner sees how large the conversation is),
	// the query embedded once (a subquery). Written with hash_embed($2) in
	// the ORDER BY, as before issue 42, a generic plan chose the btree and
	// a sort and embedded the query once per row: 16.6 s on the
	// 50,000-memory conversation, not pgvector's time.
	{"bare vector top-10", `SELECT count(*) FROM (SELECT m.id FROM mneme.memories m WHERE m.conversation_id = $1 AND m.status = 'active'
		ORDER BY m.embedding <=> @qv@ LIMIT 10) x`, true, []string{"small", "typical", "huge"}, false, bareIterative, false},
	// The same top 10, exact: the conversation's rows through the btree on
	// conversation_id, every distance computed (the query embedded once, in
	// a subquery), sorted (OFFSET 0 keeps the
	// planner from walking the HNSW index and filtering after the fact,
	// which it prefers above; with many conversations that is the slower
	// plan and loses rows to the filter).
	{"bare exact top-10", `SELECT count(*) FROM (SELECT x.id FROM (SELECT m.id, m.embedding <=> @qv@ AS d
		FROM mneme.memories m WHERE m.conversation_id = $1 AND m.status = 'active' OFFSET 0) x ORDER BY x.d LIMIT 10) y`,
		true, []string{"small", "typical", "huge"}, false, "", false},
	// The bare top 10 of the conversation's tenant (scope tenant's
	// reference; $1 the tenant): every memory of the tenant, by HNSW with
	// iterative scans and exactly through the btree on tenant_id.
	{"bare vector top-10, tenant", `SELECT count(*) FROM (SELECT m.id FROM mneme.memories m WHERE m.tenant_id = $1 AND m.status = 'active'
		ORDER BY m.embedding <=> @qv@ LIMIT 10) x`, true, []string{"huge"}, false, bareIterative, true},
	{"bare exact top-10, tenant", `SELECT count(*) FROM (SELECT x.id FROM (SELECT m.id, m.embedding <=> @qv@ AS d
		FROM mneme.memories m WHERE m.tenant_id = $1 AND m.status = 'active' OFFSET 0) x ORDER BY x.d LIMIT 10) y`,
		true, []string{"huge"}, false, "", true},
	// (array variant: not on huge, where evaluating <=> per row takes seconds
	// a query; see scaleTime)
	{"BM25 leg", `SELECT count(*) FROM mneme.bm25_search($1, $2, 100)`, false, []string{"small", "typical", "huge"}, false, "", false},
	{"vector leg", `SELECT count(*) FROM mneme.vector_search($1, @qa@, 100)`, false, []string{"small", "typical", "huge"}, false, "", false},
	{"search", `SELECT count(*) FROM mneme.search($1, $2, 10@qe@)`, false, []string{"small", "typical", "huge"}, false, "", false},
	{"retrieve", `SELECT count(*) FROM mneme.retrieve($1, $2, 10@qe@)`, false, []string{"small", "typical", "huge"}, false, "", false},
	// Scope tenant on the typical conversation's tenant, and on the huge
	// conversation's: two conversations of 5% each and about a hundredth of
	// the rest (100,000 memories of 1,000,000; scaleBigTenant).
	{"search, scope tenant", `SELECT count(*) FROM mneme.search($1, $2, 10, scope => 'tenant'@qe@)`, false, []string{"typical", "huge"}, false, "", false},
	{"retrieve, scope tenant", `SELECT count(*) FROM mneme.retrieve($1, $2, 10, scope => 'tenant'@qe@)`, false, []string{"huge"}, false, "", false},
	{"context_items", `SELECT count(*) FROM mneme.context_items($1, $2, 1000@qe@)`, false, []string{"context"}, false, "", false},
	{"context", `SELECT length(mneme.context($1, $2, 1000, record => false@qe@))`, false, []string{"context"}, false, "", false},
	// The hybrid baseline (pghybrid), top 10 like search, over its copy of
	// the memories: its own table, no row security, run as the owner.
	{hybridCall, "", true, []string{"small", "typical", "huge"}, false, "", false},
	// The form Citus delegates: the call alone in the target list (not
	// SELECT ... FROM the call, which Citus plans on the coordinator).
	{"search, bound login", `SELECT mneme.search($1, $2, 10@qe@)`, false, []string{"small", "typical"}, true, "", false},
	{"retrieve, bound login", `SELECT mneme.retrieve($1, $2, 10@qe@)`, false, []string{"small", "typical"}, true, "", false},
	{"context_items, bound login", `SELECT mneme.context_items($1, $2, 1000@qe@)`, false, []string{"context"}, true, "", false},
}

// bareIterative: pgvector's iterative index scans for the bare lookups
// (a placeholder setting where pgvector is not installed, harmless).
const bareIterative = `SET LOCAL hnsw.iterative_scan = relaxed_order; SET LOCAL plan_cache_mode = force_custom_plan`

// hybridCall is the hybrid baseline's line (pghybrid.Search, not SQL here).
const hybridCall = "PostgreSQL hybrid_search, top 10"

// scaleTime times every call on every conversation, interleaved (each round
// runs each call once), as the owner for the bare lookup and as the
// application login in the conversation's tenant for the API.
func scaleTime(ctx context.Context, conn, app, bound *pgx.Conn, hybrid *pghybrid.Baseline, o ScaleOptions, vec scaleVectors, variant string) (map[string]map[string]Latencies, error) {
	convs := map[string]uuid.UUID{"small": probeSmall, "typical": probeTypical, "huge": bulkConv(0), "context": probeContext}
	tenant := map[string]string{"small": probeTenant, "typical": probeTenant, "context": probeTenant, "huge": tenantOf(0, o.Tenants)}
	words := map[string][]string{}
	for name, c := range convs {
		var ws []string
		if err := conn.QueryRow(ctx, `SELECT array_agg(w) FROM (SELECT unnest(string_to_array(content, ' ')) AS w
			FROM (SELECT content FROM mneme.memories WHERE conversation_id = $1 ORDER BY id LIMIT 200) s) x
			WHERE w ~ '^[a-z]+$'`, c).Scan(&ws); err != nil {
			return nil, fmt.Errorf("words of %s: %w", name, err)
		}
		if len(ws) == 0 {
			return nil, fmt.Errorf("the %s conversation has no memories", name)
		}
		words[name] = ws
	}
	r := mrand.New(mrand.NewPCG(3, 3))
	samples := map[string]map[string][]float64{}
	warmup := min(5, 1+o.Queries/5)
	for i := 0; i < o.Queries+warmup; i++ {
		for _, c := range scaleCalls {
			for _, name := range c.on {
				if c.owner && variant == "array" && name == "huge" {
					continue // seconds a query: the array variant has no index for it
				}
				if c.byTenant && o.Citus {
					continue // a bare read of every shard, not what Citus is measured for (not tried on Citus)
				}
				ws := words[name]
				q := ws[r.IntN(len(ws))] + " " + ws[r.IntN(len(ws))] + " " + ws[r.IntN(len(ws))]
				var took time.Duration
				var arg any = convs[name]
				if c.byTenant {
					arg = tenant[name]
				}
				// The statement and its arguments, the query's vector made
				// before the clock starts (--vectors clustered).
				sql, args, err := vec.statement(c.sql, arg, q)
				if err != nil {
					return nil, fmt.Errorf("%s on %s: %w", c.name, name, err)
				}
				if c.name == hybridCall {
					var qemb []float32 // nil: mneme.hash_embed in SQL
					if vec.clustered != nil {
						qemb, _ = vec.clustered.EmbedOne(q)
					}
					t0 := time.Now()
					if _, err := hybrid.SearchEmbedding(ctx, convs[name].String(), q, qemb, 10); err != nil {
						return nil, fmt.Errorf("%s on %s: %w", c.name, name, err)
					}
					took = time.Since(t0)
				} else if c.prep != "" {
					err := pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
						if _, err := tx.Exec(ctx, c.prep); err != nil {
							return err
						}
						t0 := time.Now()
						_, err := tx.Exec(ctx, sql, args...)
						took = time.Since(t0)
						return err
					})
					if err != nil {
						return nil, fmt.Errorf("%s on %s: %w", c.name, name, err)
					}
				} else if c.owner || c.bound {
					on := conn
					if c.bound {
						on = bound
					}
					t0 := time.Now()
					if _, err := on.Exec(ctx, sql, args...); err != nil {
						return nil, fmt.Errorf("%s on %s: %w", c.name, name, err)
					}
					took = time.Since(t0)
				} else {
					err := pgx.BeginFunc(ctx, app, func(tx pgx.Tx) error {
						if _, err := tx.Exec(ctx, `SELECT mneme.set_tenant($1)`, tenant[name]); err != nil {
							return err
						}
						t0 := time.Now()
						_, err := tx.Exec(ctx, sql, args...)
						took = time.Since(t0)
						return err
					})
					if err != nil {
						return nil, fmt.Errorf("%s on %s: %w", c.name, name, err)
					}
				}
				if i >= warmup {
					if samples[name] == nil {
						samples[name] = map[string][]float64{}
					}
					samples[name][c.name] = append(samples[name][c.name], float64(took.Microseconds())/1000)
				}
			}
		}
		if i%10 == 0 { // a running system takes pending reviews regularly
			if _, err := conn.Exec(ctx, `UPDATE mneme.message_queue SET pending_reviews = NULL WHERE pending_reviews IS NOT NULL`); err != nil {
				return nil, err
			}
		}
	}
	out := map[string]map[string]Latencies{}
	for name, calls := range samples {
		out[name] = map[string]Latencies{}
		for call, ms := range calls {
			out[name][call] = percentiles(ms)
		}
	}
	return out, nil
}

// scaleGoals checks the goals at the largest size (and its growth from the
// smallest).
func scaleGoals(steps []ScaleStep, variant string) []ScaleGoal {
	if len(steps) == 0 {
		return nil
	}
	first, last := steps[0], steps[len(steps)-1]
	at := func(s ScaleStep, conv, call string) Latencies { return s.Calls[conv][call] }
	var goals []ScaleGoal
	add := func(goal string, measured, limit float64) {
		goals = append(goals, ScaleGoal{Goal: goal, Measured: math.Round(measured*100) / 100, Limit: limit, Pass: measured <= limit})
	}
	// The reference is the faster of the two bare lookups: what a person
	// writing the query by hand could get at best.
	bare := at(last, "typical", "bare vector top-10").P50
	if exact := at(last, "typical", "bare exact top-10").P50; exact > 0 && (bare == 0 || exact < bare) {
		bare = exact
	}
	for _, call := range []string{"search", "retrieve"} {
		add(fmt.Sprintf("%s p50 / the faster bare vector top-10 p50, typical conversation, %d memories", call, last.Memories),
			at(last, "typical", call).P50/math.Max(bare, 1e-3), 1.5)
		if variant == "array" {
			goals[len(goals)-1].NotApplicable, goals[len(goals)-1].Pass = true, false
		}
	}
	add(fmt.Sprintf("context_items p50 ms, %d memories", last.Memories), at(last, "context", "context_items").P50, 10)
	add(fmt.Sprintf("context_items p99 ms, %d memories", last.Memories), at(last, "context", "context_items").P99, 30)
	if len(steps) > 1 {
		for _, conv := range []string{"small", "typical", "context"} {
			calls := make([]string, 0, len(last.Calls[conv]))
			for call := range last.Calls[conv] {
				calls = append(calls, call)
			}
			sort.Strings(calls)
			for _, call := range calls {
				if call == hybridCall {
					continue // the baseline's growth is not a goal of mneme's (shown in the table)
				}
				add(fmt.Sprintf("%s on %s: p50 at %d / p50 at %d", call, conv, last.Memories, first.Memories),
					at(last, conv, call).P50/math.Max(at(first, conv, call).P50, 1e-3), 1.5)
			}
		}
	}
	return goals
}
