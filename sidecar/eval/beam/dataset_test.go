package beam

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/mneme-memory/mneme/sidecar/dbtest"
	"github.com/mneme-memory/mneme/sidecar/eval/recall"
)

func TestMain(m *testing.M) { dbtest.Main(m) }

func TestLoadTier(t *testing.T) {
	d, err := Load("testdata/tier")
	require.NoError(t, err)
	require.Equal(t, "BEAM", d.Benchmark)
	require.Equal(t, "tier", d.Name)
	require.Equal(t, Abilities, d.Categories)
	require.Equal(t, Measures, d.Measures)
	require.Len(t, d.Conversations, 2)
	c := d.Conversations[0]
	require.Equal(t, "beam-1", c.ID)
	require.Equal(t, Spacing, c.Spacing)
	require.Len(t, c.Sessions, 3)
	require.Equal(t, time.Date(2024, 3, 15, 0, 0, 0, 0, time.UTC), c.Sessions[0].At, "the first message's time_anchor")
	require.Equal(t, time.Date(2024, 4, 5, 0, 0, 0, 0, time.UTC), c.Sessions[1].At)
	require.Equal(t, time.Date(2024, 4, 6, 0, 0, 0, 0, time.UTC), c.Sessions[2].At, "undated: the day after the previous batch")
	require.Equal(t, recall.Turn{ID: "3", Speaker: "assistant", Text: "Caching the summary query would bring that down."}, c.Sessions[0].Turns[3])
	require.Equal(t, map[string]int{SkipNoEvidence: 1, SkipBadIDs: 1}, c.Skipped)

	byAbility := map[string]recall.Question{}
	for _, q := range c.Questions {
		byAbility[q.Category] = q
	}
	require.Len(t, c.Questions, 4)
	require.Equal(t, []string{"0"}, byAbility["information_extraction"].Evidence)
	require.Nil(t, byAbility["information_extraction"].Measure)
	require.Equal(t, []string{"2", "6"}, byAbility["knowledge_update"].Evidence)
	require.Equal(t, []string{"4", "8"}, byAbility["contradiction_resolution"].Evidence)
	require.Equal(t, []string{"0", "2", "4", "8"}, byAbility["event_ordering"].Evidence, "nested lists flatten")

	// original_info [2] and updated_info [6]; first_statement [4] and
	// second_statement [8].
	ku := byAbility["knowledge_update"].Measure
	require.Equal(t, map[string]float64{UpdatedFound: 1, StaleFirst: 0}, ku([]string{"6", "2"}))
	require.Equal(t, map[string]float64{UpdatedFound: 1, StaleFirst: 1}, ku([]string{"2", "6"}), "the old value first")
	require.Equal(t, map[string]float64{UpdatedFound: 0, StaleFirst: 1}, ku([]string{"0", "2"}), "the old value without the new")
	require.Equal(t, map[string]float64{UpdatedFound: 0, StaleFirst: 0}, ku(nil))
	cr := byAbility["contradiction_resolution"].Measure
	require.Equal(t, map[string]float64{BothFound: 1}, cr([]string{"8", "0", "4"}))
	require.Equal(t, map[string]float64{BothFound: 0}, cr([]string{"4"}))

	one, err := Load("testdata/tier/2")
	require.NoError(t, err, "a single conversation folder, questions under probing_questions/")
	require.Len(t, one.Conversations, 1)
	require.Len(t, one.Conversations[0].Questions, 1)
}

func TestLoadErrors(t *testing.T) {
	_, err := Load("testdata/bad")
	require.ErrorContains(t, err, `time_anchor "the fifteenth of March"`)
	_, err = Load("testdata/nowhere")
	require.Error(t, err)
	_, err = Load(t.TempDir())
	require.ErrorContains(t, err, "holds no chat.json")
	_, err = parseSources([]byte(`["x"]`))
	require.ErrorContains(t, err, "want message ids")
	_, err = parseSources([]byte(`[1.5]`))
	require.ErrorContains(t, err, "not a message id")
}

// TestRunFixture evaluates the fixture end to end on a real database:
// every method reports every budget; at 2,000 words the context holds the
// whole (small) conversation, so mneme context finds every evidence
// message, the updated value and both contradicting statements.
func TestRunFixture(t *testing.T) {
	db := dbtest.New(t)
	d, err := Load("testdata/tier")
	require.NoError(t, err)
	rep, err := recall.Run(context.Background(), db.Pool, recall.Options{Budgets: []int{20, 2000}, Headline: 2000}, d)
	require.NoError(t, err)
	require.Equal(t, []string{"beam-1", "beam-2"}, rep.Conversations)
	require.Equal(t, 14, rep.Turns)
	require.Equal(t, 5, rep.Questions)
	require.Equal(t, []string{"information_extraction", "knowledge_update", "event_ordering", "contradiction_resolution"}, rep.Categories)
	require.Len(t, rep.Methods, len(recall.Methods))
	for _, m := range rep.Methods {
		require.Len(t, m.Results, 2, m.Name)
	}
	full := rep.Result(recall.MethodContext, 2000)
	require.Equal(t, 1.0, full.Overall.Recall)
	require.Equal(t, 2, full.ByCategory["information_extraction"].Questions)
	require.Equal(t, map[string]float64{UpdatedFound: 1, StaleFirst: 0, BothFound: 1}, full.Measures)
	require.LessOrEqual(t, rep.Result(recall.MethodContext, 20).Overall.Recall, 1.0)
	var table, plot strings.Builder
	require.NoError(t, rep.WriteTable(&table))
	require.Contains(t, table.String(), "mneme context")
	require.Contains(t, table.String(), "stale first")
	require.NoError(t, rep.WritePlot(&plot))
	require.Contains(t, plot.String(), "<svg")
}
