package locomo

// TEMPORARY STAND-IN, to be deleted when the sidecar's jobs runner
// (jobs.NewRunner, Register, Drain) is on main: a minimal in-process runner
// that claims ready jobs one at a time and runs the registered handler in
// the job's transaction, so the pipeline's real segment handler can run now.

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/mneme-memory/mneme/sidecar/jobs"
)

type miniRunner struct {
	pool     *pgxpool.Pool
	handlers map[string]jobs.Handler
}

func (r *miniRunner) Register(kind string, h jobs.Handler) { r.handlers[kind] = h }

func (r *miniRunner) Drain(ctx context.Context) error {
	for {
		did, err := r.one(ctx)
		if err != nil || !did {
			return err
		}
	}
}

func (r *miniRunner) one(ctx context.Context) (bool, error) {
	tx, err := r.pool.Begin(ctx)
	if err != nil {
		return false, err
	}
	defer tx.Rollback(ctx) //nolint:errcheck
	var j jobs.Job
	err = tx.QueryRow(ctx, `UPDATE mneme.jobs SET state = 'running', attempts = attempts + 1
		WHERE id = (SELECT id FROM mneme.jobs WHERE state = 'pending' AND run_at <= now() ORDER BY id LIMIT 1 FOR UPDATE SKIP LOCKED)
		RETURNING id, kind, conversation_id, payload, attempts, created_at`).
		Scan(&j.ID, &j.Kind, &j.ConversationID, &j.Payload, &j.Attempts, &j.CreatedAt)
	if errors.Is(err, pgx.ErrNoRows) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	h, ok := r.handlers[j.Kind]
	if !ok {
		return false, fmt.Errorf("job %d: no handler for kind %q", j.ID, j.Kind)
	}
	if err := h(ctx, tx, j); err != nil {
		return false, fmt.Errorf("job %d (%s): %w", j.ID, j.Kind, err)
	}
	if _, err := tx.Exec(ctx, `UPDATE mneme.jobs SET state = 'done', finished_at = now() WHERE id = $1`, j.ID); err != nil {
		return false, err
	}
	return true, tx.Commit(ctx)
}
