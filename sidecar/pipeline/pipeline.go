// Package pipeline owns mneme's two conversation pipelines, run as jobs:
// segmentation (kind "segment": queued messages become episodic memories)
// and review (kind "review": a reviewer rates the memories a retrieval
// returned by how the conversation used them, and only that moves FSRS
// state). Each has an LLM path and a deterministic offline fallback.
package pipeline

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"reflect"

	"github.com/google/uuid"

	"github.com/mneme-memory/mneme/sidecar/jobs"
	"github.com/mneme-memory/mneme/sidecar/revision"
)

// chatJSON is the LLM: structured output into out (sidecar/llm.Client).
// It returns an error, leaving out untouched, on malformed or invalid output.
type chatJSON interface {
	JSON(ctx context.Context, system, user, name string, out any) error
}

// embedder turns texts into vectors (sidecar/embed: the hash embedder or an
// OpenAI-compatible endpoint).
type embedder interface {
	Embed(ctx context.Context, texts []string) ([][]float32, error)
	Dim() int
}

// Segmenter decides which episodes to store of a conversation's queued
// messages. It runs with no transaction open. The offline implementation
// (heuristicSegmenter) and the LLM one (llmSegmenter) are wired by New.
type Segmenter interface {
	Segment(ctx context.Context, in segmentInput) ([]episode, error)
}

// segmentInput is what a segmenter gets: the queued messages, whether the
// cut is forced, the conversation's most recent memories (newest first) and
// the settings.
type segmentInput struct {
	Conversation uuid.UUID
	Messages     []message
	Forced       bool
	Prior        []priorMemory
	Settings     settings
	Labels       []labelMeaning // the vocabulary, for the LLM segmenter's instructions
}

// Reviewer rates each retrieved memory by how the conversation that
// followed used it: again, hard, good or easy (anything else falls back to
// setting review_default_rating). It runs with no transaction open.
type Reviewer interface {
	// Name is stored in review_log.reviewer.
	Name() string
	Rate(ctx context.Context, convo []message, targets []target, s settings) (map[uuid.UUID]verdict, error)
}

// verdict is a memory's rating and why (review_log.evidence, shown by mneme
// ui): the heuristic's score and thresholds, or the LLM's reason.
type verdict struct {
	Rating   string
	Evidence map[string]any
}

// Deps are what the pipelines need. LLM nil means offline: the heuristic
// segmenter and reviewer. Embedder is required: the offline segmenter
// compares embedded windows, and with an external embedder (setting
// embedder = "external") it also embeds new memories; with the built-in
// hash embedder SQL fills a NULL embedding itself.
type Deps struct {
	LLM      chatJSON
	Embedder embedder
	Log      *slog.Logger
}

// Pipelines holds the handlers' dependencies.
type Pipelines struct {
	segmenter Segmenter
	reviewer  Reviewer
	reviser   revision.Reviser
	// consolidator: the consolidate job (rules, and the model when set).
	consolidator revision.Consolidator
	embed        embedder
	log          *slog.Logger
	// llmFacts: the segmenter returns the facts of its episodes itself (an
	// LLM); otherwise the offline extractor finds them.
	llmFacts bool
}

// New wires the pipelines: the LLM segmenter and reviewer when d.LLM is set,
// the offline ones otherwise. This is the one place that chooses them.
func New(d Deps) (*Pipelines, error) {
	if d.Embedder == nil {
		return nil, fmt.Errorf("pipeline: an embedder is required (the built-in hash embedder works offline)")
	}
	p := &Pipelines{embed: d.Embedder, log: d.Log}
	if p.log == nil {
		p.log = slog.New(slog.DiscardHandler)
	}
	if d.LLM != nil {
		p.segmenter = llmSegmenter{llm: d.LLM, log: p.log}
		p.reviewer = llmReviewer{llm: d.LLM, log: p.log}
		p.reviser = revision.Reviser{Classifier: revision.LLM{Model: d.LLM, Log: p.log, MinConfidence: revision.DefaultMinConfidence}, Log: p.log}
		p.consolidator = revision.Consolidator{Model: d.LLM, Log: p.log, MinConfidence: revision.DefaultMinConfidence}
		p.llmFacts = true
	} else {
		p.segmenter = heuristicSegmenter{embed: d.Embedder}
		p.reviewer = heuristicReviewer{}
		p.reviser = revision.Reviser{Classifier: revision.Heuristic{}, Log: p.log}
		p.consolidator = revision.Consolidator{Log: p.log}
	}
	return p, nil
}

