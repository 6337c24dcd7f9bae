package recall

import (
	"bytes"
	"cmp"
	"context"
	"fmt"
	"slices"
	"sort"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
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
	ID    uuid.UUID
	Text  string // what counts toward the budget: its content (for an episode, the transcript of its span)
	Doc   Doc
	Turns int
}

// loadMemories reads the conversation's active memories and places the
// turns of each memory's source span in its text.
func loadMemories(ctx context.Context, pool *pgxpool.Pool, in *Ingested) (map[uuid.UUID]*Memory, error) {
	rows, err := pool.Query(ctx, `
		SELECT id, content, coalesce(source_message_ids, '{}')
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
			turn, ok := in.TurnByMsg[mid]
			if !ok {
				return nil, fmt.Errorf("memory %s: source message %d is not a turn of this conversation", id, mid)
			}
			ids = append(ids, turn)
			texts = append(texts, in.Text[turn])
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
	{MethodContext, "mneme context", "mneme.context_items: the best-matching turns (and neighbours) of the memories mneme.search ranks first, facts whole, filled to the budget"},
	{MethodMneme, "mneme", "mneme.search as shipped: BM25 and vector legs fused by RRF, times retrievability and label weight"},
	{MethodMnemeNoR, "mneme without R", "the same candidates and fusion without the retrievability factor"},
	{MethodMnemeBM25, "mneme BM25 leg", "mneme's memories ranked by its BM25 leg alone"},
	{MethodMnemeVector, "mneme vector leg", "mneme's memories ranked by its vector leg alone"},
	{MethodBM25Turns, "BM25 raw turns", "BM25 over the raw turns, each turn a document"},
	{MethodBM25Windows, "BM25 5-turn windows", "BM25 over windows of 5 consecutive turns of a session"},
	{MethodPGHybrid, "PostgreSQL hybrid search", pgHybridAbout},
}

// searchRow is one row of mneme.search.
type searchRow struct {
	id             uuid.UUID
	score, rrf     float64
	retrievability float64
}

// searchK is the most mneme.search returns (its k is 1..100). The budgets
// need far fewer: 2,000 words are 10 to 20 memories.
const searchK = 100

// mnemeSource ranks a conversation's memories for one question: mneme.search
// as shipped (and, from its columns, the ranking without retrievability),
// and each retrieval leg alone through its own function (mneme.bm25_search,
// mneme.vector_search), with the candidates mneme.search fuses.
type mnemeSource struct {
	pool     *pgxpool.Pool
	conv     uuid.UUID
	at       time.Time // the as-of time of retrievability: Ingested.Last
	memories map[uuid.UUID]*Memory
	embed    QueryEmbedder
}

func (s *mnemeSource) methods() []string {
	return []string{MethodMneme, MethodMnemeNoR, MethodMnemeBM25, MethodMnemeVector}
}

func (s *mnemeSource) rank(ctx context.Context, q string) ([][]Doc, []time.Duration, error) {
	qemb, embTook, err := embedQuestion(ctx, s.embed, q)
	if err != nil {
		return nil, nil, err
	}
	found, searchTook, err := s.search(ctx, q, qemb)
	if err != nil {
		return nil, nil, err
	}
	searchTook += embTook
	bm25, bm25Took, err := s.leg(ctx, `SELECT memory_id, score FROM mneme.bm25_search($1, $2, mneme.setting('retrieve_candidates')::int)`, s.conv, q)
	if err != nil {
		return nil, nil, fmt.Errorf("mneme.bm25_search: %w", err)
	}
	vec, vecTook, err := s.leg(ctx, `SELECT memory_id, -distance FROM mneme.vector_search($1,
			coalesce($2::real[], CASE WHEN mneme.setting('embedder') #>> '{}' = 'hash' THEN mneme.hash_embed($3) END),
			mneme.setting('retrieve_candidates')::int)`, s.conv, qemb, q)
	if err != nil {
		return nil, nil, fmt.Errorf("mneme.vector_search: %w", err)
	}
	vecTook += embTook

	full := make([]Scored, len(found))
	noR := make([]Scored, len(found))
	for i, r := range found {
		full[i] = Scored{ID: r.id, Score: r.score}
		// Without retrievability: score / R^w = rrf * label weight.
		noR[i] = Scored{ID: r.id, Score: r.rrf}
		if r.retrievability > 0 {
			noR[i].Score = r.score / r.retrievability
		}
	}
	var out [][]Doc
	for _, hits := range [][]Scored{full, noR, bm25, vec} {
		docs, err := s.docs(RankLikeSQL(hits))
		if err != nil {
			return nil, nil, err
		}
		out = append(out, docs)
	}
	return out, []time.Duration{searchTook, searchTook, bm25Took, vecTook}, nil
}

// Scored is one memory with the score a ranking orders by (higher first).
type Scored struct {
	ID    uuid.UUID
	Score float64
}

// RankLikeSQL orders hits as mneme's SQL orders its rankings (mneme.search
// by score DESC, id; mneme.bm25_search by score DESC, memory_id;
// mneme.vector_search by distance, memory_id): the higher score first,
// equal scores by memory id in PostgreSQL's uuid order (its 16 bytes
// compared as unsigned bytes). The evaluation then ranks ties as what
// ships does, not by some order of its own.
func RankLikeSQL(hits []Scored) []uuid.UUID {
	sorted := slices.Clone(hits)
	slices.SortFunc(sorted, func(a, b Scored) int {
		if c := cmp.Compare(b.Score, a.Score); c != 0 {
			return c
		}
		return bytes.Compare(a.ID[:], b.ID[:])
	})
	ids := make([]uuid.UUID, len(sorted))
	for i, h := range sorted {
		ids[i] = h.ID
	}
	return ids
}

// embedQuestion embeds the question with the external embedder: a
// []float32, or nil (SQL NULL) without one (SQL embeds it with the hash
// embedder).
func embedQuestion(ctx context.Context, e QueryEmbedder, q string) (any, time.Duration, error) {
	if e == nil {
		return nil, 0, nil
	}
	start := time.Now()
	v, err := e.Embed(ctx, []string{q})
	if err != nil {
		return nil, 0, fmt.Errorf("embed question: %w", err)
	}
	return v[0], time.Since(start), nil
}

// search is one mneme.search call: its rows and how long it took.
func (s *mnemeSource) search(ctx context.Context, q string, qemb any) ([]searchRow, time.Duration, error) {
	start := time.Now()
	rows, err := s.pool.Query(ctx, `
		SELECT memory_id, score, rrf,
		       power(retrievability, (mneme.setting('retrievability_weight') #>> '{}')::float8)  -- the factor in score
		FROM mneme.search($1, $2, $3, $4, at => $5)`, s.conv, q, searchK, qemb, s.at)
	if err != nil {
		return nil, 0, fmt.Errorf("mneme.search: %w", err)
	}
	res, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (searchRow, error) {
		var x searchRow
		return x, r.Scan(&x.id, &x.score, &x.rrf, &x.retrievability)
	})
	if err != nil {
		return nil, 0, fmt.Errorf("mneme.search: %w", err)
	}
	return res, time.Since(start), nil
}

// leg runs one retrieval leg's query (rows of memory id and score, higher
// better) and how long it took.
func (s *mnemeSource) leg(ctx context.Context, sql string, args ...any) ([]Scored, time.Duration, error) {
	start := time.Now()
	rows, err := s.pool.Query(ctx, sql, args...)
	if err != nil {
		return nil, 0, err
	}
	hits, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (Scored, error) {
		var x Scored
		return x, r.Scan(&x.ID, &x.Score)
	})
	return hits, time.Since(start), err
}

// docs are the memories' docs, in the order given.
func (s *mnemeSource) docs(ids []uuid.UUID) ([]Doc, error) {
	docs := make([]Doc, len(ids))
	for i, id := range ids {
		m, ok := s.memories[id]
		if !ok {
			return nil, fmt.Errorf("retrieval returned memory %s that is not an active memory of the conversation", id)
		}
		docs[i] = m.Doc
	}
	return docs, nil
}
