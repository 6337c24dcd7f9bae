package jobs

import (
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"time"

	"github.com/mneme-memory/mneme/sidecar/backoff"
)

// Options tune a Runner. The zero value is usable.
type Options struct {
	WorkerID        string         // locked_by of claimed jobs; default host-pid-random
	Concurrency     int            // jobs run at once (default 4)
	Lease           time.Duration  // lease per claim, extended by heartbeats while the job runs (default 30s)
	PollEvery       time.Duration  // sweep interval: claims whatever is ready even without an event (default 5s)
	Retry           backoff.Policy // delay before a failed job's next attempt (default 1s doubling to 10m)
	MaxAttempts     int            // overrides every job's max_attempts when > 0 (MNEME_MAX_ATTEMPTS)
	JobTimeout      time.Duration  // a handler's context deadline (default 10m)
	ShutdownTimeout time.Duration  // Stop waits this long for in-flight jobs when its ctx has no deadline (default 30s)
	Logger          *slog.Logger
	Observer        Observer // metrics; nil = none
}

// Observer is told what the runner does, for metrics. Implementations must
// be safe for concurrent use and fast.
type Observer interface {
	// Claimed: a job was claimed, wait after it became ready (run_at or
	// created_at, whichever is later).
	Claimed(kind string, wait time.Duration)
	// Finished: one run ended with outcome done, retried, failed, lost
	// (lease lost, nothing committed) or released (shutdown).
	Finished(kind, outcome string, d time.Duration)
}

// Outcomes reported to Observer.Finished.
const (
	OutcomeDone     = "done"
	OutcomeRetried  = "retried"
	OutcomeFailed   = "failed"
	OutcomeLost     = "lost"
	OutcomeReleased = "released"
)

type nopObserver struct{}

func (nopObserver) Claimed(string, time.Duration)          {}
func (nopObserver) Finished(string, string, time.Duration) {}

func (o Options) withDefaults() Options {
	if o.WorkerID == "" {
		host, _ := os.Hostname()
		if host == "" {
			host = "mneme"
		}
		o.WorkerID = fmt.Sprintf("%s-%d-%04x", host, os.Getpid(), rand.IntN(1<<16))
	}
	if o.Concurrency <= 0 {
		o.Concurrency = 4
	}
	if o.Lease <= 0 {
		o.Lease = 30 * time.Second
	}
	if o.PollEvery <= 0 {
		o.PollEvery = 5 * time.Second
	}
	if o.Retry.Base <= 0 {
		o.Retry = backoff.Policy{Base: time.Second, Max: 10 * time.Minute}
	}
	if o.JobTimeout <= 0 {
		o.JobTimeout = 10 * time.Minute
	}
	if o.ShutdownTimeout <= 0 {
		o.ShutdownTimeout = 30 * time.Second
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Observer == nil {
		o.Observer = nopObserver{}
	}
	return o
}
