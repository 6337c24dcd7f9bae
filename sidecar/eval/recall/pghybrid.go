package recall

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/mneme-memory/mneme/sidecar/pghybrid"
)

// MethodPGHybrid is the hybrid search people write in PostgreSQL today
// (package pghybrid: full-text ts_rank_cd and cosine, fused by RRF k 50)
// over the raw turns, with the evaluation's embedder.
const MethodPGHybrid = "pg_hybrid"

// pgHybridAbout describes the baseline in reports.
const pgHybridAbout = "the hybrid_search people copy (Supabase docs) over raw turns: ts_rank_cd over " +
	"websearch_to_tsquery with a GIN index, and cosine distance (pgvector where installed, else real[]) with the " +
	"evaluation's embedder, each leg's top 200, RRF k 50"

// pgHybridSource serves the baseline in Run: one conversation's turns.
type pgHybridSource struct {
	h    *pghybrid.Baseline
	conv string
}

func newPGHybridSource(ctx context.Context, pool *pgxpool.Pool, c *Conversation, embed QueryEmbedder) (*pgHybridSource, error) {
	var emb pghybrid.Embedder
	if embed != nil {
		emb = embed
	}
	h, err := pghybrid.New(ctx, pool, emb)
	if err != nil {
		return nil, err
	}
	var turns []pghybrid.Turn
	for _, s := range c.Sessions {
		for _, t := range s.Turns {
			turns = append(turns, pghybrid.Turn{DiaID: t.ID, Speaker: t.Speaker, Content: t.Text})
		}
	}
	if err := h.Add(ctx, c.ID, turns); err != nil {
		return nil, err
	}
	return &pgHybridSource{h: h, conv: c.ID}, nil
}

func (p *pgHybridSource) methods() []string { return []string{MethodPGHybrid} }

// rank returns the top 100 turns (match_count 100: more than any budget
// holds). The time includes embedding the question.
func (p *pgHybridSource) rank(ctx context.Context, q string) ([][]Doc, []time.Duration, error) {
	start := time.Now()
	hits, err := p.h.Search(ctx, p.conv, q, 100)
	if err != nil {
		return nil, nil, err
	}
	took := time.Since(start)
	docs := make([]Doc, len(hits))
	for i, t := range hits {
		docs[i] = PlaceTurns(TurnLine(t.Speaker, t.Content), []string{t.DiaID}, []string{t.Content})
	}
	return [][]Doc{docs}, []time.Duration{took}, nil
}
