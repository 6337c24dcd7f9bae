// Package daemon is `mneme run`: the job runner with every pipeline's
// handlers, the event transport that wakes it, and the /healthz and /metrics
// endpoint.
package daemon

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/mneme-memory/mneme/sidecar/config"
	"github.com/mneme-memory/mneme/sidecar/events"
	"github.com/mneme-memory/mneme/sidecar/jobs"
	"github.com/mneme-memory/mneme/sidecar/lifecycle"
	"github.com/mneme-memory/mneme/sidecar/metrics"
	"github.com/mneme-memory/mneme/sidecar/pipeline"
	"github.com/mneme-memory/mneme/sidecar/revision"
	"github.com/mneme-memory/mneme/sidecar/tracing"
	"github.com/mneme-memory/mneme/sidecar/usage"
	"github.com/mneme-memory/mneme/sidecar/vectorindex"
	"github.com/mneme-memory/mneme/sidecar/version"
)

// Daemon is a configured sidecar: its runner has every handler registered.
type Daemon struct {
	Runner *jobs.Runner
	cfg    config.Config
	pool   *pgxpool.Pool
	reg    *metrics.Registry
	log    *slog.Logger
}

// New wires the sidecar on pool: metrics, the runner, the pipelines
// (pipeline.Configure: offline unless an LLM or embedder is configured) and
// their handlers. Registering is the one place job kinds get handlers.
func New(ctx context.Context, cfg config.Config, pool *pgxpool.Pool, log *slog.Logger) (*Daemon, error) {
	// First of all: a database whose SQL API this binary does not speak
	// (migrated by another major, or not yet migrated) is refused, with
	// both versions and what to run.
	dbAPI, err := version.Check(ctx, pool)
	if err != nil {
		return nil, err
	}
	log.Info("versions", "mneme", version.Binary(), "sql_api", version.SQLAPI(), "database_sql_api", dbAPI)
	warnPrivileged(ctx, pool, log)
	// (exemplars: the trace id of a recording span, none when tracing is off)
	reg := metrics.New(metrics.WithTenantLabel(cfg.MetricsTenantLabel), metrics.WithExemplars(tracing.TraceID))
	buildInfo(reg, dbAPI)
	m := metrics.Sidecar{R: reg}
	d := &Daemon{Runner: jobs.NewRunner(pool, runnerOptions(cfg, log, m)), cfg: cfg, pool: pool, reg: reg, log: log}
	deps, err := pipeline.Configure(ctx, cfg, pool, log, m.LLM, m.Embed, usage.NewRecorder(m.Usage))
	if err != nil {
		return nil, err
	}
	p, err := pipeline.New(deps)
	if err != nil {
		return nil, fmt.Errorf("pipelines: %w", err)
	}
	if err := d.Runner.RegisterAll(Handlers(p, log)); err != nil {
		return nil, err
	}
	if err := CheckKinds(ctx, pool, d.Runner); err != nil {
		return nil, err
	}
	log.Info("handlers registered", "kinds", d.Runner.Kinds(), "left_to_newer_sidecars", d.Runner.Left())
	return d, nil
}

// CheckKinds compares the registered handlers with mneme.job_kinds, the
// kinds mneme.enqueue_job accepts and the payload each must carry. A kind
// there that this sidecar declares (jobs.Kinds) but has no handler for
// would wait for ever: an error. A kind it does not declare is newer than
// it (a migrate of a later release added it, and the sidecars are being
// rolled): its jobs are left unclaimed for the newer sidecars
// (Runner.Leave, logged once), so an older sidecar keeps serving the
// kinds it knows through the upgrade window (docs/migrations.md).
func CheckKinds(ctx context.Context, pool *pgxpool.Pool, runner *jobs.Runner) error {
	rows, err := pool.Query(ctx, `SELECT kind FROM mneme.job_kinds ORDER BY kind`)
	if err != nil {
		return fmt.Errorf("read mneme.job_kinds (is the database migrated? mneme migrate): %w", err)
	}
	kinds, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return fmt.Errorf("read mneme.job_kinds: %w", err)
	}
	registered := runner.Kinds()
	var missing, newer []string
	for _, k := range kinds {
		switch {
		case slices.Contains(registered, k):
		case jobs.Declared(k):
			missing = append(missing, k)
		default:
			newer = append(newer, k)
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("job kinds %v of mneme.job_kinds have no handler in this sidecar (handlers: %v): bind them in daemon.Handlers", missing, registered)
	}
	runner.Leave(newer...)
	return nil
}

