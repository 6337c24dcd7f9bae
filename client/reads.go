package client

import (
	"context"
	"encoding/json"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
)

// The reads for people (docs/sql-api.md, "Reads for people") and the few
// calls mneme ui makes besides the agent's: what a page of the UI shows,
// each one mneme.* call, so that the sidecar's UI, its MCP server and
// docs/clients/loop.go share one client.

// Review is a row of mneme.memory_reviews.
type Review struct {
	ReviewedAt                        time.Time
	Rating, Reviewer                  string
	Defaulted                         bool
	StabilityBefore, StabilityAfter   float64
	DifficultyBefore, DifficultyAfter float64
	StateBefore, StateAfter           string
	LastReviewedBefore                time.Time
	MatchedQueries                    []string
	JobID                             *int64
	// Evidence is why the reviewer rated so: {"score", "thresholds"} (the
	// heuristic) or {"reason"} (the LLM); nil for reviews before mneme
	// stored it.
	Evidence json.RawMessage
}

// MemoryReviews is mneme.memory_reviews: the memory's review log, oldest
// first.
func (c *Client) MemoryReviews(ctx context.Context, memory uuid.UUID) ([]Review, error) {
	return rows(ctx, c, newCall("memory_reviews", memory), `reviewed_at, rating, reviewer, defaulted, stability_before,
		stability_after, difficulty_before, difficulty_after, state_before, state_after, last_reviewed_before, matched_queries,
		job_id, evidence`,
		func(r pgx.CollectableRow) (Review, error) {
			var v Review
			var ev []byte
			err := r.Scan(&v.ReviewedAt, &v.Rating, &v.Reviewer, &v.Defaulted, &v.StabilityBefore, &v.StabilityAfter,
				&v.DifficultyBefore, &v.DifficultyAfter, &v.StateBefore, &v.StateAfter, &v.LastReviewedBefore,
				&v.MatchedQueries, &v.JobID, &ev)
			if ev != nil {
				v.Evidence = ev
			}
			return v, err
		})
}

// Event is a row of mneme.memory_event_log. A reason that may be NULL is
// nil.
type Event struct {
	At            time.Time
	Event         string
	Reason        *string
	Actor, Caller string
}

// MemoryEvents is mneme.memory_event_log: the memory's lifecycle events,
// the tombstone of an erased memory too.
func (c *Client) MemoryEvents(ctx context.Context, memory uuid.UUID) ([]Event, error) {
	return rows(ctx, c, newCall("memory_event_log", memory), `at, event, reason, actor, caller::text`,
		func(r pgx.CollectableRow) (Event, error) {
			var e Event
			return e, r.Scan(&e.At, &e.Event, &e.Reason, &e.Actor, &e.Caller)
		})
}

// FindOptions are mneme.find_memories' arguments; zero values leave the
// SQL defaults.
type FindOptions struct {
	Conversation uuid.UUID // uuid.Nil: the tenant's memories
	Words        string
	Label        string
	Status       string
	Kind         string
	Pinned       *bool
	RMin, RMax   *float64
	Sort         string    // created (default), created_asc, said, said_asc, r, r_desc
	K, Page      *int      // rows a page (default 50) and the page (default 1); nil: the default
	At           time.Time // retrievability at (default now)
}

// Found is a row of mneme.find_memories; Total is the number of rows
// that match, on every page.
type Found struct {
	MemoryID, ConversationID uuid.UUID
	Kind, Status, Label      string
	Pinned                   bool
	Title, Summary           *string
	Content                  string
	SourceFirstAt            *time.Time
	CreatedAt                time.Time
	ValidUntil               *time.Time
	Stability                float64
	LastReviewedAt           time.Time
	ReviewCount              int32
	ConfidenceScore          float32
	Retrievability           float64
	SupersedesID             *uuid.UUID
	Total                    int64
}

