package pipeline

import (
	"context"
	"fmt"
	"log/slog"
	"strings"

	"github.com/mneme-memory/mneme/sidecar/clip"
	"github.com/mneme-memory/mneme/sidecar/revision"
)

// segmentSystemPrompt instructs the LLM segmenter; %s is the label
// vocabulary, one line per label (segmentPrompt).
const segmentSystemPrompt = `You are a conversation segmenter for a long-term memory system.
You read the messages of a conversation that have not been stored yet and decide whether
they form a complete episode worth storing now as one memory ("create"), or whether the
conversation is still in the middle of its topic and should wait for more messages ("skip").
Create when the messages hold a coherent exchange about one topic that has concluded or
shifted; skip when the topic is still open. When the task says the cut is forced, always create.

For a created memory return:
- summary: one to three sentences in the third person, concrete and self-contained: who said
  or did what, names, places, numbers and dates as given. Empty when skipping.
- surprise: 0 to 1, how new this episode is compared with the earlier memories listed
  (0 = it repeats them, 1 = entirely new information).
- label: one of these:
%s- pinned: true only for core identity facts about the user that must never fade (name,
  family, lasting commitments); otherwise false.
- facts: the facts the messages state about the speakers or people they name, each one
  self-contained sentence in the third person with names instead of pronouns and absolute dates
  (resolve "yesterday" or "last week" from the message times), with the numbers of the messages
  it comes from. Only what was said as true, not questions, plans or guesses. Empty when skipping
  or when nothing factual was said.`

// segmentDecision is the LLM segmenter's structured output.
type segmentDecision struct {
	Action   string    `json:"action" enum:"create,skip" description:"create or skip"`
	Summary  string    `json:"summary" description:"one to three sentences; empty when skipping"`
	Surprise float64   `json:"surprise" description:"0 to 1: novelty against the earlier memories"`
	Label    string    `json:"label" description:"one label of the vocabulary listed in the instructions"`
	Pinned   bool      `json:"pinned" description:"true only for core identity facts"`
	Facts    []llmFact `json:"facts" description:"the facts the messages state; may be empty"`
}

// llmFact is one fact the LLM segmenter extracted: the message numbers are
// the ones shown in the prompt (1-based), so it cannot name other messages.
type llmFact struct {
	Text     string `json:"text" description:"one self-contained sentence, third person, absolute dates"`
	Messages []int  `json:"messages" description:"numbers of the messages it comes from"`
}

// Validate rejects output the segmenter must not write.
func (d *segmentDecision) Validate() error {
	switch d.Action {
	case "create":
		if strings.TrimSpace(d.Summary) == "" {
			return fmt.Errorf("action create needs a summary")
		}
	case "skip":
	default:
		return fmt.Errorf("action %q: want create or skip", d.Action)
	}
	if !(d.Surprise >= 0 && d.Surprise <= 1) {
		return fmt.Errorf("surprise %v: want 0 to 1", d.Surprise)
	}
	// The label is checked by SQL, the one definition of the vocabulary
	// (mneme.is_label): createEpisode lets SQL choose one (mneme.auto_label)
	// when the model's is not in it.
	return nil
}

// llmSegmenter is the Segmenter of a configured LLM.
type llmSegmenter struct {
	llm chatJSON
	log *slog.Logger
}

// llmPrior is how many recent memories the LLM segmenter is shown.
const llmPrior = 5

func (l llmSegmenter) Segment(ctx context.Context, in segmentInput) ([]episode, error) {
	msgs, forced := in.Messages, in.Forced
	prior := in.Prior[:min(len(in.Prior), llmPrior)]
	var b strings.Builder
	b.WriteString("## Earlier Memories\n")
	if len(prior) == 0 {
		b.WriteString("(none)\n")
	}
	for _, m := range prior {
		s := m.Summary
		if s == "" {
			s = clip.String(m.Content, 300)
		}
		fmt.Fprintf(&b, "- %q\n", s)
	}
	b.WriteString("\n## Messages\n")
	for i, m := range msgs {
		fmt.Fprintf(&b, "%d. [%s] %s: %q\n", i+1, m.At.Format("2006-01-02 15:04"), m.Role, m.Content)
	}
	if forced {
		b.WriteString("\n## Task\nThe cut is forced: create a memory of these messages.\n")
	} else {
		b.WriteString("\n## Task\nDecide: create a memory of these messages now, or skip and wait for more.\n")
	}
	var d segmentDecision
	if err := l.llm.JSON(ctx, segmentPrompt(in.Labels), b.String(), "segment_decision", &d); err != nil {
		return nil, fmt.Errorf("llm segmenter: %w", err)
	}
	if err := d.Validate(); err != nil { // in case the client did not
		return nil, fmt.Errorf("llm segmenter: %w", err)
	}
	if d.Action == "skip" && !forced {
		return nil, nil
	}
	if d.Action == "skip" {
		// Nothing is lost silently: a forced cut drains its messages, so it
		// must store them. Keep the LLM's judgement in the label.
		l.log.Warn("llm segmenter answered skip on a forced cut: storing the episode as trivial", "conversation", in.Conversation)
		if strings.TrimSpace(d.Label) == "" {
			d.Label = "trivial"
		}
	}
	return []episode{{Messages: msgs, Summary: strings.TrimSpace(d.Summary), Surprise: d.Surprise, Label: d.Label, Pinned: d.Pinned,
		Facts: l.facts(in, d.Facts)}}, nil
}

// facts turns the model's facts into extracted facts with message ids; a
// fact that is blank, too long or names a message number not shown is
// dropped (logged), never stored with made-up provenance.
func (l llmSegmenter) facts(in segmentInput, fs []llmFact) []revision.Extracted {
	var out []revision.Extracted
	for _, f := range fs {
		text := strings.TrimSpace(f.Text)
		ids := make([]int64, 0, len(f.Messages))
		ok := text != "" && len([]rune(text)) <= 2000 && len(f.Messages) > 0
		for _, n := range f.Messages {
			if n < 1 || n > len(in.Messages) {
				ok = false
				break
			}
			ids = append(ids, in.Messages[n-1].ID)
		}
		if !ok {
			l.log.Warn("llm segmenter: fact dropped (blank, too long, or messages not shown)", "conversation", in.Conversation,
				"fact", clip.String(text, 80), "messages", f.Messages)
			continue
		}
		out = append(out, revision.Extracted{Text: text, MessageIDs: ids})
	}
	return out
}

// labelMeaning is one label of the vocabulary (mneme.label_vocabulary).
type labelMeaning struct {
	Label, Meaning string
}

// segmentPrompt writes the segmenter's instructions with the vocabulary SQL
// defines, so a label added there reaches the model.
func segmentPrompt(labels []labelMeaning) string {
	var b strings.Builder
	for _, l := range labels {
		fmt.Fprintf(&b, "  - %s: %s\n", l.Label, l.Meaning)
	}
	return fmt.Sprintf(segmentSystemPrompt, b.String())
}
