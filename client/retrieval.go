package client

import (
	"context"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
)

// SearchOptions are the optional arguments of mneme.search and
// mneme.retrieve; zero values leave the SQL defaults.
type SearchOptions struct {
	K              int       // how many memories (default 5)
	QueryEmbedding []float32 // the query's vector (real[]); nil: SQL embeds it when the built-in embedder is configured
	Since, Until   time.Time
	At             time.Time
	Scope          string // conversation (default) or tenant
	AsOf           time.Time
	IncludeHistory bool
}

func (o SearchOptions) add(q call) call {
	return q.opt(o.K != 0, "k", "", o.K).
		opt(o.QueryEmbedding != nil, "query_embedding", "::real[]", o.QueryEmbedding).
		opt(!o.Since.IsZero(), "since", "", o.Since).
		opt(!o.Until.IsZero(), "until", "", o.Until).
		opt(!o.At.IsZero(), "at", "", o.At).
		opt(o.Scope != "", "scope", "", o.Scope).
		opt(!o.AsOf.IsZero(), "as_of", "", o.AsOf).
		opt(o.IncludeHistory, "include_history", "", true)
}

// Retrieval is a row of mneme.search and mneme.retrieve (type
// mneme.retrieval). Text that may be NULL is "".
type Retrieval struct {
	MemoryID        uuid.UUID
	Kind            string // episodic or semantic
	Summary         string
	Content         string
	CreatedAt       time.Time
	Score           float64
	RRF             float64
	BM25Rank        *int32 // nil: not a candidate of the BM25 leg
	VectorRank      *int32 // nil: not a candidate of the vector leg, or the leg was skipped
	Retrievability  float64
	Title           string
	Label           string
	Pinned          bool
	BM25Score       *float64
	VectorDistance  *float64
	Status          string
	ConfidenceScore float32
}

const retrievalCols = `memory_id, kind, coalesce(summary, ''), content, created_at, score, rrf, bm25_rank, vector_rank,
	retrievability, coalesce(title, ''), label, pinned, bm25_score, vector_distance, status, confidence_score`

func scanRetrieval(r pgx.CollectableRow) (Retrieval, error) {
	var m Retrieval
	return m, r.Scan(&m.MemoryID, &m.Kind, &m.Summary, &m.Content, &m.CreatedAt, &m.Score, &m.RRF, &m.BM25Rank, &m.VectorRank,
		&m.Retrievability, &m.Title, &m.Label, &m.Pinned, &m.BM25Score, &m.VectorDistance, &m.Status, &m.ConfidenceScore)
}

// Search is mneme.search: hybrid retrieval without side effects.
func (c *Client) Search(ctx context.Context, conv uuid.UUID, query string, o SearchOptions) ([]Retrieval, error) {
	return rows(ctx, c, o.add(newCall("search", conv, query)), retrievalCols, scanRetrieval)
}

// Retrieve is mneme.retrieve: Search that records a pending review.
func (c *Client) Retrieve(ctx context.Context, conv uuid.UUID, query string, o SearchOptions) ([]Retrieval, error) {
	return rows(ctx, c, o.add(newCall("retrieve", conv, query)), retrievalCols, scanRetrieval)
}

// ContextOptions are the optional arguments of mneme.context and
// mneme.context_items; zero values leave the SQL defaults.
type ContextOptions struct {
	Budget         int // most words, 1 to 100000 (default 1000)
	QueryEmbedding []float32
	Since, Until   time.Time
	At             time.Time
	Scope          string
	NoRecord       bool // context only: record no pending review (record => false, e.g. on a hot standby)
}

func (o ContextOptions) add(q call) call {
	return q.opt(o.Budget != 0, "budget", "", o.Budget).
		opt(o.QueryEmbedding != nil, "query_embedding", "::real[]", o.QueryEmbedding).
		opt(!o.Since.IsZero(), "since", "", o.Since).
		opt(!o.Until.IsZero(), "until", "", o.Until).
		opt(!o.At.IsZero(), "at", "", o.At).
		opt(o.Scope != "", "scope", "", o.Scope)
}

// Context is mneme.context: the memory for a prompt within a word budget,
// as markdown ("" when nothing matches); it records a pending review
// unless NoRecord.
func (c *Client) Context(ctx context.Context, conv uuid.UUID, query string, o ContextOptions) (string, error) {
	var s string
	err := c.scalar(ctx, o.add(newCall("context", conv, query)).opt(o.NoRecord, "record", "", false), &s)
	return s, err
}

// ContextItem is a row of mneme.context_items.
type ContextItem struct {
	Item       int32
	MemoryID   uuid.UUID
	Kind       string
	Label      string
	Score      float64
	FirstAt    *time.Time
	MessageIDs []int64
	Words      int32
	Text       string
}

// ContextItems is mneme.context_items: the items Context would render, one
// row each, without side effects.
func (c *Client) ContextItems(ctx context.Context, conv uuid.UUID, query string, o ContextOptions) ([]ContextItem, error) {
	return rows(ctx, c, o.add(newCall("context_items", conv, query)),
		`item, memory_id, kind, label, score, first_at, coalesce(message_ids, '{}'), words, text`,
		func(r pgx.CollectableRow) (ContextItem, error) {
			var i ContextItem
			return i, r.Scan(&i.Item, &i.MemoryID, &i.Kind, &i.Label, &i.Score, &i.FirstAt, &i.MessageIDs, &i.Words, &i.Text)
		})
}
