package jobs

import (
	"context"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/mneme-memory/mneme/sidecar/backoff"
)

// Runner claims jobs from mneme.jobs and runs their handlers.
type Runner struct {
	pool *pgxpool.Pool
	opts Options
	log  *slog.Logger

	mu       sync.Mutex
	handlers map[string]Handler
	running  map[int64]*run  // by job id: heartbeats and shutdown release
	newer    map[string]bool // kinds of the schema newer than this sidecar: left unclaimed (Leave)

	wake     chan struct{}
	slots    chan struct{}
	inflight sync.WaitGroup

	runCtx     context.Context // parent of every handler context
	cancelRuns context.CancelFunc

	startOnce    sync.Once
	stopOnce     sync.Once
	stopping     chan struct{} // closed: claim no more
	dispatchDone chan struct{} // closed when the dispatcher exits: no run starts after it
	loopsDone    chan struct{} // closed when dispatcher and heartbeat exit
	aborted      bool
}

type run struct {
	job     Job
	attempt int
	cancel  context.CancelFunc
}

// NewRunner returns a runner over pool. Register handlers, then Start or Drain.
func NewRunner(pool *pgxpool.Pool, opts Options) *Runner {
	opts = opts.withDefaults()
	ctx, cancel := context.WithCancel(context.Background())
	return &Runner{
		pool:         pool,
		opts:         opts,
		log:          opts.Logger.With("worker", opts.WorkerID),
		handlers:     map[string]Handler{},
		running:      map[int64]*run{},
		newer:        map[string]bool{},
		wake:         make(chan struct{}, 1),
		slots:        make(chan struct{}, opts.Concurrency),
		runCtx:       ctx,
		cancelRuns:   cancel,
		stopping:     make(chan struct{}),
		dispatchDone: make(chan struct{}),
		loopsDone:    make(chan struct{}),
	}
}

// WorkerID is the locked_by value of this runner's claims.
func (r *Runner) WorkerID() string { return r.opts.WorkerID }

// Register sets the handler for a job kind, replacing any earlier one.
func (r *Runner) Register(kind string, h Handler) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.handlers[kind] = h
}

// RegisterAll registers hs, which must hold a handler for every kind of
// the declaration (Kinds) and for no other: the one binding of kinds to
// handlers (daemon.Handlers) cannot miss a kind added to Kinds.
func (r *Runner) RegisterAll(hs map[string]Handler) error {
	var missing []string
	for _, k := range Kinds {
		if hs[k.Name()] == nil {
			missing = append(missing, k.Name())
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("job kinds without a handler: %s (bind them in daemon.Handlers)", strings.Join(missing, ", "))
	}
	if len(hs) != len(Kinds) {
		var extra []string
		for k := range hs {
			if !slices.ContainsFunc(Kinds, func(d Kind) bool { return d.Name() == k }) {
				extra = append(extra, k)
			}
		}
		sort.Strings(extra)
		return fmt.Errorf("handlers for undeclared job kinds: %s (declare them in jobs.Kinds)", strings.Join(extra, ", "))
	}
	for k, h := range hs {
		r.Register(k, h)
	}
	return nil
}

// Kinds lists the registered job kinds.
func (r *Runner) Kinds() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Sorted(maps.Keys(r.handlers))
}

// Leave makes the runner leave jobs of kinds unclaimed: kinds of
// mneme.job_kinds newer than this sidecar (a migrate of a later release
// added them), which the sidecars of that release handle. Each kind is
// logged once.
func (r *Runner) Leave(kinds ...string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, k := range kinds {
		if r.newer[k] {
			continue
		}
		r.newer[k] = true
		r.log.Warn("job kind newer than this sidecar: its jobs are left to the sidecars of the release that declares it",
			"kind", k, "fix", "roll the sidecars to the release that migrated the database (docs/migrations.md)")
	}
}

// Left lists the kinds the runner leaves unclaimed (Leave).
func (r *Runner) Left() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Sorted(maps.Keys(r.newer))
}

