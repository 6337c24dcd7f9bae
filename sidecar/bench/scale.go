package bench

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"hash/fnv"
	"io"
	"log/slog"
	"math"
	mrand "math/rand/v2"
	"net/url"
	"regexp"
	"sort"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/mneme-memory/mneme/sidecar/clip"
	"github.com/mneme-memory/mneme/sidecar/config"
	"github.com/mneme-memory/mneme/sidecar/embed"
	"github.com/mneme-memory/mneme/sidecar/eval/pghybrid"
	"github.com/mneme-memory/mneme/sidecar/eval/plot"
	"github.com/mneme-memory/mneme/sidecar/eval/recall"
	"github.com/mneme-memory/mneme/sidecar/migrate"
	"github.com/mneme-memory/mneme/sidecar/scratch"
)

// ScaleOptions size `mneme bench scale`.
type ScaleOptions struct {
	Server        string // DATABASE_URL: the benchmark database lives on its server
	DB            string // the benchmark database's name: kept, grown step by step, reused
	Sizes         []int  // memories in the database at each step, ascending
	Conversations int    // conversations the bulk memories are spread over
	Tenants       int    // tenants the conversations belong to
	Queries       int    // timed queries per call and conversation
	Fresh         bool   // drop the database first
	// Citus: Server is a Citus coordinator; the benchmark database is a
	// scratch database on every node, distributed, dropped afterwards.
	Citus    bool
	Plot     string // an SVG of p50 against size goes here ("": none)
	Vector   string // the embedding variant of a new database: auto, pgvector or array ("": auto)
	Progress io.Writer
	Log      *slog.Logger
}

// ScaleStep is one size: what the database holds and each call's latency.
type ScaleStep struct {
	Memories     int     `json:"memories"`
	BuildSeconds float64 `json:"build_seconds"` // adding this step's memories (0 when they were there)
	DBBytes      int64   `json:"database_bytes"`
	// BytesPerMemory: the heap and each index of mneme.memories, and the
	// BM25 tables, divided by the memories.
	BytesPerMemory map[string]float64 `json:"bytes_per_memory"`
	// Calls: conversation (small, typical, huge, context) -> call -> latency.
	Calls map[string]map[string]Latencies `json:"calls"`
}

// ScaleGoal is one of the goals, measured.
type ScaleGoal struct {
	Goal     string  `json:"goal"`
	Measured float64 `json:"measured"`
	Limit    float64 `json:"limit"`
	Pass     bool    `json:"pass"`
	// NotApplicable: the array variant has no vector index to compare
	// with (its bare ORDER BY evaluates mneme's <=> per row).
	NotApplicable bool `json:"not_applicable,omitempty"`
}

// ScaleResult is a run.
type ScaleResult struct {
	DB            string         `json:"database"`
	Citus         bool           `json:"citus"` // on a Citus cluster (a scratch database, distributed)
	Variant       string         `json:"variant"`
	Conversations int            `json:"conversations"`
	Tenants       int            `json:"tenants"`
	Queries       int            `json:"queries"`
	Probes        map[string]int `json:"probe_memories"` // the timed conversations' sizes (fixed across steps)
	Steps         []ScaleStep    `json:"steps"`
	Goals         []ScaleGoal    `json:"goals"`
	// ContextSteps: where context_items's time goes at the largest size,
	// when its latency goal is missed (auto_explain of one call).
	ContextSteps []SlowStep `json:"context_items_steps,omitempty"`
	// SearchSteps: where search's time goes on the typical conversation at
	// the largest size, when its goal against the bare top-10 is missed.
	SearchSteps []SlowStep `json:"search_steps,omitempty"`
}

// The timed conversations. small and typical hold synthetic memories,
// context 500 episodes of 6 messages through add_message and
// create_episode; their sizes never change, so their latency at each step
// shows what the rest of the database costs them. huge is the bulk's
// largest conversation, which grows with the database.
var (
	probeSmall   = uuid.NewSHA1(uuid.NameSpaceOID, []byte("mneme-scale-small"))
	probeTypical = uuid.NewSHA1(uuid.NameSpaceOID, []byte("mneme-scale-typical"))
	probeContext = uuid.NewSHA1(uuid.NameSpaceOID, []byte("mneme-scale-context"))
)

const (
	probeSmallN    = 20
	probeTypicalN  = 300
	probeEpisodes  = 500
	probeTenant    = "t1"
	scaleChunk     = 50000
	scaleHugeShare = 0.05 // each of the three largest conversations holds 5% of the bulk
)

func bulkConv(i int) uuid.UUID {
	return uuid.NewSHA1(uuid.NameSpaceOID, []byte(fmt.Sprintf("mneme-scale-%d", i)))
}

