package bench

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"math"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/mneme-memory/mneme/sidecar/config"
	"github.com/mneme-memory/mneme/sidecar/daemon"
	"github.com/mneme-memory/mneme/sidecar/migrate"
	"github.com/mneme-memory/mneme/sidecar/scratch"
)

// IngestOptions size `mneme bench ingest`.
type IngestOptions struct {
	Server        string        // DATABASE_URL: the scratch database is created on its server
	Conversations []int         // one run per count: that many conversations written at once
	Duration      time.Duration // how long the writers write in each run
	Sidecars      int           // sidecars (daemons, as `mneme run`) serving the database
	Concurrency   int           // jobs each sidecar runs at once
	Preload       int           // memories stored before the runs (bulk, in other conversations)
	Rate          int           // messages per second the writers aim at together (0: as fast as they can)
	Writers       int           // connections the writers share (0: one per 50 messages/s of Rate, at least 4; without a rate one per writer)
	Vector        string        // embedding variant: auto, pgvector or array (as MNEME_VECTOR)
	Keep          bool          // keep the scratch database (its name is logged)
	LLM           string        // off (offline pipelines) or fake (the LLM paths against an in-process fake model)
	Log           *slog.Logger

	variant string    // what migrate chose
	cpu     *cpuProbe // nil: the server runs elsewhere
}

// IngestResult is one run.
type IngestResult struct {
	Conversations int     `json:"conversations"`
	Sidecars      int     `json:"sidecars"`
	Concurrency   int     `json:"concurrency"`
	Preloaded     int     `json:"memories_before"`
	Variant       string  `json:"vector"`
	Rate          int     `json:"target_messages_per_sec"`
	Writers       int     `json:"writer_connections"`
	Messages      int64   `json:"messages"`
	Failures      int64   `json:"failures"`
	Seconds       float64 `json:"write_seconds"`
	PerSecond     float64 `json:"messages_per_sec"`
	SegmentJobs   int     `json:"segment_jobs"`
	Memories      int     `json:"memories_created"`
	FailedJobs    int     `json:"failed_jobs"`
	// Lag is the segmentation lag: from the add_message that queued a
	// segment job (its created_at) to the job's memories committed (its
	// finished_at), for the jobs queued while the writers wrote.
	Lag Latencies `json:"segmentation_lag_ms"`
	// Backlog is how long the sidecars took, once the writers stopped, to
	// run every job left.
	BacklogSeconds float64 `json:"backlog_seconds"`
	// AddMessage is the writers' add_message calls as they saw them.
	AddMessage Latencies `json:"add_message_ms"`
	// CPU: where the machine's CPU went while the writers wrote (when the
	// server runs on this machine; see cpu.go).
	CPU *CPUReport `json:"cpu,omitempty"`
	// Goals: the ingest goals, pass or not, for this run.
	Goals []ScaleGoal `json:"goals"`
	// AddMessageSteps: when a goal is missed, where one add_message's time
	// goes, as the writers' login runs it (auto_explain of a warmed call).
	AddMessageSteps []SlowStep `json:"add_message_steps,omitempty"`
	// LLM: with --llm fake, the model calls and tokens per 1,000 messages,
	// by job kind and call (the usage ledger).
	LLM []LLMUse `json:"llm_per_1000_messages,omitempty"`
}

// The ingest goals: sustained messages/s and segmentation lag p95.
const (
	ingestGoalRate  = 2000
	ingestGoalLagMS = 5000
)

