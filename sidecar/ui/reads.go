package ui

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
)

// The reads of the pages. Each is a call of mneme's SQL API but for the
// job queue and the tenant list, which only admins (and the sidecar) may
// read, as tables.

// Conversation is a row of mneme.conversations.
type Conversation struct {
	ID                                 uuid.UUID
	Messages, Queued, Memories, Active int64
	LastMessageAt                      *time.Time
	PendingJobs, FailedJobs            int64
	PendingReviews                     int
	// From mneme.conversation_titles:
	Speakers     []string
	FirstMessage string
	FirstAt      *time.Time
}

// genericRoles are add_message's own roles: no title.
var genericRoles = map[string]bool{"user": true, "assistant": true, "system": true, "tool": true}

// Title is what a person recognises the conversation by: its speakers'
// names (mneme.set_speakers), else the start of its first message.
func (c Conversation) Title() string {
	var names []string
	for _, s := range c.Speakers {
		if !genericRoles[s] {
			names = append(names, s)
		}
	}
	switch {
	case len(names) > 0:
		return strings.Join(names, " & ")
	case strings.TrimSpace(c.FirstMessage) != "":
		return clip(60, strings.Join(strings.Fields(c.FirstMessage), " "))
	}
	return "Conversation " + c.ID.String()[:8]
}

