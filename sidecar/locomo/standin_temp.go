package locomo

// TEMPORARY STAND-IN, to be deleted when the pipeline's segment handler and
// the sidecar's jobs runner (Register/Drain) are on main. It lets the rest
// of the evaluation be built and tested meanwhile: every segment job cuts
// the queued messages through its boundary into one episodic memory.

import (
	"context"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// StandInJobs is the temporary segmentation stand-in.
type StandInJobs struct{ Pool *pgxpool.Pool }

// Drain runs pending segment jobs until none is left.
func (s StandInJobs) Drain(ctx context.Context) error {
	for {
		did, err := s.one(ctx)
		if err != nil || !did {
			return err
		}
	}
}

func (s StandInJobs) one(ctx context.Context) (bool, error) {
	tx, err := s.Pool.Begin(ctx)
	if err != nil {
		return false, err
	}
	defer tx.Rollback(ctx) //nolint:errcheck
	var id int64
	var conv string
	var through int64
	err = tx.QueryRow(ctx, `SELECT id, conversation_id::text, (payload->>'through_message_id')::bigint FROM mneme.jobs
		WHERE kind = 'segment' AND state = 'pending' ORDER BY id LIMIT 1 FOR UPDATE SKIP LOCKED`).Scan(&id, &conv, &through)
	if err == pgx.ErrNoRows {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	rows, err := tx.Query(ctx, `SELECT id, role, content FROM mneme.messages
		WHERE conversation_id = $1 AND consumed_at IS NULL AND id <= $2 ORDER BY id`, conv, through)
	if err != nil {
		return false, err
	}
	var ids []int64
	var lines []string
	for rows.Next() {
		var mid int64
		var role, content string
		if err := rows.Scan(&mid, &role, &content); err != nil {
			rows.Close()
			return false, err
		}
		ids = append(ids, mid)
		lines = append(lines, role+": "+content)
	}
	rows.Close()
	if len(ids) > 0 {
		if _, err := tx.Exec(ctx, `
			WITH m AS (
				INSERT INTO mneme.memories (conversation_id, kind, content, summary, source_message_ids, source_type)
				VALUES ($1, 'episodic', $2, $3, $4, 'conversation') RETURNING id)
			UPDATE mneme.messages SET consumed_at = now(), memory_id = (SELECT id FROM m)
			WHERE id = ANY($4)`, conv, strings.Join(lines, "\n"), lines[0], ids); err != nil {
			return false, fmt.Errorf("stand-in segment: %w", err)
		}
	}
	if _, err := tx.Exec(ctx, `UPDATE mneme.jobs SET state = 'done', finished_at = now() WHERE id = $1`, id); err != nil {
		return false, err
	}
	return true, tx.Commit(ctx)
}
