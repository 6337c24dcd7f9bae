// Package fsrs owns mneme's memory-strength model: a thin wrapper over
// go-fsrs v3 (FSRS-5 default parameters, no fuzz) that gives a new memory
// its initial state, computes the next state after a review, and evaluates
// the forgetting curve. Retrieval never calls Next: only reviews do.
package fsrs

import (
	"fmt"
	"math"
	"strings"
	"time"

	gofsrs "github.com/open-spaced-repetition/go-fsrs/v3"
)

// Rating is a review's verdict on one memory.
type Rating = gofsrs.Rating

// The four FSRS ratings.
const (
	Again = gofsrs.Again
	Hard  = gofsrs.Hard
	Good  = gofsrs.Good
	Easy  = gofsrs.Easy
)

// Phase is the FSRS card state, stored in mneme.memories.fsrs_state.
type Phase string

// Phases. A new memory starts in review, as a graduated card (Initial): an
// "again" is then a lapse (relearning, stability of days), where a card in
// learning would only lose half its stability. Learning is kept for rows
// written before that (mneme.reset_initial_state moves them).
const (
	Learning   Phase = "learning"
	Review     Phase = "review"
	Relearning Phase = "relearning"
)

// State is a memory's FSRS state as stored in mneme.memories.
type State struct {
	Stability      float64
	Difficulty     float64
	Phase          Phase
	LastReviewedAt time.Time
	Reviews        int // review_count: reviews after creation
}

var params = func() gofsrs.Parameters {
	p := gofsrs.DefaultParam()
	p.EnableFuzz = false // deterministic
	return p
}()

var scheduler = gofsrs.NewFSRS(params)

// ParseRating reads again, hard, good or easy (any case, surrounding space).
func ParseRating(s string) (Rating, error) {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "again":
		return Again, nil
	case "hard":
		return Hard, nil
	case "good":
		return Good, nil
	case "easy":
		return Easy, nil
	}
	return 0, fmt.Errorf("unknown rating %q: want again, hard, good or easy", s)
}

// Name is the lower-case name mneme stores for a rating.
func Name(r Rating) string { return strings.ToLower(r.String()) }

// Initial is the state of a memory created at createdAt whose label gives
// it stabilityDays (setting initial_stability_days): a graduated card (phase
// review) with stability stabilityDays * (1 + surprise*0.5) (surprise clamped
// to [0, 1]) and the difficulty go-fsrs gives a new card's first "good",
// last reviewed at creation, so retrievability starts at 1. SQL computes the
// same (mneme.initial_state); a test holds them equal.
func Initial(stabilityDays, surprise float64, createdAt time.Time) State {
	if math.IsNaN(surprise) || surprise < 0 {
		surprise = 0
	}
	surprise = math.Min(surprise, 1)
	first := scheduler.Next(gofsrs.NewCard(), createdAt, gofsrs.Good).Card
	return State{
		Stability:      stabilityDays * (1 + surprise*0.5),
		Difficulty:     first.Difficulty,
		Phase:          Review,
		LastReviewedAt: createdAt,
	}
}

// Next is the state after a review rated r at reviewedAt, from the stored
// stability, difficulty and phase and the days elapsed since the last
// review (go-fsrs counts whole days). The caller rejects stale reviews
// (reviewedAt not after LastReviewedAt) before calling it.
func Next(s State, r Rating, reviewedAt time.Time) State {
	card := gofsrs.Card{
		Stability:  s.Stability,
		Difficulty: s.Difficulty,
		State:      s.Phase.card(),
		LastReview: s.LastReviewedAt,
		Reps:       uint64(s.Reviews) + 1,
	}
	next := scheduler.Next(card, reviewedAt, r).Card
	return State{
		Stability:      next.Stability,
		Difficulty:     next.Difficulty,
		Phase:          phaseOf(next.State),
		LastReviewedAt: reviewedAt,
		Reviews:        s.Reviews + 1,
	}
}

// Retrievability is the FSRS-5 forgetting curve at now:
// R = (1 + 19/81 * t / S) ^ -0.5 with t in fractional days (1 when now is
// not after lastReviewedAt).
func Retrievability(stability float64, lastReviewedAt, now time.Time) float64 {
	if !now.After(lastReviewedAt) {
		return 1
	}
	card := gofsrs.Card{Stability: stability, State: gofsrs.Review, LastReview: lastReviewedAt}
	return scheduler.GetRetrievability(card, now)
}

// ParsePhase reads a stored fsrs_state.
func ParsePhase(s string) (Phase, error) {
	switch p := Phase(s); p {
	case Learning, Review, Relearning:
		return p, nil
	}
	return "", fmt.Errorf("unknown fsrs_state %q: want learning, review or relearning", s)
}

func (p Phase) card() gofsrs.State {
	switch p {
	case Review:
		return gofsrs.Review
	case Relearning:
		return gofsrs.Relearning
	}
	return gofsrs.Learning
}

func phaseOf(s gofsrs.State) Phase {
	switch s {
	case gofsrs.Review:
		return Review
	case gofsrs.Relearning:
		return Relearning
	}
	return Learning
}