// Ingest measures sustained add_message throughput with the sidecars
// running the real pipelines (offline), and how far segmentation lags
// behind: writers (one per conversation, at most 200), sharing a pool of
// mneme_app connections (writerConns), send messages at Rate (or as fast
// as add_message takes them), the server's clock as the message time.
func Ingest(ctx context.Context, o IngestOptions) ([]IngestResult, error) {
	if len(o.Conversations) == 0 || o.Duration <= 0 || o.Sidecars < 1 || o.Concurrency < 1 || o.Preload < 0 {
		return nil, fmt.Errorf("conversations, duration, sidecars and concurrency must be positive")
	}
	log := o.Log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	db, err := scratch.Create(ctx, scratch.Options{Server: o.Server, Prefix: "mneme_bench_", Keep: o.Keep, Log: log})
	if err != nil {
		return nil, err
	}
	defer db.Close()
	if o.Vector == "" {
		o.Vector = "auto"
	}
	variant, err := migrate.Run(ctx, db.URL, migrate.Options{Vector: o.Vector, Logger: log})
	if err != nil {
		return nil, fmt.Errorf("migrate: %w", err)
	}
	o.variant = variant.Variant
	pool, err := pgxpool.New(ctx, db.URL)
	if err != nil {
		return nil, err
	}
	defer pool.Close()
	// The writers connect as an application does: a mneme_app login, under
	// row security, in the default tenant.
	owner, err := pool.Acquire(ctx)
	if err != nil {
		return nil, err
	}
	appURL, dropApp, err := appLogin(ctx, owner.Conn(), db.URL)
	owner.Release()
	if err != nil {
		return nil, err
	}
	defer dropApp()
	pcfg, err := pgxpool.ParseConfig(appURL)
	if err != nil {
		return nil, err
	}
	appRole, dbName := pcfg.ConnConfig.User, pcfg.ConnConfig.Database
	o.cpu = newCPUProbe(ctx, pool, func(p serverProcess) string {
		switch {
		case p.BackendType == "client backend" && p.User == appRole:
			return "the writers' backends (add_message)"
		case p.BackendType == "client backend" && p.Database == dbName:
			return "the sidecars' backends (jobs, claims, listeners)"
		case p.BackendType == "walsender":
			return "the server's WAL senders"
		default:
			return "the server's other processes (WAL writer, checkpointer, autovacuum, other databases)"
		}
	})
	maxConv := 0
	for _, n := range o.Conversations {
		maxConv = max(maxConv, n)
	}
	pcfg.MaxConns = int32(writerConns(maxConv, o.Rate, o.Writers))
	writerPool, err := pgxpool.NewWithConfig(ctx, pcfg)
	if err != nil {
		return nil, err
	}
	defer writerPool.Close()
	if o.Preload > 0 {
		if err := preload(ctx, pool, o.Preload, variant.Variant, log); err != nil {
			return nil, err
		}
	}

	// The sidecars, as `mneme run` wires them: offline pipelines, NOTIFY
	// wake-ups, the sweep.
	cfg := config.Config{DatabaseURL: db.URL, Events: config.EventsNotify, Concurrency: o.Concurrency,
		PollEvery: time.Second, MaxAttempts: 5, JobLease: 30 * time.Second, ShutdownTimeout: 30 * time.Second,
		EmbedDim: config.DefaultEmbedDim}
	if o.LLM == "fake" {
		f, err := startFakeLLM()
		if err != nil {
			return nil, err
		}
		defer f.close()
		cfg.LLM = config.Endpoint{BaseURL: f.url, Model: "fake", APIKey: "fake"}
		cfg.LLMTimeout = 30 * time.Second
	}
	sctx, stop := context.WithCancel(ctx)
	var wg sync.WaitGroup
	errs := make(chan error, o.Sidecars)
	for i := 0; i < o.Sidecars; i++ {
		spool, err := daemon.OpenPool(ctx, cfg)
		if err != nil {
			stop()
			return nil, err
		}
		defer spool.Close()
		d, err := daemon.New(ctx, cfg, spool, slog.New(slog.DiscardHandler))
		if err != nil {
			stop()
			return nil, err
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := d.Serve(sctx); err != nil {
				errs <- err
			}
		}()
	}
	defer func() {
		stop()
		wg.Wait()
	}()

	var out []IngestResult
	for _, n := range o.Conversations {
		r, err := ingestRun(ctx, pool, writerPool, o, n, log)
		if err != nil {
			return out, err
		}
		for _, g := range r.Goals {
			if !g.Pass {
				if r.AddMessageSteps, err = explainAddMessage(ctx, pool, appURL); err != nil {
					return out, fmt.Errorf("explain add_message: %w", err)
				}
				break
			}
		}
		select {
		case err := <-errs:
			return out, fmt.Errorf("sidecar: %w", err)
		default:
		}
		out = append(out, r)
	}
	return out, nil
}

