package pipeline

import (
	"context"
	"fmt"
	"log/slog"
	"math"
	"strings"

	"github.com/google/uuid"

	"github.com/mneme-memory/mneme/sidecar/clip"
)

// reviewSystemPrompt tells the LLM reviewer what a review is and how to rate (again, hard, good, easy).
const reviewSystemPrompt = `You are a memory relevance reviewer for a long-term memory system.
Earlier in this conversation a search retrieved the memories listed below, for the queries
shown with each. The conversation has since moved on. For each memory, judge whether it was
actually useful to the conversation that followed: did the conversation use, build on, answer
with, or depend on what the memory says?

Rate each memory with exactly one of:
- again: not used; irrelevant to the conversation (retrieving it was a mistake)
- hard: marginally relevant; the conversation touched its topic but did not really use it
- good: relevant and used; the conversation relied on its content
- easy: central; the conversation revolved around what it says

Judge by use, not by resemblance: a memory that merely shares words with a query but that the
conversation did not use is "again". The number of matched queries is a hint, not a rule.
Rate every memory listed, once, using its id exactly as given, with a short reason (at most 20 words).`

// reviewOutput is the LLM reviewer's structured output. Rating is free
// text on purpose: an unknown value falls back to the default rating for
// that memory instead of failing the whole review.
type reviewOutput struct {
	Ratings []reviewRating `json:"ratings"`
}

type reviewRating struct {
	MemoryID string `json:"memory_id" description:"the id from the Memory heading"`
	Rating   string `json:"rating" description:"again, hard, good or easy"`
	Reason   string `json:"reason" description:"why, in at most 20 words: what in the conversation used or ignored the memory"`
}

// reviewMessage is the user message: the conversation after the retrieval
// and the memories to rate.
func reviewMessage(ctx []message, targets []target) string {
	var b strings.Builder
	b.WriteString("## Conversation Context\n")
	for _, m := range ctx {
		fmt.Fprintf(&b, "- %s: %q\n", m.Role, m.Content)
	}
	b.WriteString("\n## Retrieved Memories\n")
	for _, t := range targets {
		s := t.Summary
		if s == "" {
			s = clip.String(t.Content, 400)
		}
		fmt.Fprintf(&b, "\n### Memory %s\n**Summary:** %s\n**Matched queries:** %s\n", t.ID, s, matchedQueries(t.Queries))
	}
	return b.String()
}

// maxListedQueries bounds the prompt when one memory matched many queries.
const maxListedQueries = 20

// matchedQueries lists the distinct queries in first-seen order, a repeat
// shown as a count, at most maxListedQueries of them.
func matchedQueries(qs []string) string {
	var order []string
	n := map[string]int{}
	for _, q := range qs {
		if n[q] == 0 {
			order = append(order, q)
		}
		n[q]++
	}
	var parts []string
	for i, q := range order {
		if i == maxListedQueries {
			parts = append(parts, fmt.Sprintf("and %d more (%d matches in all)", len(order)-i, len(qs)))
			break
		}
		if n[q] > 1 {
			parts = append(parts, fmt.Sprintf("%q (%d times)", q, n[q]))
		} else {
			parts = append(parts, fmt.Sprintf("%q", q))
		}
	}
	return strings.Join(parts, ", ")
}

// llmReviewer is the Reviewer of a configured LLM.
type llmReviewer struct {
	llm chatJSON
	log *slog.Logger
}

func (llmReviewer) Name() string { return "llm" }

func (l llmReviewer) Rate(ctx context.Context, convo []message, targets []target, _ settings) (map[uuid.UUID]verdict, error) {
	var out reviewOutput
	if err := l.llm.JSON(ctx, reviewSystemPrompt, reviewMessage(convo, targets), "memory_ratings", &out); err != nil {
		return nil, fmt.Errorf("llm reviewer: %w", err)
	}
	want := map[uuid.UUID]bool{}
	for _, t := range targets {
		want[t.ID] = true
	}
	ratings := map[uuid.UUID]verdict{}
	for _, r := range out.Ratings {
		id, err := uuid.Parse(strings.TrimSpace(r.MemoryID))
		if err != nil || !want[id] {
			l.log.Warn("llm reviewer rated a memory it was not asked about; ignored", "memory_id", r.MemoryID)
			continue
		}
		if _, dup := ratings[id]; dup {
			continue // the first rating counts
		}
		v := verdict{Rating: r.Rating}
		if reason := strings.TrimSpace(r.Reason); reason != "" {
			v.Evidence = map[string]any{"reason": clip.String(reason, 500)}
		}
		ratings[id] = v
	}
	return ratings, nil
}

// heuristicReviewer is the offline Reviewer (reviewHeuristic).
type heuristicReviewer struct{}

func (heuristicReviewer) Name() string { return "heuristic" }

func (heuristicReviewer) Rate(_ context.Context, convo []message, targets []target, s settings) (map[uuid.UUID]verdict, error) {
	out := map[uuid.UUID]verdict{}
	for id, score := range heuristicScores(convo, targets) {
		out[id] = verdict{Rating: rateOverlap(score, s.Thresholds),
			Evidence: map[string]any{"score": math.Round(score*10000) / 10000, "thresholds": s.Thresholds}}
	}
	return out, nil
}

// reviewHeuristic rates each memory by how much of it the conversation
// reflects: the content words the conversation shares with the memory's
// summary and content, excluding the words of the queries that retrieved it
// (matching the query is why it was retrieved, not evidence it was used),
// as an Ochiai coefficient |M∩C| / sqrt(|M|·|C|). Below thresholds.hard:
// again; below good: hard; below easy: good; else easy.
func reviewHeuristic(convo []message, targets []target, th map[string]float64) map[uuid.UUID]string {
	out := map[uuid.UUID]string{}
	for id, score := range heuristicScores(convo, targets) {
		out[id] = rateOverlap(score, th)
	}
	return out
}

// heuristicScores is each memory's overlap score (reflection).
func heuristicScores(convo []message, targets []target) map[uuid.UUID]float64 {
	texts := make([]string, len(convo))
	for i, m := range convo {
		texts[i] = m.Content
	}
	ctxTerms := termSet(texts...)
	out := map[uuid.UUID]float64{}
	for _, t := range targets {
		out[t.ID] = reflection(ctxTerms, termSet(t.Summary, t.Content), termSet(t.Queries...))
	}
	return out
}

func reflection(ctxTerms, memTerms, queryTerms map[string]bool) float64 {
	var c, m, both int
	for w := range ctxTerms {
		if !queryTerms[w] {
			c++
			if memTerms[w] {
				both++
			}
		}
	}
	for w := range memTerms {
		if !queryTerms[w] {
			m++
		}
	}
	if both == 0 {
		return 0
	}
	return float64(both) / math.Sqrt(float64(c)*float64(m))
}

func rateOverlap(score float64, th map[string]float64) string {
	switch {
	case score < th["hard"]:
		return "again"
	case score < th["good"]:
		return "hard"
	case score < th["easy"]:
		return "good"
	}
	return "easy"
}
