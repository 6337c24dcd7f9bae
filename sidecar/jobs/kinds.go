package jobs

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
)

// The payload contract of every job kind the sidecar handles, one Go type
// per kind (River's JobArgs): its Kind and the fields its handler reads,
// with the JSON names on the wire. Every Go encoder and decoder of a kind
// uses its type. The same contract is written twice more, in SQL: the rule
// mneme.enqueue_job checks (mneme.job_kinds, sql/000-core.sql) and one
// builder per kind (mneme._segment_payload and its siblings), which every
// SQL site that enqueues the kind calls. tests/job_contract_test.go holds
// the three together: each type's payloads pass the rule, each builder's
// output decodes strictly into the type, and every kind of mneme.job_kinds
// has a type in AllArgs.

// The kinds of mneme.job_kinds.
const (
	KindSegment     = "segment"
	KindReview      = "review"
	KindRevise      = "revise"
	KindCleanup     = "cleanup"
	KindNoop        = "noop"
	KindConsolidate = "consolidate"
)

// Args is a job kind's payload.
type Args interface {
	Kind() string
}

// AllArgs lists one value of every kind's type: the kinds the sidecar
// knows a payload contract for.
func AllArgs() []Args {
	return []Args{SegmentArgs{}, ReviewArgs{}, ReviseArgs{}, CleanupArgs{}, NoopArgs{}, ConsolidateArgs{}}
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
	ReviewedAt time.Time `json:"reviewed_at,omitzero"`
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