// preload stores n synthetic memories in 1,000 other conversations, in
// bulk (the BM25 statistics by their statement trigger): only their volume
// matters here.
func preload(ctx context.Context, pool *pgxpool.Pool, n int, variant string, log *slog.Logger) error {
	log.Info("bench ingest: preloading memories", "memories", n)
	c, err := benchMemories(config.DefaultEmbedDim, n, min(1000, n))
	if err != nil {
		return err
	}
	conn, err := pool.Acquire(ctx)
	if err != nil {
		return err
	}
	defer conn.Release()
	return loadBenchMemories(ctx, conn.Conn(), variant, c)
}

func ingestRun(ctx context.Context, pool, writerPool *pgxpool.Pool, o IngestOptions, nconv int, log *slog.Logger) (IngestResult, error) {
	res := IngestResult{Conversations: nconv, Sidecars: o.Sidecars, Concurrency: o.Concurrency, Preloaded: o.Preload, Rate: o.Rate,
		Variant: o.variant}
	convs := make([]uuid.UUID, nconv)
	for i := range convs {
		convs[i] = uuid.New()
	}
	var sent, failures atomic.Int64
	// Writers stop at the deadline between calls: a call cancelled midway
	// would be neither a message nor a failure.
	deadline := time.Now().Add(o.Duration)
	writing := func() bool { return ctx.Err() == nil && time.Now().Before(deadline) }
	// One writer per conversation, at most 200, each serving its share of
	// the conversations in turn, one message to each; they share
	// writerConns connections, as an application's request handlers share
	// its pool (a writer waiting for a conversation's row lock holds up its
	// own conversations, not a connection's worth of others).
	writers := min(nconv, 200)
	res.Writers = writerConns(nconv, o.Rate, o.Writers)
	var cpu0 cpuSnapshot
	if o.cpu != nil {
		var err error
		if cpu0, err = o.cpu.snapshot(ctx); err != nil {
			return res, fmt.Errorf("CPU snapshot: %w", err)
		}
	}
	took := make([][]float64, writers) // each writer's add_message latencies, ms
	var wg sync.WaitGroup
	start := time.Now()
	for w := 0; w < writers; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			sent0 := 0
			for i := 0; writing(); i++ {
				for c := w; c < nconv && writing(); c += writers {
					if o.Rate > 0 { // this writer's share of the rate, on schedule
						due := start.Add(time.Duration(float64(sent0) * float64(writers) / float64(o.Rate) * float64(time.Second)))
						time.Sleep(time.Until(due))
						sent0++
					}
					t0 := time.Now()
					_, err := writerPool.Exec(ctx, `SELECT mneme.add_message($1, $2, $3)`, convs[c],
						[]string{"user", "assistant"}[i%2], ingestText(c, i))
					if err == nil {
						took[w] = append(took[w], float64(time.Since(t0).Microseconds())/1000)
						sent.Add(1)
					} else if failures.Add(1) == 1 {
						log.Warn("add_message failed", "err", err)
					}
				}
			}
		}(w)
	}
	wg.Wait()
	res.Seconds = time.Since(start).Seconds()
	res.Messages, res.Failures = sent.Load(), failures.Load()
	res.PerSecond = float64(res.Messages) / res.Seconds
	writeEnd := time.Now()
	if o.cpu != nil {
		cpu1, err := o.cpu.snapshot(ctx)
		if err != nil {
			return res, fmt.Errorf("CPU snapshot: %w", err)
		}
		r := o.cpu.report(cpu0, cpu1, "this process (the writers' and the sidecars' Go code)")
		res.CPU = &r
	}
	var all []float64
	for _, t := range took {
		all = append(all, t...)
	}
	res.AddMessage = percentiles(all)

	// Let the sidecars finish what the writers left: cut every
	// conversation's tail and wait for the queue to drain.
	if _, err := writerPool.Exec(ctx, `SELECT mneme.segment_now(c) FROM unnest($1::uuid[]) c`, convs); err != nil {
		return res, fmt.Errorf("segment_now: %w", err)
	}
	for {
		var busy int
		if err := pool.QueryRow(ctx, `SELECT count(*) FROM mneme.jobs WHERE state IN ('pending', 'running') AND run_at <= now()`).Scan(&busy); err != nil {
			return res, err
		}
		if busy == 0 {
			break
		}
		if time.Since(writeEnd) > 30*time.Minute {
			return res, fmt.Errorf("jobs still pending 30 minutes after the writers stopped")
		}
		time.Sleep(100 * time.Millisecond)
	}
	res.BacklogSeconds = time.Since(writeEnd).Seconds()

	var lags []float64
	rows, err := pool.Query(ctx, `SELECT extract(epoch FROM finished_at - created_at) * 1000 FROM mneme.jobs
		WHERE kind = 'segment' AND state = 'done' AND conversation_id = ANY ($1) AND created_at <= $2`, convs, writeEnd)
	if err != nil {
		return res, err
	}
	for rows.Next() {
		var ms float64
		if err := rows.Scan(&ms); err != nil {
			rows.Close()
			return res, err
		}
		lags = append(lags, ms)
	}
	if err := rows.Err(); err != nil {
		return res, err
	}
	res.Lag = percentiles(lags)
	if o.LLM == "fake" {
		if res.LLM, err = llmUse(ctx, pool, convs, res.Messages); err != nil {
			return res, err
		}
	}
	if err := pool.QueryRow(ctx, `SELECT
			(SELECT count(*) FROM mneme.jobs WHERE kind = 'segment' AND conversation_id = ANY ($1)),
			(SELECT count(*) FROM mneme.jobs WHERE state = 'failed' AND conversation_id = ANY ($1)),
			(SELECT count(*) FROM mneme.memories WHERE conversation_id = ANY ($1))`, convs).
		Scan(&res.SegmentJobs, &res.FailedJobs, &res.Memories); err != nil {
		return res, err
	}
	res.Goals = []ScaleGoal{
		{Goal: fmt.Sprintf("messages/s sustained over %d conversations, at least", nconv), Measured: math.Round(res.PerSecond),
			// (1% short passes: writers paced at exactly the goal's rate
			// measure a little under it over the run)
			Limit: ingestGoalRate, Pass: res.PerSecond >= ingestGoalRate*0.99},
		{Goal: fmt.Sprintf("segmentation lag p95 ms over %d conversations, at most", nconv), Measured: math.Round(res.Lag.P95),
			Limit: ingestGoalLagMS, Pass: res.Lag.P95 <= ingestGoalLagMS},
	}
	log.Info("bench ingest", "conversations", nconv, "messages_per_sec", int(res.PerSecond), "lag_p95_ms", res.Lag.P95)
	return res, nil
}

