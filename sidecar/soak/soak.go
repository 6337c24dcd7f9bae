// Package soak is `mneme bench soak`: the loop as users run it, checked.
// Writers talk in many conversations of several tenants on realistic
// timing (sessions separated by gaps, late and refused out-of-order
// messages), with retrievals, contexts, remembers, segment_now and erases
// of planted marker words in between, while sidecars run, are killed
// (SIGKILL, or an abort in process) and restarted at random and a second
// one comes and goes. After a bounded time and a settle, the database is
// checked against what the soak itself wrote down (the ledger) and against
// a drain of the same messages on a fresh database (the offline
// reference): each invariant passes or fails with its counts.
package soak

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/mneme-memory/mneme/sidecar/migrate"
	"github.com/mneme-memory/mneme/sidecar/scratch"
)

// Options size a soak run.
type Options struct {
	Server        string        // DATABASE_URL: the scratch databases are created on its server
	Duration      time.Duration // how long the writers write
	Seed          int64         // the workload's randomness (0: from the clock; the result says which)
	Tenants       int
	Conversations int
	InProcess     bool          // sidecars in this process (killed by Runner.Abort) instead of `mneme run` processes (SIGKILL)
	Binary        string        // the mneme binary the sidecar processes run (`<Binary> run`)
	ChaosEvery    time.Duration // mean time between sidecar kills, restarts and starts (and erases)
	Gap           time.Duration // segment_gap_seconds
	Lease         time.Duration // MNEME_JOB_LEASE of the sidecars: a killed sidecar's jobs are claimable after it
	Concurrency   int           // jobs each sidecar runs at once
	Settle        time.Duration // at most this long for the queue to empty after the writers stop
	Vector        string        // auto, pgvector or array
	Keep          bool          // keep the live scratch database (its name is logged)
	Log           *slog.Logger
}

// Result is a soak run: what it did, its throughput and its invariants.
type Result struct {
	Seed            int64       `json:"seed"`
	Variant         string      `json:"vector"`
	Sidecars        string      `json:"sidecars"`
	Tenants         int         `json:"tenants"`
	Conversations   int         `json:"conversations"`
	Gap             string      `json:"gap"`
	Lease           string      `json:"lease"`
	ChaosEvery      string      `json:"chaos_every"`
	WriteSeconds    float64     `json:"write_seconds"`
	SettleSeconds   float64     `json:"settle_seconds"`
	Messages        int         `json:"messages"`
	Calls           int         `json:"calls"`
	Jobs            int         `json:"jobs_finished"`
	MessagesPerSec  float64     `json:"messages_per_sec"`
	CallsPerSec     float64     `json:"calls_per_sec"`
	JobsPerSec      float64     `json:"jobs_per_sec"`
	SidecarStarts   int         `json:"sidecar_starts"`
	SidecarKills    int         `json:"sidecar_kills"`
	SidecarStops    int         `json:"sidecar_stops"`
	SidecarErrors   int         `json:"sidecar_log_errors"`
	SidecarWarnings int         `json:"sidecar_log_warnings"`
	SidecarLog      []string    `json:"sidecar_log_first,omitempty"`
	Invariants      []Invariant `json:"invariants"`
}

// Pass reports whether every invariant passed.
func (r *Result) Pass() bool {
	for _, iv := range r.Invariants {
		if !iv.Pass {
			return false
		}
	}
	return len(r.Invariants) > 0
}

// ErrFailed is returned (wrapped) with a result whose invariants did not
// all pass.
var ErrFailed = errors.New("soak: invariants failed")

