package pipeline

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/mneme-memory/mneme/sidecar/fsrs"
	"github.com/mneme-memory/mneme/sidecar/jobs"
)

// target is one memory to rate, with every query that returned it.
type target struct {
	ID      uuid.UUID
	Summary string
	Content string
	Queries []string
	Stored  fsrs.State
	Status  string
}

// Review is the handler of kind "review": it aggregates the pending
// reviews by memory (keeping every query that matched), drops memories that
// are gone or no longer active and asks the reviewer for a rating per
// memory, with no transaction open; then, in one short transaction, it locks
// the memories, computes each FSRS next state from the stored one and
// writes it with a review_log row. A review not newer than a memory's
// last_reviewed_at is skipped as stale.
func (p *Pipelines) Review(ctx context.Context, db jobs.Store, job jobs.Job) error {
	var pl jobs.ReviewArgs
	if err := json.Unmarshal(job.Payload, &pl); err != nil {
		return fmt.Errorf("review job %d: payload (reviews must be an array of {query, memory_ids}): %v: %w", job.ID, err, jobs.ErrPermanent)
	}
	if pl.ReviewedAt.IsZero() {
		return fmt.Errorf("review job %d: payload has no reviewed_at: %w", job.ID, jobs.ErrPermanent)
	}
	entries := pl.Reviews
	set, err := loadSettings(ctx, db)
	if err != nil {
		return err
	}
	log := p.log.With("job", job.ID, "conversation", job.ConversationID.UUID)

	order, queries := aggregate(entries, log)
	if len(order) == 0 {
		return nil
	}
	targets, err := reviewTargets(ctx, db, order, queries, false)
	if err != nil {
		return fmt.Errorf("review job %d: %w", job.ID, err)
	}
	live := targets[:0]
	for _, t := range targets {
		if !reviewable(t.Status) {
			log.Info("review: memory superseded or forgotten, skipped", "memory", t.ID, "status", t.Status)
			continue
		}
		live = append(live, t)
	}
	if len(live) < len(order) {
		log.Info("review: some memories are gone or inactive", "asked", len(order), "reviewing", len(live))
	}
	if len(live) == 0 {
		return nil
	}
	convo := make([]message, len(pl.Context))
	for i, m := range pl.Context {
		convo[i] = message(m)
	}
	if len(pl.ContextMessageIDs) > 0 {
		if convo, err = contextMessages(ctx, db, job.ConversationID.UUID, pl.ContextMessageIDs); err != nil {
			return fmt.Errorf("review job %d: %w", job.ID, err)
		}
	}

	if len(convo) == 0 {
		// Nothing was said after the retrievals (pending reviews handed over
		// early, before any message): no evidence either way.
		log.Info("review: no conversation to judge by, nothing rated", "memories", len(live))
		return nil
	}

	// Decide: the reviewer (a model call with an LLM), no transaction open.
	ratings, err := p.reviewer.Rate(ctx, convo, live, set)
	if err != nil {
		return fmt.Errorf("review job %d: %w", job.ID, err)
	}
	fallback, err := fsrs.ParseRating(set.DefaultRating)
	if err != nil {
		return fmt.Errorf("review job %d: setting review_default_rating: %w", job.ID, err)
	}

	// Writes: lock the rows and compute from what is stored now.
	ids := make([]uuid.UUID, len(live))
	for i, t := range live {
		ids[i] = t.ID
	}
	return db.Commit(ctx, func(tx pgx.Tx) error {
		locked, err := reviewTargets(ctx, tx, ids, queries, true)
		if err != nil {
			return fmt.Errorf("review job %d: %w", job.ID, err)
		}
		for _, t := range locked {
			if err := p.applyReview(ctx, tx, job.ID, t, ratings[t.ID], fallback, pl.ReviewedAt, log); err != nil {
				return fmt.Errorf("review job %d: %w", job.ID, err)
			}
		}
		return nil
	})
}

