package tests

import (
	"context"
	"math"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/mneme-memory/mneme/sidecar/dbtest"
)

// Setting retrievability_weight is the exponent on R in the score:
// score = rrf * R^w * label weight. 1 (the default) is the design's rrf * R.
func TestRetrievabilityWeightSetting(t *testing.T) {
	t.Parallel()
	db := dbtest.New(t, dbtest.WithVector("array"))
	ctx := context.Background()
	conv := uuid.New()
	at := time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC)
	// Same text, so the same rrf; one fresh, one faded.
	addMemory(t, db, conv, "the lighthouse keeper painted the door blue",
		map[string]any{"last_reviewed_at": at.Add(-time.Hour), "stability": 3.0})
	faded := addMemory(t, db, conv, "the lighthouse keeper painted the door blue",
		map[string]any{"last_reviewed_at": at.AddDate(0, -6, 0), "stability": 3.0})

	for _, w := range []float64{1, 0.5, 0.25, 0} {
		_, err := db.Pool.Exec(ctx, `SELECT mneme.set_setting('retrievability_weight', to_jsonb($1::float8))`, w)
		require.NoError(t, err)
		hits := search(t, db.Pool, "search", conv, "lighthouse door", 5, nil, nil, nil, at)
		require.Len(t, hits, 2)
		for _, h := range hits {
			require.InDelta(t, h.RRF*math.Pow(h.Retrievability, w), h.Score, 1e-12, "w=%v", w)
		}
		if w > 0 {
			require.NotEqual(t, faded, hits[0].ID, "w=%v: the fresh memory ranks first", w)
		} else {
			require.Equal(t, hits[0].Score, hits[1].Score, "w=0: forgetting ignored")
		}
	}
	// A negative weight would reward forgetting: set_setting rejects it, and
	// one forced into the table is rejected at query time.
	_, err := db.Pool.Exec(ctx, `SELECT mneme.set_setting('retrievability_weight', '-1')`)
	require.Equal(t, "22023", sqlState(t, err))
	require.ErrorContains(t, err, "retrievability_weight")
	forceSetting(t, db, "retrievability_weight", `-1`)
	_, err = db.Pool.Exec(ctx, `SELECT * FROM mneme.search($1, 'lighthouse', 5)`, conv)
	require.Equal(t, "22023", sqlState(t, err))
}
