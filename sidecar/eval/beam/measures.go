package beam

import "github.com/mneme-memory/mneme/sidecar/eval/recall"

// The extra measures, beside recall per ability: whether the context holds
// the new value of a knowledge update ahead of the old, and both sides of
// a contradiction. A statement is inside when any of its messages is.
const (
	UpdatedFound = "knowledge_update_updated_found"
	StaleFirst   = "knowledge_update_stale_first"
	BothFound    = "contradiction_both_found"
)

// Measures describe them, in report order.
var Measures = []recall.Measure{
	{Name: UpdatedFound, Label: "updated found", About: "share of knowledge_update questions with a message of the updated value (updated_info) inside"},
	{Name: StaleFirst, Label: "stale first", About: "share of knowledge_update questions with a message of the old value (original_info) inside " +
		"and ahead of every updated one, or inside without them"},
	{Name: BothFound, Label: "both found", About: "share of contradiction_resolution questions with a message of each statement " +
		"(first_statement, second_statement) inside"},
}

// measure is a question's Question.Measure: knowledge updates count toward
// UpdatedFound and StaleFirst, contradictions toward BothFound (old and new
// are their two statements), other abilities toward none.
func measure(ability string, old, new []string) func(inside []string) map[string]float64 {
	if ability != "knowledge_update" && ability != "contradiction_resolution" {
		return nil
	}
	return func(inside []string) map[string]float64 {
		pos := map[string]int{}
		for i, id := range inside {
			if _, seen := pos[id]; !seen {
				pos[id] = i
			}
		}
		first := func(ids []string) (at int, in bool) {
			for _, id := range ids {
				if p, ok := pos[id]; ok && (!in || p < at) {
					at, in = p, true
				}
			}
			return at, in
		}
		oldAt, oldIn := first(old)
		newAt, newIn := first(new)
		if ability == "knowledge_update" {
			return map[string]float64{UpdatedFound: one(newIn), StaleFirst: one(oldIn && (!newIn || oldAt < newAt))}
		}
		return map[string]float64{BothFound: one(oldIn && newIn)}
	}
}

func one(b bool) float64 {
	if b {
		return 1
	}
	return 0
}
