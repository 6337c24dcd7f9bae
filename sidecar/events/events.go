// Package events tells the job runner that new jobs exist. Jobs live in
// mneme.jobs and the runner's periodic sweep finds every one of them, so a
// transport only shortens the wait: logical replication (follow the WAL
// through a slot), LISTEN/NOTIFY, or nothing (poll). auto picks the best the
// server and role allow.
package events

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/mneme-memory/mneme/sidecar/backoff"
)

// Waker is what a transport wakes: the job runner.
type Waker interface{ Wake() }

// Source is one transport. Run blocks until ctx is done, reconnecting on
// its own; it returns an error only for problems retrying cannot fix.
type Source interface {
	Run(ctx context.Context) error
}

// Transport names (config.Events*).
const (
	Auto        = "auto"
	Replication = "replication"
	Notify      = "notify"
	Poll        = "poll"
)

// Channel is the NOTIFY channel mneme.enqueue_job signals.
const Channel = "mneme_jobs"

// Publication is the publication of inserts into mneme.jobs.
const Publication = "mneme_jobs"

// Options configure a transport.
type Options struct {
	DSN         string        // DATABASE_URL
	Pool        *pgxpool.Pool // for the replication transport's bookkeeping queries
	Slot        string        // replication slot name (default "mneme")
	StatusEvery time.Duration // replication: standby status update interval (default 1s)
	Reconnect   backoff.Policy
	Logger      *slog.Logger
	// OnEvent, if set, is called for every job an event announced (the
	// replication transport; NOTIFY payloads name no job), with
	// the job's commit time when the transport knows it (replication).
	OnEvent func(jobID int64, committed time.Time)
}

func (o Options) withDefaults() Options {
	if o.Slot == "" {
		o.Slot = "mneme"
	}
	if o.StatusEvery <= 0 {
		o.StatusEvery = time.Second
	}
	if o.Reconnect.Base <= 0 {
		o.Reconnect = backoff.Policy{Base: 200 * time.Millisecond, Max: 15 * time.Second}
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	return o
}

// New returns the transport named kind (not auto: Choose first).
func New(kind string, opts Options, w Waker) (Source, error) {
	opts = opts.withDefaults()
	switch kind {
	case Replication:
		return newReplication(opts, w), nil
	case Notify:
		return newNotifier(opts, w), nil
	case Poll:
		return pollOnly{}, nil
	}
	return nil, fmt.Errorf("unknown event transport %q: use auto, replication, notify or poll", kind)
}

// pollOnly relies on the runner's sweep alone.
type pollOnly struct{}

func (pollOnly) Run(ctx context.Context) error { <-ctx.Done(); return nil }

// Choose resolves auto: replication when wal_level is logical and the role
// may replicate, else notify. It returns the transport and why.
func Choose(ctx context.Context, pool *pgxpool.Pool, want string) (string, string, error) {
	if want != Auto {
		return want, "configured by MNEME_EVENTS", nil
	}
	var walLevel string
	var canReplicate bool
	var slots int
	err := pool.QueryRow(ctx, `
		SELECT current_setting('wal_level'),
		       (SELECT rolreplication OR rolsuper FROM pg_roles WHERE rolname = current_user),
		       current_setting('max_replication_slots')::int`).Scan(&walLevel, &canReplicate, &slots)
	if err != nil {
		return "", "", fmt.Errorf("choose event transport: %w", err)
	}
	switch {
	case walLevel != "logical":
		return Notify, fmt.Sprintf("wal_level is %s, not logical (set wal_level = logical and restart PostgreSQL to use replication)", walLevel), nil
	case !canReplicate:
		return Notify, "the role has neither REPLICATION nor SUPERUSER (ALTER ROLE ... REPLICATION to use replication)", nil
	case slots < 1:
		return Notify, "max_replication_slots is 0", nil
	}
	return Replication, "wal_level is logical and the role may replicate", nil
}
