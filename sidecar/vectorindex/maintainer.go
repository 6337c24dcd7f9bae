// Package vectorindex keeps the per-scope HNSW indexes of the pgvector
// variant (mneme.vector_index_plan) made and dropped as conversations and
// tenants cross vector_scope_index_min, with no operator command: the
// sidecar runs the plan every interval through a connection of its own, as
// a login that may create indexes on mneme.memories (CREATE INDEX
// CONCURRENTLY runs outside any transaction, so no SQL function can do it).
package vectorindex

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/mneme-memory/mneme/sidecar/metrics"
	"github.com/mneme-memory/mneme/sidecar/migrate"
)

// lockKey is the session advisory lock one pass holds, so that of several
// sidecars one builds at a time (a second CREATE INDEX CONCURRENTLY of the
// same index would wait for the first and then find it there).
const lockKey = "mneme.vector_indexes"

// Options configure a Maintainer.
type Options struct {
	// URL is the index login's connection (MNEME_INDEX_DATABASE_URL, else
	// DATABASE_URL): a role that may create indexes on mneme.memories (its
	// owner, or a member of the owner's role; docs/performance.md).
	URL   string
	Every time.Duration // between passes
	Log   *slog.Logger
	// Metrics: the registry the builds are counted in (nil: none).
	Metrics *metrics.Registry
}

// Progress is the build in progress, as pg_stat_progress_create_index
// shows it.
type Progress struct {
	Index string
	Phase string
	Done  int64 // blocks or tuples done of the current phase
	Total int64
}

// Maintainer runs the plan every Options.Every.
type Maintainer struct {
	o   Options
	log *slog.Logger

	mu       sync.Mutex
	pending  map[string]int // action -> statements the last pass found to do
	building *Progress
	warned   string // the last refusal logged (logged once, not every pass)
	external bool   // the database's embedder is not the hash embedder
}

// New makes a Maintainer; Run starts it.
func New(o Options) *Maintainer {
	log := o.Log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	m := &Maintainer{o: o, log: log, pending: map[string]int{}}
	if o.Metrics != nil {
		o.Metrics.Gauge(metrics.VectorIndexPending, m.pendingSamples)
		o.Metrics.Gauge(metrics.VectorIndexBuild, m.progressSamples)
	}
	return m
}

// ErrNotApplicable: the database is the array variant (no index to make).
var ErrNotApplicable = errors.New("per-scope vector indexes need the pgvector variant")

// ErrNoPrivilege: the login may not create indexes on mneme.memories.
var ErrNoPrivilege = errors.New("the index login may not create indexes on mneme.memories")