// OpenPool connects the pool `mneme run` and `mneme slot` use, sized for
// the runner's concurrency.
func OpenPool(ctx context.Context, cfg config.Config) (*pgxpool.Pool, error) {
	pcfg, err := pgxpool.ParseConfig(cfg.DatabaseURL)
	if err != nil {
		return nil, fmt.Errorf("DATABASE_URL: %w", err)
	}
	// Handlers hold a connection each, claims, heartbeats and the
	// replication bookkeeping need a few more.
	pcfg.MaxConns = int32(cfg.Concurrency + 4)
	pool, err := pgxpool.NewWithConfig(ctx, pcfg)
	if err != nil {
		return nil, fmt.Errorf("connect: %w", err)
	}
	if err := pool.Ping(ctx); err != nil {
		pool.Close()
		return nil, fmt.Errorf("connect to PostgreSQL: %w", err)
	}
	return pool, nil
}

func runnerOptions(cfg config.Config, log *slog.Logger, m metrics.Sidecar) jobs.Options {
	return jobs.Options{
		Concurrency:     cfg.Concurrency,
		PollEvery:       cfg.PollEvery,
		MaxAttempts:     cfg.MaxAttempts,
		Lease:           cfg.JobLease,
		ShutdownTimeout: cfg.ShutdownTimeout,
		Logger:          log,
		Observer:        m,
	}
}

// Serve runs the daemon until ctx is cancelled (SIGINT, SIGTERM): the event
// transport, the job runner and the HTTP endpoint, then shuts them down in
// reverse order, letting in-flight jobs finish.
func (d *Daemon) Serve(ctx context.Context) error {
	cfg, pool, runner, reg, log := d.cfg, d.pool, d.Runner, d.reg, d.log
	// Before anything is written: a transport that needs a session (and
	// poll with pgx's named statements) refuses a DATABASE_URL that reaches
	// the server through PgBouncer.
	if err := events.CheckDirect(ctx, pool, cfg.Events); err != nil {
		return err
	}
	// The lifecycle policy runs as a job every cleanup_interval (one pending
	// at a time).
	if id, err := lifecycle.Schedule(ctx, pool); err != nil {
		return err
	} else if id != 0 {
		log.Info("cleanup scheduled", "job", id)
	}
	transport, why, err := events.Choose(ctx, pool, cfg.Events)
	if err != nil {
		return err
	}
	log.Info("event transport", "transport", transport, "why", why, "sweep_every", cfg.PollEvery)
	warnAbandonedSlot(ctx, pool, cfg.SlotName, transport, log)
	src, err := events.New(transport, events.Options{
		DSN: cfg.DatabaseURL, Pool: pool, Slot: cfg.SlotName, Logger: log,
	}, runner)
	if err != nil {
		return err
	}
	reg.Gauge(metrics.Jobs, func() ([]metrics.Sample, error) { return jobCounts(pool) })
	reg.Gauge(metrics.SlotRetainedWALBytes, func() ([]metrics.Sample, error) { return slotSamples(pool, cfg.SlotName) })

	var srv *http.Server
	if cfg.MetricsAddr != "" {
		ln, err := net.Listen("tcp", cfg.MetricsAddr)
		if err != nil {
			return fmt.Errorf("MNEME_METRICS_ADDR=%s: %w", cfg.MetricsAddr, err)
		}
		srv = &http.Server{Handler: httpHandler(pool, reg, transport), ReadHeaderTimeout: 5 * time.Second}
		go func() {
			if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
				log.Error("http server", "err", err)
			}
		}()
		log.Info("serving /healthz and /metrics", "addr", ln.Addr().String())
	}

	// The per-scope HNSW indexes, made and dropped as scopes grow and
	// shrink (pgvector; a pass every MNEME_INDEX_INTERVAL).
	idxDone := make(chan struct{})
	idxCtx, stopIdx := context.WithCancel(context.WithoutCancel(ctx))
	if cfg.IndexEvery > 0 {
		url := cfg.IndexURL
		if url == "" {
			url = cfg.DatabaseURL
		}
		go func() {
			defer close(idxDone)
			vectorindex.New(vectorindex.Options{URL: url, Every: cfg.IndexEvery, Log: log, Metrics: reg}).Run(idxCtx)
		}()
	} else {
		close(idxDone)
	}

	srcCtx, stopSrc := context.WithCancel(context.WithoutCancel(ctx))
	srcDone := make(chan error, 1)
	go func() { srcDone <- src.Run(srcCtx) }()
	runner.Start(context.WithoutCancel(ctx))
	// Consolidation's schedule: conversations quiet since their facts were
	// revised get a consolidate job (mneme.schedule_consolidation).
	go revision.ScheduleConsolidations(srcCtx, pool, time.Minute, log)

	var srcErr error
	select {
	case <-ctx.Done():
		log.Info("shutting down")
	case srcErr = <-srcDone:
		log.Error("event transport stopped", "err", srcErr)
	}
	stopSrc()
	// (a build in progress is cancelled: CREATE INDEX CONCURRENTLY leaves
	// an invalid index, which the next pass drops and makes again)
	stopIdx()
	<-idxDone
	// The runner waits for in-flight jobs up to MNEME_SHUTDOWN_TIMEOUT, then
	// releases what is still running.
	err = runner.Stop(context.Background())
	if srv != nil {
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(sctx)
	}
	if srcErr == nil {
		<-srcDone
	}
	return errors.Join(srcErr, err)
}