// scaleWeights: conversations 0 to 2 hold 5% of the bulk each, the others
// sizes spread evenly on a log scale between 10 and 500 (so at 1,000,000
// memories over 10,000 conversations: three of 50,000, the rest 10 to
// 500 times 0.85 / their mean). Cumulative, for a binary search.
func scaleWeights(n int) []float64 {
	w := make([]float64, n)
	rest := 0.0
	for i := 3; i < n; i++ {
		w[i] = math.Exp(math.Log(10) + (math.Log(500)-math.Log(10))*float64(i-3)/float64(max(1, n-4)))
		rest += w[i]
	}
	cum := make([]float64, n)
	acc := 0.0
	for i := 0; i < n; i++ {
		if i < 3 {
			acc += scaleHugeShare
		} else {
			acc += w[i] / rest * (1 - 3*scaleHugeShare)
		}
		cum[i] = acc
	}
	return cum
}

// convOf is memory j's conversation: fixed for j whatever the size, so
// growing the database adds to every conversation in proportion.
func convOf(cum []float64, j int) int {
	h := fnv.New64a()
	fmt.Fprintf(h, "%d", j)
	u := float64(h.Sum64()>>11) / float64(1<<53)
	return min(sort.SearchFloat64s(cum, u), len(cum)-1)
}

// Scale builds (or grows, or reuses) the benchmark database step by step
// and times every call at each size, as a mneme_app login under row-level
// security in the conversation's tenant.
func Scale(ctx context.Context, o ScaleOptions) (*ScaleResult, error) {
	log := o.Log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if len(o.Sizes) == 0 || o.Conversations < 4 || o.Tenants < 2 || o.Tenants > o.Conversations || o.Queries < 1 {
		return nil, fmt.Errorf("sizes, at least 4 conversations, 2 to conversations tenants and queries are required")
	}
	var dsn string
	name := o.DB
	if o.Citus {
		db, err := scratch.Create(ctx, scratch.Options{Server: o.Server, Prefix: "mneme_bench_scale_", Citus: true, Log: log})
		if err != nil {
			return nil, err
		}
		defer db.Close()
		dsn, name = db.URL, db.Name
	} else {
		var err error
		if dsn, err = scaleDatabase(ctx, o, log); err != nil {
			return nil, err
		}
	}
	vector := o.Vector
	if vector == "" {
		vector = "auto"
	}
	res, err := migrate.Run(ctx, dsn, migrate.Options{Vector: vector, Logger: log, Citus: o.Citus})
	if err != nil {
		return nil, fmt.Errorf("migrate %s: %w", name, err)
	}
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		return nil, err
	}
	defer conn.Close(context.Background())
	// The bare lookup names <=> unqualified: mneme's (array) or pgvector's.
	if _, err := conn.Exec(ctx, `SET search_path = mneme, public`); err != nil {
		return nil, err
	}
	out := &ScaleResult{DB: name, Citus: o.Citus, Variant: res.Variant, Conversations: o.Conversations, Tenants: o.Tenants, Queries: o.Queries,
		Probes: map[string]int{"small": probeSmallN, "typical": probeTypicalN, "context": probeEpisodes}}
	hash := embed.NewHash(res.Dim)
	if err := scaleSetup(ctx, conn, o, hash); err != nil {
		return nil, err
	}
	// The hybrid search people write in PostgreSQL, over a copy of the same
	// memories in its own table (package pghybrid).
	hybrid, err := pghybrid.New(ctx, conn, nil)
	if err != nil {
		return nil, err
	}
	app, drop, err := scaleApp(ctx, conn, dsn)
	if err != nil {
		return nil, err
	}
	defer drop()
	bound, dropBound, err := scaleBound(ctx, conn, dsn)
	if err != nil {
		return nil, err
	}
	defer dropBound()
	cum := scaleWeights(o.Conversations)
	for _, n := range o.Sizes {
		step := ScaleStep{Memories: n}
		t0 := time.Now()
		grew, err := scaleGrow(ctx, conn, o, hash, cum, n)
		if err != nil {
			return nil, err
		}
		if grew {
			step.BuildSeconds = time.Since(t0).Seconds()
		}
		// (before the sizes: the database's size includes the copy)
		if err := scaleHybrid(ctx, conn, hybrid, o, n); err != nil {
			return nil, fmt.Errorf("the hybrid baseline's copy: %w", err)
		}
		if err := scaleSizes(ctx, conn, &step, o.Citus); err != nil {
			return nil, err
		}
		if step.Calls, err = scaleTime(ctx, conn, app, bound, hybrid, o, res.Variant); err != nil {
			return nil, err
		}
		log.Info("bench scale: step measured", "memories", n, "build_s", step.BuildSeconds)
		out.Steps = append(out.Steps, step)
	}
	out.Goals = scaleGoals(out.Steps, res.Variant)
	// Where a latency goal is missed, where the call's time goes.
	missed := func(prefix string) bool {
		for _, g := range out.Goals {
			if strings.HasPrefix(g.Goal, prefix) && !g.Pass && !g.NotApplicable {
				return true
			}
		}
		return false
	}
	if missed("context_items p") {
		if out.ContextSteps, err = explainCall(ctx, dsn, probeContext, `SELECT count(*) FROM mneme.context_items($1, $2, 1000)`); err != nil {
			return nil, fmt.Errorf("explain context_items: %w", err)
		}
	}
	if missed("search p50") || missed("retrieve p50") {
		if out.SearchSteps, err = explainCall(ctx, dsn, probeTypical, `SELECT count(*) FROM mneme.search($1, $2, 10)`); err != nil {
			return nil, fmt.Errorf("explain search: %w", err)
		}
	}
	return out, nil
}

