package beam

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/mneme-memory/mneme/sidecar/dbtest"
	"github.com/mneme-memory/mneme/sidecar/embed"
	"github.com/mneme-memory/mneme/sidecar/eval/locomo"
	"github.com/mneme-memory/mneme/sidecar/pipeline"
)

func TestMain(m *testing.M) { dbtest.Main(m) }

func TestLoadTier(t *testing.T) {
	convs, err := Load("testdata/tier")
	require.NoError(t, err)
	require.Len(t, convs, 2)
	c := convs[0]
	require.Equal(t, "1", c.ID)
	require.Len(t, c.Batches, 3)
	require.Equal(t, time.Date(2024, 3, 15, 0, 0, 0, 0, time.UTC), c.Batches[0].At, "the first message's time_anchor")
	require.Equal(t, time.Date(2024, 4, 5, 0, 0, 0, 0, time.UTC), c.Batches[1].At)
	require.Equal(t, time.Date(2024, 4, 6, 0, 0, 0, 0, time.UTC), c.Batches[2].At, "undated: the day after the previous batch")
	require.Equal(t, Message{ID: 3, Role: "assistant", Content: "Caching the summary query would bring that down."}, c.Batches[0].Messages[3])
	require.Equal(t, map[string]int{SkipNoEvidence: 1, SkipBadIDs: 1}, c.Skipped)

	byAbility := map[string]Question{}
	for _, q := range c.Questions {
		byAbility[q.Ability] = q
	}
	require.Len(t, c.Questions, 4)
	require.Equal(t, []int{0}, byAbility["information_extraction"].Evidence)
	ku := byAbility["knowledge_update"]
	require.Equal(t, []int{2}, ku.Old)
	require.Equal(t, []int{6}, ku.New)
	require.ElementsMatch(t, []int{2, 6}, ku.Evidence)
	cr := byAbility["contradiction_resolution"]
	require.Equal(t, []int{4}, cr.Old)
	require.Equal(t, []int{8}, cr.New)
	require.Equal(t, []int{0, 2, 4, 8}, byAbility["event_ordering"].Evidence, "nested lists flatten")

	one, err := Load("testdata/tier/2")
	require.NoError(t, err, "a single conversation folder, questions under probing_questions/")
	require.Len(t, one, 1)
	require.Len(t, one[0].Questions, 1)
}

func TestLoadErrors(t *testing.T) {
	_, err := Load("testdata/bad")
	require.ErrorContains(t, err, `time_anchor "the fifteenth of March"`)
	_, err = Load("testdata/nowhere")
	require.Error(t, err)
	_, err = Load(t.TempDir())
	require.ErrorContains(t, err, "holds no chat.json")
	q := Question{}
	require.ErrorContains(t, q.parseSources([]byte(`["x"]`)), "want message ids")
	require.ErrorContains(t, q.parseSources([]byte(`[1.5]`)), "not a message id")
}

func TestConvert(t *testing.T) {
	convs, err := Load("testdata/tier")
	require.NoError(t, err)
	lc, byIndex := Convert(convs)
	require.Len(t, lc, 2)
	require.Equal(t, "beam-1", lc[0].ID)
	require.Equal(t, Spacing, lc[0].Spacing)
	require.Equal(t, locomo.Turn{DiaID: "6", Speaker: "user", Text: "After the caching tweaks the dashboard API answers in about 250ms."}, lc[0].Sessions[1].Turns[0])
	require.Len(t, byIndex, 5)
	require.Equal(t, "Who visits in June?", byIndex[lc[1].Questions[0].Index].Text, "indexes are unique across conversations")
}

// TestRunFixture evaluates the fixture end to end on a real database:
// every method reports every budget; at 2,000 words the context holds the
// whole (small) conversation, so mneme context finds every evidence
// message, the updated value and both contradicting statements.
func TestRunFixture(t *testing.T) {
	db := dbtest.New(t)
	convs, err := Load("testdata/tier")
	require.NoError(t, err)
	jobs, err := locomo.PipelineJobs(db.Pool, pipeline.Deps{Embedder: embed.NewHash(256)})
	require.NoError(t, err)
	rep, err := Run(context.Background(), db.Pool, convs, locomo.Options{Budgets: []int{20, 2000}, Headline: 2000, Jobs: jobs, Data: "testdata/tier"})
	require.NoError(t, err)
	require.Equal(t, 2, rep.Conversations)
	require.Equal(t, 14, rep.Messages)
	require.Equal(t, map[string]int{"information_extraction": 2, "knowledge_update": 1, "contradiction_resolution": 1, "event_ordering": 1}, rep.Questions)
	require.Len(t, rep.Methods, len(locomo.Methods))
	var ctx Method
	for _, m := range rep.Methods {
		require.Len(t, m.Results, 2, m.Name)
		if m.Name == locomo.MethodContext {
			ctx = m
		}
	}
	full := ctx.Results[1]
	require.Equal(t, 2000, full.Budget)
	require.Equal(t, 1.0, full.Recall)
	require.Equal(t, 1.0, full.UpdatedFound)
	require.Equal(t, 1.0, full.BothFound)
	require.LessOrEqual(t, ctx.Results[0].Recall, 1.0)
	var table, js, plot strings.Builder
	require.NoError(t, rep.WriteTable(&table))
	require.Contains(t, table.String(), "mneme context")
	require.Contains(t, table.String(), "updated found")
	require.NoError(t, rep.WriteJSON(&js))
	require.Contains(t, js.String(), `"knowledge_update_stale_first"`)
	require.NoError(t, rep.WritePlot(&plot))
	require.Contains(t, plot.String(), "<svg")
}
