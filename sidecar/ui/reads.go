package ui

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/mneme-memory/mneme/client"
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
	titles, err := client.InTx(tx).ConversationTitles(ctx, ids)
	if err != nil {
		return fmt.Errorf("read conversation titles: %w", err)
	}
	for _, t := range titles {
		if i, ok := at[t.ConversationID]; ok {
			convs[i].Speakers, convs[i].FirstMessage, convs[i].FirstAt = t.Speakers, t.FirstMessage, t.FirstMessageAt
		}
	}
	return nil
}

// readRecent is mneme.recent_conversations: the k most recently active
// conversations with their titles and no counts, for a chooser.
func readRecent(ctx context.Context, tx pgx.Tx, k int) ([]Conversation, error) {
	titles, err := client.InTx(tx).RecentConversations(ctx, k)
	if err != nil {
		return nil, fmt.Errorf("read recent conversations: %w", err)
	}
	out := make([]Conversation, len(titles))
	for i, t := range titles {
		out[i] = Conversation{ID: t.ConversationID, LastMessageAt: t.LastMessageAt, Speakers: t.Speakers,
			FirstMessage: t.FirstMessage, FirstAt: t.FirstMessageAt}
	}
	return out, nil
}

func readConversations(ctx context.Context, tx pgx.Tx, k int) ([]Conversation, error) {
	convs, err := client.InTx(tx).Conversations(ctx, k)
	if err != nil {
		return nil, fmt.Errorf("read conversations: %w", err)
	}
	out := make([]Conversation, len(convs))
	for i, c := range convs {
		out[i] = Conversation{ID: c.ConversationID, Messages: c.Messages, Queued: c.QueuedMessages, Memories: c.Memories,
			Active: c.ActiveMemories, LastMessageAt: c.LastMessageAt, PendingJobs: c.PendingJobs, FailedJobs: c.FailedJobs,
			PendingReviews: int(c.PendingReviews)}
	}
	return out, nil
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
	msgs, err := client.InTx(tx).Messages(ctx, conv)
	if err != nil {
		return nil, fmt.Errorf("read messages: %w", err)
	}
	out := make([]Message, len(msgs))
	for i, m := range msgs {
		out[i] = Message{ID: m.MessageID, Role: m.Role, Content: m.Content, At: m.CreatedAt, ConsumedAt: m.ConsumedAt,
			MemoryID: m.MemoryID, SetAsideBy: m.SetAsideJobID}
	}
	return out, nil
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
	mems, err := client.InTx(tx).Memories(ctx, conv)
	if err != nil {
		return nil, fmt.Errorf("read memories: %w", err)
	}
	out := make([]MemoryRow, len(mems))
	for i, m := range mems {
		r := MemoryRow{ID: m.MemoryID, Kind: m.Kind, Status: m.Status, Label: m.Label, Pinned: m.Pinned,
			Title: nonEmpty(m.Title), Summary: nonEmpty(m.Summary), Content: m.Content, SourceIDs: m.SourceMessageIDs,
			SourceFirstAt: m.SourceFirstAt, Stability: m.Stability, ReviewCount: int(m.ReviewCount),
			Confidence: m.ConfidenceScore, SupersedesID: m.SupersedesID, CreatedAt: m.CreatedAt}
		if m.LastReviewedAt != nil {
			r.LastReviewedAt = *m.LastReviewedAt
		}
		r.Retrievability = retrievability(r.Pinned, r.Stability, r.LastReviewedAt, now)
		out[i] = r
	}
	return out, nil
}

