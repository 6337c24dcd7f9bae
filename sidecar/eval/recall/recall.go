// Package recall is the evidence-recall harness of the benchmark
// evaluations (LoCoMo, BEAM): given conversations in its model, it feeds
// every turn through mneme's real write path (mneme.add_message and the
// segmentation pipeline) on a scratch database, asks every question of
// mneme and of baselines ranked on the same data, and measures which
// evidence turns come back within a context budget in words. It owns the
// run (settings, wiring, budgets, cross-validation), the report (one JSON
// shape for every benchmark), its table and plot, and the command-line
// flags; a reader per benchmark (packages locomo and beam) turns the
// benchmark's files into Data.
package recall

import "time"

// Data is one benchmark's conversations as its reader gives them to the
// harness. The reader refuses what the run cannot evaluate faithfully: a
// conversation id empty or given twice, a turn id given twice in a
// conversation, no spacing between turns.
type Data struct {
	Benchmark string // the benchmark's name, e.g. LoCoMo: the report's title
	Name      string // the file or folder read, as the report names it
	// Categories are the question categories in report order (the table's
	// columns); a question of a category not listed comes after them.
	Categories    []string
	Measures      []Measure // the reader's extra measures (Question.Measure), in report order
	Conversations []Conversation
}

// Conversation is one conversation of a benchmark: dated sessions of turns,
// and the questions asked after the last one.
type Conversation struct {
	ID        string // unique in the data; the mneme conversation id derives from it
	Sessions  []Session
	Questions []Question
	// Spacing is the time between two turns of a session: benchmarks date
	// sessions, not turns.
	Spacing time.Duration
	// Skipped counts the questions not evaluated, by reason.
	Skipped map[string]int
}

// Session is one dated session of a conversation.
type Session struct {
	At    time.Time // the time of its first turn
	Turns []Turn
}

// Turn is one message of a conversation.
type Turn struct {
	ID      string // unique in the conversation: what evidence names (LoCoMo's dia_id, BEAM's message id)
	Speaker string // the message's role
	Text    string
}

// Question is one evaluated question.
type Question struct {
	Index    int // position in the reader's source, for messages
	Text     string
	Category string // recall is reported per category too
	// Answer is the benchmark's reference answer ("" when it gives none):
	// what `mneme eval qa` judges a model's answer against.
	Answer string
	// Evidence holds the distinct ids of the turns that answer the
	// question; ids that name no turn of the conversation count as missed.
	Evidence []string
	// Measure, when set, computes the reader's extra measures of one
	// context built for the question from the ids of the evidence turns
	// inside it, in context order: a value (usually 0 or 1) for each
	// measure the question counts toward. The report gives, per method and
	// budget, each measure's mean over the questions that count toward it.
	Measure func(inside []string) map[string]float64
}

// Measure names and describes one extra measure of a reader.
type Measure struct {
	Name  string `json:"name"`  // the key of BudgetResult.Measures
	Label string `json:"label"` // the table's column
	About string `json:"about"`
}

// TurnCount is the number of turns of the conversation.
func (c *Conversation) TurnCount() int {
	n := 0
	for _, s := range c.Sessions {
		n += len(s.Turns)
	}
	return n
}