func httpHandler(pool *pgxpool.Pool, reg *metrics.Registry, transport string) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) {
		ctx, cancel := context.WithTimeout(r.Context(), 2*time.Second)
		defer cancel()
		if err := pool.Ping(ctx); err != nil {
			http.Error(w, "database unreachable: "+err.Error(), http.StatusServiceUnavailable)
			return
		}
		fmt.Fprintf(w, "ok transport=%s\n", transport)
	})
	mux.Handle("GET /metrics", reg.Handler())
	return mux
}

func jobCounts(pool *pgxpool.Pool) ([]metrics.Sample, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	rows, err := pool.Query(ctx, `SELECT kind, state, jobs FROM mneme.job_stats ORDER BY kind, state`)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []metrics.Sample
	for rows.Next() {
		var kind, state string
		var n int64
		if err := rows.Scan(&kind, &state, &n); err != nil {
			return nil, err
		}
		out = append(out, metrics.Sample{Labels: []string{kind, state}, Value: float64(n)})
	}
	return out, rows.Err()
}

// OpenFromEnv loads the configuration from the environment (DATABASE_URL
// required) and opens the pool.
func OpenFromEnv(ctx context.Context) (*pgxpool.Pool, config.Config, error) {
	cfg, err := config.Load(true)
	if err != nil {
		return nil, cfg, err
	}
	pool, err := OpenPool(ctx, cfg)
	return pool, cfg, err
}

// buildInfo is the mneme_build_info gauge (always 1): the binary's
// version, the SQL API it speaks and the database's at start.
func buildInfo(reg *metrics.Registry, dbAPI string) {
	reg.Gauge(metrics.BuildInfo, func() ([]metrics.Sample, error) {
		return []metrics.Sample{{Labels: []string{version.Binary(), version.SQLAPI(), dbAPI}, Value: 1}}, nil
	})
}

// warnPrivileged warns when the sidecar connects as a superuser or as the
// role that owns mneme's tables (the one that migrates): row security and
// the grants, which keep a job to its tenant's rows, do not hold such a
// login, so a bug in the sidecar would reach further than it should.
func warnPrivileged(ctx context.Context, pool *pgxpool.Pool, log *slog.Logger) {
	var login string
	var super, owner bool
	err := pool.QueryRow(ctx, `SELECT current_user, r.rolsuper,
		       pg_catalog.pg_has_role(current_user, c.relowner, 'MEMBER')
		  FROM pg_catalog.pg_roles r, pg_catalog.pg_class c
		 WHERE r.rolname = current_user AND c.oid = 'mneme.memories'::regclass`).Scan(&login, &super, &owner)
	if err != nil {
		log.Warn("could not read the login's privileges", "err", err)
		return
	}
	fix := "CREATE ROLE mneme_sidecar LOGIN IN ROLE mneme_worker; point DATABASE_URL at it (README, Use your own PostgreSQL)"
	switch {
	case super:
		log.Warn("the sidecar is connected as a superuser: row security and grants do not hold it; run it as a member of mneme_worker",
			"login", login, "fix", fix)
	case owner:
		log.Warn("the sidecar is connected as the owner of mneme's tables (the login that migrates): run it as a member of mneme_worker",
			"login", login, "fix", fix)
	}
}
