package bench

import (
	"context"
	"fmt"
	"hash/fnv"
	"io"
	"log/slog"
	"math"
	"os"
	"sort"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/mneme-memory/mneme/sidecar/migrate"
	"github.com/mneme-memory/mneme/sidecar/pghybrid"
	"github.com/mneme-memory/mneme/sidecar/progress"
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
	Citus  bool
	Plot   string // an SVG of p50 against size goes here ("": none)
	Vector string // the embedding variant of a new database: auto, pgvector or array ("": auto)
	// Embedder: the database's embedder setting for the run, hash ("") or
	// external (every call then passes the query's embedding).
	Embedder string
	// Vectors: the vectors stored and queried with, hash ("": the hash
	// embedder's) or clustered (shaped like a model's, as in
	// docs/experiments/ann-recall.sql; only with Embedder external).
	Vectors string
	// Ingest: the ingest goal's run after the sizes (bench ingest's
	// writers and sidecars on a scratch database of the same server):
	// messages/s aimed at (0: not run, its goals n/a), for how long, over
	// how many conversations.
	IngestRate          int
	IngestDuration      time.Duration
	IngestConversations int
	Progress            io.Writer
	Log                 *slog.Logger
}

// ScaleStep is one size: what the database holds and each call's latency.
type ScaleStep struct {
	Memories     int     `json:"memories"`
	BuildSeconds float64 `json:"build_seconds"` // adding this step's memories (0 when they were there)
	// IndexSeconds: making the per-scope HNSW indexes this step needed
	// (mneme.vector_index_plan; ScopeIndexes of them).
	IndexSeconds float64 `json:"index_seconds,omitempty"`
	ScopeIndexes int     `json:"scope_indexes_made,omitempty"`
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
	// AtLeast: the goal is a floor (a recall), not a ceiling.
	AtLeast bool `json:"at_least,omitempty"`
}

