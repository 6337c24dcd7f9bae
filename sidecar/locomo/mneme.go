package locomo

import (
	"context"
	"fmt"
	"sort"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"
)

// QueryEmbedder embeds questions when mneme uses an external embedder (the
// sidecar's embed package). Nil: SQL embeds the query itself (built-in
// hash embedder).
type QueryEmbedder interface {
	Embed(ctx context.Context, texts []string) ([][]float32, error)
}

// Memory is one memory of an evaluated conversation as the budget sees it.
type Memory struct {
	ID       uuid.UUID
	Text     string // what counts toward the budget: mneme.memory_text(title, summary, content)
	Doc      Doc
	FirstMsg int64 // the first source message: a stable tie-break
	Turns    int
}

// loadMemories reads the conversation's active memories and places the
// turns of each memory's source span in its text. A memory's text is what
// mneme indexes and embeds, mneme.memory_text(title, summary, content):
// the same words count toward the budget, as they are what a prompt built
// from the memory would hold.
func loadMemories(ctx context.Context, pool *pgxpool.Pool, in *Ingested) (map[uuid.UUID]*Memory, error) {
	rows, err := pool.Query(ctx, `
		SELECT id, mneme.memory_text(title, summary, content), coalesce(source_message_ids, '{}')
		FROM mneme.memories
		WHERE conversation_id = $1 AND status = 'active'`, in.ConvID)
	if err != nil {
		return nil, fmt.Errorf("load memories: %w", err)
	}
	defer rows.Close()
	out := map[uuid.UUID]*Memory{}
	for rows.Next() {
		var (
			id   uuid.UUID
			text string
			msgs []int64
		)
		if err := rows.Scan(&id, &text, &msgs); err != nil {
			return nil, fmt.Errorf("load memories: %w", err)
		}
		sort.Slice(msgs, func(a, b int) bool { return msgs[a] < msgs[b] })
		m := &Memory{ID: id, Text: text, Turns: len(msgs)}
		var ids, texts []string
		for _, mid := range msgs {
			dia, ok := in.DiaByMsg[mid]
			if !ok {
				return nil, fmt.Errorf("memory %s: source message %d is not a turn of this conversation", id, mid)
			}
			ids = append(ids, dia)
			texts = append(texts, in.Text[dia])
		}
		if len(msgs) > 0 {
			m.FirstMsg = msgs[0]
		}
		m.Doc = PlaceTurns(m.Text, ids, texts)
		out[id] = m
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("load memories: %w", err)
	}
	return out, nil
}

// Method names of the mneme rankings, all from one mneme.search call.
const (
	MethodMneme       = "mneme"
	MethodMnemeNoR    = "mneme_no_r"
	MethodMnemeBM25   = "mneme_bm25"
	MethodMnemeVector = "mneme_vector"
	MethodBM25Turns   = "bm25_turns"
	MethodBM25Windows = "bm25_window5"
)

// MethodInfo describes one ranked method of the report.
type MethodInfo struct {
	Name  string `json:"name"`
	Label string `json:"label"`
	About string `json:"about"`
}

// Methods are the methods of a run, in report order.
var Methods = []MethodInfo{
	{MethodMneme, "mneme", "mneme.search as shipped: BM25 and vector legs fused by RRF, times retrievability and label weight"},
	{MethodMnemeNoR, "mneme without R", "the same candidates and fusion without the retrievability factor"},
	{MethodMnemeBM25, "mneme BM25 leg", "mneme's memories ranked by its BM25 leg alone"},
	{MethodMnemeVector, "mneme vector leg", "mneme's memories ranked by its vector leg alone"},
	{MethodBM25Turns, "BM25 raw turns", "BM25 over the raw turns, each turn a document"},
	{MethodBM25Windows, "BM25 5-turn windows", "BM25 over windows of 5 consecutive turns of a session"},
}

// searchRow is one row of mneme.search.
type searchRow struct {
	id             uuid.UUID
	score, rrf     float64
	bm25, vector   *int
	retrievability float64
}

// mnemeSource ranks a conversation's memories with one mneme.search call
// per question and derives the ablations from the columns it returns.
type mnemeSource struct {
	pool     *pgxpool.Pool
	conv     uuid.UUID
	k        int
	memories map[uuid.UUID]*Memory
	embed    QueryEmbedder
}

func (s *mnemeSource) methods() []string {
	return []string{MethodMneme, MethodMnemeNoR, MethodMnemeBM25, MethodMnemeVector}
}

func (s *mnemeSource) rank(ctx context.Context, q string) ([][]Doc, time.Duration, error) {
	var qemb any
	start := time.Now()
	if s.embed != nil {
		v, err := s.embed.Embed(ctx, []string{q})
		if err != nil {
			return nil, 0, fmt.Errorf("embed question: %w", err)
		}
		qemb = v[0]
	}
	// k covers every candidate of both legs, so each ablation below sees
	// its whole candidate list.
	rows, err := s.pool.Query(ctx, `
		SELECT memory_id, score, rrf, bm25_rank, vector_rank, retrievability
		FROM mneme.search($1, $2, $3, $4)`, s.conv, q, s.k, qemb)
	if err != nil {
		return nil, 0, fmt.Errorf("mneme.search: %w", err)
	}
	var res []searchRow
	for rows.Next() {
		var r searchRow
		if err := rows.Scan(&r.id, &r.score, &r.rrf, &r.bm25, &r.vector, &r.retrievability); err != nil {
			rows.Close()
			return nil, 0, fmt.Errorf("mneme.search: %w", err)
		}
		res = append(res, r)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, 0, fmt.Errorf("mneme.search: %w", err)
	}
	took := time.Since(start)
	for _, r := range res {
		if _, ok := s.memories[r.id]; !ok {
			return nil, 0, fmt.Errorf("mneme.search returned memory %s that is not an active memory of the conversation", r.id)
		}
	}

	first := func(r searchRow) int64 { return s.memories[r.id].FirstMsg }
	// Exact score ties are broken by conversation order, not by the random
	// memory uuid, so that every run ranks alike.
	order := func(rows []searchRow, key func(searchRow) float64) []Doc {
		rs := append([]searchRow(nil), rows...)
		sort.SliceStable(rs, func(a, b int) bool {
			ka, kb := key(rs[a]), key(rs[b])
			if ka != kb {
				return ka > kb
			}
			return first(rs[a]) < first(rs[b])
		})
		docs := make([]Doc, len(rs))
		for i, r := range rs {
			docs[i] = s.memories[r.id].Doc
		}
		return docs
	}
	leg := func(get func(searchRow) *int) []Doc {
		var in []searchRow
		for _, r := range res {
			if get(r) != nil {
				in = append(in, r)
			}
		}
		return order(in, func(r searchRow) float64 { return -float64(*get(r)) })
	}
	noR := func(r searchRow) float64 {
		if r.retrievability > 0 {
			return r.score / r.retrievability
		}
		return r.rrf
	}
	return [][]Doc{
		order(res, func(r searchRow) float64 { return r.score }),
		order(res, noR),
		leg(func(r searchRow) *int { return r.bm25 }),
		leg(func(r searchRow) *int { return r.vector }),
	}, took, nil
}