// readTitles adds mneme.conversation_titles' speakers and first message.
func readTitles(ctx context.Context, tx pgx.Tx, convs []Conversation) error {
	ids := make([]uuid.UUID, len(convs))
	at := make(map[uuid.UUID]int, len(convs))
	for i, c := range convs {
		ids[i] = c.ID
		at[c.ID] = i
	}
	rows, err := tx.Query(ctx, `SELECT conversation_id, speakers, first_message, first_message_at FROM mneme.conversation_titles($1)`, ids)
	if err != nil {
		return fmt.Errorf("read conversation titles: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var id uuid.UUID
		var sp []string
		var first *string
		var firstAt *time.Time
		if err := rows.Scan(&id, &sp, &first, &firstAt); err != nil {
			return fmt.Errorf("read conversation titles: %w", err)
		}
		if i, ok := at[id]; ok {
			convs[i].Speakers, convs[i].FirstAt = sp, firstAt
			if first != nil {
				convs[i].FirstMessage = *first
			}
		}
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("read conversation titles: %w", err)
	}
	return nil
}

func readConversations(ctx context.Context, tx pgx.Tx, k int) ([]Conversation, error) {
	rows, err := tx.Query(ctx, `SELECT conversation_id, messages, queued_messages, memories, active_memories,
	        last_message_at, pending_jobs, failed_jobs, pending_reviews FROM mneme.conversations($1)`, k)
	if err != nil {
		return nil, fmt.Errorf("read conversations: %w", err)
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (Conversation, error) {
		var c Conversation
		err := r.Scan(&c.ID, &c.Messages, &c.Queued, &c.Memories, &c.Active, &c.LastMessageAt, &c.PendingJobs, &c.FailedJobs, &c.PendingReviews)
		return c, err
	})
}

// Message is a row of mneme.conversation_messages.
type Message struct {
	ID         int64
	Role       string
	Content    string
	At         time.Time
	ConsumedAt *time.Time
	MemoryID   *uuid.UUID
	SetAsideBy *int64
}

func readMessages(ctx context.Context, tx pgx.Tx, conv uuid.UUID) ([]Message, error) {
	rows, err := tx.Query(ctx, `SELECT message_id, role, content, created_at, consumed_at, memory_id, set_aside_job_id
	        FROM mneme.conversation_messages($1)`, conv)
	if err != nil {
		return nil, fmt.Errorf("read messages: %w", err)
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (Message, error) {
		var m Message
		err := r.Scan(&m.ID, &m.Role, &m.Content, &m.At, &m.ConsumedAt, &m.MemoryID, &m.SetAsideBy)
		return m, err
	})
}

// MemoryRow is a row of mneme.conversation_memories.
type MemoryRow struct {
	ID                  uuid.UUID
	Kind, Status, Label string
	Pinned              bool
	Title, Summary      *string
	Content             string
	SourceIDs           []int64
	SourceFirstAt       *time.Time
	Stability           float64
	LastReviewedAt      time.Time
	ReviewCount         int
	Confidence          float32
	SupersedesID        *uuid.UUID
	CreatedAt           time.Time
	Retrievability      float64 // at the page's time, 1 if pinned
}

func readMemories(ctx context.Context, tx pgx.Tx, conv uuid.UUID, now time.Time) ([]MemoryRow, error) {
	rows, err := tx.Query(ctx, `SELECT memory_id, kind, status, label, pinned, title, summary, content, source_message_ids,
	        source_first_at, stability, last_reviewed_at, review_count, confidence_score, supersedes_id, created_at
	        FROM mneme.conversation_memories($1)`, conv)
	if err != nil {
		return nil, fmt.Errorf("read memories: %w", err)
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (MemoryRow, error) {
		var m MemoryRow
		err := r.Scan(&m.ID, &m.Kind, &m.Status, &m.Label, &m.Pinned, &m.Title, &m.Summary, &m.Content, &m.SourceIDs,
			&m.SourceFirstAt, &m.Stability, &m.LastReviewedAt, &m.ReviewCount, &m.Confidence, &m.SupersedesID, &m.CreatedAt)
		m.Retrievability = retrievability(m.Pinned, m.Stability, m.LastReviewedAt, now)
		return m, err
	})
}

// Memory is mneme.inspect's row.
type Memory struct {
	ID, Conversation            uuid.UUID
	Kind, Status                string
	StatusReason                *string
	Label                       string
	Pinned                      bool
	Summary                     *string
	Content                     string
	Stability, Difficulty       float64
	LastReviewedAt              time.Time
	ReviewCount                 int
	SupersedesID, SupersededBy  *uuid.UUID
	CreatedAt                   time.Time
	Confidence                  float32
	SourceType                  string
	SourceRef                   *string
	SourceIDs                   []int64
	ValidUntil, LastConfirmedAt *time.Time
	ConfirmsID, InvalidatesID   *uuid.UUID
	Slot, Revision              *string
	Retrievability              float64
}

func readMemory(ctx context.Context, tx pgx.Tx, id uuid.UUID) (Memory, error) {
	var m Memory
	err := tx.QueryRow(ctx, `SELECT memory_id, conversation_id, kind, status, status_reason, label, pinned, summary, content,
	        stability, difficulty, last_reviewed_at, review_count, supersedes_id, superseded_by, created_at, confidence_score,
	        source_type, source_ref, source_message_ids, valid_until, last_confirmed_at, confirms_id, invalidates_id, slot, revision
	        FROM mneme.inspect($1)`, id).Scan(&m.ID, &m.Conversation, &m.Kind, &m.Status, &m.StatusReason, &m.Label, &m.Pinned,
		&m.Summary, &m.Content, &m.Stability, &m.Difficulty, &m.LastReviewedAt, &m.ReviewCount, &m.SupersedesID, &m.SupersededBy,
		&m.CreatedAt, &m.Confidence, &m.SourceType, &m.SourceRef, &m.SourceIDs, &m.ValidUntil, &m.LastConfirmedAt,
		&m.ConfirmsID, &m.InvalidatesID, &m.Slot, &m.Revision)
	if err != nil {
		return m, fmt.Errorf("inspect memory %s: %w", id, err)
	}
	return m, nil
}

// Review is a row of mneme.memory_reviews.
type Review struct {
	At                                time.Time
	Rating, Reviewer                  string
	Defaulted                         bool
	StabilityBefore, StabilityAfter   float64
	DifficultyBefore, DifficultyAfter float64
	StateBefore, StateAfter           string
	LastReviewedBefore                time.Time
	Queries                           []string
	JobID                             *int64
	// Evidence is why it was rated so: the heuristic's score and
	// thresholds, or the LLM's reason (NULL for reviews before 00130).
	Evidence *struct {
		Score      *float64           `json:"score"`
		Thresholds map[string]float64 `json:"thresholds"`
		Reason     string             `json:"reason"`
	}
}

func readReviews(ctx context.Context, tx pgx.Tx, id uuid.UUID) ([]Review, error) {
	rows, err := tx.Query(ctx, `SELECT reviewed_at, rating, reviewer, defaulted, stability_before, stability_after,
	        difficulty_before, difficulty_after, state_before, state_after, last_reviewed_before, matched_queries, job_id, evidence
	        FROM mneme.memory_reviews($1)`, id)
	if err != nil {
		return nil, fmt.Errorf("read reviews: %w", err)
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (Review, error) {
		var v Review
		err := r.Scan(&v.At, &v.Rating, &v.Reviewer, &v.Defaulted, &v.StabilityBefore, &v.StabilityAfter,
			&v.DifficultyBefore, &v.DifficultyAfter, &v.StateBefore, &v.StateAfter, &v.LastReviewedBefore, &v.Queries, &v.JobID, &v.Evidence)
		return v, err
	})
}

// Event is a row of mneme.memory_event_log.
type Event struct {
	At            time.Time
	Event         string
	Reason        *string
	Actor, Caller string
}

func readEvents(ctx context.Context, tx pgx.Tx, id uuid.UUID) ([]Event, error) {
	rows, err := tx.Query(ctx, `SELECT at, event, reason, actor, caller::text FROM mneme.memory_event_log($1)`, id)
	if err != nil {
		return nil, fmt.Errorf("read events: %w", err)
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (Event, error) {
		var e Event
		err := r.Scan(&e.At, &e.Event, &e.Reason, &e.Actor, &e.Caller)
		return e, err
	})
}

// Link is a row of mneme.history: a memory of the lineage.
type Link struct {
	Depth     int
	Relation  string
	ID        uuid.UUID
	Status    string
	Content   string
	CreatedAt time.Time
}

func readLineage(ctx context.Context, tx pgx.Tx, id uuid.UUID) ([]Link, error) {
	rows, err := tx.Query(ctx, `SELECT depth, relation, memory_id, status, content, created_at FROM mneme.history($1)`, id)
	if err != nil {
		return nil, fmt.Errorf("read lineage: %w", err)
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (Link, error) {
		var l Link
		err := r.Scan(&l.Depth, &l.Relation, &l.ID, &l.Status, &l.Content, &l.CreatedAt)
		return l, err
	})
}

// bm25Alone is the UI's query_embedding: it embeds no query, so under an
// external embedder it asks for BM25 alone ('{}'; SQL refuses a NULL
// there) and with the hash embedder lets SQL embed the query (NULL).
const bm25Alone = `CASE WHEN mneme.setting('embedder') #>> '{}' = 'hash' THEN NULL ELSE '{}'::real[] END`

// Hit is a row of mneme.search.
type Hit struct {
	ID                   uuid.UUID
	Kind                 string
	Summary              *string
	Content              string
	Score, RRF           float64
	BM25Rank, VectorRank *int
	Retrievability       float64
	Label                string
	Pinned               bool
	Status               string
	Confidence           float32
	LabelWeight          float64
	ConfFactor           float64 // confidence_score ^ confidence_weight
	ContextItem          int     // the context item it became, 0: cut by the budget
}

func readSearch(ctx context.Context, tx pgx.Tx, conv uuid.UUID, q string, k int, scope string) ([]Hit, error) {
	rows, err := tx.Query(ctx, `SELECT memory_id, kind, summary, content, score, rrf, bm25_rank, vector_rank, retrievability,
	        label, pinned, status, confidence_score FROM mneme.search($1, $2, $3, `+bm25Alone+`, scope => $4)`, conv, q, k, scope)
	if err != nil {
		return nil, fmt.Errorf("search: %w", err)
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (Hit, error) {
		var h Hit
		err := r.Scan(&h.ID, &h.Kind, &h.Summary, &h.Content, &h.Score, &h.RRF, &h.BM25Rank, &h.VectorRank, &h.Retrievability,
			&h.Label, &h.Pinned, &h.Status, &h.Confidence)
		return h, err
	})
}

// Item is a row of mneme.context_items.
type Item struct {
	Item       int
	MemoryID   uuid.UUID
	Kind       string
	Label      string
	Score      float64
	FirstAt    *time.Time
	MessageIDs []int64
	Words      int
	Text       string
}

func readContext(ctx context.Context, tx pgx.Tx, conv uuid.UUID, q string, budget int, scope string) ([]Item, error) {
	rows, err := tx.Query(ctx, `SELECT item, memory_id, kind, label, score, first_at, message_ids, words, text
	        FROM mneme.context_items($1, $2, $3, `+bm25Alone+`, scope => $4)`, conv, q, budget, scope)
	if err != nil {
		return nil, fmt.Errorf("context_items: %w", err)
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (Item, error) {
		var i Item
		err := r.Scan(&i.Item, &i.MemoryID, &i.Kind, &i.Label, &i.Score, &i.FirstAt, &i.MessageIDs, &i.Words, &i.Text)
		return i, err
	})
}

// settingOf reads one setting as the type T (mneme.setting is the app's).
func settingOf[T any](ctx context.Context, tx pgx.Tx, key string) (T, error) {
	var v T
	if err := tx.QueryRow(ctx, `SELECT mneme.setting($1)`, key).Scan(&v); err != nil {
		return v, fmt.Errorf("setting %s: %w", key, err)
	}
	return v, nil
}

// JobStat is a row of mneme.job_stats; FailedJob a failed row of mneme.jobs.
type JobStat struct {
	Kind, State    string
	Jobs           int64
	OldestCreated  time.Time
	NextRunAt      *time.Time
	LastFinishedAt *time.Time
}

type FailedJob struct {
	ID           int64
	Kind         string
	Conversation *uuid.UUID
	Attempts     int
	MaxAttempts  int
	LastError    *string
	UpdatedAt    time.Time
}

func readJobs(ctx context.Context, tx pgx.Tx) ([]JobStat, []FailedJob, error) {
	// The tenant's own (mneme.job_stats counts every tenant's: on a page of
	// one tenant it said "1 failed" beside "no failed jobs").
	rows, err := tx.Query(ctx, `SELECT kind, state, count(*), min(created_at), min(run_at) FILTER (WHERE state = 'pending'), max(finished_at)
	        FROM mneme.jobs WHERE tenant_id = (SELECT mneme._tenant()) GROUP BY kind, state ORDER BY kind, state`)
	if err != nil {
		return nil, nil, fmt.Errorf("read job_stats: %w", err)
	}
	stats, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (JobStat, error) {
		var s JobStat
		err := r.Scan(&s.Kind, &s.State, &s.Jobs, &s.OldestCreated, &s.NextRunAt, &s.LastFinishedAt)
		return s, err
	})
	if err != nil {
		return nil, nil, fmt.Errorf("read job_stats: %w", err)
	}
	rows, err = tx.Query(ctx, `SELECT id, kind, conversation_id, attempts, max_attempts, last_error, updated_at
	        FROM mneme.jobs WHERE state = 'failed' AND tenant_id = (SELECT mneme._tenant()) ORDER BY updated_at DESC, id DESC LIMIT 200`)
	if err != nil {
		return nil, nil, fmt.Errorf("read failed jobs: %w", err)
	}
	failed, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (FailedJob, error) {
		var j FailedJob
		err := r.Scan(&j.ID, &j.Kind, &j.Conversation, &j.Attempts, &j.MaxAttempts, &j.LastError, &j.UpdatedAt)
		return j, err
	})
	if err != nil {
		return nil, nil, fmt.Errorf("read failed jobs: %w", err)
	}
	return stats, failed, nil
}