// nonEmpty is s, or nil for "" (the client reads a NULL text as "").
func nonEmpty(s string) *string {
	if s == "" {
		return nil
	}
	return &s
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
	i, err := client.InTx(tx).Inspect(ctx, id)
	if err != nil {
		return Memory{}, fmt.Errorf("inspect memory %s: %w", id, err)
	}
	m := Memory{ID: i.MemoryID, Conversation: i.ConversationID, Kind: i.Kind, Status: i.Status,
		StatusReason: nonEmpty(i.StatusReason), Label: i.Label, Pinned: i.Pinned, Summary: nonEmpty(i.Summary),
		Content: i.Content, Stability: i.Stability, Difficulty: i.Difficulty, ReviewCount: int(i.ReviewCount),
		SupersedesID: i.SupersedesID, SupersededBy: i.SupersededBy, CreatedAt: i.CreatedAt, Confidence: i.ConfidenceScore,
		SourceType: i.SourceType, SourceRef: nonEmpty(i.SourceRef), SourceIDs: i.SourceMessageIDs, ValidUntil: i.ValidUntil,
		LastConfirmedAt: i.LastConfirmedAt, ConfirmsID: i.ConfirmsID, InvalidatesID: i.InvalidatesID,
		Slot: nonEmpty(i.Slot), Revision: nonEmpty(i.Revision)}
	if i.LastReviewedAt != nil {
		m.LastReviewedAt = *i.LastReviewedAt
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
	revs, err := client.InTx(tx).MemoryReviews(ctx, id)
	if err != nil {
		return nil, fmt.Errorf("read reviews: %w", err)
	}
	out := make([]Review, len(revs))
	for i, v := range revs {
		out[i] = Review{At: v.ReviewedAt, Rating: v.Rating, Reviewer: v.Reviewer, Defaulted: v.Defaulted,
			StabilityBefore: v.StabilityBefore, StabilityAfter: v.StabilityAfter, DifficultyBefore: v.DifficultyBefore,
			DifficultyAfter: v.DifficultyAfter, StateBefore: v.StateBefore, StateAfter: v.StateAfter,
			LastReviewedBefore: v.LastReviewedBefore, Queries: v.MatchedQueries, JobID: v.JobID}
		if v.Evidence != nil {
			if err := json.Unmarshal(v.Evidence, &out[i].Evidence); err != nil {
				return nil, fmt.Errorf("review evidence %s: %w", v.Evidence, err)
			}
		}
	}
	return out, nil
}

// Event is a row of mneme.memory_event_log.
type Event struct {
	At            time.Time
	Event         string
	Reason        *string
	Actor, Caller string
}

func readEvents(ctx context.Context, tx pgx.Tx, id uuid.UUID) ([]Event, error) {
	evs, err := client.InTx(tx).MemoryEvents(ctx, id)
	if err != nil {
		return nil, fmt.Errorf("read events: %w", err)
	}
	out := make([]Event, len(evs))
	for i, e := range evs {
		out[i] = Event{At: e.At, Event: e.Event, Reason: e.Reason, Actor: e.Actor, Caller: e.Caller}
	}
	return out, nil
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
	hist, err := client.InTx(tx).History(ctx, id)
	if err != nil {
		return nil, fmt.Errorf("read lineage: %w", err)
	}
	out := make([]Link, len(hist))
	for i, h := range hist {
		out[i] = Link{Depth: int(h.Depth), Relation: h.Relation, ID: h.MemoryID, Status: h.Status, Content: h.Content,
			CreatedAt: h.CreatedAt}
	}
	return out, nil
}

// queryEmbedding is the UI's query_embedding: it embeds no query, so under
// an external embedder it asks for BM25 alone ('{}'; SQL refuses a NULL
// there) and with the hash embedder lets SQL embed the query (nil: NULL).
func queryEmbedding(ctx context.Context, tx pgx.Tx) ([]float32, error) {
	embedder, err := settingOf[string](ctx, tx, "embedder")
	if err != nil || embedder == "hash" {
		return nil, err
	}
	return []float32{}, nil
}

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
	emb, err := queryEmbedding(ctx, tx)
	if err != nil {
		return nil, err
	}
	hits, err := client.InTx(tx).Search(ctx, conv, q, client.SearchOptions{K: k, QueryEmbedding: emb, Scope: scope})
	if err != nil {
		return nil, fmt.Errorf("search: %w", err)
	}
	out := make([]Hit, len(hits))
	for i, h := range hits {
		out[i] = Hit{ID: h.MemoryID, Kind: h.Kind, Summary: nonEmpty(h.Summary), Content: h.Content, Score: h.Score,
			RRF: h.RRF, BM25Rank: intOf(h.BM25Rank), VectorRank: intOf(h.VectorRank), Retrievability: h.Retrievability,
			Label: h.Label, Pinned: h.Pinned, Status: h.Status, Confidence: h.ConfidenceScore}
	}
	return out, nil
}

func intOf(p *int32) *int {
	if p == nil {
		return nil
	}
	v := int(*p)
	return &v
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
	emb, err := queryEmbedding(ctx, tx)
	if err != nil {
		return nil, err
	}
	items, err := client.InTx(tx).ContextItems(ctx, conv, q, client.ContextOptions{Budget: budget, QueryEmbedding: emb, Scope: scope})
	if err != nil {
		return nil, fmt.Errorf("context_items: %w", err)
	}
	out := make([]Item, len(items))
	for i, it := range items {
		out[i] = Item{Item: int(it.Item), MemoryID: it.MemoryID, Kind: it.Kind, Label: it.Label, Score: it.Score,
			FirstAt: it.FirstAt, MessageIDs: it.MessageIDs, Words: int(it.Words), Text: it.Text}
	}
	return out, nil
}

