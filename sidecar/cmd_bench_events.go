package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/mneme-memory/mneme/sidecar/config"
	"github.com/mneme-memory/mneme/sidecar/events"
	"github.com/mneme-memory/mneme/sidecar/jobs"
	"github.com/mneme-memory/mneme/sidecar/migrate"
)

func init() {
	benchCommands["events"] = command{"per transport: commit-to-handler latency and jobs/s with a no-op handler", cmdBenchEvents}
}

type eventsBench struct {
	Transport   string  `json:"transport"`
	Sweep       string  `json:"sweep_interval"`
	Samples     int     `json:"latency_samples"`
	P50         float64 `json:"p50_ms"`
	P99         float64 `json:"p99_ms"`
	Jobs        int     `json:"throughput_jobs"`
	JobsPerSec  float64 `json:"jobs_per_sec"`
	Concurrency int     `json:"concurrency"`
}

func cmdBenchEvents(ctx context.Context, log *slog.Logger, args []string) error {
	fs := flag.NewFlagSet("bench events", flag.ContinueOnError)
	transports := fs.String("transports", "replication,notify,poll", "comma-separated transports to measure")
	samples := fs.Int("samples", 200, "latency samples per transport (one job per transaction, spaced by --gap)")
	gap := fs.Duration("gap", 10*time.Millisecond, "pause between latency samples")
	n := fs.Int("jobs", 5000, "jobs for the throughput run (enqueued in one transaction)")
	conc := fs.Int("concurrency", 4, "runner concurrency")
	sweep := fs.Duration("sweep", time.Second, "sweep interval (the poll transport's latency is about half of it)")
	asJSON := fs.Bool("json", false, "print JSON, one object per transport")
	if err := fs.Parse(args); err != nil {
		return errUsage
	}
	if *samples < 1 || *n < 1 || *conc < 1 || *sweep <= 0 {
		return fmt.Errorf("%w: --samples, --jobs, --concurrency and --sweep must be positive", errUsage)
	}
	cfg, err := config.FromEnv()
	if err != nil {
		return err
	}
	if cfg.DatabaseURL == "" {
		return fmt.Errorf("DATABASE_URL is not set: run ./scripts/with-test-db.sh bin/mneme bench events")
	}
	var results []eventsBench
	for _, tr := range strings.Split(*transports, ",") {
		tr = strings.TrimSpace(tr)
		if _, err := events.New(tr, events.Options{}, nil); err != nil || tr == events.Auto {
			return fmt.Errorf("%w: transport %q: use replication, notify or poll", errUsage, tr)
		}
		res, err := benchTransport(ctx, log, cfg.DatabaseURL, tr, *samples, *gap, *n, *conc, *sweep)
		if err != nil {
			return fmt.Errorf("bench %s: %w", tr, err)
		}
		results = append(results, res)
		if *asJSON {
			if err := json.NewEncoder(os.Stdout).Encode(res); err != nil {
				return err
			}
		}
	}
	if !*asJSON {
		fmt.Printf("mneme bench events: %d latency samples, %d-job throughput run, concurrency %d, sweep %s\n",
			*samples, *n, *conc, *sweep)
		fmt.Printf("  %-12s %12s %12s %10s\n", "transport", "p50 ms", "p99 ms", "jobs/s")
		for _, r := range results {
			fmt.Printf("  %-12s %12.2f %12.2f %10.0f\n", r.Transport, r.P50, r.P99, r.JobsPerSec)
		}
	}
	return nil
}

// benchTransport runs one transport against a fresh database.
func benchTransport(ctx context.Context, log *slog.Logger, url, transport string, samples int, gap time.Duration,
	n, conc int, sweep time.Duration) (eventsBench, error) {
	res := eventsBench{Transport: transport, Sweep: sweep.String(), Samples: samples, Jobs: n, Concurrency: conc}
	dbURL, drop, err := benchDatabase(ctx, url, false)
	if err != nil {
		return res, err
	}
	defer drop()
	slot := "mneme_bench_" + strings.TrimPrefix(dbURL[strings.LastIndex(dbURL, "/")+1:], "mneme_bench_")
	slot = strings.SplitN(slot, "?", 2)[0]
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