// writerConns is how many connections the writers of nconv conversations
// share: --writers when given; at a rate, a pool sized to it (one
// connection per 50 messages/s, at least 4: add_message takes a fraction of
// a millisecond, and more connections than the rate needs only add backends
// competing with the sidecars for the CPU, docs/performance.md); as fast as
// they can, one per writer. Never more than the writers (one per
// conversation, at most 200).
func writerConns(nconv, rate, writers int) int {
	most := min(nconv, 200)
	switch {
	case writers > 0:
		return min(most, writers)
	case rate > 0:
		return min(most, max(4, (rate+49)/50))
	default:
		return most
	}
}

// explainAddMessage calls add_message three times on a new conversation
// as the writers' login, with auto_explain reporting the third's
// statements: an application's login may neither LOAD auto_explain nor
// set its parameters, so the owner sets them for that login (ALTER ROLE
// ... SET, reset afterwards) and a new connection of it has them.
func explainAddMessage(ctx context.Context, pool *pgxpool.Pool, appURL string) ([]SlowStep, error) {
	cfg, err := pgx.ParseConfig(appURL)
	if err != nil {
		return nil, err
	}
	role := pgx.Identifier{cfg.User}.Sanitize()
	set := []string{"session_preload_libraries = 'auto_explain'"}
	set = append(set, autoExplainSettings...)
	for _, s := range set {
		if _, err := pool.Exec(ctx, "ALTER ROLE "+role+" SET "+s); err != nil {
			return nil, fmt.Errorf("auto_explain for %s (needs a superuser): %w", cfg.User, err)
		}
	}
	defer func() { _, _ = pool.Exec(context.Background(), "ALTER ROLE "+role+" RESET ALL") }()
	e, err := newExplainer(ctx, cfg, nil)
	if err != nil {
		return nil, err
	}
	defer e.close()
	// (one conversation: each call appends a message to it)
	return e.steps(ctx, `SELECT mneme.add_message($1, 'user', $2)`, uuid.New(), ingestText(0, 1))
}

