package recall

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestTakeCutsAtTheBudget(t *testing.T) {
	docs := []Doc{
		{Words: 10, Turns: []DocTurn{{"A", 4}, {"B", 10}}},
		{Words: 20, Turns: []DocTurn{{"C", 5}, {"D", 12}, {"E", 20}}},
		{Words: 5, Turns: []DocTurn{{"F", 5}}},
	}
	for _, tc := range []struct {
		budget int
		found  []string
		words  int
	}{
		{3, nil, 3},                            // not even A's end fits
		{4, []string{"A"}, 4},                  // A ends exactly at the cut
		{10, []string{"A", "B"}, 10},           // the first doc exactly
		{16, []string{"A", "B", "C"}, 16},      // the second is cut after C
		{22, []string{"A", "B", "C", "D"}, 22}, // ... after D; nothing after it
		{30, []string{"A", "B", "C", "D", "E"}, 30},
		{34, []string{"A", "B", "C", "D", "E"}, 34}, // F is cut: it does not count
		{35, []string{"A", "B", "C", "D", "E", "F"}, 35},
		{1000, []string{"A", "B", "C", "D", "E", "F"}, 35}, // fewer words than the budget
	} {
		inside, words := Take(docs, tc.budget)
		require.Equal(t, tc.found, inside, "budget %d", tc.budget)
		require.Equal(t, tc.words, words, "budget %d", tc.budget)
	}
}

func TestTakeStopsAtTheCutDoc(t *testing.T) {
	// A small doc after a cut one is not taken: the context is a prefix of
	// the ranking, so skipping ahead would reorder it.
	docs := []Doc{{Words: 50, Turns: []DocTurn{{"A", 50}}}, {Words: 2, Turns: []DocTurn{{"B", 2}}}}
	inside, words := Take(docs, 10)
	require.Empty(t, inside)
	require.Equal(t, 10, words)
}

// The context holds each turn once, in the order of the docs that hold it.
func TestTakeKeepsContextOrder(t *testing.T) {
	docs := []Doc{{Words: 4, Turns: []DocTurn{{"B", 2}, {"A", 4}}}, {Words: 4, Turns: []DocTurn{{"A", 2}, {"C", 4}}}}
	inside, words := Take(docs, 8)
	require.Equal(t, []string{"B", "A", "C"}, inside)
	require.Equal(t, 8, words)
}

func TestRecallCountsInvalidIDsAsMissed(t *testing.T) {
	inside := []string{"D1:1", "D2:2"}
	r, hits := evidenceRecall([]string{"D1:1", "D9:99"}, inside)
	require.Equal(t, 0.5, r)
	require.Equal(t, 1, hits)
	r, hits = evidenceRecall([]string{"D3:3"}, inside)
	require.Zero(t, r)
	require.Zero(t, hits)
	r, _ = evidenceRecall([]string{"D1:1", "D2:2"}, inside)
	require.Equal(t, 1.0, r)
}

func TestPlaceTurns(t *testing.T) {
	text := "Ana and Ben talk about cats\nAna: I adopted a cat.\nBen: Congratulations!\nAna: It is grey."
	d := PlaceTurns(text, []string{"D1:1", "D1:2", "D1:3", "D1:4"},
		[]string{"I adopted a cat.", "Congratulations!", "It is grey.", "not in the text"})
	require.Equal(t, 17, d.Words)
	require.Equal(t, []DocTurn{{"D1:1", 11}, {"D1:2", 13}, {"D1:3", 17}, {"D1:4", 17}}, d.Turns)

	// Repeated texts are placed in order, not both at the first occurrence.
	d = PlaceTurns("A: ok\nB: ok", []string{"x", "y"}, []string{"ok", "ok"})
	require.Equal(t, []DocTurn{{"x", 2}, {"y", 4}}, d.Turns)
}