// readContextCandidates is the search page's one read: mneme.context_candidates,
// search's top context_candidates (the hits) and the context_items they
// became (the items, in item order), from one search.
func readContextCandidates(ctx context.Context, tx pgx.Tx, conv uuid.UUID, q string, budget int, scope string) ([]Hit, []Item, error) {
	emb, err := queryEmbedding(ctx, tx)
	if err != nil {
		return nil, nil, err
	}
	rows, err := tx.Query(ctx, `SELECT memory_id, kind, summary, content, score, rrf, bm25_rank, vector_rank, retrievability,
		       label, pinned, status, confidence_score, item, item_score, first_at, message_ids, words, text
		FROM mneme.context_candidates($1, $2, $3, $4, scope => $5)`, conv, q, budget, emb, scope)
	if err != nil {
		return nil, nil, fmt.Errorf("context_candidates: %w", err)
	}
	var hits []Hit
	var items []Item
	for rows.Next() {
		var h Hit
		var summary *string
		var conf *float32
		var item, words *int32
		var itemScore *float64
		var firstAt *time.Time
		var msgs []int64
		var text *string
		if err := rows.Scan(&h.ID, &h.Kind, &summary, &h.Content, &h.Score, &h.RRF, &h.BM25Rank, &h.VectorRank,
			&h.Retrievability, &h.Label, &h.Pinned, &h.Status, &conf, &item, &itemScore, &firstAt, &msgs, &words, &text); err != nil {
			rows.Close()
			return nil, nil, fmt.Errorf("context_candidates: %w", err)
		}
		if summary != nil {
			h.Summary = nonEmpty(*summary)
		}
		if conf != nil {
			h.Confidence = *conf
		}
		hits = append(hits, h)
		if item != nil {
			it := Item{Item: int(*item), MemoryID: h.ID, Kind: h.Kind, Label: h.Label, FirstAt: firstAt, MessageIDs: msgs}
			if itemScore != nil {
				it.Score = *itemScore
			}
			if words != nil {
				it.Words = int(*words)
			}
			if text != nil {
				it.Text = *text
			}
			items = append(items, it)
		}
	}
	if err := rows.Err(); err != nil {
		return nil, nil, fmt.Errorf("context_candidates: %w", err)
	}
	slices.SortFunc(items, func(a, b Item) int { return a.Item - b.Item })
	return hits, items, nil
}

// settingOf reads one setting (mneme.setting is the app's) as the type T,
// or its JSON as it is for []byte.
func settingOf[T any](ctx context.Context, tx pgx.Tx, key string) (T, error) {
	var v T
	raw, err := client.InTx(tx).Setting(ctx, key)
	if err != nil {
		return v, fmt.Errorf("setting %s: %w", key, err)
	}
	if b, ok := any(&v).(*[]byte); ok {
		*b = raw
		return v, nil
	}
	if err := json.Unmarshal(raw, &v); err != nil {
		return v, fmt.Errorf("setting %s (%s): %w", key, raw, err)
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
	k, page := pageSize, f.Page
	o := client.FindOptions{Words: f.Q, Label: f.Label, Status: f.Status, Kind: f.Kind, Sort: f.Sort, K: &k, Page: &page, At: now}
	if f.Conversation != "" {
		id, err := client.ParseID("conversation", f.Conversation)
		if err != nil {
			return nil, 0, fmt.Errorf("find memories: %w", err)
		}
		o.Conversation = id
	}
	switch f.Pinned {
	case "yes", "no":
		pinned := f.Pinned == "yes"
		o.Pinned = &pinned
	}
	for _, r := range []struct {
		name string
		s    string
		dst  **float64
	}{{"r_min", f.RMin, &o.RMin}, {"r_max", f.RMax, &o.RMax}} {
		if r.s == "" {
			continue
		}
		v, err := strconv.ParseFloat(r.s, 64)
		if err != nil {
			return nil, 0, fmt.Errorf("find memories: %w", &client.Error{Op: "find_memories", SQLState: "22P02",
				Message: fmt.Sprintf("%s: invalid input syntax for type double precision: %q", r.name, r.s)})
		}
		*r.dst = &v
	}
	found, err := client.InTx(tx).FindMemories(ctx, o)
	if err != nil {
		return nil, 0, fmt.Errorf("find memories: %w", err)
	}
	var total int64
	out := make([]Found, len(found))
	for i, m := range found {
		out[i] = Found{ID: m.MemoryID, Conversation: m.ConversationID, Kind: m.Kind, Status: m.Status, Label: m.Label,
			Pinned: m.Pinned, Title: m.Title, Summary: m.Summary, Content: m.Content, SaidAt: m.SourceFirstAt,
			CreatedAt: m.CreatedAt, ValidUntil: m.ValidUntil, Stability: m.Stability, LastReviewedAt: m.LastReviewedAt,
			ReviewCount: int(m.ReviewCount), Confidence: m.ConfidenceScore, Retrievability: m.Retrievability,
			SupersedesID: m.SupersedesID}
		total = m.Total
	}
	return out, total, nil
}

// readLabels is the tenant's label vocabulary, for the filter's choices.
func readLabels(ctx context.Context, tx pgx.Tx) ([]string, error) {
	labels, err := client.InTx(tx).Labels(ctx)
	if err != nil {
		return nil, fmt.Errorf("read labels: %w", err)
	}
	return labels, nil
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
