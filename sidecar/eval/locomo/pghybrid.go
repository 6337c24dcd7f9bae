package locomo

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// MethodPGHybrid is the hybrid search people write in PostgreSQL today,
// over the raw turns: full-text search ranked by ts_rank_cd over a
// generated tsvector with a GIN index (websearch_to_tsquery), and, where
// pgvector is installed, cosine distance, fused by reciprocal rank (k 50),
// as in the widely copied hybrid_search function of the Supabase docs.
const MethodPGHybrid = "pg_hybrid"

// pgHybridSchema holds the baseline's table in the evaluated database.
const pgHybridSchema = `
CREATE SCHEMA IF NOT EXISTS eval_baseline;
CREATE TABLE IF NOT EXISTS eval_baseline.turns (
    id      bigserial PRIMARY KEY,
    conv    text NOT NULL,
    dia_id  text NOT NULL,
    speaker text NOT NULL,
    content text NOT NULL,
    fts     tsvector GENERATED ALWAYS AS (to_tsvector('english', content)) STORED
);
CREATE INDEX IF NOT EXISTS turns_fts_idx ON eval_baseline.turns USING gin (fts);`

// pgHybridQuery is the full-text leg of hybrid_search, candidates
// match_count * 2, fused by rrf_k 50 (its semantic leg needs pgvector).
const pgHybridQuery = `
WITH full_text AS (
    SELECT id, row_number() OVER (ORDER BY ts_rank_cd(fts, websearch_to_tsquery('english', $2)) DESC) AS rank_ix
    FROM eval_baseline.turns
    WHERE conv = $1 AND fts @@ websearch_to_tsquery('english', $2)
    ORDER BY rank_ix
    LIMIT $3 * 2
)
SELECT t.dia_id, t.speaker, t.content
FROM full_text JOIN eval_baseline.turns t ON t.id = full_text.id
ORDER BY coalesce(1.0 / (50 + full_text.rank_ix), 0.0) DESC, t.id
LIMIT $3`

type pgHybridSource struct {
	pool *pgxpool.Pool
	conv string
}

func newPGHybridSource(ctx context.Context, pool *pgxpool.Pool, c *Conversation) (*pgHybridSource, error) {
	if _, err := pool.Exec(ctx, pgHybridSchema); err != nil {
		return nil, fmt.Errorf("%s table: %w", MethodPGHybrid, err)
	}
	batch := &pgx.Batch{}
	for _, s := range c.Sessions {
		for _, t := range s.Turns {
			batch.Queue(`INSERT INTO eval_baseline.turns (conv, dia_id, speaker, content) VALUES ($1, $2, $3, $4)`,
				c.ID, t.DiaID, t.Speaker, t.Text)
		}
	}
	if err := pool.SendBatch(ctx, batch).Close(); err != nil {
		return nil, fmt.Errorf("%s turns of %s: %w", MethodPGHybrid, c.ID, err)
	}
	return &pgHybridSource{pool: pool, conv: c.ID}, nil
}

func (p *pgHybridSource) methods() []string { return []string{MethodPGHybrid} }

// rank returns the top 100 turns (match_count 100: more than any budget holds).
func (p *pgHybridSource) rank(ctx context.Context, q string) ([][]Doc, []time.Duration, error) {
	start := time.Now()
	rows, err := p.pool.Query(ctx, pgHybridQuery, p.conv, q, 100)
	if err != nil {
		return nil, nil, fmt.Errorf("%s: %w", MethodPGHybrid, err)
	}
	docs, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (Doc, error) {
		var dia, speaker, text string
		if err := r.Scan(&dia, &speaker, &text); err != nil {
			return Doc{}, err
		}
		return PlaceTurns(TurnLine(speaker, text), []string{dia}, []string{text}), nil
	})
	if err != nil {
		return nil, nil, fmt.Errorf("%s: %w", MethodPGHybrid, err)
	}
	return [][]Doc{docs}, []time.Duration{time.Since(start)}, nil
}
