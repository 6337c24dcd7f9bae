package jobs

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
)

// The kinds of jobs, declared once: Kinds below. Each kind's Go type
// (River's JobArgs) carries its Kind and the fields its handler reads, with
// the JSON names on the wire; every Go encoder and decoder of a kind uses
// it. The SQL side is generated from the same declaration (KindsSQL,
// written to sql/205-job-kinds.sql by `go test ./sidecar/jobs -run
// TestKindsSQL -update`, a test that fails when the file is stale): the
// rows of mneme.job_kinds (the payload rule mneme.enqueue_job checks, read
// off the Go type's fields) and one payload builder per kind
// (mneme._<kind>_payload), which every SQL site that enqueues the kind
// calls. The sidecar binds a handler to every declared kind in one place
// (daemon.Handlers); docs/pipelines.md says how to add a kind.

// The kinds of Kinds.
const (
	KindSegment     = "segment"
	KindReview      = "review"
	KindRevise      = "revise"
	KindCleanup     = "cleanup"
	KindNoop        = "noop"
	KindConsolidate = "consolidate"
)

// Kind declares a job kind: everything Go and SQL know of it but its
// handler.
type Kind struct {
	// Args is the zero value of the kind's payload type; its Kind() is the
	// kind's name. The payload rule is read off its fields: a field is
	// required unless its JSON tag says omitempty or omitzero (a job:"required"
	// tag says required regardless); its type gives the rule's type and
	// range (int64: an id from 1 to 2^63-1; time.Time: an RFC 3339 time;
	// uuid.UUID: a uuid, not the nil one; a slice: an array of its
	// element; a struct: an object of its fields, none required).
	Args Args
	// NeedsConversation: a job of the kind must name a conversation.
	NeedsConversation bool
	// Description is mneme.job_kinds.description.
	Description string
	// Rule is a jsonpath predicate across fields that their types cannot
	// say; Hint says it (or anything else) in words, after the fields.
	Rule, Hint string
	// RuleCode is the SQLSTATE a builder raises when Rule fails (22004
	// when Rule asks for a field; 22023 when empty).
	RuleCode string
	// Builder lists, in order, the JSON names of the fields the SQL
	// builder mneme._<kind>_payload takes as arguments (the fields SQL
	// writes; others are read only, e.g. from older releases).
	Builder []string
}

// Name is the kind's name.
func (k Kind) Name() string { return k.Args.Kind() }

// Kinds is the one declaration of the job kinds. Adding a kind: a Go type
// and a row here, `go test ./sidecar/jobs -run TestKindsSQL -update`, and
// its handler in daemon.Handlers (docs/pipelines.md, "Adding a job kind").
var Kinds = []Kind{
	{Args: SegmentArgs{}, NeedsConversation: true,
		Description: "cut the conversation's queued messages into episodes and store them as memories",
		Rule:        "($.check == true || exists($.through_message_id))", Hint: "through_message_id is required when check is false", RuleCode: "22004",
		Builder: []string{"reason", "check", "through_message_id", "trigger_message_id"}},
	{Args: ReviewArgs{}, NeedsConversation: true,
		Description: "rate the memories a retrieval returned by their use in the conversation since, and move their FSRS state",
		Builder:     []string{"reviews", "reviewed_at", "context_message_ids"}},
	{Args: ReviseArgs{}, NeedsConversation: true,
		Description: "compare a new fact with what the conversation believes: add, merge, supersede or invalidate",
		Hint:        "not the nil uuid",
		Builder:     []string{"memory_id"}},
	{Args: ConsolidateArgs{}, NeedsConversation: true,
		Description: "look again at the active facts of the conversation's scope across episodes and time: supersede what a later statement replaced, merge duplicates",
		Builder:     []string{"reason"}},
	{Args: CleanupArgs{},
		Description: "the lifecycle policy (mneme.cleanup): inactivate faded memories, record expired ones, purge long-inactive ones and prune done jobs, as the settings say",
		Hint:        "any object (the handler reads no field)"},
	{Args: NoopArgs{},
		Description: "nothing: benchmarks and smoke tests", Hint: "any object"},
}

// Args is a job kind's payload.
type Args interface {
	Kind() string
}

// AllArgs lists one value of every declared kind's type (Kinds).
func AllArgs() []Args {
	out := make([]Args, len(Kinds))
	for i, k := range Kinds {
		out[i] = k.Args
	}
	return out
}

