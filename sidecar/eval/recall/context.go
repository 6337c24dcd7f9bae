package recall

import (
	"context"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"
)

// MethodContext is mneme.context_items: the context mneme itself builds
// for a budget (the best turns of the best episodes, facts whole).
const MethodContext = "mneme_context"

// contextSource calls mneme.context_items once per budget (what goes in
// depends on the room left, so a ranking cut at the budget cannot express
// it), as of the conversation's last
// turn, with the question embedded like mnemeSource's when the embedder is
// external.
type contextSource struct {
	pool  *pgxpool.Pool
	conv  uuid.UUID
	at    time.Time
	in    *Ingested
	embed QueryEmbedder
}

func (s *contextSource) context(ctx context.Context, q string, budget int) ([]string, int, time.Duration, error) {
	start := time.Now()
	qarg, _, err := embedQuestion(ctx, s.embed, q)
	if err != nil {
		return nil, 0, 0, err
	}
	rows, err := s.pool.Query(ctx, `
		SELECT coalesce(message_ids, '{}'), words
		FROM mneme.context_items($1, $2, $3, $4, at => $5)`, s.conv, q, budget, qarg, s.at)
	if err != nil {
		return nil, 0, 0, fmt.Errorf("mneme.context_items: %w", err)
	}
	defer rows.Close()
	var inside []string
	words := 0
	for rows.Next() {
		var ids []int64
		var w int
		if err := rows.Scan(&ids, &w); err != nil {
			return nil, 0, 0, fmt.Errorf("mneme.context_items: %w", err)
		}
		words += w
		for _, id := range ids {
			turn, ok := s.in.TurnByMsg[id]
			if !ok {
				return nil, 0, 0, fmt.Errorf("mneme.context_items: message %d is not a turn of this conversation", id)
			}
			inside = append(inside, turn)
		}
	}
	if err := rows.Err(); err != nil {
		return nil, 0, 0, fmt.Errorf("mneme.context_items: %w", err)
	}
	took := time.Since(start)
	if words > budget {
		return nil, 0, 0, fmt.Errorf("mneme.context_items: %d words over a budget of %d", words, budget)
	}
	return inside, words, took, nil
}
