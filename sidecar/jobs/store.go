package jobs

import (
	"context"
	"errors"
	"fmt"
	"log/slog"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/mneme-memory/mneme/sidecar/tracing"
	"github.com/mneme-memory/mneme/sidecar/usage"
)

// Querier runs statements outside any transaction the handler controls:
// each is its own short implicit transaction.
type Querier interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// Store is what a handler works with: reads with no transaction open, and
// one Commit for its writes.
type Store interface {
	Querier
	// Commit runs fn in one transaction that also completes the job, and
	// commits. It may be called once per job, and again only after a call
	// whose fn returned an error (that transaction was rolled back: a
	// handler may read again and decide again).
	Commit(ctx context.Context, fn func(tx pgx.Tx) error) error
}

// beginner opens a transaction: a pool, or a transaction (a savepoint).
type beginner interface {
	Querier
	Begin(ctx context.Context) (pgx.Tx, error)
}

// errLeaseLost is returned by Commit when the job's lease was lost before
// the commit: the effect was rolled back and the job's new holder decides.
var errLeaseLost = errors.New("job lease lost before commit")

// errCommitted guards against a second Commit of one job after one that
// went past its fn.
var errCommitted = errors.New("job already committed")

// runStore is the runner's Store for one claimed job.
type runStore struct {
	db      beginner
	id      int64
	worker  string
	attempt int
	done    bool // Commit succeeded
	tried   bool // Commit was called
	final   bool // a Commit went past its fn (completing the job, or failing to)
	ledger  *usage.Ledger
	log     *slog.Logger
}

func (s *runStore) Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
	return s.db.Exec(ctx, sql, args...)
}

func (s *runStore) Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error) {
	return s.db.Query(ctx, sql, args...)
}

func (s *runStore) QueryRow(ctx context.Context, sql string, args ...any) pgx.Row {
	return s.db.QueryRow(ctx, sql, args...)
}

func (s *runStore) Commit(ctx context.Context, fn func(tx pgx.Tx) error) (err error) {
	if s.final {
		return fmt.Errorf("commit job %d: %w", s.id, errCommitted)
	}
	s.tried = true
	ctx, span := tracing.Tracer().Start(ctx, "db commit", trace.WithAttributes(attribute.Int64("mneme.job.id", s.id)))
	defer func() { tracing.End(span, err) }()
	tx, err := s.db.Begin(ctx)
	if err != nil {
		return fmt.Errorf("begin: %w", err)
	}
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()
	if err := fn(tx); err != nil {
		return err
	}
	s.final = true
	// The model calls of this attempt, in the commit of its effect: a
	// rolled-back commit leaves none, a retry adds its own.
	calls := s.ledger.Pending()
	if err := usage.Write(ctx, tx, s.id, s.attempt, calls); err != nil {
		s.log.Warn("the LLM usage of a job was not recorded", "job", s.id, "err", err)
		calls = nil
	}
	ok, err := complete(ctx, tx, s.id, s.worker, s.attempt)
	if err != nil {
		return err
	}
	if !ok {
		return errLeaseLost
	}
	if err := tx.Commit(ctx); err != nil {
		return fmt.Errorf("commit: %w", err)
	}
	s.done = true
	s.ledger.Written(len(calls))
	return nil
}

// Inline is a Store for running a handler outside the runner (evaluations,
// tests): reads go to db, and Commit runs fn in db.Begin (a transaction, or
// a savepoint when db is itself a transaction) without completing any job
// row.
func Inline(db interface {
	Querier
	Begin(ctx context.Context) (pgx.Tx, error)
}) Store {
	return inlineStore{db}
}

type inlineStore struct{ beginner }

func (s inlineStore) Commit(ctx context.Context, fn func(tx pgx.Tx) error) error {
	return pgx.BeginFunc(ctx, s.beginner, fn)
}
