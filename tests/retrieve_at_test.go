package tests

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/mneme-memory/mneme/sidecar/dbtest"
)

// mneme.search, retrieve and retrieve_markdown evaluate retrievability at
// their optional last argument `at` (default now()): the same memories and
// the same `at` rank alike whatever the wall clock says, and the calls
// without `at` keep working.
func TestSearchAtEvaluatesRetrievabilityThen(t *testing.T) {
	t.Parallel()
	db := dbtest.New(t, dbtest.WithVector("array"))
	ctx := context.Background()
	conv := uuid.New()
	t0 := time.Date(2023, 5, 1, 12, 0, 0, 0, time.UTC)
	// fresh: reviewed at t0, short stability. steady: reviewed 60 days
	// before t0, long stability. Same words, so the same rrf.
	fresh := addMemory(t, db, conv, "the lighthouse keeper painted the door blue",
		map[string]any{"last_reviewed_at": t0, "stability": 2.0})
	steady := addMemory(t, db, conv, "the lighthouse keeper painted the door blue",
		map[string]any{"last_reviewed_at": t0.AddDate(0, 0, -60), "stability": 200.0})

	want := func(at time.Time, id uuid.UUID) float64 {
		var r float64
		require.NoError(t, db.Pool.QueryRow(ctx, `SELECT mneme.retrievability(stability, last_reviewed_at, $2)
			FROM mneme.memories WHERE id = $1`, id, at).Scan(&r))
		return r
	}
	for _, c := range []struct {
		at    time.Time
		first uuid.UUID
	}{
		{t0.Add(time.Hour), fresh},    // fresh is still at R ~1, steady has faded a little
		{t0.AddDate(1, 0, 0), steady}, // a year on, the short stability has faded far more
	} {
		hits := search(t, db.Pool, "search", conv, "lighthouse door", 5, nil, nil, nil, c.at)
		require.Len(t, hits, 2)
		require.Equal(t, c.first, hits[0].ID, "at %s", c.at)
		require.Equal(t, hits[0].RRF, hits[1].RRF)
		for _, h := range hits {
			require.InDelta(t, want(c.at, h.ID), h.Retrievability, 1e-12)
			require.InDelta(t, h.RRF*h.Retrievability, h.Score, 1e-12)
		}
		// retrieve ranks the same (and records its pending review).
		require.Equal(t, ids(hits), ids(search(t, db.Pool, "retrieve", conv, "lighthouse door", 5, nil, nil, nil, c.at)))
		var md string
		require.NoError(t, db.Pool.QueryRow(ctx, `SELECT mneme.retrieve_markdown($1, 'lighthouse door', 5, at => $2)`,
			conv, c.at).Scan(&md))
		require.Contains(t, md, fmt.Sprintf("retrievability %.3f)", hits[0].Retrievability))
		require.Contains(t, md, fmt.Sprintf("retrievability %.3f)", hits[1].Retrievability))
	}

	// Without `at`: now(), as before, and the old positional forms work.
	tx, err := db.Pool.Begin(ctx)
	require.NoError(t, err)
	defer tx.Rollback(ctx) //nolint:errcheck
	var now time.Time
	require.NoError(t, tx.QueryRow(ctx, `SELECT now()`).Scan(&now))
	require.Equal(t, search(t, tx, "search", conv, "lighthouse door", 5, nil, nil, nil, now),
		search(t, tx, "search", conv, "lighthouse door", 5, nil, nil, nil))
	require.Len(t, search(t, tx, "search", conv, "lighthouse door", 5), 2)
	require.Len(t, search(t, tx, "retrieve", conv, "lighthouse door", 5, nil), 2)

	// at NULL is an error, not a silent now().
	_, err = db.Pool.Exec(ctx, `SELECT * FROM mneme.search($1, 'lighthouse', 5, at => NULL)`, conv)
	require.Equal(t, "22004", sqlState(t, err))
	_, err = db.Pool.Exec(ctx, `SELECT mneme.retrieve_markdown($1, 'lighthouse', 5, NULL, NULL, NULL, NULL)`, conv)
	require.Equal(t, "22004", sqlState(t, err))
}
