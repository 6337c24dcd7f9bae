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
)

// Job is one row of mneme.jobs as a handler sees it.
type Job struct {
	ID             int64
	Kind           string
	ConversationID uuid.NullUUID
	Tenant         string
	Payload        json.RawMessage
	Attempts       int // attempts so far, including this one
	CreatedAt      time.Time
}

// Handler does one job. It reads what it needs through db with no
// transaction open, decides (an LLM or embedder call may take seconds), then
// writes its effect through db.Commit: one short transaction that re-checks
// what was read and also marks the job done, so a handler that writes only to
// PostgreSQL has its effect exactly once and holds no locks while it waits on
// a model. A handler that returns nil without calling Commit has its job
// completed by the runner. A returned error is retried with backoff, unless
// it wraps ErrPermanent.
type Handler func(ctx context.Context, db Store, job Job) error

// ErrPermanent marks an error that retrying cannot fix: the job fails at once.
var ErrPermanent = errors.New("permanent job failure")