// Declared reports whether kind is one of this sidecar's (Kinds).
func Declared(kind string) bool {
	return slices.ContainsFunc(Kinds, func(d Kind) bool { return d.Name() == kind })
}

// Wake asks the runner to claim now: an event transport saw a new job. It
// never blocks; many wakes before the next claim count as one.
func (r *Runner) Wake() {
	select {
	case r.wake <- struct{}{}:
	default:
	}
}

// Start runs the runner in the background until Stop (or Abort). Cancelling
// ctx is the same as calling Stop with the runner's ShutdownTimeout.
func (r *Runner) Start(ctx context.Context) {
	r.startOnce.Do(func() {
		var wg sync.WaitGroup
		wg.Add(2)
		go func() { defer wg.Done(); defer close(r.dispatchDone); r.dispatch() }()
		go func() { defer wg.Done(); r.heartbeat() }()
		go func() { wg.Wait(); close(r.loopsDone) }()
		go func() {
			select {
			case <-ctx.Done():
				_ = r.Stop(context.Background())
			case <-r.stopping:
			}
		}()
		r.log.Info("job runner started", "concurrency", r.opts.Concurrency, "kinds", r.Kinds(),
			"lease", r.opts.Lease, "sweep", r.opts.PollEvery, "shutdown_timeout", r.opts.ShutdownTimeout)
	})
}

// Stop stops claiming and waits for in-flight jobs until ctx is done (or,
// if ctx has no deadline, for the runner's ShutdownTimeout); jobs still
// running then are cancelled and released for another worker without
// counting the attempt. Stop is safe to call more than once.
func (r *Runner) Stop(ctx context.Context) error {
	r.stopOnce.Do(func() {
		close(r.stopping)
		r.startOnce.Do(func() { close(r.loopsDone); close(r.dispatchDone) }) // never started
		if _, ok := ctx.Deadline(); !ok {
			var cancel context.CancelFunc
			ctx, cancel = context.WithTimeout(ctx, r.opts.ShutdownTimeout)
			defer cancel()
		}
		done := make(chan struct{})
		// The dispatcher first: a claim under way when Stop began starts
		// its runs (inflight.Add) after it returns; waiting on inflight
		// before that would miss them, and they would run on after Stop
		// returned, on a pool the caller then closes.
		go func() { <-r.dispatchDone; r.inflight.Wait(); close(done) }()
		select {
		case <-done:
		case <-ctx.Done():
			n := r.releaseAll()
			r.log.Warn("shutdown deadline reached: released in-flight jobs", "jobs", n)
			<-done
		}
		r.cancelRuns()
		<-r.loopsDone
		r.log.Info("job runner stopped")
	})
	return nil
}

// Abort stops at once as a crash would: handler contexts are cancelled,
// nothing is released or recorded, leases are left to expire. Tests use it.
func (r *Runner) Abort() {
	r.mu.Lock()
	r.aborted = true
	r.mu.Unlock()
	r.cancelRuns()
	r.stopOnce.Do(func() {
		close(r.stopping)
		r.startOnce.Do(func() { close(r.loopsDone); close(r.dispatchDone) })
	})
	<-r.dispatchDone
	r.inflight.Wait()
	<-r.loopsDone
}

func (r *Runner) isAborted() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.aborted
}

// runs is a snapshot of the running jobs.
func (r *Runner) runs() []*run {
	r.mu.Lock()
	defer r.mu.Unlock()
	runs := make([]*run, 0, len(r.running))
	for _, rn := range r.running {
		runs = append(runs, rn)
	}
	return runs
}

// releaseAll cancels running handlers and gives their jobs back.
func (r *Runner) releaseAll() int {
	runs := r.runs()
	for _, rn := range runs {
		rn.cancel()
	}
	return len(runs)
}

