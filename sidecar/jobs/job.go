// Package jobs runs the durable work queue in mneme.jobs: it claims pending
// jobs with FOR UPDATE SKIP LOCKED under a lease, dispatches them to the
// handler registered for their kind, and retries failures with backoff.
package jobs

import (
	"context"
	"encoding/json"
	"errors"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
)

// Job is one row of mneme.jobs as a handler sees it.
type Job struct {
	ID             int64
	Kind           string
	ConversationID uuid.NullUUID
	Payload        json.RawMessage
	Attempts       int // attempts so far, including this one
	CreatedAt      time.Time
}

// Handler does one job inside tx. The runner marks the job done in the same
// transaction and commits, so a handler that writes only to PostgreSQL has
// its effect exactly once. Slow work that holds no locks (an LLM call) may
// run before the handler's first write. A returned error rolls tx back and
// the job is retried with backoff, unless it wraps ErrPermanent.
type Handler func(ctx context.Context, tx pgx.Tx, job Job) error

// ErrPermanent marks an error that retrying cannot fix: the job fails at once.
var ErrPermanent = errors.New("permanent job failure")
