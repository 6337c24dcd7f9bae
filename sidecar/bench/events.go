package bench

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/mneme-memory/mneme/sidecar/events"
	"github.com/mneme-memory/mneme/sidecar/jobs"
	"github.com/mneme-memory/mneme/sidecar/migrate"
	"github.com/mneme-memory/mneme/sidecar/scratch"
)

// EventsResult is one transport's measurement.
type EventsResult struct {
	Transport   string  `json:"transport"`
	Sweep       string  `json:"sweep_interval"`
	Samples     int     `json:"latency_samples"`
	P50         float64 `json:"p50_ms"`
	P99         float64 `json:"p99_ms"`
	Jobs        int     `json:"throughput_jobs"`
	JobsPerSec  float64 `json:"jobs_per_sec"`
	Concurrency int     `json:"concurrency"`
}

// EventsOptions are the benchmark's knobs (mneme bench events --help).
type EventsOptions struct {
	Server      string // DATABASE_URL: each transport gets a scratch database on its server
	Transports  []string
	Samples     int           // latency samples per transport (one job per transaction, spaced by Gap)
	Gap         time.Duration // pause between latency samples
	Jobs        int           // jobs for the throughput run (enqueued in one transaction)
	Concurrency int
	Sweep       time.Duration
	Log         *slog.Logger
}

// Events measures, per transport, commit-to-handler latency and no-op jobs
// per second.
func Events(ctx context.Context, o EventsOptions) ([]EventsResult, error) {
	if o.Samples < 1 || o.Jobs < 1 || o.Concurrency < 1 || o.Sweep <= 0 {
		return nil, fmt.Errorf("samples, jobs, concurrency and sweep must be positive")
	}
	for _, tr := range o.Transports {
		if _, err := events.New(tr, events.Options{}, nil); err != nil || tr == events.Auto {
			return nil, fmt.Errorf("transport %q: use replication, notify or poll", tr)
		}
	}
	log := o.Log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	var results []EventsResult
	for _, tr := range o.Transports {
		res, err := benchTransport(ctx, log, o.Server, tr, o.Samples, o.Gap, o.Jobs, o.Concurrency, o.Sweep)
		if err != nil {
			return results, fmt.Errorf("bench %s: %w", tr, err)
		}
		results = append(results, res)
	}
	return results, nil
}

// WriteEventsTable prints the results for a person.
func WriteEventsTable(w io.Writer, o EventsOptions, results []EventsResult) {
	fmt.Fprintf(w, "mneme bench events: %d latency samples, %d-job throughput run, concurrency %d, sweep %s\n",
		o.Samples, o.Jobs, o.Concurrency, o.Sweep)
	fmt.Fprintf(w, "  %-12s %12s %12s %10s\n", "transport", "p50 ms", "p99 ms", "jobs/s")
	for _, r := range results {
		fmt.Fprintf(w, "  %-12s %12.2f %12.2f %10.0f\n", r.Transport, r.P50, r.P99, r.JobsPerSec)
	}
}