// VectorIndex is a row of mneme.vector_index_status: a per-scope HNSW
// index, ready or being built by the sidecar.
type VectorIndex struct {
	Name, Scope, State string
	Bytes              int64
	Phase              *string
	Done, Total        *int64
}

func readVectorIndexes(ctx context.Context, tx pgx.Tx) ([]VectorIndex, error) {
	rows, err := tx.Query(ctx, `SELECT index_name, scope, state, bytes, phase, done, total FROM mneme.vector_index_status()`)
	if err != nil {
		return nil, fmt.Errorf("read vector_index_status: %w", err)
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (VectorIndex, error) {
		var v VectorIndex
		err := r.Scan(&v.Name, &v.Scope, &v.State, &v.Bytes, &v.Phase, &v.Done, &v.Total)
		return v, err
	})
}

func readTenants(ctx context.Context, tx pgx.Tx) ([]string, error) {
	rows, err := tx.Query(ctx, `SELECT id FROM mneme.tenants ORDER BY id`)
	if err != nil {
		return nil, fmt.Errorf("read tenants: %w", err)
	}
	return pgx.CollectRows(rows, pgx.RowTo[string])
}

// Filter is the memories view's query: mneme.find_memories' arguments.
type Filter struct {
	Conversation string // "" for the tenant's
	Q, Label     string
	Status, Kind string
	Pinned       string // "", "yes", "no"
	RMin, RMax   string // "" or a number in [0, 1]
	Sort         string
	Page         int
}