// Run passes every interval until ctx ends; it returns at once on the
// array variant. A pass that fails is logged and retried at the next.
func (m *Maintainer) Run(ctx context.Context) {
	t := time.NewTicker(m.o.Every)
	defer t.Stop()
	for {
		_, err := m.Once(ctx)
		switch {
		case errors.Is(err, ErrNotApplicable):
			m.log.Info("vector indexes: not maintained", "why", err)
			return
		case ctx.Err() != nil:
			return
		case errors.Is(err, ErrNoPrivilege) && !m.external:
			// (embedder hash: the plan makes no index; nothing is missed)
			m.infoOnce(err)
		case err != nil:
			m.warnOnce(err)
		default:
			m.warnOnce(nil)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

func (m *Maintainer) infoOnce(err error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if err.Error() != m.warned {
		m.warned = err.Error()
		m.log.Info("vector indexes: not maintained", "why", err,
			"fix", "MNEME_INDEX_DATABASE_URL: a login that owns mneme's tables (needed with an external embedder)")
	}
}

func (m *Maintainer) warnOnce(err error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	msg := ""
	if err != nil {
		msg = err.Error()
	}
	if msg == m.warned {
		return
	}
	m.warned = msg
	if err != nil {
		m.log.Warn("vector indexes: the pass failed (retried every interval)", "err", err,
			"fix", "MNEME_INDEX_DATABASE_URL: a login that owns mneme's tables (docs/performance.md, Indexes that manage themselves)")
	}
}

// Once runs one pass: the plan read and each of its statements run, drops
// first. It returns the steps it ran (none when another sidecar holds the
// pass's lock).
func (m *Maintainer) Once(ctx context.Context) ([]migrate.IndexStep, error) {
	conn, err := pgx.Connect(ctx, m.o.URL)
	if err != nil {
		return nil, fmt.Errorf("vector indexes: connect: %w", err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	var variant, embedder, login string
	var may bool
	if err := conn.QueryRow(ctx, `SELECT mneme.setting('vector_variant') #>> '{}', mneme.setting('embedder') #>> '{}', current_user,
		       r.rolsuper OR pg_catalog.pg_has_role(current_user, c.relowner, 'USAGE')
		  FROM pg_catalog.pg_roles r, pg_catalog.pg_class c
		 WHERE r.rolname = current_user AND c.oid = 'mneme.memories'::regclass`).Scan(&variant, &embedder, &login, &may); err != nil {
		return nil, fmt.Errorf("vector indexes: %w", err)
	}
	m.mu.Lock()
	m.external = embedder != "hash"
	m.mu.Unlock()
	if variant != "pgvector" {
		return nil, ErrNotApplicable
	}
	if !may {
		return nil, fmt.Errorf("%w (login %s)", ErrNoPrivilege, login)
	}
	if _, err := conn.Exec(ctx, `SET application_name = 'mneme vector indexes'`); err != nil {
		return nil, err
	}
	var locked bool
	if err := conn.QueryRow(ctx, `SELECT pg_catalog.pg_try_advisory_lock(pg_catalog.hashtext($1))`, lockKey).Scan(&locked); err != nil {
		return nil, fmt.Errorf("vector indexes: lock: %w", err)
	}
	if !locked {
		return nil, nil // another sidecar's pass
	}
	plan, err := migrate.VectorIndexes(ctx, conn, false, m.log)
	if err != nil {
		return nil, err
	}
	m.setPending(plan)
	var done []migrate.IndexStep
	for i, s := range plan {
		t0 := time.Now()
		m.log.Info("vector index", "action", s.Action, "scope", s.Scope, "id", s.ScopeID, "memories", s.Memories, "index", s.Index)
		err := m.run(ctx, conn, s)
		m.count(s.Action, err)
		if err != nil {
			return done, fmt.Errorf("%s %s (%s %s): %w", s.Action, s.Index, s.Scope, s.ScopeID, err)
		}
		m.log.Info("vector index done", "action", s.Action, "index", s.Index, "seconds", time.Since(t0).Seconds())
		done = append(done, s)
		m.setPending(plan[i+1:])
	}
	return done, nil
}

// run runs one statement, watching its progress from a second connection
// of the same login (pg_stat_progress_create_index shows a session's
// figures to its own role).
func (m *Maintainer) run(ctx context.Context, conn *pgx.Conn, s migrate.IndexStep) error {
	pid := conn.PgConn().PID()
	watchCtx, stop := context.WithCancel(ctx)
	var wg sync.WaitGroup
	if s.Action == "create" {
		wg.Add(1)
		go func() {
			defer wg.Done()
			m.watch(watchCtx, pid, s.Index)
		}()
	}
	_, err := conn.Exec(ctx, s.Statement)
	stop()
	wg.Wait()
	m.mu.Lock()
	m.building = nil
	m.mu.Unlock()
	return err
}

func (m *Maintainer) watch(ctx context.Context, pid uint32, index string) {
	m.mu.Lock()
	m.building = &Progress{Index: index, Phase: "starting"}
	m.mu.Unlock()
	conn, err := pgx.Connect(ctx, m.o.URL)
	if err != nil {
		return
	}
	defer conn.Close(context.WithoutCancel(ctx))
	t := time.NewTicker(time.Second)
	defer t.Stop()
	for {
		var p Progress
		p.Index = index
		err := conn.QueryRow(ctx, `SELECT p.phase,
			       CASE WHEN p.blocks_total > 0 THEN p.blocks_done ELSE p.tuples_done END,
			       CASE WHEN p.blocks_total > 0 THEN p.blocks_total ELSE p.tuples_total END
			  FROM pg_catalog.pg_stat_progress_create_index p WHERE p.pid = $1`, int32(pid)).Scan(&p.Phase, &p.Done, &p.Total)
		if err == nil {
			m.mu.Lock()
			m.building = &p
			m.mu.Unlock()
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// Building is the build in progress (nil: none).
func (m *Maintainer) Building() *Progress {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.building == nil {
		return nil
	}
	p := *m.building
	return &p
}

func (m *Maintainer) setPending(plan []migrate.IndexStep) {
	n := map[string]int{"create": 0, "drop": 0}
	for _, s := range plan {
		n[s.Action]++
	}
	m.mu.Lock()
	m.pending = n
	m.mu.Unlock()
}

func (m *Maintainer) count(action string, err error) {
	if m.o.Metrics == nil {
		return
	}
	result := "done"
	if err != nil {
		result = "failed"
	}
	m.o.Metrics.Add(context.Background(), metrics.VectorIndexSteps, []string{action, result}, 1)
}

func (m *Maintainer) pendingSamples() ([]metrics.Sample, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []metrics.Sample
	for _, a := range []string{"create", "drop"} {
		if n, ok := m.pending[a]; ok {
			out = append(out, metrics.Sample{Labels: []string{a}, Value: float64(n)})
		}
	}
	return out, nil
}

func (m *Maintainer) progressSamples() ([]metrics.Sample, error) {
	p := m.Building()
	if p == nil {
		return nil, nil
	}
	v := 0.0
	if p.Total > 0 {
		v = float64(p.Done) / float64(p.Total)
	}
	return []metrics.Sample{{Labels: []string{p.Index, p.Phase}, Value: v}}, nil
}
