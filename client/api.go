package client

import (
	"context"
	"encoding/json"
	"errors"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
)

// Version is mneme.version(), the SQL API's semantic version.
func (c *Client) Version(ctx context.Context) (string, error) {
	var v string
	err := c.scalar(ctx, newCall("version"), &v)
	return v, err
}

// CheckVersion returns the database's SQL API version, or an error that
// is ErrUnsupportedVersion when it is not in SupportedAPI or the database
// has no mneme.version() (not migrated, or too old).
func (c *Client) CheckVersion(ctx context.Context) (string, error) {
	v, err := c.Version(ctx)
	if s := SQLState(err); s == "42883" || s == "3F000" {
		return "", versionError("", err)
	} else if err != nil {
		return "", err
	}
	if major, _, _ := strings.Cut(v, "."); major != strconv.Itoa(supportedMajor) {
		return v, versionError(v, nil)
	}
	return v, nil
}

// AddMessage is mneme.add_message: appends a message now; returns its id.
func (c *Client) AddMessage(ctx context.Context, conv uuid.UUID, role, content string) (int64, error) {
	return c.AddMessageAt(ctx, conv, role, content, time.Time{})
}

// AddMessageAt is AddMessage with the time it was said (zero: now).
func (c *Client) AddMessageAt(ctx context.Context, conv uuid.UUID, role, content string, at time.Time) (int64, error) {
	var id int64
	err := c.scalar(ctx, newCall("add_message", conv, role, content).opt(!at.IsZero(), "at", "", at), &id)
	return id, err
}

// PoppedMessage is the row of mneme.pop_message.
type PoppedMessage struct {
	MessageID int64
	Role      string
	Content   string
	CreatedAt time.Time
}

// PopMessage is mneme.pop_message: removes and returns the conversation's
// latest message while no memory holds it (nil when it has none). Once
// segmentation stored it, the *Error is 55000 and names the memory.
func (c *Client) PopMessage(ctx context.Context, conv uuid.UUID) (*PoppedMessage, error) {
	out, err := rows(ctx, c, newCall("pop_message", conv), `message_id, role, content, created_at`,
		func(r pgx.CollectableRow) (PoppedMessage, error) {
			var m PoppedMessage
			return m, r.Scan(&m.MessageID, &m.Role, &m.Content, &m.CreatedAt)
		})
	if err != nil || len(out) == 0 {
		return nil, err
	}
	return &out[0], nil
}

// SegmentNow is mneme.segment_now: the conversation is over, segment what
// is queued. It returns the job's id, or 0 when nothing is queued.
func (c *Client) SegmentNow(ctx context.Context, conv uuid.UUID) (int64, error) {
	var id *int64
	if err := c.scalar(ctx, newCall("segment_now", conv), &id); err != nil || id == nil {
		return 0, err
	}
	return *id, nil
}

// RememberOptions are mneme.remember's optional arguments; zero values
// leave the SQL defaults.
type RememberOptions struct {
	Label      string // trivial, temporary, general, user_profile, important or project_<name>
	Pinned     bool
	ValidUntil time.Time
	Supersedes uuid.UUID // a memory this one replaces at once (no revise job)
	Title      string
	SourceRef  string
	At         time.Time // when it was said
}

// Remember is mneme.remember: stores a fact; returns its memory id.
func (c *Client) Remember(ctx context.Context, conv uuid.UUID, content string, o RememberOptions) (uuid.UUID, error) {
	q := newCall("remember", conv, content).
		opt(o.Label != "", "label", "", o.Label).
		opt(o.Pinned, "pinned", "", true).
		opt(!o.ValidUntil.IsZero(), "valid_until", "", o.ValidUntil).
		opt(o.Supersedes != uuid.Nil, "supersedes", "", o.Supersedes).
		opt(o.Title != "", "title", "", o.Title).
		opt(o.SourceRef != "", "source_ref", "", o.SourceRef).
		opt(!o.At.IsZero(), "at", "", o.At)
	var id uuid.UUID
	err := c.scalar(ctx, q, &id)
	return id, err
}

// Forget is mneme.forget: invalidates a memory with a reason (the row and
// its history stay).
func (c *Client) Forget(ctx context.Context, memory uuid.UUID, reason string) error {
	return c.exec(ctx, newCall("forget", memory, reason))
}

// Erase is mneme.erase: deletes a memory and every copy of its words
// (mneme_admin).
func (c *Client) Erase(ctx context.Context, memory uuid.UUID, reason string) error {
	return c.exec(ctx, newCall("erase", memory, reason))
}

// EraseConversation is mneme.erase_conversation (mneme_admin); it returns
// the number of memories erased.
func (c *Client) EraseConversation(ctx context.Context, conv uuid.UUID, reason string) (int64, error) {
	var n int64
	err := c.scalar(ctx, newCall("erase_conversation", conv, reason), &n)
	return n, err
}