// benchTransport runs one transport against a fresh database.
func benchTransport(ctx context.Context, log *slog.Logger, url, transport string, samples int, gap time.Duration,
	n, conc int, sweep time.Duration) (EventsResult, error) {
	res := EventsResult{Transport: transport, Sweep: sweep.String(), Samples: samples, Jobs: n, Concurrency: conc}
	db, err := scratch.Create(ctx, scratch.Options{Server: url, Prefix: "mneme_bench_", Log: log})
	if err != nil {
		return res, err
	}
	defer db.Close()
	dbURL := db.URL
	slot := db.Name
	if _, err := migrate.Run(ctx, dbURL, migrate.Options{Vector: "array", Logger: log}); err != nil {
		return res, fmt.Errorf("migrate: %w", err)
	}
	pcfg, err := pgxpool.ParseConfig(dbURL)
	if err != nil {
		return res, err
	}
	pcfg.MaxConns = int32(conc + 4)
	pool, err := pgxpool.NewWithConfig(ctx, pcfg)
	if err != nil {
		return res, err
	}
	defer pool.Close()
	defer func() { _, _ = events.DropSlot(context.Background(), pool, slot) }()

	var mu sync.Mutex
	started := map[int64]time.Time{}
	quiet := slog.New(slog.DiscardHandler)
	runner := jobs.NewRunner(pool, jobs.Options{Concurrency: conc, PollEvery: sweep, Logger: quiet})
	runner.Register("noop", func(_ context.Context, _ jobs.Store, job jobs.Job) error {
		now := time.Now()
		mu.Lock()
		started[job.ID] = now
		mu.Unlock()
		return nil
	})
	src, err := events.New(transport, events.Options{DSN: dbURL, Pool: pool, Slot: slot, Logger: quiet}, runner)
	if err != nil {
		return res, err
	}
	sctx, stopSrc := context.WithCancel(ctx)
	srcDone := make(chan error, 1)
	go func() { srcDone <- src.Run(sctx) }()
	runner.Start(ctx)
	defer func() {
		stopSrc()
		<-srcDone
		_ = runner.Stop(context.Background())
	}()
	if err := waitTransportReady(ctx, pool, transport, slot); err != nil {
		return res, err
	}

	// Latency: one job per transaction; from the client seeing COMMIT
	// acknowledged to the handler starting.
	conn, err := pool.Acquire(ctx)
	if err != nil {
		return res, err
	}
	// The private test cluster runs synchronous_commit=off, which delays
	// WAL (and so replication) by up to wal_writer_delay; measure what a
	// default server does.
	if _, err := conn.Exec(ctx, `SET synchronous_commit = on`); err != nil {
		conn.Release()
		return res, err
	}
	committed := make(map[int64]time.Time, samples)
	for i := 0; i < samples; i++ {
		var id int64
		if err := conn.QueryRow(ctx, `SELECT mneme.enqueue_job('noop', NULL)`).Scan(&id); err != nil {
			conn.Release()
			return res, fmt.Errorf("enqueue: %w", err)
		}
		committed[id] = time.Now()
		time.Sleep(gap)
	}
	conn.Release()
	if err := waitDone(ctx, pool, samples, 2*time.Minute); err != nil {
		return res, err
	}
	mu.Lock()
	ms := make([]float64, 0, samples)
	for id, c := range committed {
		ms = append(ms, max(0, started[id].Sub(c)).Seconds()*1000)
	}
	mu.Unlock()
	l := percentiles(ms)
	res.P50, res.P99 = l.P50, l.P99

	// Throughput: n jobs in one transaction, timed from its commit to the
	// last completion.
	t0 := time.Now()
	if _, err := pool.Exec(ctx, `SELECT mneme.enqueue_job('noop', NULL) FROM generate_series(1, $1)`, n); err != nil {
		return res, fmt.Errorf("enqueue: %w", err)
	}
	t1 := time.Now()
	if err := waitDone(ctx, pool, samples+n, 10*time.Minute); err != nil {
		return res, err
	}
	res.JobsPerSec = float64(n) / time.Since(t1).Seconds()
	log.Info("bench events", "transport", transport, "p50_ms", res.P50, "p99_ms", res.P99,
		"jobs_per_sec", int(res.JobsPerSec), "enqueue_s", t1.Sub(t0).Seconds())
	return res, nil
}

func waitTransportReady(ctx context.Context, pool *pgxpool.Pool, transport, slot string) error {
	q := map[string]string{
		events.Notify: `SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND query = 'LISTEN mneme_jobs'`,
		events.Replication: `SELECT count(*) FROM pg_replication_slots s JOIN pg_stat_replication r ON r.pid = s.active_pid
			WHERE s.slot_name = '` + slot + `'`,
	}[transport]
	if q == "" {
		return nil
	}
	deadline := time.Now().Add(time.Minute)
	for time.Now().Before(deadline) {
		var k int
		if err := pool.QueryRow(ctx, q).Scan(&k); err == nil && k > 0 {
			return nil
		}
		time.Sleep(20 * time.Millisecond)
	}
	return fmt.Errorf("transport %s not ready after a minute", transport)
}

func waitDone(ctx context.Context, pool *pgxpool.Pool, want int, limit time.Duration) error {
	deadline := time.Now().Add(limit)
	for time.Now().Before(deadline) {
		var done int
		if err := pool.QueryRow(ctx, `SELECT count(*) FROM mneme.jobs WHERE state = 'done'`).Scan(&done); err != nil {
			return err
		}
		if done >= want {
			return nil
		}
		time.Sleep(10 * time.Millisecond)
	}
	return fmt.Errorf("only some of %d jobs done after %s", want, limit)
}