// applyReview writes one memory's rating as its FSRS next state, computed
// from the locked row; inactive memories and stale reviews are skipped.
func (p *Pipelines) applyReview(ctx context.Context, tx pgx.Tx, jobID int64, t target, v verdict, fallback fsrs.Rating,
	reviewedAt time.Time, log *slog.Logger) error {
	if !reviewable(t.Status) {
		return nil
	}
	if !reviewedAt.After(t.Stored.LastReviewedAt) {
		log.Info("review: stale, skipped", "memory", t.ID, "reviewed_at", reviewedAt, "last_reviewed_at", t.Stored.LastReviewedAt)
		return nil
	}
	r, perr := fsrs.ParseRating(v.Rating)
	defaulted := perr != nil
	if defaulted {
		log.Warn("review: no usable rating, applying the default", "memory", t.ID, "got", v.Rating, "default", fsrs.Name(fallback))
		r = fallback
	}
	next := fsrs.Next(t.Stored, r, reviewedAt)
	// The job, when it is a row of mneme.jobs: apply_review re-reads its
	// payload under a lock, so an erase during the model call is honoured.
	var job any
	if jobID != 0 {
		job = jobID
	}
	var evidence any
	if v.Evidence != nil {
		b, err := json.Marshal(v.Evidence)
		if err != nil {
			return fmt.Errorf("review evidence of %s: %w", t.ID, err)
		}
		evidence = string(b)
	}
	var applied bool
	err := tx.QueryRow(ctx, `SELECT mneme.apply_review($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11::jsonb)`,
		t.ID, fsrs.Name(r), next.Stability, next.Difficulty, string(next.Phase), reviewedAt,
		p.reviewer.Name(), t.Queries, defaulted, job, evidence).Scan(&applied)
	if err != nil {
		return fmt.Errorf("apply review of %s: %w", t.ID, err)
	}
	log.Info("review: rated", "memory", t.ID, "rating", fsrs.Name(r), "defaulted", defaulted,
		"stability_before", t.Stored.Stability, "stability_after", next.Stability, "applied", applied)
	return nil
}

// contextMessages reads a review's context messages by id; erased ones are
// simply absent.
func contextMessages(ctx context.Context, db jobs.Querier, conv uuid.UUID, ids []int64) ([]message, error) {
	rows, err := db.Query(ctx, `SELECT id, role, content, created_at FROM mneme.context_messages($1, $2)`, conv, ids)
	if err != nil {
		return nil, fmt.Errorf("read context messages: %w", err)
	}
	msgs, err := pgx.CollectRows(rows, scanMessage)
	if err != nil {
		return nil, fmt.Errorf("read context messages: %w", err)
	}
	return msgs, nil
}

// reviewable: active, or inactive (cleanup took it out of retrieval after
// it was retrieved; the review makes it active again, in SQL).
func reviewable(status string) bool { return status == "active" || status == "inactive" }

// aggregate deduplicates memory ids in first-seen order and collects every
// query that returned each (a repeat is kept: the count is a signal).
func aggregate(entries []jobs.PendingReview, log interface{ Warn(string, ...any) }) ([]uuid.UUID, map[uuid.UUID][]string) {
	var order []uuid.UUID
	queries := map[uuid.UUID][]string{}
	for _, e := range entries {
		for _, s := range e.MemoryIDs {
			id, err := uuid.Parse(s)
			if err != nil {
				log.Warn("review: not a memory id, ignored", "memory_id", s)
				continue
			}
			if _, seen := queries[id]; !seen {
				order = append(order, id)
				queries[id] = []string{}
			}
			queries[id] = append(queries[id], e.Query)
		}
	}
	return order, queries
}

func reviewTargets(ctx context.Context, db jobs.Querier, ids []uuid.UUID, queries map[uuid.UUID][]string, lock bool) ([]target, error) {
	rows, err := db.Query(ctx, `
		SELECT id, coalesce(summary, ''), content, status, stability, difficulty, fsrs_state, last_reviewed_at, review_count
		FROM mneme.review_targets($1, $2)`, ids, lock)
	if err != nil {
		return nil, fmt.Errorf("read memories to review: %w", err)
	}
	got, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (target, error) {
		var t target
		var phase string
		if err := r.Scan(&t.ID, &t.Summary, &t.Content, &t.Status, &t.Stored.Stability, &t.Stored.Difficulty,
			&phase, &t.Stored.LastReviewedAt, &t.Stored.Reviews); err != nil {
			return t, err
		}
		var err error
		t.Stored.Phase, err = fsrs.ParsePhase(phase)
		return t, err
	})
	if err != nil {
		return nil, fmt.Errorf("read memories to review: %w", err)
	}
	// Back in the pending reviews' order, with their queries.
	byID := map[uuid.UUID]target{}
	for _, t := range got {
		t.Queries = queries[t.ID]
		byID[t.ID] = t
	}
	out := make([]target, 0, len(got))
	for _, id := range ids {
		if t, ok := byID[id]; ok {
			out = append(out, t)
		}
	}
	return out, nil
}