// Found is a row of mneme.find_memories.
type Found struct {
	ID, Conversation    uuid.UUID
	Kind, Status, Label string
	Pinned              bool
	Title, Summary      *string
	Content             string
	SaidAt              *time.Time
	CreatedAt           time.Time
	ValidUntil          *time.Time
	Stability           float64
	LastReviewedAt      time.Time
	ReviewCount         int
	Confidence          float32
	Retrievability      float64
	SupersedesID        *uuid.UUID
}

// pageSize is the memories view's rows a page.
const pageSize = 50

func readFound(ctx context.Context, tx pgx.Tx, f Filter, now time.Time) ([]Found, int64, error) {
	null := func(s string) any {
		if s == "" {
			return nil
		}
		return s
	}
	var conv, pinned any
	if f.Conversation != "" {
		conv = f.Conversation
	}
	switch f.Pinned {
	case "yes":
		pinned = true
	case "no":
		pinned = false
	}
	rows, err := tx.Query(ctx, `SELECT memory_id, conversation_id, kind, status, label, pinned, title, summary, content,
	        source_first_at, created_at, valid_until, stability, last_reviewed_at, review_count, confidence_score,
	        retrievability, supersedes_id, total
	        FROM mneme.find_memories($1::uuid, $2, $3, $4, $5, $6, $7::float8, $8::float8, $9, $10, $11, $12)`,
		conv, null(f.Q), null(f.Label), null(f.Status), null(f.Kind), pinned, null(f.RMin), null(f.RMax), null(f.Sort), pageSize, f.Page, now)
	if err != nil {
		return nil, 0, fmt.Errorf("find memories: %w", err)
	}
	var total int64
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (Found, error) {
		var m Found
		err := r.Scan(&m.ID, &m.Conversation, &m.Kind, &m.Status, &m.Label, &m.Pinned, &m.Title, &m.Summary, &m.Content,
			&m.SaidAt, &m.CreatedAt, &m.ValidUntil, &m.Stability, &m.LastReviewedAt, &m.ReviewCount, &m.Confidence,
			&m.Retrievability, &m.SupersedesID, &total)
		return m, err
	})
	if err != nil {
		return nil, 0, fmt.Errorf("find memories: %w", err)
	}
	return out, total, nil
}

// readLabels is the tenant's label vocabulary, for the filter's choices.
func readLabels(ctx context.Context, tx pgx.Tx) ([]string, error) {
	rows, err := tx.Query(ctx, `SELECT unnest(mneme.labels())`)
	if err != nil {
		return nil, fmt.Errorf("read labels: %w", err)
	}
	return pgx.CollectRows(rows, pgx.RowTo[string])
}

// Why is the review's evidence as a sentence: the heuristic's overlap
// score against its thresholds, or the LLM's reason.
func (v Review) Why() string {
	e := v.Evidence
	switch {
	case e == nil:
		if v.Defaulted {
			return "no usable rating from the reviewer: the default rating (review_default_rating)"
		}
		return "not recorded (a review before mneme stored its evidence)"
	case e.Reason != "":
		return e.Reason
	case e.Score != nil:
		th := e.Thresholds
		return fmt.Sprintf("overlap %.3f with the conversation after it (again < %g ≤ hard < %g ≤ good < %g ≤ easy)",
			*e.Score, th["hard"], th["good"], th["easy"])
	}
	return ""
}