// SegmentArgs is a segment job's payload (SQL: mneme._segment_payload,
// called by add_message, segment_now and _segment_followup): why the job
// was enqueued. The handler decides from the queue itself, so the fields
// are informative; through_message_id is required when check is false.
type SegmentArgs struct {
	// Reason: gap, max_messages, check, segment_now or followup.
	Reason string `json:"reason,omitempty"`
	// Check: ask the segmenter (true) or cut regardless (false).
	Check            bool   `json:"check"`
	ThroughMessageID *int64 `json:"through_message_id,omitempty"`
	TriggerMessageID *int64 `json:"trigger_message_id,omitempty"`
	// NextThroughMessageID: written by releases before issue 37 (a cut
	// asked for while another was pending); read only to accept them.
	NextThroughMessageID *int64 `json:"next_through_message_id,omitempty"`
}

// Kind is "segment".
func (SegmentArgs) Kind() string { return KindSegment }

// ReviewArgs is a review job's payload (SQL: mneme._review_payload, called
// by add_pending_review past pending_reviews_max; Go: the segment job's
// hand-over of pending reviews).
type ReviewArgs struct {
	// Reviews are the pending reviews as taken.
	Reviews []PendingReview `json:"reviews"`
	// ContextMessageIDs are the conversation's messages the review judges
	// by; their text stays in mneme.messages (read when the job runs).
	ContextMessageIDs []int64 `json:"context_message_ids,omitempty"`
	// Context carries messages inline: only review jobs enqueued by a
	// release before context_message_ids, still queued after an upgrade.
	Context []ContextMessage `json:"context,omitempty"`
	// ReviewedAt: the time the reviews are judged at. Zero is left out
	// (so refused by the rule): the handler fails a zero time, which the
	// rule would take as 0001-01-01T00:00:00Z.
	ReviewedAt time.Time `json:"reviewed_at,omitzero" job:"required"`
}

// Kind is "review".
func (ReviewArgs) Kind() string { return KindReview }

// PendingReview is one retrieval recorded by mneme.retrieve: the query and
// the memories it returned (ids as text: a malformed one is skipped by the
// handler, not the whole job).
type PendingReview struct {
	Query string `json:"query"`
	// MemoryIDs: an entry without them (an imported queue may hold one)
	// stays without them, not null, which the rule refuses.
	MemoryIDs []string `json:"memory_ids,omitzero"`
}

// ContextMessage is one message carried inline by an old review job.
type ContextMessage struct {
	ID      int64     `json:"id"`
	Role    string    `json:"role"`
	Content string    `json:"content"`
	At      time.Time `json:"at"`
}

// ReviseArgs is a revise job's payload (SQL: mneme._revise_payload, called
// by remember and add_fact): the new fact to compare with what the
// conversation believes.
type ReviseArgs struct {
	MemoryID uuid.UUID `json:"memory_id"`
}

// Kind is "revise".
func (ReviseArgs) Kind() string { return KindRevise }

// ConsolidateArgs is a consolidate job's payload (SQL:
// mneme._consolidate_payload, called by consolidate and
// schedule_consolidation): why it was enqueued; the handler reads the
// conversation's facts itself.
type ConsolidateArgs struct {
	// Reason: on_demand or quiet.
	Reason string `json:"reason,omitempty"`
}

// Kind is "consolidate".
func (ConsolidateArgs) Kind() string { return KindConsolidate }

// CleanupArgs is a cleanup job's payload (SQL: mneme._cleanup_payload,
// called by schedule_cleanup): the handler reads no field.
type CleanupArgs struct{}

// Kind is "cleanup".
func (CleanupArgs) Kind() string { return KindCleanup }

// NoopArgs is a noop job's payload (benchmarks and smoke tests): no field.
type NoopArgs struct{}

// Kind is "noop".
func (NoopArgs) Kind() string { return KindNoop }

// rowQuerier runs one statement (a pool, a connection or a transaction).
type rowQuerier interface {
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// Enqueue marshals args and enqueues a job of its kind for conv (invalid:
// a job of no conversation) with mneme.enqueue_job, in q's transaction if
// q is one. It returns the job's id (a pending equivalent's, if any).
func Enqueue(ctx context.Context, q rowQuerier, conv uuid.NullUUID, args Args) (int64, error) {
	payload, err := json.Marshal(args)
	if err != nil {
		return 0, fmt.Errorf("enqueue %s job: marshal payload: %w", args.Kind(), err)
	}
	var id int64
	if err := q.QueryRow(ctx, `SELECT mneme.enqueue_job($1, $2, $3)`, args.Kind(), conv, payload).Scan(&id); err != nil {
		return 0, fmt.Errorf("enqueue %s job: %w", args.Kind(), err)
	}
	return id, nil
}
