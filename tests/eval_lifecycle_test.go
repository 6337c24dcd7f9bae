package tests

import (
	"bytes"
	"context"
	"log/slog"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/mneme-memory/mneme/sidecar/dbtest"
	"github.com/mneme-memory/mneme/sidecar/eval/lifecycle"
)

// TestLifecycleEval runs `mneme-lab eval lifecycle` short: deterministic,
// pinned and important memories never leave, nothing is purged with purge
// off or before its grace, trivial memories fade before important ones, and
// the rollback leaves the database as it was.
func TestLifecycleEval(t *testing.T) {
	t.Parallel()
	db := dbtest.New(t)
	ctx := context.Background()
	opts := lifecycle.Options{Days: 120, PurgeAfterDays: 20}
	res, err := lifecycle.Run(ctx, db.Pool, opts, slog.New(slog.DiscardHandler))
	if dbtest.OnCitus() {
		require.ErrorContains(t, err, "eval lifecycle does not run on a distributed mneme (Citus)")
		return
	}
	require.NoError(t, err)
	require.Len(t, res.Scenarios, 2)
	off, on := res.Scenarios[0], res.Scenarios[1]
	for _, sc := range res.Scenarios {
		require.Len(t, sc.Days, 120)
		require.Zero(t, sc.PinnedOrImportantLeft, sc.Name)
		require.Zero(t, sc.PurgedEarly, sc.Name)
		require.Positive(t, sc.Reviews, sc.Name)
		last := sc.Days[len(sc.Days)-1].Labels
		require.Equal(t, 1.0, last["important"].Active, sc.Name)
		require.Less(t, last["trivial"].Active, last["general"].Active, sc.Name)
		require.Positive(t, last["general"].Active, sc.Name)
		// Every day, each label's memories are active, inactive or
		// purged: the three shares sum to one.
		for d, day := range sc.Days {
			for label, s := range day.Labels {
				if s.Created == 0 {
					continue
				}
				for _, share := range []float64{s.Active, s.Inactive, s.Purged} {
					require.True(t, share >= 0 && share <= 1, "%s day %d %s: %+v", sc.Name, d+1, label, s)
				}
				require.InDelta(t, 1, s.Active+s.Inactive+s.Purged, 1e-9, "%s day %d %s: %+v", sc.Name, d+1, label, s)
			}
		}
	}
	require.Zero(t, off.Purged, "purge off purges nothing")
	require.Positive(t, on.Purged, "purge on purges inactive memories after the grace")
	var left int
	require.NoError(t, db.Pool.QueryRow(ctx, `SELECT count(*) FROM mneme.memories`).Scan(&left))
	require.Zero(t, left, "each scenario rolls back")

	again, err := lifecycle.Run(ctx, db.Pool, opts, slog.New(slog.DiscardHandler))
	require.NoError(t, err)
	require.Equal(t, res, again, "deterministic")

	var table, svg bytes.Buffer
	require.NoError(t, lifecycle.WriteTable(&table, res))
	require.Contains(t, table.String(), "day 90")
	require.NoError(t, lifecycle.WriteSVG(&svg, res))
	require.Contains(t, svg.String(), "<svg")
}
