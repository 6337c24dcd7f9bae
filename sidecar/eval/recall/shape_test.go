package recall_test

import (
	"bytes"
	"context"
	"encoding/json"
	"maps"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/mneme-memory/mneme/sidecar/dbtest"
	"github.com/mneme-memory/mneme/sidecar/eval/beam"
	"github.com/mneme-memory/mneme/sidecar/eval/recall"
)

// TestReadersShareOneJSONShape: a LoCoMo report and a BEAM report have the
// same keys at the top, in every method's results and in the
// cross-validation; only the values differ (BEAM fills the measures).
func TestReadersShareOneJSONShape(t *testing.T) {
	t.Parallel()
	bd, err := beam.Load("../beam/testdata/tier")
	require.NoError(t, err)
	opt := recall.Options{Budgets: []int{50}, Headline: 50, Folds: 2,
		Candidates: []recall.Candidate{{"context_window": "1"}, {"context_window": "2"}}}
	shape := func(d *recall.Data) (top, method, result, cv []string, measures map[string]any) {
		rep, err := recall.Run(context.Background(), dbtest.New(t).Pool, opt, d)
		require.NoError(t, err)
		var buf bytes.Buffer
		require.NoError(t, rep.WriteJSON(&buf))
		var m map[string]any
		require.NoError(t, json.Unmarshal(buf.Bytes(), &m))
		keys := func(v any) []string { return slices.Sorted(maps.Keys(v.(map[string]any))) }
		m0 := m["methods"].([]any)[0]
		r0 := m0.(map[string]any)["results"].([]any)[0].(map[string]any)
		return keys(m), keys(m0), keys(r0), keys(m["cross_validated"]), r0["measures"].(map[string]any)
	}
	lTop, lMethod, lResult, lCV, lMeasures := shape(load(t))
	bTop, bMethod, bResult, bCV, bMeasures := shape(bd)
	require.Equal(t, lTop, bTop)
	require.Equal(t, lMethod, bMethod)
	require.Equal(t, lResult, bResult)
	require.Equal(t, lCV, bCV)
	require.Contains(t, lTop, "cross_validated")
	require.Contains(t, lResult, "by_category")
	require.Empty(t, lMeasures)
	require.ElementsMatch(t, []string{beam.UpdatedFound, beam.StaleFirst, beam.BothFound}, slices.Collect(maps.Keys(bMeasures)))
	require.Contains(t, bCV, "measures", "the knowledge-update measures are cross-validated too")
}