// Revise is the revise job's handler: belief revision (package revision)
// with the classifier New chose.
func (p *Pipelines) Revise(ctx context.Context, db jobs.Store, job jobs.Job) error {
	return p.reviser.Handle(ctx, db, job)
}

// Consolidate is the consolidate job's handler: a second look at the
// active facts of the conversation's scope (package revision).
func (p *Pipelines) Consolidate(ctx context.Context, db jobs.Store, job jobs.Job) error {
	return p.consolidator.Handle(ctx, db, job)
}

// settings are the tunables the pipelines read, once per job.
type settings struct {
	Window          int                `key:"segment_window"`
	EpisodeMin      int                `key:"segment_episode_min"`
	EpisodeMax      int                `key:"segment_episode_max"`
	ShiftSimilarity float64            `key:"segment_shift_similarity"`
	SummarySents    int                `key:"segment_summary_sentences"`
	DefaultRating   string             `key:"review_default_rating"`
	Thresholds      map[string]float64 `key:"review_heuristic_thresholds"`
	Embedder        string             `key:"embedder"`
	EmbeddingDim    int                `key:"embedding_dim"`
	ExtractFacts    bool               `key:"extract_facts"`
	MinMessages     int                `key:"segment_min_messages"`
	MaxMessages     int                `key:"segment_max_messages"`
	FactsMax        int                `key:"extract_facts_max"`
}

func loadSettings(ctx context.Context, db jobs.Querier) (settings, error) {
	var s settings
	rows, err := db.Query(ctx, `SELECT key, value FROM mneme.settings`)
	if err != nil {
		return s, fmt.Errorf("read settings: %w", err)
	}
	vals := map[string][]byte{}
	for rows.Next() {
		var k string
		var v []byte
		if err := rows.Scan(&k, &v); err != nil {
			return s, fmt.Errorf("read settings: %w", err)
		}
		vals[k] = v
	}
	if err := rows.Err(); err != nil {
		return s, fmt.Errorf("read settings: %w", err)
	}
	rv := reflect.ValueOf(&s).Elem()
	for i := 0; i < rv.NumField(); i++ {
		key := rv.Type().Field(i).Tag.Get("key")
		raw, ok := vals[key]
		if !ok {
			return s, fmt.Errorf("setting %s is missing: run mneme migrate", key)
		}
		if err := json.Unmarshal(raw, rv.Field(i).Addr().Interface()); err != nil {
			return s, fmt.Errorf("setting %s = %s: %w", key, raw, err)
		}
	}
	if s.MinMessages < 1 || s.MaxMessages < 1 {
		return s, fmt.Errorf("settings segment_min_messages (%d), segment_max_messages (%d): want >= 1", s.MinMessages, s.MaxMessages)
	}
	if s.FactsMax < 1 {
		return s, fmt.Errorf("setting extract_facts_max (%d): want >= 1", s.FactsMax)
	}
	if s.Window < 1 || s.EpisodeMin < 1 || s.EpisodeMax < s.EpisodeMin || s.SummarySents < 1 {
		return s, fmt.Errorf("settings segment_window (%d), segment_episode_min (%d), segment_episode_max (%d), segment_summary_sentences (%d): want window, min and sentences >= 1 and max >= min",
			s.Window, s.EpisodeMin, s.EpisodeMax, s.SummarySents)
	}
	for _, k := range []string{"hard", "good", "easy"} {
		if _, ok := s.Thresholds[k]; !ok {
			return s, fmt.Errorf("setting review_heuristic_thresholds needs keys hard, good and easy, has %v", s.Thresholds)
		}
	}
	return s, nil
}
