package ui

import (
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"
)

// TestWrapWords: lineage boxes break at word boundaries (issue 51 showed
// "financial anal|yst"); a word longer than a line is cut; what does not
// fit ends in "…".
func TestWrapWords(t *testing.T) {
	require.Equal(t, []string{"Andrew works as a financial", "analyst now works at a bank"},
		wrapWords("Andrew works as a financial analyst now works at a bank", 31, 3))
	require.Equal(t, []string{"one two", "three four", "five six…"}, wrapWords("one two three four five six seven eight", 10, 3))
	require.Equal(t, []string{"abcdefghij", "klmno"}, wrapWords("abcdefghijklmno", 10, 3))
	require.Equal(t, []string{"superseded", "by"}, wrapWords("superseded by", 12, 2))
	require.Empty(t, wrapWords("   ", 10, 2))
	for _, l := range wrapWords(strings.Repeat("word ", 40), 31, 3) {
		require.LessOrEqual(t, len([]rune(l)), 31)
	}
}

// TestPlotMarks: the retrievability plot of a superseded, once-pinned
// memory: calendar dates on x, the "now" line, a mark per review coloured
// by rating, marks for pin, supersession and valid-until, no curve after
// it stopped being active, and a y range fitted to the curve.
func TestPlotMarks(t *testing.T) {
	now := time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC)
	created := now.AddDate(0, -6, 0)
	stopped := now.AddDate(0, -1, 0)
	m := Memory{ID: uuid.New(), Status: "superseded", CreatedAt: created, LastReviewedAt: created.AddDate(0, 2, 0),
		Stability: 400, ValidUntil: &stopped}
	reviews := []Review{
		{At: created.AddDate(0, 1, 0), Rating: "good", Reviewer: "heuristic", StabilityBefore: 300, StabilityAfter: 350, LastReviewedBefore: created},
		{At: created.AddDate(0, 2, 0), Rating: "again", Reviewer: "llm", StabilityBefore: 350, StabilityAfter: 400, LastReviewedBefore: created.AddDate(0, 1, 0)},
	}
	events := []Event{{At: created.AddDate(0, 3, 0), Event: "pinned", Actor: "app"}, {At: created.AddDate(0, 3, 1), Event: "unpinned", Actor: "app"},
		{At: stopped, Event: "superseded", Actor: "app"}}
	succ := uuid.New()
	lineage := []Link{{Depth: 0, Relation: "self", ID: m.ID}, {Depth: 1, Relation: "replaced_by", ID: succ, CreatedAt: stopped}}
	svg, err := retrievabilityPlot(m, reviews, events, lineage, now)
	require.NoError(t, err)
	s := string(svg)
	for _, want := range []string{`class="marker now"`, `class="marker review review-good"`, `class="marker review review-again"`,
		`class="marker event event-pinned"`, `class="marker event event-superseded"`, `class="marker supersession"`,
		`class="marker valid-until"`, `>Jul 2026<`, `>now<`} {
		require.Contains(t, s, want)
	}
	require.Contains(t, s, `stroke="#D55E00"`, "again in its colour")
	require.NotContains(t, s, `data-label="ahead, if not reviewed"`, "no curve ahead of a superseded memory")
	require.NotContains(t, s, ">0.00<", "the y range fitted: a stability of a year never falls near 0")
}
