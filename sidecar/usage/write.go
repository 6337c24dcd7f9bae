package usage

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/jackc/pgx/v5"
)

// Write stores calls as the ledger rows of attempt of job jobID, in tx (the
// transaction that ends the attempt), inside a savepoint: a refused write
// is rolled back alone and returned, and tx goes on; the ledger never
// fails a job by itself.
func Write(ctx context.Context, tx pgx.Tx, jobID int64, attempt int, calls []Call) error {
	if len(calls) == 0 {
		return nil
	}
	body, err := json.Marshal(calls)
	if err != nil {
		return fmt.Errorf("ledger of job %d: marshal %d calls: %w", jobID, len(calls), err)
	}
	sp, err := tx.Begin(ctx)
	if err != nil {
		return fmt.Errorf("ledger of job %d: savepoint: %w", jobID, err)
	}
	if _, err := sp.Exec(ctx, `SELECT mneme.record_llm_calls($1, $2, $3)`, jobID, attempt, body); err != nil {
		_ = sp.Rollback(ctx)
		return fmt.Errorf("ledger of job %d: %w", jobID, err)
	}
	if err := sp.Commit(ctx); err != nil {
		return fmt.Errorf("ledger of job %d: release savepoint: %w", jobID, err)
	}
	return nil
}