// scaleHybrid fills the hybrid baseline's table with a copy of the
// memories (its dia_id the memory's id) when it does not hold as many:
// copied again whole, in chunks of the memories' key order.
func scaleHybrid(ctx context.Context, conn *pgx.Conn, h *pghybrid.Baseline, o ScaleOptions, n int) error {
	var have, want int64
	if err := conn.QueryRow(ctx, `SELECT (SELECT count(*) FROM eval_baseline.turns), (SELECT count(*) FROM mneme.memories)`).Scan(&have, &want); err != nil {
		return err
	}
	if have == want {
		return nil
	}
	if _, err := conn.Exec(ctx, `TRUNCATE eval_baseline.turns`); err != nil {
		return err
	}
	bar := recall.NewProgress(o.Progress, fmt.Sprintf("copy %d memories for the hybrid baseline", n), int(want))
	var from *uuid.UUID
	for {
		var to *uuid.UUID
		if err := conn.QueryRow(ctx, `SELECT max(x.id::text)::uuid FROM (SELECT m.id FROM mneme.memories m
			WHERE $1::uuid IS NULL OR m.id > $1 ORDER BY m.id LIMIT $2) x`, from, scaleChunk).Scan(&to); err != nil {
			return err
		}
		if to == nil {
			break
		}
		added, err := h.AddRows(ctx, `SELECT m.conversation_id::text, m.id::text, '', m.content, m.embedding::real[]
			FROM mneme.memories m WHERE ($1::uuid IS NULL OR m.id > $1) AND m.id <= $2`, from, to)
		if err != nil {
			return err
		}
		bar.Add(int(added))
		from = to
	}
	bar.Done()
	_, err := conn.Exec(ctx, `VACUUM ANALYZE eval_baseline.turns`)
	return err
}