// Pin is mneme.pin: retrievability counts as 1, never purged.
func (c *Client) Pin(ctx context.Context, memory uuid.UUID) error {
	return c.exec(ctx, newCall("pin", memory))
}

// Unpin is mneme.unpin.
func (c *Client) Unpin(ctx context.Context, memory uuid.UUID) error {
	return c.exec(ctx, newCall("unpin", memory))
}

func (c *Client) exec(ctx context.Context, q call) error {
	return c.run(ctx, q.fn, func(db DB) error {
		_, err := db.Exec(ctx, "SELECT "+q.sql(), q.args...)
		return err
	})
}

// Inspection is mneme.inspect's row. Text that may be NULL is "".
type Inspection struct {
	MemoryID, ConversationID    uuid.UUID
	Kind, Status, StatusReason  string
	Label                       string
	Pinned                      bool
	Summary, Content            string
	Stability, Difficulty       float64
	LastReviewedAt              *time.Time
	ReviewCount                 int32
	SupersedesID, SupersededBy  *uuid.UUID
	CreatedAt                   time.Time
	ConfidenceScore             float32
	SourceType, SourceRef       string
	SourceMessageIDs            []int64
	ValidUntil, LastConfirmedAt *time.Time
	ConfirmsID, InvalidatesID   *uuid.UUID
	Slot, Revision              string
}

// Inspect is mneme.inspect: one memory with its belief state, provenance
// and lineage links.
func (c *Client) Inspect(ctx context.Context, memory uuid.UUID) (Inspection, error) {
	out, err := rows(ctx, c, newCall("inspect", memory), `memory_id, conversation_id, kind, status, coalesce(status_reason, ''),
		label, pinned, coalesce(summary, ''), content, stability, difficulty, last_reviewed_at, review_count, supersedes_id,
		superseded_by, created_at, confidence_score, source_type, coalesce(source_ref, ''), coalesce(source_message_ids, '{}'),
		valid_until, last_confirmed_at, confirms_id, invalidates_id, coalesce(slot, ''), coalesce(revision, '')`,
		func(r pgx.CollectableRow) (Inspection, error) {
			var i Inspection
			return i, r.Scan(&i.MemoryID, &i.ConversationID, &i.Kind, &i.Status, &i.StatusReason, &i.Label, &i.Pinned,
				&i.Summary, &i.Content, &i.Stability, &i.Difficulty, &i.LastReviewedAt, &i.ReviewCount, &i.SupersedesID,
				&i.SupersededBy, &i.CreatedAt, &i.ConfidenceScore, &i.SourceType, &i.SourceRef, &i.SourceMessageIDs,
				&i.ValidUntil, &i.LastConfirmedAt, &i.ConfirmsID, &i.InvalidatesID, &i.Slot, &i.Revision)
		})
	if err != nil {
		return Inspection{}, err
	}
	if len(out) == 0 {
		return Inspection{}, errors.New("inspect: no row") // mneme.inspect raises P0002 itself
	}
	return out[0], nil
}

// HistoryEntry is a row of mneme.history.
type HistoryEntry struct {
	Depth           int32
	Relation        string // self, replaced, replaced_by, confirmed_by, invalidated_by, confirms, invalidates
	MemoryID        uuid.UUID
	Status          string
	StatusReason    string
	Content         string
	SupersedesID    *uuid.UUID
	ConfidenceScore float32
	SourceType      string
	ValidUntil      *time.Time
	CreatedAt       time.Time
}

// History is mneme.history: the memory's lineage both ways, oldest first.
func (c *Client) History(ctx context.Context, memory uuid.UUID) ([]HistoryEntry, error) {
	return rows(ctx, c, newCall("history", memory), `depth, relation, memory_id, status, coalesce(status_reason, ''), content,
		supersedes_id, confidence_score, source_type, valid_until, created_at`,
		func(r pgx.CollectableRow) (HistoryEntry, error) {
			var h HistoryEntry
			return h, r.Scan(&h.Depth, &h.Relation, &h.MemoryID, &h.Status, &h.StatusReason, &h.Content, &h.SupersedesID,
				&h.ConfidenceScore, &h.SourceType, &h.ValidUntil, &h.CreatedAt)
		})
}

// Message is a row of mneme.conversation_messages.
type Message struct {
	MessageID     int64
	Role          string
	Content       string
	CreatedAt     time.Time
	ConsumedAt    *time.Time
	MemoryID      *uuid.UUID
	SetAsideJobID *int64
}

// Messages is mneme.conversation_messages: the conversation's messages in
// order, each with the episode it went into.
func (c *Client) Messages(ctx context.Context, conv uuid.UUID) ([]Message, error) {
	return rows(ctx, c, newCall("conversation_messages", conv), `message_id, role, content, created_at, consumed_at, memory_id, set_aside_job_id`,
		func(r pgx.CollectableRow) (Message, error) {
			var m Message
			return m, r.Scan(&m.MessageID, &m.Role, &m.Content, &m.CreatedAt, &m.ConsumedAt, &m.MemoryID, &m.SetAsideJobID)
		})
}