// ScaleResult is a run.
type ScaleResult struct {
	DB            string         `json:"database"`
	Citus         bool           `json:"citus"` // on a Citus cluster (a scratch database, distributed)
	Variant       string         `json:"variant"`
	Embedder      string         `json:"embedder"`
	Vectors       string         `json:"vectors"` // hash or clustered (ScaleOptions.Vectors)
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
	// HugeSteps and TenantSteps: where search's time goes on the huge
	// conversation and with scope tenant on its tenant, when an issue 42
	// goal is missed.
	HugeSteps   []SlowStep `json:"huge_search_steps,omitempty"`
	TenantSteps []SlowStep `json:"tenant_search_steps,omitempty"`
	// Scopes: each scope's calls against its bare top-10 at the largest
	// size, one row each (small, typical, huge conversation; the huge
	// conversation's tenant).
	Scopes []ScopeRow `json:"scopes"`
	// Recall: the vector leg's and the bare HNSW lookup's recall@10
	// against exact on the large scopes (pgvector, not on Citus).
	Recall []ScaleRecall `json:"recall,omitempty"`
	// Ingest: the ingest run (nil: --ingest-rate 0 or on Citus).
	Ingest *IngestResult `json:"ingest,omitempty"`
	// Load: /proc/loadavg's 1-minute figure when the run started and ended
	// (the machine is shared: compare within a run).
	Load string `json:"load_average"`
	// Command: the command line of the run.
	Command string `json:"command"`
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
	load0 := loadAverage()
	out := &ScaleResult{DB: name, Citus: o.Citus, Command: strings.Join(os.Args, " "), Variant: res.Variant, Conversations: o.Conversations, Tenants: o.Tenants, Queries: o.Queries,
		Probes: map[string]int{"small": probeSmallN, "typical": probeTypicalN, "context": probeEpisodes}}
	if o.Embedder == "" {
		o.Embedder = "hash"
	}
	if o.Vectors == "" {
		o.Vectors = "hash"
	}
	if o.Vectors == "clustered" && o.Embedder != "external" {
		return nil, fmt.Errorf("vectors clustered need the external embedder (the hash embedder embeds queries with its own vectors)")
	}
	out.Embedder, out.Vectors = o.Embedder, o.Vectors
	if err := scaleVectorsKept(ctx, conn, name, o.Vectors); err != nil {
		return nil, err
	}
	vec := newScaleVectors(o, res.Dim)
	if err := scaleSetup(ctx, conn, o, vec); err != nil {
		return nil, err
	}
	if err := scaleBigTenant(ctx, conn, o); err != nil {
		return nil, err
	}
	if _, err := conn.Exec(ctx, `SELECT mneme.set_setting('embedder', to_jsonb($1::text))`, o.Embedder); err != nil {
		return nil, fmt.Errorf("embedder %s: %w", o.Embedder, err)
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
		grew, err := scaleGrow(ctx, conn, o, vec, cum, n)
		if err != nil {
			return nil, err
		}
		if grew {
			step.BuildSeconds = time.Since(t0).Seconds()
		}
		// The large conversations' and tenants' own HNSW indexes, as an
		// operator makes them (mneme vector-indexes): what is missing.
		if res.Variant == "pgvector" && !o.Citus {
			t1 := time.Now()
			if _, err := conn.Exec(ctx, `SET maintenance_work_mem = '1GB'`); err != nil {
				return nil, err
			}
			plan, err := migrate.VectorIndexes(ctx, conn, true, log)
			if err != nil {
				return nil, fmt.Errorf("per-scope vector indexes: %w", err)
			}
			if _, err := conn.Exec(ctx, `RESET maintenance_work_mem`); err != nil {
				return nil, err
			}
			if len(plan) > 0 {
				step.IndexSeconds = time.Since(t1).Seconds()
			}
			step.ScopeIndexes = len(plan)
		}
		// (before the sizes: the database's size includes the copy)
		if err := scaleHybrid(ctx, conn, hybrid, o, n); err != nil {
			return nil, fmt.Errorf("the hybrid baseline's copy: %w", err)
		}
		if err := scaleSizes(ctx, conn, &step, o.Citus); err != nil {
			return nil, err
		}
		if step.Calls, err = scaleTime(ctx, conn, app, bound, hybrid, o, vec, res.Variant); err != nil {
			return nil, err
		}
		log.Info("bench scale: step measured", "memories", n, "build_s", step.BuildSeconds)
		out.Steps = append(out.Steps, step)
	}
	out.Goals = append(scaleGoals(out.Steps, res.Variant), scopeGoals(out.Steps[len(out.Steps)-1], res.Variant)...)
	out.Scopes = scopeRows(out.Steps[len(out.Steps)-1], res.Variant)
	for _, r := range out.Scopes {
		out.Goals = append(out.Goals, r.Goal)
	}
	// Issue 53: the vector leg's recall@10 against exact on the large
	// scopes (pgvector: through their own indexes with an external embedder).
	if res.Variant == "pgvector" && !o.Citus {
		if out.Recall, err = scaleRecall(ctx, conn, o, vec); err != nil {
			return nil, fmt.Errorf("recall: %w", err)
		}
		for _, rc := range out.Recall {
			out.Goals = append(out.Goals, ScaleGoal{Goal: fmt.Sprintf("issue 53: vector leg recall@10 against exact, %s, embedder %s (%s vectors)", rc.Scope, o.Embedder, o.Vectors),
				Measured: rc.Leg, Limit: 0.95, Pass: rc.Leg >= 0.95, AtLeast: true})
		}
	}
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
		if out.ContextSteps, err = explainCall(ctx, dsn, probeContext, vec, `SELECT count(*) FROM mneme.context_items($1, $2, 1000@qe@)`); err != nil {
			return nil, fmt.Errorf("explain context_items: %w", err)
		}
	}
	if missed("search p50") || missed("retrieve p50") {
		if out.SearchSteps, err = explainCall(ctx, dsn, probeTypical, vec, `SELECT count(*) FROM mneme.search($1, $2, 10@qe@)`); err != nil {
			return nil, fmt.Errorf("explain search: %w", err)
		}
	}
	if missed("issue 42: search p") || missed("issue 42: retrieve p") {
		if out.HugeSteps, err = explainCall(ctx, dsn, bulkConv(0), vec, `SELECT count(*) FROM mneme.search($1, $2, 10@qe@)`); err != nil {
			return nil, fmt.Errorf("explain search on the huge conversation: %w", err)
		}
		if out.TenantSteps, err = explainCall(ctx, dsn, bulkConv(0), vec, `SELECT count(*) FROM mneme.search($1, $2, 10, scope => 'tenant'@qe@)`); err != nil {
			return nil, fmt.Errorf("explain search with scope tenant: %w", err)
		}
	}
	// Issue 53: ingest, the last row (its own scratch database: the
	// writers' and sidecars' work does not depend on the stored memories'
	// number, and the benchmark database stays as built).
	if o.IngestRate > 0 && !o.Citus {
		runs, err := Ingest(ctx, IngestOptions{Server: o.Server, Conversations: []int{o.IngestConversations}, Duration: o.IngestDuration,
			Sidecars: 2, Concurrency: 2, Rate: o.IngestRate, Vector: res.Variant, Log: log})
		if err != nil {
			return nil, fmt.Errorf("ingest: %w", err)
		}
		out.Ingest = &runs[0]
	}
	out.Goals = append(out.Goals, ingestGoals(out.Ingest, o)...)
	out.Load = load0 + " to " + loadAverage()
	return out, nil
}

// ingestGoals are the ingest run's goals as rows of the scale report (n/a
// when it did not run).
func ingestGoals(r *IngestResult, o ScaleOptions) []ScaleGoal {
	if r == nil {
		why := "not run: --ingest-rate 0"
		if o.Citus {
			why = "not run on Citus"
		}
		return []ScaleGoal{
			{Goal: "issue 53: ingest messages/s sustained, at least (" + why + ")", Limit: ingestGoalRate, NotApplicable: true, AtLeast: true},
			{Goal: "issue 53: ingest segmentation lag p95 ms, at most (" + why + ")", Limit: ingestGoalLagMS, NotApplicable: true},
		}
	}
	var out []ScaleGoal
	for _, g := range r.Goals {
		g.Goal = fmt.Sprintf("issue 53: ingest %s (aimed at %d/s for %s, 2 sidecars x 2 jobs, a scratch database)", g.Goal, o.IngestRate, o.IngestDuration)
		g.AtLeast = strings.HasPrefix(g.Goal, "issue 53: ingest messages/s")
		out = append(out, g)
	}
	return out
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
	bar := progress.New(o.Progress, fmt.Sprintf("copy %d memories for the hybrid baseline", n), int(want))
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