// ingestText is message i of conversation c: a topic every twelve
// messages, so the offline segmenter finds episodes as well as the
// 30-message forced cut.
func ingestText(c, i int) string {
	topics := []string{"the garden and the tomato beds", "learning Rust and the borrow checker",
		"a trip to Lisbon in the spring", "the new job at the bakery", "running a half marathon"}
	return fmt.Sprintf("message %d of conversation %d: more about %s, detail %d", i, c, topics[(c+i/12)%len(topics)], i%7)
}

// WriteIngestTable prints the results of a run with o for a person: what
// was run, then one line per run.
func WriteIngestTable(w io.Writer, o IngestOptions, results []IngestResult) {
	rate := "as fast as they can"
	if o.Rate > 0 {
		rate = fmt.Sprintf("%d messages/s in all", o.Rate)
	}
	variant := ""
	if len(results) > 0 {
		variant = results[0].Variant
	}
	pipelines := "offline pipelines"
	if o.LLM == "fake" {
		pipelines = "LLM pipelines against a fake model"
	}
	fmt.Fprintf(w, "mneme bench ingest: writers for %s per run (%s), %d sidecars x %d jobs at once, %s, %d memories stored before, variant %s\n",
		o.Duration, rate, o.Sidecars, o.Concurrency, pipelines, o.Preload, variant)
	fmt.Fprintf(w, "  %-13s %11s %9s %9s %9s %11s %9s %9s %9s %9s %10s %8s\n", "conversations", "connections", "messages", "failures",
		"msgs/s", "segment jobs", "memories", "lag p50", "lag p95", "lag p99", "backlog s", "failed")
	for _, r := range results {
		fmt.Fprintf(w, "  %-13d %11d %9d %9d %9.0f %11d %9d %9.0f %9.0f %9.0f %10.1f %8d\n", r.Conversations, r.Writers, r.Messages,
			r.Failures, r.PerSecond, r.SegmentJobs, r.Memories, r.Lag.P50, r.Lag.P95, r.Lag.P99, r.BacklogSeconds, r.FailedJobs)
	}
	for _, r := range results {
		fmt.Fprintf(w, "\n%d conversations: add_message as the writers saw it p50 %.2f ms, p95 %.2f, p99 %.2f\n",
			r.Conversations, r.AddMessage.P50, r.AddMessage.P95, r.AddMessage.P99)
		if r.CPU != nil {
			fmt.Fprintf(w, "  where the CPU went while the writers wrote (%.0f s): the machine %.2f of %d cores busy\n",
				r.CPU.Seconds, r.CPU.MachineCores, r.CPU.Cores)
			for _, c := range r.CPU.Shares {
				fmt.Fprintf(w, "    %5.2f cores  %s\n", c.Cores, c.Class)
			}
		} else {
			fmt.Fprintln(w, "  (the server runs on another machine: no CPU breakdown)")
		}
		if len(r.AddMessageSteps) > 0 {
			writeSlowSteps(w, "add_message (as the writers' login runs it)", r.AddMessageSteps, "  ")
		}
		writeGoals(w, r.Goals, "  ")
		if len(r.LLM) > 0 {
			fmt.Fprintf(w, "  LLM use per 1,000 messages (usage ledger; the fake model reports a token per word):\n")
			fmt.Fprintf(w, "    %-20s %9s %14s %18s\n", "job kind/call", "calls", "prompt tokens", "completion tokens")
			for _, u := range r.LLM {
				fmt.Fprintf(w, "    %-20s %9.1f %14.0f %18.0f\n", u.Kind, u.Calls, u.PromptTokens, u.CompletionTokens)
			}
		}
	}
}