// HashEmbed is mneme.hash_embed: the built-in embedder's vector of text.
func (c *Client) HashEmbed(ctx context.Context, text string) ([]float32, error) {
	var v []float32
	err := c.scalar(ctx, call{fn: "hash_embed", args: []any{text}}, &v)
	return v, err
}

// ConversationMemory is a row of mneme.conversation_memories. Text that
// may be NULL is "".
type ConversationMemory struct {
	MemoryID         uuid.UUID
	Kind, Status     string
	Label            string
	Pinned           bool
	Title, Summary   string
	Content          string
	SourceMessageIDs []int64
	SourceFirstAt    *time.Time
	Stability        float64
	LastReviewedAt   *time.Time
	ReviewCount      int32
	ConfidenceScore  float32
	SupersedesID     *uuid.UUID
	CreatedAt        time.Time
}

// Memories is mneme.conversation_memories: the conversation's memories of
// every status.
func (c *Client) Memories(ctx context.Context, conv uuid.UUID) ([]ConversationMemory, error) {
	return rows(ctx, c, newCall("conversation_memories", conv), `memory_id, kind, status, label, pinned, coalesce(title, ''),
		coalesce(summary, ''), content, coalesce(source_message_ids, '{}'), source_first_at, stability, last_reviewed_at,
		review_count, confidence_score, supersedes_id, created_at`,
		func(r pgx.CollectableRow) (ConversationMemory, error) {
			var m ConversationMemory
			return m, r.Scan(&m.MemoryID, &m.Kind, &m.Status, &m.Label, &m.Pinned, &m.Title, &m.Summary, &m.Content,
				&m.SourceMessageIDs, &m.SourceFirstAt, &m.Stability, &m.LastReviewedAt, &m.ReviewCount, &m.ConfidenceScore,
				&m.SupersedesID, &m.CreatedAt)
		})
}

// Conversation is a row of mneme.conversations.
type Conversation struct {
	ConversationID                                     uuid.UUID
	Messages, QueuedMessages, Memories, ActiveMemories int64
	LastMessageAt                                      *time.Time
	PendingJobs, FailedJobs                            int64
	PendingReviews                                     int32
}

// Conversations is mneme.conversations: the tenant's conversations, the
// most recently active first, at most k (0: the SQL default, 100).
func (c *Client) Conversations(ctx context.Context, k int) ([]Conversation, error) {
	return rows(ctx, c, newCall("conversations").opt(k != 0, "k", "", k), `conversation_id, messages, queued_messages, memories,
		active_memories, last_message_at, pending_jobs, failed_jobs, pending_reviews`,
		func(r pgx.CollectableRow) (Conversation, error) {
			var v Conversation
			return v, r.Scan(&v.ConversationID, &v.Messages, &v.QueuedMessages, &v.Memories, &v.ActiveMemories,
				&v.LastMessageAt, &v.PendingJobs, &v.FailedJobs, &v.PendingReviews)
		})
}

// ConversationTitle is what a person recognises a conversation by: a row
// of mneme.conversation_titles or mneme.recent_conversations. Text that
// may be NULL is "".
type ConversationTitle struct {
	ConversationID uuid.UUID
	LastMessageAt  *time.Time // recent_conversations only
	Speakers       []string   // set_speakers' names, else the roles of the first messages
	FirstMessage   string     // its first 200 characters
	FirstMessageAt *time.Time
}

// ConversationTitles is mneme.conversation_titles: for each of the
// tenant's conversations named (others: no row), its speakers and first
// message.
func (c *Client) ConversationTitles(ctx context.Context, ids []uuid.UUID) ([]ConversationTitle, error) {
	return rows(ctx, c, newCall("conversation_titles", ids), `conversation_id, NULL::timestamptz, speakers, coalesce(first_message, ''), first_message_at`,
		scanTitle)
}

// RecentConversations is mneme.recent_conversations: the tenant's k most
// recently active conversations (0: the SQL default, 100) with their
// titles and no counts (cheaper than Conversations, for a chooser).
func (c *Client) RecentConversations(ctx context.Context, k int) ([]ConversationTitle, error) {
	return rows(ctx, c, newCall("recent_conversations").opt(k != 0, "k", "", k),
		`conversation_id, last_message_at, speakers, coalesce(first_message, ''), first_message_at`, scanTitle)
}

func scanTitle(r pgx.CollectableRow) (ConversationTitle, error) {
	var v ConversationTitle
	return v, r.Scan(&v.ConversationID, &v.LastMessageAt, &v.Speakers, &v.FirstMessage, &v.FirstMessageAt)
}

// Setting is mneme.setting: a setting's value as JSON (docs/settings.md).
func (c *Client) Setting(ctx context.Context, key string) (json.RawMessage, error) {
	var v []byte
	err := c.scalar(ctx, newCall("setting", key), &v)
	return json.RawMessage(v), err
}
