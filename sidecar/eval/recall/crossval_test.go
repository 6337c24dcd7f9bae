package recall

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/mneme-memory/mneme/sidecar/cli"
)

func TestGrid(t *testing.T) {
	g := Grid(map[string][]string{"context_window": {"1", "2"}, "context_order": {`"rank"`, `"newest"`}})
	require.Len(t, g, 4)
	require.Equal(t, `context_order="rank",context_window=1`, g[0].String())
	require.Equal(t, `context_order="newest",context_window=2`, g[3].String())
	require.Equal(t, "(defaults)", Candidate{}.String())
}

// A candidate that is best only on the held-out conversation is not chosen
// for it: each fold is scored with the choice of the other folds.
func TestFoldScoresNeverSeeTheHeldOutFold(t *testing.T) {
	// Two candidates, three conversations of 10 questions each. A is better
	// on conversations 0 and 1, B much better on 2 only.
	sc := Scores{N: map[int]int{0: 10, 1: 10, 2: 10}, Sum: map[int]map[int]map[int]float64{
		0: {0: {1000: 8}, 1: {1000: 8}, 2: {1000: 2}},  // A
		1: {0: {1000: 7}, 1: {1000: 7}, 2: {1000: 10}}, // B
	}}
	cv := FoldScores([]string{"A", "B"}, []string{"c0", "c1", "c2"}, sc, 3, []int{1000}, 1000)
	require.Equal(t, "B", cv.Chosen[0].Candidate, "fold 1 (c0) trained on c1, c2: B 17 > A 10")
	require.Equal(t, "B", cv.Chosen[1].Candidate)
	require.Equal(t, "A", cv.Chosen[2].Candidate, "fold 3 (c2) trained on c0, c1: A")
	// c0 and c1 scored with B (7 + 7), c2 with A (2): 16 of 30.
	require.InDelta(t, 16.0/30, cv.Recall[1000].Recall, 0.001)
	// In hindsight B (24/30) beats A (18/30): the cross-validated number is
	// lower than the best in hindsight.
	require.InDelta(t, 0.8, cv.Best[1000].Recall, 0.001)
	require.Equal(t, 30, cv.Recall[1000].Questions)
}

// TestChoicesCandidates: --folds and --choose go together (folds 0 or at
// least 2), and the candidates are every combination of the values.
func TestChoicesCandidates(t *testing.T) {
	c := cli.Choices{}
	require.NoError(t, c.Set("context_window=1|2"))
	require.NoError(t, c.Set(`context_order="rank"|"newest"`))
	got, err := Candidates(c, 5)
	require.NoError(t, err)
	require.Len(t, got, 4)
	for _, folds := range []int{-1, 1, 0} {
		_, err := Candidates(c, folds)
		require.ErrorIs(t, err, cli.ErrUsage, "folds %d with --choose", folds)
	}
	_, err = Candidates(cli.Choices{}, 3)
	require.ErrorIs(t, err, cli.ErrUsage, "folds without --choose")
	none, err := Candidates(cli.Choices{}, 0)
	require.NoError(t, err)
	require.Nil(t, none)
}