// FindMemories is mneme.find_memories: the tenant's (or a
// conversation's) memories, filtered, sorted and paged.
func (c *Client) FindMemories(ctx context.Context, o FindOptions) ([]Found, error) {
	var conv any
	if o.Conversation != uuid.Nil {
		conv = o.Conversation
	}
	q := newCall("find_memories").
		opt(true, "conversation", "::uuid", conv).
		opt(o.Words != "", "words", "", o.Words).
		opt(o.Label != "", "only_label", "", o.Label).
		opt(o.Status != "", "only_status", "", o.Status).
		opt(o.Kind != "", "only_kind", "", o.Kind).
		opt(o.Pinned != nil, "only_pinned", "", o.Pinned).
		opt(o.RMin != nil, "r_min", "::float8", o.RMin).
		opt(o.RMax != nil, "r_max", "::float8", o.RMax).
		opt(o.Sort != "", "sort", "", o.Sort).
		opt(o.K != nil, "k", "", o.K).
		opt(o.Page != nil, "page", "", o.Page).
		opt(!o.At.IsZero(), "at", "", o.At)
	return rows(ctx, c, q, `memory_id, conversation_id, kind, status, label, pinned, title, summary, content,
		source_first_at, created_at, valid_until, stability, last_reviewed_at, review_count, confidence_score,
		retrievability, supersedes_id, total`,
		func(r pgx.CollectableRow) (Found, error) {
			var m Found
			return m, r.Scan(&m.MemoryID, &m.ConversationID, &m.Kind, &m.Status, &m.Label, &m.Pinned, &m.Title, &m.Summary,
				&m.Content, &m.SourceFirstAt, &m.CreatedAt, &m.ValidUntil, &m.Stability, &m.LastReviewedAt, &m.ReviewCount,
				&m.ConfidenceScore, &m.Retrievability, &m.SupersedesID, &m.Total)
		})
}

// Labels is mneme.labels(): the label vocabulary.
func (c *Client) Labels(ctx context.Context) ([]string, error) {
	var out []string
	err := c.scalar(ctx, newCall("labels"), &out)
	return out, err
}

// BM25Hit is a row of mneme.bm25_search.
type BM25Hit struct {
	MemoryID uuid.UUID
	Score    float64
	Rank     int32
}

// BM25Search is mneme.bm25_search: the BM25 leg alone, its top k (0: the
// SQL default).
func (c *Client) BM25Search(ctx context.Context, conv uuid.UUID, query string, k int) ([]BM25Hit, error) {
	return rows(ctx, c, newCall("bm25_search", conv, query).opt(k != 0, "k", "", k), `memory_id, score, rank`,
		func(r pgx.CollectableRow) (BM25Hit, error) {
			var h BM25Hit
			return h, r.Scan(&h.MemoryID, &h.Score, &h.Rank)
		})
}

// UsageRow is a row of mneme.llm_usage.
type UsageRow struct {
	Key                                string
	Calls, FailedCalls, EstimatedCalls int64
	PromptTokens, CompletionTokens     int64
	AvgLatencyMS                       *float64 // nil: no call measured
	EstimatedCost                      float64
}

// LLMUsage is mneme.llm_usage: the model calls from since to until,
// grouped by (tenant, kind, model or day).
func (c *Client) LLMUsage(ctx context.Context, since, until time.Time, by string) ([]UsageRow, error) {
	return rows(ctx, c, newCall("llm_usage", since, until, by), `key, calls, failed_calls, estimated_calls, prompt_tokens,
		completion_tokens, avg_latency_ms, estimated_cost::float8`,
		func(r pgx.CollectableRow) (UsageRow, error) {
			var u UsageRow
			return u, r.Scan(&u.Key, &u.Calls, &u.FailedCalls, &u.EstimatedCalls, &u.PromptTokens, &u.CompletionTokens,
				&u.AvgLatencyMS, &u.EstimatedCost)
		})
}

// ConversationUsage is mneme.conversation_llm_usage's row.
type ConversationUsage struct {
	Calls, FailedCalls             int64
	PromptTokens, CompletionTokens int64
	EstimatedCost                  float64
}

// ConversationLLMUsage is mneme.conversation_llm_usage: the model calls
// made for one conversation.
func (c *Client) ConversationLLMUsage(ctx context.Context, conv uuid.UUID) (ConversationUsage, error) {
	out, err := rows(ctx, c, newCall("conversation_llm_usage", conv),
		`calls, failed_calls, prompt_tokens, completion_tokens, estimated_cost::float8`,
		func(r pgx.CollectableRow) (ConversationUsage, error) {
			var u ConversationUsage
			return u, r.Scan(&u.Calls, &u.FailedCalls, &u.PromptTokens, &u.CompletionTokens, &u.EstimatedCost)
		})
	if err != nil || len(out) == 0 {
		return ConversationUsage{}, err
	}
	return out[0], nil
}

// RetryJob is mneme.retry_job (mneme_admin, mneme_worker): a failed job
// runs again, its set-aside messages back in the queue.
func (c *Client) RetryJob(ctx context.Context, job int64) error {
	return c.exec(ctx, newCall("retry_job", job))
}
