package revision

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"

	"github.com/mneme-memory/mneme/sidecar/clip"
	"github.com/mneme-memory/mneme/sidecar/llm"
)

// chatJSON is the LLM: structured output into out (sidecar/llm.Client).
type chatJSON interface {
	JSON(ctx context.Context, system, user, name string, out any) error
}

const reviseSystemPrompt = `You maintain the beliefs of a long-term memory. A new fact has been written.
Compare it with the existing facts listed (numbered) and choose one action:
- ADD: the new fact is new information; every existing fact stays true.
- NOOP: the new fact says the same as one existing fact (a restatement or duplicate).
- SUPERSEDE: the new fact replaces the value of one existing fact about the same subject and
  attribute (e.g. a new city someone lives in, a new employer, a changed preference).
- INVALIDATE: the new fact retracts one existing fact without giving a new value
  (e.g. "no longer works there", "stopped", "quit").
Facts about different subjects, or different attributes of the same subject, never replace
each other: choose ADD. When you are unsure, choose ADD.
Return target: the number of the existing fact for NOOP, SUPERSEDE and INVALIDATE, 0 for ADD;
reason: one short sentence; confidence: 0 to 1.`

// llmDecision is the model's structured output.
type llmDecision struct {
	Action     string  `json:"action" enum:"ADD,NOOP,SUPERSEDE,INVALIDATE" description:"the revision action"`
	Target     int     `json:"target" description:"the number of the existing fact acted on; 0 for ADD"`
	Reason     string  `json:"reason" description:"one short sentence"`
	Confidence float64 `json:"confidence" description:"0 to 1"`
}

// Validate rejects answers that are not one of the four actions on a
// listed fact. n is unknown here; Classify checks the range.
func (d *llmDecision) Validate() error {
	switch d.Action {
	case ActionAdd, ActionNoop, ActionSupersede, ActionInvalidate:
	default:
		return fmt.Errorf("action %q: want ADD, NOOP, SUPERSEDE or INVALIDATE", d.Action)
	}
	if !(d.Confidence >= 0 && d.Confidence <= 1) {
		return fmt.Errorf("confidence %v: want 0 to 1", d.Confidence)
	}
	return nil
}

// DefaultMinConfidence is the confidence under which the model's MERGE,
// SUPERSEDE or INVALIDATE is stored as an ADD: replacing a belief loses
// nothing (the old one stays in history), but an unsure replacement hides
// the right answer from every later search, while an unneeded ADD only
// leaves a duplicate beside it. At 0.5 the model must at least lean
// towards its answer.
const DefaultMinConfidence = 0.5

// LLM is the classifier of a configured model: one structured-output call
// per new fact. Candidate ids are shown as small integers, so the model
// cannot name a memory that was not offered. A malformed answer, a target
// out of range or a confidence under MinConfidence is an ADD; a transport
// error is returned (the job is retried). The slot comes from the offline
// parser either way, so later facts still find this one by slot.
type LLM struct {
	Model         chatJSON
	Log           *slog.Logger
	MinConfidence float64
}

func (LLM) Name() string { return "llm" }

func (l LLM) Classify(ctx context.Context, f Fact, cands []Candidate, s Settings) (Decision, error) {
	d := Decision{Action: ActionAdd} // the job gives it the slot the offline parser reads
	if len(cands) == 0 {
		d.Reason = "nothing similar is believed"
		return d, nil
	}
	var b strings.Builder
	b.WriteString("## Existing facts\n")
	for i, c := range cands {
		fmt.Fprintf(&b, "%d. [%s] %q\n", i+1, c.At.UTC().Format("2006-01-02"), c.Content)
	}
	fmt.Fprintf(&b, "\n## New fact\n[%s] %q\n", f.At.UTC().Format("2006-01-02"), f.Content)
	var out llmDecision
	err := l.Model.JSON(ctx, reviseSystemPrompt, b.String(), "revision_decision", &out)
	if errors.Is(err, llm.ErrInvalidOutput) {
		l.log().Warn("revise: unusable model answer, stored as ADD", "memory", f.ID, "error", err)
		d.Reason = "model answer unusable: " + clip.String(err.Error(), 160)
		return d, nil
	}
	if err != nil {
		return d, fmt.Errorf("llm classifier: %w", err)
	}
	switch {
	case out.Action == ActionAdd:
		d.Reason = out.Reason
	case out.Target < 1 || out.Target > len(cands):
		l.log().Warn("revise: model named no listed fact, stored as ADD", "memory", f.ID, "action", out.Action, "target", out.Target)
		d.Reason = fmt.Sprintf("model answered %s of fact %d, which was not listed", out.Action, out.Target)
	case out.Confidence < l.MinConfidence:
		d.Reason = fmt.Sprintf("model unsure (%s at confidence %.2f): %s", out.Action, out.Confidence, out.Reason)
	default:
		d.Action, d.Target, d.Reason = out.Action, cands[out.Target-1].ID, out.Reason
	}
	return d, nil
}

func (l LLM) log() *slog.Logger {
	if l.Log == nil {
		return slog.New(slog.DiscardHandler)
	}
	return l.Log
}
