package jobs

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/mneme-memory/mneme/sidecar/tracing"
	"github.com/mneme-memory/mneme/sidecar/usage"
)

// The runner's whole contract with the database: the functions of
// sql/200-jobs.sql. Nothing else in this package writes SQL.

type claimed struct {
	Job
	maxAttempts int
	readyAt     time.Time
}

// claim claims up to limit jobs, none of the kinds in except (kinds newer
// than this sidecar, Runner.Leave).
func claim(ctx context.Context, q Querier, worker string, limit int, lease time.Duration, maxAttempts int, except []string) ([]claimed, error) {
	const cols = `SELECT id, kind, conversation_id, tenant_id, payload, attempts, max_attempts, created_at,
		       greatest(created_at, run_at)`
	var rows pgx.Rows
	var err error
	if len(except) == 0 {
		rows, err = q.Query(ctx, cols+` FROM mneme.claim_jobs($1, $2, $3, $4)`, worker, limit, lease, nullInt(maxAttempts))
	} else {
		rows, err = q.Query(ctx, cols+` FROM mneme.claim_jobs($1, $2, $3, $4, $5)`, worker, limit, lease, nullInt(maxAttempts), except)
	}
	if err != nil {
		return nil, fmt.Errorf("claim jobs: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (claimed, error) {
		var c claimed
		err := row.Scan(&c.ID, &c.Kind, &c.ConversationID, &c.Tenant, &c.Payload, &c.Attempts, &c.maxAttempts, &c.CreatedAt, &c.readyAt)
		return c, err
	})
	if err != nil {
		return nil, fmt.Errorf("claim jobs: %w", err)
	}
	return out, nil
}

// inSchema reports whether mneme.job_kinds declares kind (a kind the
// schema knows and this sidecar may not).
func inSchema(ctx context.Context, q Querier, kind string) (bool, error) {
	var ok bool
	if err := q.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM mneme.job_kinds WHERE kind = $1)`, kind).Scan(&ok); err != nil {
		return false, fmt.Errorf("read mneme.job_kinds: %w", err)
	}
	return ok, nil
}

func complete(ctx context.Context, tx pgx.Tx, id int64, worker string, attempt int) (bool, error) {
	var ok bool
	if err := tx.QueryRow(ctx, `SELECT mneme.complete_job($1, $2, $3)`, id, worker, attempt).Scan(&ok); err != nil {
		return false, fmt.Errorf("complete job %d: %w", id, err)
	}
	return ok, nil
}

// fail returns the new state ("" if the lease was lost).
func fail(ctx context.Context, q Querier, id int64, worker string, attempt int, msg string, retryIn time.Duration,
	permanent bool, maxAttempts int) (string, error) {
	var state pgtype.Text
	err := q.QueryRow(ctx, `SELECT mneme.fail_job($1, $2, $3, $4, $5, $6, $7)`,
		id, worker, attempt, msg, retryIn, permanent, nullInt(maxAttempts)).Scan(&state)
	if err != nil {
		return "", fmt.Errorf("record failure of job %d: %w", id, err)
	}
	return state.String, nil
}

// failRecorded is fail, in one transaction with the attempt's ledger rows
// (usage.Write); a refused ledger write is logged and the failure recorded
// all the same.
func failRecorded(ctx context.Context, db beginner, led *usage.Ledger, log *slog.Logger, id int64, worker string, attempt int,
	msg string, retryIn time.Duration, permanent bool, maxAttempts int) (_ string, err error) {
	ctx, span := tracing.Tracer().Start(ctx, "db fail", trace.WithAttributes(attribute.Int64("mneme.job.id", id)))
	defer func() { tracing.End(span, err) }()
	calls := led.Pending()
	if len(calls) == 0 {
		return fail(ctx, db, id, worker, attempt, msg, retryIn, permanent, maxAttempts)
	}
	tx, err := db.Begin(ctx)
	if err != nil {
		return "", fmt.Errorf("record failure of job %d: begin: %w", id, err)
	}
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()
	if werr := usage.Write(ctx, tx, id, attempt, calls); werr != nil {
		log.Warn("the LLM usage of a failed attempt was not recorded", "job", id, "err", werr)
		calls = nil
	}
	state, err := fail(ctx, tx, id, worker, attempt, msg, retryIn, permanent, maxAttempts)
	if err != nil {
		return "", err
	}
	if err := tx.Commit(ctx); err != nil {
		return "", fmt.Errorf("record failure of job %d: commit: %w", id, err)
	}
	led.Written(len(calls))
	return state, nil
}

func release(ctx context.Context, q Querier, id int64, worker string, attempt int) error {
	if _, err := q.Exec(ctx, `SELECT mneme.release_job($1, $2, $3)`, id, worker, attempt); err != nil {
		return fmt.Errorf("release job %d: %w", id, err)
	}
	return nil
}

func extendLease(ctx context.Context, q Querier, id int64, worker string, attempt int, lease time.Duration) (bool, error) {
	var ok pgtype.Bool
	err := q.QueryRow(ctx, `SELECT mneme.extend_job_lease($1, $2, $3, $4)`, id, worker, attempt, lease).Scan(&ok)
	if err != nil {
		return false, fmt.Errorf("extend lease of job %d: %w", id, err)
	}
	return ok.Valid && ok.Bool, nil
}

// nullInt is NULL for 0 (no override).
func nullInt(n int) pgtype.Int4 { return pgtype.Int4{Int32: int32(n), Valid: n > 0} }