// scaleDatabase creates the benchmark database if it does not exist (or
// drops it first with Fresh) and returns its URL.
func scaleDatabase(ctx context.Context, o ScaleOptions, log *slog.Logger) (string, error) {
	admin, err := pgx.Connect(ctx, o.Server)
	if err != nil {
		return "", fmt.Errorf("connect to %s: %w", config.Redact(o.Server), err)
	}
	defer admin.Close(context.Background())
	ident := pgx.Identifier{o.DB}.Sanitize()
	if o.Fresh {
		if _, err := admin.Exec(ctx, "DROP DATABASE IF EXISTS "+ident+" WITH (FORCE)"); err != nil {
			return "", err
		}
	}
	var exists bool
	if err := admin.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_database WHERE datname = $1)`, o.DB).Scan(&exists); err != nil {
		return "", err
	}
	if !exists {
		log.Info("bench scale: creating the benchmark database", "name", o.DB)
		if _, err := admin.Exec(ctx, "CREATE DATABASE "+ident); err != nil {
			return "", fmt.Errorf("create %s: %w", o.DB, err)
		}
	} else {
		log.Info("bench scale: reusing the benchmark database (grown only where a step needs more)", "name", o.DB)
	}
	return scratch.WithDatabase(o.Server, o.DB)
}

// scaleSetup creates the tenants, the conversations' queue rows and the
// timed conversations, once.
func scaleSetup(ctx context.Context, conn *pgx.Conn, o ScaleOptions, hash embed.Hash) error {
	var have int
	if err := conn.QueryRow(ctx, `SELECT count(*) FROM mneme.message_queue WHERE id = $1`, probeContext).Scan(&have); err != nil {
		return err
	}
	if have > 0 {
		return nil
	}
	if _, err := conn.Exec(ctx, `SELECT mneme.create_tenant('t' || g) FROM generate_series(0, $1 - 1) g`, o.Tenants); err != nil {
		return fmt.Errorf("create tenants: %w", err)
	}
	ids := make([]string, o.Conversations)
	tenants := make([]string, o.Conversations)
	for i := range ids {
		ids[i], tenants[i] = bulkConv(i).String(), tenantOf(i, o.Tenants)
	}
	if _, err := conn.Exec(ctx, `INSERT INTO mneme.message_queue (id, tenant_id) SELECT * FROM unnest($1::uuid[], $2::text[])`,
		ids, tenants); err != nil {
		return fmt.Errorf("conversations: %w", err)
	}
	if _, err := conn.Exec(ctx, `INSERT INTO mneme.message_queue (id, tenant_id) VALUES ($1, $4), ($2, $4), ($3, $4)`,
		probeSmall, probeTypical, probeContext, probeTenant); err != nil {
		return fmt.Errorf("timed conversations: %w", err)
	}
	r := mrand.New(mrand.NewPCG(7, 7))
	vocab := benchVocabulary(mrand.New(mrand.NewPCG(42, 1)))
	zipf := mrand.NewZipf(r, 1.1, 50, uint64(len(vocab)-1))
	text := func(n int) string {
		w := make([]string, n)
		for i := range w {
			w[i] = vocab[zipf.Uint64()]
		}
		return strings.Join(w, " ")
	}
	for _, p := range []struct {
		conv uuid.UUID
		n    int
	}{{probeSmall, probeSmallN}, {probeTypical, probeTypicalN}} {
		for i := 0; i < p.n; i++ {
			t := text(12 + r.IntN(29))
			v, err := hash.EmbedOne(t)
			if err != nil {
				return err
			}
			if _, err := conn.Exec(ctx, `INSERT INTO mneme.memories (conversation_id, content, embedding, created_at, last_reviewed_at)
				VALUES ($1, $2, $3::real[]::mneme.embedding, now(), now())`, p.conv, t, v); err != nil {
				return fmt.Errorf("timed conversation: %w", err)
			}
		}
	}
	start := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	for e := 0; e < probeEpisodes; e++ {
		err := pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
			ids := make([]int64, contextMessages)
			var lines []string
			for m := range ids {
				t := text(12 + r.IntN(29))
				role := []string{"user", "assistant"}[m%2]
				at := start.Add(time.Duration(e)*time.Hour + time.Duration(m)*time.Minute)
				if err := tx.QueryRow(ctx, `SELECT mneme.add_message($1, $2, $3, $4)`, probeContext, role, t, at).Scan(&ids[m]); err != nil {
					return err
				}
				lines = append(lines, role+": "+t)
			}
			content := strings.Join(lines, "\n")
			_, err := tx.Exec(ctx, `SELECT mneme.create_episode($1, $2, $3, $4, mneme.hash_embed($3), 0, 'general', false, 900, 5)`,
				probeContext, ids, content, lines[0])
			return err
		})
		if err != nil {
			return fmt.Errorf("context conversation: %w", err)
		}
	}
	_, err := conn.Exec(ctx, `DELETE FROM mneme.jobs`)
	return err
}

// scaleGrow adds bulk memories until the database holds n (the timed
// conversations included), in chunks: COPY into a staging table, then one
// INSERT per chunk (the BM25 statistics by their statement trigger).
func scaleGrow(ctx context.Context, conn *pgx.Conn, o ScaleOptions, hash embed.Hash, cum []float64, n int) (bool, error) {
	var have int
	if err := conn.QueryRow(ctx, `SELECT count(*) FROM mneme.memories`).Scan(&have); err != nil {
		return false, err
	}
	probes := probeSmallN + probeTypicalN + probeEpisodes
	if have >= n {
		return false, nil
	}
	vocab := benchVocabulary(mrand.New(mrand.NewPCG(42, 1)))
	// pgvector: the HNSW index is built after the load, much faster than
	// inserting into it row by row (as bench retrieve does).
	var hnsw string
	if err := conn.QueryRow(ctx, `SELECT coalesce(pg_get_indexdef(to_regclass('mneme.memories_embedding_hnsw')), '')`).Scan(&hnsw); err != nil {
		return false, err
	}
	if hnsw != "" {
		if _, err := conn.Exec(ctx, `DROP INDEX mneme.memories_embedding_hnsw`); err != nil {
			return false, err
		}
	}
	if _, err := conn.Exec(ctx, `CREATE UNLOGGED TABLE IF NOT EXISTS bench_scale_load
		(conversation_id uuid, content text, embedding real[], created_at timestamptz)`); err != nil {
		return false, err
	}
	bar := recall.NewProgress(o.Progress, fmt.Sprintf("grow to %d memories", n), n-have)
	base := time.Now().Add(-time.Duration(n) * time.Second)
	for from := have - probes; from < n-probes; from += scaleChunk {
		to := min(from+scaleChunk, n-probes)
		rows := make([][]any, 0, to-from)
		for j := from; j < to; j++ {
			r := mrand.New(mrand.NewPCG(uint64(j), 99))
			zipf := mrand.NewZipf(r, 1.1, 50, uint64(len(vocab)-1))
			w := make([]string, 12+r.IntN(29))
			for i := range w {
				w[i] = vocab[zipf.Uint64()]
			}
			t := strings.Join(w, " ")
			v, err := hash.EmbedOne(t)
			if err != nil {
				return false, err
			}
			rows = append(rows, []any{bulkConv(convOf(cum, j)), t, v, base.Add(time.Duration(j) * time.Second)})
		}
		if _, err := conn.CopyFrom(ctx, pgx.Identifier{"bench_scale_load"}, []string{"conversation_id", "content", "embedding", "created_at"},
			pgx.CopyFromRows(rows)); err != nil {
			return false, fmt.Errorf("copy: %w", err)
		}
		if _, err := conn.Exec(ctx, `INSERT INTO mneme.memories (conversation_id, content, embedding, created_at, last_reviewed_at)
			SELECT conversation_id, content, embedding::mneme.embedding, created_at, created_at FROM bench_scale_load`); err != nil {
			return false, fmt.Errorf("insert: %w", err)
		}
		if _, err := conn.Exec(ctx, `TRUNCATE bench_scale_load`); err != nil {
			return false, err
		}
		bar.Add(to - from)
	}
	bar.Done()
	if hnsw != "" {
		for _, q := range []string{`SET maintenance_work_mem = '2GB'`, hnsw, `RESET maintenance_work_mem`} {
			if _, err := conn.Exec(ctx, q); err != nil {
				return false, fmt.Errorf("rebuild the HNSW index: %w", err)
			}
		}
	}
	steps := []string{`VACUUM ANALYZE mneme.memories`, `VACUUM ANALYZE mneme.bm25_postings`, `VACUUM ANALYZE mneme.bm25_terms`,
		`VACUUM ANALYZE mneme.bm25_docs`, `VACUUM ANALYZE mneme.bm25_stats`, `VACUUM ANALYZE mneme.messages`, `VACUUM ANALYZE mneme.message_queue`}
	for _, s := range steps {
		if _, err := conn.Exec(ctx, s); err != nil {
			return false, fmt.Errorf("%s: %w", s, err)
		}
	}
	return true, nil
}

// scaleSizes records the database's size and bytes per memory.
func scaleSizes(ctx context.Context, conn *pgx.Conn, step *ScaleStep, citus bool) error {
	step.BytesPerMemory = map[string]float64{}
	if citus {
		return scaleSizesCitus(ctx, conn, step)
	}
	if err := conn.QueryRow(ctx, `SELECT pg_database_size(current_database())`).Scan(&step.DBBytes); err != nil {
		return err
	}
	rows, err := conn.Query(ctx, `
		SELECT CASE WHEN c.relname = 'memories' THEN 'memories heap' ELSE c.relname::text END,
		       pg_relation_size(c.oid)::float8 / greatest((SELECT count(*) FROM mneme.memories), 1)
		FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace AND n.nspname = 'mneme'
		LEFT JOIN pg_index i ON i.indexrelid = c.oid
		WHERE c.relname IN ('memories', 'bm25_postings', 'bm25_terms', 'bm25_docs')
		   OR i.indrelid = 'mneme.memories'::regclass`)
	if err != nil {
		return err
	}
	for rows.Next() {
		var name string
		var b float64
		if err := rows.Scan(&name, &b); err != nil {
			rows.Close()
			return err
		}
		step.BytesPerMemory[name] = math.Round(b*10) / 10
	}
	return rows.Err()
}

// scaleSizesCitus: on Citus the coordinator's tables are empty shells, so
// the sizes are the shards' (citus_relation_size: the heap;
// citus_total_relation_size less citus_table_size: every index of
// memories together) and the database's on every node.
func scaleSizesCitus(ctx context.Context, conn *pgx.Conn, step *ScaleStep) error {
	if err := conn.QueryRow(ctx, `SELECT sum(result::bigint)::bigint
		FROM run_command_on_all_nodes('SELECT pg_database_size(current_database())')`).Scan(&step.DBBytes); err != nil {
		return err
	}
	rows, err := conn.Query(ctx, `
		WITH n AS (SELECT greatest(count(*), 1)::float8 AS n FROM mneme.memories)
		SELECT x.name, x.bytes::float8 / n.n FROM n, (VALUES
			('memories heap', citus_relation_size('mneme.memories')),
			('memories indexes', citus_total_relation_size('mneme.memories') - citus_table_size('mneme.memories')),
			('bm25_postings', citus_relation_size('mneme.bm25_postings')),
			('bm25_terms', citus_relation_size('mneme.bm25_terms')),
			('bm25_docs', citus_relation_size('mneme.bm25_docs'))) AS x(name, bytes)`)
	if err != nil {
		return err
	}
	for rows.Next() {
		var name string
		var b float64
		if err := rows.Scan(&name, &b); err != nil {
			rows.Close()
			return err
		}
		step.BytesPerMemory[name] = math.Round(b*10) / 10
	}
	return rows.Err()
}

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

// The calls timed on each conversation. $1 conversation, $2 query text.
var scaleCalls = []struct {
	name, sql string
	owner     bool     // run as the database owner (the bare index lookup: mneme_app reads no table)
	on        []string // conversations it runs on
	// bound: made alone (no transaction, no set_tenant) by the login bound
	// to the probe tenant (scaleBound); only on its conversations.
	bound bool
}{
	{"bare vector top-10", `SELECT count(*) FROM (SELECT m.id FROM mneme.memories m WHERE m.conversation_id = $1 AND m.status = 'active'
		ORDER BY m.embedding <=> mneme.hash_embed($2)::mneme.embedding LIMIT 10) x`, true, []string{"small", "typical", "huge"}, false},
	// The same top 10, exact: the conversation's rows through the btree on
	// conversation_id, every distance computed (the query embedded once, in
	// a subquery), sorted (OFFSET 0 keeps the
	// planner from walking the HNSW index and filtering after the fact,
	// which it prefers above; with many conversations that is the slower
	// plan and loses rows to the filter).
	{"bare exact top-10", `SELECT count(*) FROM (SELECT x.id FROM (SELECT m.id, m.embedding <=> (SELECT mneme.hash_embed($2)::mneme.embedding) AS d
		FROM mneme.memories m WHERE m.conversation_id = $1 AND m.status = 'active' OFFSET 0) x ORDER BY x.d LIMIT 10) y`,
		true, []string{"small", "typical", "huge"}, false},
	// (array variant: not on huge, where evaluating <=> per row takes seconds
	// a query; see scaleTime)
	{"BM25 leg", `SELECT count(*) FROM mneme.bm25_search($1, $2, 100)`, false, []string{"small", "typical", "huge"}, false},
	{"vector leg", `SELECT count(*) FROM mneme.vector_search($1, mneme.hash_embed($2), 100)`, false, []string{"small", "typical", "huge"}, false},
	{"search", `SELECT count(*) FROM mneme.search($1, $2, 10)`, false, []string{"small", "typical", "huge"}, false},
	{"retrieve", `SELECT count(*) FROM mneme.retrieve($1, $2, 10)`, false, []string{"small", "typical", "huge"}, false},
	{"search, scope tenant", `SELECT count(*) FROM mneme.search($1, $2, 10, scope => 'tenant')`, false, []string{"typical"}, false},
	{"context_items", `SELECT count(*) FROM mneme.context_items($1, $2, 1000)`, false, []string{"context"}, false},
	{"context", `SELECT length(mneme.context($1, $2, 1000, record => false))`, false, []string{"context"}, false},
	// The hybrid baseline (pghybrid), top 10 like search, over its copy of
	// the memories: its own table, no row security, run as the owner.
	{hybridCall, "", true, []string{"small", "typical", "huge"}, false},
	// The form Citus delegates: the call alone in the target list (not
	// SELECT ... FROM the call, which Citus plans on the coordinator).
	{"search, bound login", `SELECT mneme.search($1, $2, 10)`, false, []string{"small", "typical"}, true},
	{"retrieve, bound login", `SELECT mneme.retrieve($1, $2, 10)`, false, []string{"small", "typical"}, true},
	{"context_items, bound login", `SELECT mneme.context_items($1, $2, 1000)`, false, []string{"context"}, true},
}

// hybridCall is the hybrid baseline's line (pghybrid.Search, not SQL here).
const hybridCall = "PostgreSQL hybrid_search, top 10"

// scaleTime times every call on every conversation, interleaved (each round
// runs each call once), as the owner for the bare lookup and as the
// application login in the conversation's tenant for the API.
func scaleTime(ctx context.Context, conn, app, bound *pgx.Conn, hybrid *pghybrid.Baseline, o ScaleOptions, variant string) (map[string]map[string]Latencies, error) {
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
				ws := words[name]
				q := ws[r.IntN(len(ws))] + " " + ws[r.IntN(len(ws))] + " " + ws[r.IntN(len(ws))]
				var took time.Duration
				if c.name == hybridCall {
					t0 := time.Now()
					if _, err := hybrid.Search(ctx, convs[name].String(), q, 10); err != nil {
						return nil, fmt.Errorf("%s on %s: %w", c.name, name, err)
					}
					took = time.Since(t0)
				} else if c.owner || c.bound {
					on := conn
					if c.bound {
						on = bound
					}
					t0 := time.Now()
					if _, err := on.Exec(ctx, c.sql, convs[name], q); err != nil {
						return nil, fmt.Errorf("%s on %s: %w", c.name, name, err)
					}
					took = time.Since(t0)
				} else {
					err := pgx.BeginFunc(ctx, app, func(tx pgx.Tx) error {
						if _, err := tx.Exec(ctx, `SELECT mneme.set_tenant($1)`, tenant[name]); err != nil {
							return err
						}
						t0 := time.Now()
						_, err := tx.Exec(ctx, c.sql, convs[name], q)
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

// WriteTable prints the result for a person.
func (r *ScaleResult) WriteTable(w io.Writer) {
	fmt.Fprintf(w, "mneme bench scale: database %s, variant %s, %d conversations over %d tenants, %d queries per call; "+
		"timed conversations: small %d memories, typical %d, context %d episodes (fixed), huge (the largest, grows)\n",
		r.DB, r.Variant, r.Conversations, r.Tenants, r.Queries, r.Probes["small"], r.Probes["typical"], r.Probes["context"])
	if r.Citus {
		fmt.Fprintln(w, "on Citus: a scratch database distributed by conversation; each call in a transaction (set_tenant), so Citus runs it on the coordinator, every statement routed to the conversation's shard; "+
			"the \"bound login\" calls are made alone by a login bound to the tenant, which Citus delegates to the conversation's worker whole")
	}
	for _, s := range r.Steps {
		fmt.Fprintf(w, "\n%d memories (database %.0f MB, built in %.0f s); bytes per memory:", s.Memories, float64(s.DBBytes)/1e6, s.BuildSeconds)
		names := make([]string, 0, len(s.BytesPerMemory))
		for k := range s.BytesPerMemory {
			names = append(names, k)
		}
		sort.Strings(names)
		for _, k := range names {
			fmt.Fprintf(w, " %s %.0f,", k, s.BytesPerMemory[k])
		}
		fmt.Fprintf(w, "\n  %-28s %-8s %9s %9s %9s\n", "call (ms)", "conv", "p50", "p95", "p99")
		for _, c := range scaleCalls {
			for _, conv := range c.on {
				l, ok := s.Calls[conv][c.name]
				if !ok {
					continue // not timed there (see scaleTime)
				}
				fmt.Fprintf(w, "  %-28s %-8s %9.2f %9.2f %9.2f\n", c.name, conv, l.P50, l.P95, l.P99)
			}
		}
	}
	for _, e := range []struct {
		call  string
		steps []SlowStep
	}{{"context_items", r.ContextSteps}, {"search (typical conversation)", r.SearchSteps}} {
		if len(e.steps) > 0 {
			fmt.Fprintln(w)
			writeSlowSteps(w, e.call, e.steps, "")
		}
	}
	fmt.Fprintln(w, "\ngoals")
	writeGoals(w, r.Goals, "  ")
}

// writeGoals prints goals, one line each, pass, FAIL or n/a.
func writeGoals(w io.Writer, goals []ScaleGoal, indent string) {
	for _, g := range goals {
		mark := "FAIL"
		switch {
		case g.NotApplicable:
			mark = "n/a "
		case g.Pass:
			mark = "pass"
		}
		fmt.Fprintf(w, "%s%s  %-70s %8.2f (limit %.1f)\n", indent, mark, g.Goal, g.Measured, g.Limit)
	}
}

// writeSlowSteps prints where a call's time goes: its slowest eight
// statements, with the start of each plan.
func writeSlowSteps(w io.Writer, call string, steps []SlowStep, indent string) {
	fmt.Fprintf(w, "%swhere %s's time goes (auto_explain of a warmed call, nested statements, slowest first):\n", indent, call)
	for i, st := range steps {
		if i == 8 {
			break
		}
		fmt.Fprintf(w, "%s  %8.2f ms  %s\n%s              %s\n", indent, st.MS, st.Query, indent, clip.String(st.Plan, 150))
	}
}

// WritePlot draws p50 latency against the database's size (both log
// scales): the fixed-size conversations' calls solid, the growing huge
// conversation's dashed.
func (r *ScaleResult) WritePlot(w io.Writer) error {
	c := plot.Chart{Title: fmt.Sprintf("p50 against database size (%s variant, as mneme_app)", r.Variant),
		XLabel: "memories in the database (log scale)", YLabel: "p50 ms (log scale)", XLog: true, YLog: true,
		XFormat: func(v float64) string { return fmt.Sprintf("%.0f", v) },
		YFormat: func(v float64) string { return fmt.Sprintf("%g", v) }}
	for _, l := range []struct{ conv, call string }{
		{"typical", "search"}, {"typical", "retrieve"}, {"typical", "BM25 leg"}, {"typical", "vector leg"},
		{"typical", hybridCall}, {"small", "search"}, {"context", "context_items"}, {"huge", "search"}, {"huge", "BM25 leg"},
	} {
		sr := plot.Series{Label: l.call + ", " + l.conv, Dashed: l.conv == "huge"}
		for _, s := range r.Steps {
			if lat, ok := s.Calls[l.conv][l.call]; ok && lat.P50 > 0 {
				sr.X, sr.Y = append(sr.X, float64(s.Memories)), append(sr.Y, lat.P50)
			}
		}
		if len(sr.X) > 0 {
			c.Series = append(c.Series, sr)
		}
	}
	return c.WriteSVG(w)
}

// SlowStep is one statement inside a call, from auto_explain: how long it
// took and how it starts.
type SlowStep struct {
	MS    float64 `json:"ms"`
	Query string  `json:"query"`
	Plan  string  `json:"plan"` // the first lines of its plan
}

var autoExplainRE = regexp.MustCompile(`(?s)duration: ([0-9.]+) ms\s+plan:\s*\nQuery Text:(.*?)\n([A-Z].*)`)

// explainCall runs a call ($1 the conversation, $2 three of its words) as
// the owner, with auto_explain reporting every nested statement: where
// the call's time goes.
func explainCall(ctx context.Context, dsn string, conv uuid.UUID, call string) ([]SlowStep, error) {
	cfg, err := pgx.ParseConfig(dsn)
	if err != nil {
		return nil, err
	}
	setup := []string{`LOAD 'auto_explain'`}
	for _, s := range autoExplainSettings {
		setup = append(setup, "SET "+s)
	}
	e, err := newExplainer(ctx, cfg, setup)
	if err != nil {
		return nil, err
	}
	defer e.close()
	var words string
	if err := e.conn.QueryRow(ctx, `SELECT string_agg(w, ' ') FROM (SELECT unnest(string_to_array(s.content, ' ')) AS w
		FROM (SELECT content FROM mneme.memories WHERE conversation_id = $1 ORDER BY id LIMIT 1) s) x WHERE w ~ '^[a-z]+$'`,
		conv).Scan(&words); err != nil {
		return nil, err
	}
	q := strings.Join(strings.Fields(words)[:min(3, len(strings.Fields(words)))], " ")
	return e.steps(ctx, call, conv, q)
}

// explainer is a connection whose statements auto_explain reports as
// notices (its settings made by setup, or the login's own).
type explainer struct {
	conn    *pgx.Conn
	notices []string
}

func newExplainer(ctx context.Context, cfg *pgx.ConnConfig, setup []string) (*explainer, error) {
	e := &explainer{}
	cfg.OnNotice = func(_ *pgconn.PgConn, n *pgconn.Notice) { e.notices = append(e.notices, n.Message) }
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		return nil, err
	}
	for _, s := range append(setup, `SET client_min_messages = notice`) {
		if _, err := conn.Exec(ctx, s); err != nil {
			conn.Close(context.Background())
			return nil, fmt.Errorf("auto_explain: %w", err)
		}
	}
	e.conn = conn
	return e, nil
}

// steps runs a statement three times, warmed (plans cached, pages read)
// by the first two, and returns the third's statements, slowest first.
func (e *explainer) steps(ctx context.Context, sql string, args ...any) ([]SlowStep, error) {
	for i := 0; i < 3; i++ {
		e.notices = nil
		if _, err := e.conn.Exec(ctx, sql, args...); err != nil {
			return nil, err
		}
	}
	return slowSteps(e.notices), nil
}

func (e *explainer) close() { e.conn.Close(context.Background()) }

// autoExplainSettings make auto_explain report every statement, nested
// ones too, with ANALYZE, as notices.
var autoExplainSettings = []string{"auto_explain.log_min_duration = 0", "auto_explain.log_nested_statements = on",
	"auto_explain.log_analyze = on", "auto_explain.log_level = notice"}

// slowSteps parses auto_explain's notices: the statements, slowest first.
func slowSteps(notices []string) []SlowStep {
	var steps []SlowStep
	for _, n := range notices {
		m := autoExplainRE.FindStringSubmatch(n)
		if m == nil {
			continue
		}
		var ms float64
		fmt.Sscanf(m[1], "%g", &ms)
		query := strings.Join(strings.Fields(m[2]), " ")
		plan := strings.SplitN(m[3], "\n", 4)
		steps = append(steps, SlowStep{MS: ms, Query: clip.String(query, 90), Plan: strings.Join(plan[:min(3, len(plan))], " | ")})
	}
	sort.SliceStable(steps, func(i, j int) bool { return steps[i].MS > steps[j].MS })
	return steps
}