// Run runs a soak and checks it. The error wraps ErrFailed when the run
// completed and an invariant failed (the result says which).
func Run(ctx context.Context, o Options) (*Result, error) {
	if err := o.Validate(); err != nil {
		return nil, err
	}
	log := o.Log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if o.Seed == 0 {
		o.Seed = time.Now().UnixNano()
	}
	rng := &lockedRand{r: rand.New(rand.NewSource(o.Seed))}
	res := &Result{Seed: o.Seed, Sidecars: map[bool]string{false: "process", true: "in-process"}[o.InProcess],
		Tenants: o.Tenants, Conversations: o.Conversations, Gap: o.Gap.String(), Lease: o.Lease.String(), ChaosEvery: o.ChaosEvery.String()}
	log.Info("soak: starting", "seed", o.Seed, "duration", o.Duration, "sidecars", res.Sidecars)

	db, err := scratch.Create(ctx, scratch.Options{Server: o.Server, Prefix: "mneme_soak_", Keep: o.Keep, Log: log})
	if err != nil {
		return nil, err
	}
	var lg *logins
	var pools []*pgxpool.Pool
	defer func() {
		for _, p := range pools {
			p.Close()
		}
		db.Close()
		lg.drop(context.Background(), o.Server)
	}()
	variant, err := migrate.Run(ctx, db.URL, migrate.Options{Vector: o.Vector, Logger: log})
	if err != nil {
		return nil, fmt.Errorf("migrate: %w", err)
	}
	o.Vector, res.Variant = variant.Variant, variant.Variant
	owner, err := pgxpool.New(ctx, db.URL)
	if err != nil {
		return nil, err
	}
	pools = append(pools, owner)
	if err := applySettings(ctx, owner, o); err != nil {
		return nil, err
	}
	if lg, err = createLogins(ctx, owner, db.URL, o.Tenants); err != nil {
		return nil, err
	}
	w := &workload{o: o, led: newLedger(), owner: owner}
	for _, u := range lg.tenantURLs {
		p, err := pgxpool.New(ctx, u)
		if err != nil {
			return nil, fmt.Errorf("connect as a tenant's login: %w", err)
		}
		pools = append(pools, p)
		w.apps = append(w.apps, p)
	}
	if w.admin, err = pgxpool.New(ctx, lg.adminURL); err != nil {
		return nil, fmt.Errorf("connect as the admin login: %w", err)
	}
	pools = append(pools, w.admin)
	convs := make([]*conversation, o.Conversations)
	base := time.Now().Add(-7 * 24 * time.Hour).Truncate(time.Second)
	for i := range convs {
		convs[i] = &conversation{ID: uuid.New(), Tenant: i % o.Tenants, ServerClock: i%4 == 3,
			Doomed: i%6 == 5, Marked: i%6 == 5 || i%4 == 1, virtual: base.Add(time.Duration(i) * time.Minute)}
		w.led.convs = append(w.led.convs, convs[i])
	}

	f := &fleet{o: o, url: lg.workerURL, logs: &errorLog{}}
	if err := f.start(0); err != nil {
		return nil, err
	}
	defer f.stopAll()

	// The run: writers, chaos and the eraser until the deadline.
	w.start = time.Now()
	deadline := w.start.Add(o.Duration)
	runCtx, stopRun := context.WithDeadline(ctx, deadline)
	defer stopRun()
	var wg sync.WaitGroup
	for i, c := range convs {
		crng := rand.New(rand.NewSource(o.Seed + int64(i) + 1))
		stopAt := deadline
		if c.Doomed {
			stopAt = w.start.Add(time.Duration(float64(o.Duration) * (0.3 + 0.5*crng.Float64())))
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			// The writers stop between calls (at stopAt, or when ctx ends): a
			// call cancelled midway could commit unseen, in no ledger.
			w.write(ctx, c, crng, stopAt)
			if c.Doomed {
				// erased whole a moment after its last message, its jobs
				// perhaps in flight
				time.Sleep(time.Duration(crng.Intn(1500)) * time.Millisecond)
				w.eraseConversation(ctx, c)
			}
		}()
	}
	worker, err := pgxpool.New(ctx, lg.workerURL)
	if err != nil {
		return nil, fmt.Errorf("connect as the worker login: %w", err)
	}
	pools = append(pools, worker)
	wg.Add(1)
	go func() {
		defer wg.Done()
		select {
		case <-runCtx.Done():
		case <-time.After(o.Duration / 3):
			w.poison(ctx, worker)
		}
	}()
	bg := make(chan error, 2)
	er := &eraser{w: w}
	go func() { bg <- f.chaos(runCtx, rng) }()
	go func() { bg <- er.run(runCtx, rng) }()
	wg.Wait()
	stopRun()
	for range 2 {
		if err := <-bg; err != nil {
			return nil, err
		}
	}
	res.WriteSeconds = time.Since(w.start).Seconds()

	// The settle: one sidecar, every conversation's tail cut, the queue
	// empty; then every memory still holding a marker erased.
	settleStart := time.Now()
	if err := f.ensurePrimary(); err != nil {
		return nil, err
	}
	var kept []*conversation
	for _, c := range convs {
		if c.isErased() {
			continue
		}
		kept = append(kept, c)
		if _, err := w.apps[c.Tenant].Exec(ctx, `SELECT mneme.segment_now($1)`, c.ID); err != nil {
			w.led.fail("segment_now", err)
			continue
		}
		w.led.call("segment_now")
		c.addSegmentNow()
	}
	if err := settle(ctx, owner, o.Settle, log); err != nil {
		log.Warn("soak: the queue did not settle", "err", err)
	}
	if err := er.eraseAll(ctx); err != nil {
		return nil, err
	}
	if err := settle(ctx, owner, o.Settle, log); err != nil {
		log.Warn("soak: the queue did not settle", "err", err)
	}
	res.SettleSeconds = time.Since(settleStart).Seconds()
	f.stopAll()

	if err := owner.QueryRow(ctx, `SELECT count(*) FROM mneme.jobs WHERE finished_at >= $1`, w.start).Scan(&res.Jobs); err != nil {
		return nil, err
	}
	res.Messages = w.led.counts["add_message"]
	res.Calls = w.led.totalCalls()
	res.MessagesPerSec = float64(res.Messages) / res.WriteSeconds
	res.CallsPerSec = float64(res.Calls) / res.WriteSeconds
	res.JobsPerSec = float64(res.Jobs) / (res.WriteSeconds + res.SettleSeconds)
	res.SidecarStarts, res.SidecarKills, res.SidecarStops = f.started, f.kills, f.stops
	res.SidecarErrors, res.SidecarWarnings, res.SidecarLog = f.logs.errors, f.logs.warns, f.logs.first

	if err := check(ctx, o, owner, w.led, f, convs, kept, res, log); err != nil {
		return res, err
	}
	if !res.Pass() {
		return res, ErrFailed
	}
	return res, nil
}

