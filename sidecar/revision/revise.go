// Package revision owns belief revision: the "revise" job that compares a
// new fact (an explicit mneme.remember or a fact extracted by
// segmentation) with the closest facts of its scope and applies ADD, NOOP,
// SUPERSEDE or INVALIDATE in SQL (mneme.apply_revision); the offline and
// LLM classifiers it chooses with; and the offline fact extractor that
// segmentation uses without an LLM.
package revision

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/mneme-memory/mneme/sidecar/fsrs"
	"github.com/mneme-memory/mneme/sidecar/jobs"
	"github.com/mneme-memory/mneme/sidecar/pgtime"
)

// forceAttempt is the attempt from which a decision whose target changed
// meanwhile is stored as an ADD instead of being decided again.
const forceAttempt = 3

// ErrStale is returned (and the job retried, re-reading the candidates)
// when the fact a decision acted on was revised by another job meanwhile.
var ErrStale = errors.New("the target changed since the decision: deciding again")

// Reviser is the revise job's handler.
type Reviser struct {
	Classifier Classifier
	Log        *slog.Logger
}

// Handle is the handler of kind "revise": it reads the new fact and its
// candidates, lets the classifier decide with no transaction open, then
// applies the decision in one short transaction (mneme.apply_revision locks
// both rows and re-checks them); a NOOP also gives the confirmed fact an
// FSRS "good" review at the time of the restatement.
func (r Reviser) Handle(ctx context.Context, db jobs.Store, job jobs.Job) error {
	var pl jobs.ReviseArgs
	if err := json.Unmarshal(job.Payload, &pl); err != nil || pl.MemoryID == uuid.Nil {
		return fmt.Errorf("revise job %d: payload %s needs a memory_id: %w", job.ID, job.Payload, jobs.ErrPermanent)
	}
	log := r.log().With("job", job.ID, "memory", pl.MemoryID)
	var f Fact
	var status string
	err := db.QueryRow(ctx, `SELECT id, content, created_at, status FROM mneme.memories WHERE id = $1`, pl.MemoryID).
		Scan(&f.ID, &f.Content, pgtime.Finite{T: &f.At}, &status)
	if errors.Is(err, pgx.ErrNoRows) {
		log.Info("revise: the memory is gone (erased or purged), nothing to do")
		return nil
	}
	if err != nil {
		return fmt.Errorf("revise job %d: read memory: %w", job.ID, err)
	}
	if status != "active" {
		log.Info("revise: the memory is no longer active, nothing to do", "status", status)
		return nil
	}
	var set Settings
	if err := db.QueryRow(ctx, `SELECT (mneme.setting('revision_duplicate_similarity') #>> '{}')::float8`).Scan(&set.DuplicateSimilarity); err != nil {
		return fmt.Errorf("revise job %d: read settings: %w", job.ID, err)
	}
	slot := Parse(f.Content).Slot()
	cands, err := candidates(ctx, db, f.ID, slot)
	if err != nil {
		return fmt.Errorf("revise job %d: %w", job.ID, err)
	}

	// Decide: the classifier (a model call with an LLM), no transaction open.
	d, err := r.Classifier.Classify(ctx, f, cands, set)
	if err != nil {
		return fmt.Errorf("revise job %d: %w", job.ID, err)
	}
	if d.Slot == "" {
		d.Slot = slot
	}
	if d.Action == ActionAdd && Parse(f.Content).Negated {
		// A retraction that retracted nothing states no value of its
		// slot ("I sold my house" is no car): kept out of the slot.
		d.Slot = ""
	}
	var target any
	if d.Action != ActionAdd {
		target = d.Target
	}
	force := job.Attempts >= forceAttempt
	var jobID any // the job's tenant bounds what it may revise (none for an inline job)
	if job.ID != 0 {
		jobID = job.ID
	}
	return db.Commit(ctx, func(tx pgx.Tx) error {
		var applied string
		if err := tx.QueryRow(ctx, `SELECT mneme.apply_revision($1, $2, $3, $4, $5, nullif($6, ''), $7, $8)`,
			f.ID, d.Action, target, d.Reason, r.Classifier.Name(), d.Slot, force, jobID).Scan(&applied); err != nil {
			return fmt.Errorf("revise job %d: apply %s: %w", job.ID, d.Action, err)
		}
		log.Info("revise: applied", appliedAttrs(d, applied, r.Classifier.Name(), len(cands))...)
		switch applied {
		case "STALE":
			return fmt.Errorf("revise job %d: %s of %s: %w", job.ID, d.Action, d.Target, ErrStale)
		case ActionNoop:
			return r.reconfirm(ctx, tx, job.ID, d.Target, f, log)
		}
		return nil
	})
}