// Drain runs every ready job, including jobs that handlers enqueue, and
// returns when none is ready and none is running. Jobs waiting for a retry
// (run_at in the future) are left pending. Use it instead of Start, for
// one-shot processing (mneme run --drain, the demo, evaluations).
func (r *Runner) Drain(ctx context.Context) error {
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		batch, err := claim(ctx, r.pool, r.opts.WorkerID, r.opts.Concurrency, r.opts.Lease, r.opts.MaxAttempts, r.Left())
		if err != nil {
			return err
		}
		if len(batch) == 0 {
			return nil
		}
		var wg sync.WaitGroup
		for _, c := range batch {
			wg.Add(1)
			r.inflight.Add(1)
			go func() {
				defer wg.Done()
				defer r.inflight.Done()
				r.runJob(ctx, c)
			}()
		}
		wg.Wait()
	}
}

// dispatch claims as many jobs as there are free slots whenever woken, on
// every sweep tick, and when a slot frees after a full claim.
func (r *Runner) dispatch() {
	tick := time.NewTicker(r.opts.PollEvery)
	defer tick.Stop()
	freed := make(chan struct{}, 1)
	fails := 0
	for {
		select {
		case <-r.stopping:
			return
		default:
		}
		free := r.opts.Concurrency - len(r.slots)
		more := false
		if free > 0 {
			n, err := r.claimAndStart(free, freed)
			if err != nil {
				fails++
				r.log.Warn("claim failed; retrying", "err", err, "attempt", fails)
				select {
				case <-r.stopping:
					return
				case <-time.After(backoff.Policy{Base: 200 * time.Millisecond, Max: 10 * time.Second}.Delay(fails)):
				}
				continue
			}
			fails = 0
			more = n == free
		} else {
			more = true
		}
		if more {
			select {
			case <-r.stopping:
				return
			case <-freed:
				continue
			case <-tick.C:
				continue
			}
		}
		select {
		case <-r.stopping:
			return
		case <-r.wake:
		case <-tick.C:
		case <-freed:
			// A job finished; it may have enqueued follow-up work.
		}
	}
}

func (r *Runner) claimAndStart(free int, freed chan struct{}) (int, error) {
	// A claim is never cut by shutdown half way: what it claims is started
	// or released.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	batch, err := claim(ctx, r.pool, r.opts.WorkerID, free, r.opts.Lease, r.opts.MaxAttempts, r.Left())
	if err != nil {
		return 0, err
	}
	for _, c := range batch {
		r.slots <- struct{}{}
		r.inflight.Add(1)
		go func() {
			defer func() {
				<-r.slots
				r.inflight.Done()
				select {
				case freed <- struct{}{}:
				default:
				}
			}()
			r.runJob(r.runCtx, c)
		}()
	}
	return len(batch), nil
}

// heartbeat extends the leases of running jobs every third of a lease; a
// run that lost its lease is cancelled (it could not commit anyway).
func (r *Runner) heartbeat() {
	tick := time.NewTicker(r.opts.Lease / 3)
	defer tick.Stop()
	for {
		select {
		case <-r.stopping:
			if r.isAborted() {
				return
			}
			// Keep leases alive while Stop waits for in-flight jobs.
			if r.countRunning() == 0 {
				return
			}
		default:
		}
		select {
		case <-tick.C:
		case <-r.runCtx.Done():
			return
		}
		if r.isAborted() {
			return
		}
		runs := r.runs()
		for _, rn := range runs {
			ctx, cancel := context.WithTimeout(context.Background(), r.opts.Lease/3)
			ok, err := extendLease(ctx, r.pool, rn.job.ID, r.opts.WorkerID, rn.attempt, r.opts.Lease)
			cancel()
			if err != nil {
				r.log.Warn("lease heartbeat failed", "job", rn.job.ID, "err", err)
				continue
			}
			if !ok {
				r.log.Warn("lease lost; cancelling the run", "job", rn.job.ID, "kind", rn.job.Kind)
				rn.cancel()
			}
		}
	}
}

func (r *Runner) countRunning() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.running)
}