// settle waits until no job is due or running, at most max.
func settle(ctx context.Context, pool *pgxpool.Pool, max time.Duration, log *slog.Logger) error {
	end := time.Now().Add(max)
	for {
		var busy int
		if err := pool.QueryRow(ctx, `SELECT count(*) FROM mneme.jobs
			WHERE (state = 'pending' AND run_at <= now()) OR state = 'running'`).Scan(&busy); err != nil {
			return err
		}
		if busy == 0 {
			return nil
		}
		if time.Now().After(end) {
			return fmt.Errorf("%d jobs still due or running after %s", busy, max)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// check reads the database and runs the invariants.
func check(ctx context.Context, o Options, owner *pgxpool.Pool, led *ledger, f *fleet, convs, kept []*conversation,
	res *Result, log *slog.Logger) error {
	var erasedConvs []uuid.UUID
	for _, c := range convs {
		if c.isErased() {
			erasedConvs = append(erasedConvs, c.ID)
		}
	}
	s, err := readSnapshot(ctx, owner, erasedConvs)
	if err != nil {
		return fmt.Errorf("read the database after the run: %w", err)
	}
	eps := liveEpisodes(s, led)
	live := map[uuid.UUID][]span{}
	var replay []*conversation
	for _, c := range kept {
		if sp, ok := positions(c, eps[c.ID]); ok {
			live[c.ID] = sp
			replay = append(replay, c)
		}
	}
	log.Info("soak: the offline reference", "conversations", len(replay))
	ref, err := reference(ctx, o, replay, log)
	if err != nil {
		return fmt.Errorf("the offline reference: %w", err)
	}
	for _, c := range replay {
		if _, ok := ref[c.ID]; !ok {
			ref[c.ID] = nil
		}
	}
	res.Invariants = []Invariant{
		checkMessages(s, led, kept),
		checkGaps(live, ref, replay, o.Gap),
		checkReference(live, ref, replay),
		checkJobs(s),
		checkErased(s, led),
		checkReviews(s, led),
		checkCalls(led, f),
	}
	return nil
}