// reconfirm applies the FSRS "good" review a restatement earns the fact it
// confirms, at the restatement's time (skipped as stale when the fact was
// reviewed later than that).
func (r Reviser) reconfirm(ctx context.Context, tx pgx.Tx, jobID int64, target uuid.UUID, f Fact, log *slog.Logger) error {
	var st fsrs.State
	var phase string
	err := tx.QueryRow(ctx, `SELECT stability, difficulty, fsrs_state, last_reviewed_at, review_count
		FROM mneme.review_targets(ARRAY[$1]::uuid[], true)`, target).
		Scan(&st.Stability, &st.Difficulty, &phase, &st.LastReviewedAt, &st.Reviews)
	if err != nil {
		return fmt.Errorf("revise job %d: read confirmed memory %s: %w", jobID, target, err)
	}
	if st.Phase, err = fsrs.ParsePhase(phase); err != nil {
		return fmt.Errorf("revise job %d: %w", jobID, err)
	}
	at := f.At
	if now := time.Now(); at.After(now) {
		at = now
	}
	if !at.After(st.LastReviewedAt) {
		log.Info("revise: the confirmed memory was reviewed after the restatement; no review", "target", target)
		return nil
	}
	next := fsrs.Next(st, fsrs.Good, at)
	var applied bool
	if err := tx.QueryRow(ctx, `SELECT mneme.apply_review($1, 'good', $2, $3, $4, $5, $6, $7, false, $8)`,
		target, next.Stability, next.Difficulty, string(next.Phase), at, r.Classifier.Name(),
		[]string{"restated by " + f.ID.String()}, nullJob(jobID)).Scan(&applied); err != nil {
		return fmt.Errorf("revise job %d: review confirmed memory %s: %w", jobID, target, err)
	}
	log.Info("revise: confirmed memory reviewed good", "target", target, "stability_before", st.Stability,
		"stability_after", next.Stability, "applied", applied)
	return nil
}

func candidates(ctx context.Context, db jobs.Querier, id uuid.UUID, slot string) ([]Candidate, error) {
	rows, err := db.Query(ctx, `SELECT id, content, at, coalesce(slot, ''), score
		FROM mneme.revision_candidates($1, NULL, nullif($2, ''))`, id, slot)
	if err != nil {
		return nil, fmt.Errorf("read candidates: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (Candidate, error) {
		var c Candidate
		return c, row.Scan(&c.ID, &c.Content, pgtime.Finite{T: &c.At}, &c.Slot, &c.Score)
	})
	if err != nil {
		return nil, fmt.Errorf("read candidates: %w", err)
	}
	return out, nil
}

func (r Reviser) log() *slog.Logger {
	if r.Log == nil {
		return slog.New(slog.DiscardHandler)
	}
	return r.Log
}

// nullJob is a job id as a query argument: NULL for an inline job (no row
// of mneme.jobs).
func nullJob(id int64) any {
	if id == 0 {
		return nil
	}
	return id
}

// appliedAttrs are the attributes of the "revise: applied" log line: the
// target only for an action that has one (an ADD acts on no existing fact).
func appliedAttrs(d Decision, applied, classifier string, candidates int) []any {
	attrs := []any{"decided", d.Action, "applied", applied}
	if d.Action != ActionAdd {
		attrs = append(attrs, "target", d.Target)
	}
	return append(attrs, "reason", d.Reason, "classifier", classifier, "candidates", candidates)
}
