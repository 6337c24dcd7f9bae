package tests

import (
	"context"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/mneme-memory/mneme/sidecar/dbtest"
)

// The eval tuning (goose/00040, docs/eval.md): with the built-in hash
// embedder the vector leg's reciprocal rank is weighted by
// rrf_hash_vector_weight, with an external embedder by 1; equal BM25 scores
// and equal distances share a rank, so equal matches fuse to equal scores.
func TestSearchFusionWeightsTheHashVectorLeg(t *testing.T) {
	t.Parallel()
	for _, variant := range variants(t) {
		t.Run(variant, func(t *testing.T) { fusionWeights(t, dbtest.New(t, dbtest.WithVector(variant))) })
	}
}

func fusionWeights(t *testing.T, db *dbtest.DB) {
	ctx := context.Background()
	conv := uuid.New()
	twinA := addMemory(t, db, conv, "a quiet lake behind the zebra farm", nil)
	twinB := addMemory(t, db, conv, "a quiet lake behind the zebra farm", nil)
	for _, s := range []string{"zebra stripes at dusk", "the lake froze in january", "nothing to see here", "a farm of llamas"} {
		addMemory(t, db, conv, s, nil)
	}
	var k, w float64
	require.NoError(t, db.Pool.QueryRow(ctx, `SELECT mneme.setting('rrf_k')::float8, mneme.setting('rrf_hash_vector_weight')::float8`).Scan(&k, &w))
	require.Equal(t, 60.0, k)
	require.Equal(t, 0.1, w)

	check := func(hits []hit, w float64) {
		t.Helper()
		require.NotEmpty(t, hits)
		for _, h := range hits {
			want := 0.0
			if h.BM25Rank != nil {
				want += 1 / (k + float64(*h.BM25Rank))
			}
			if h.VectorRank != nil {
				want += w / (k + float64(*h.VectorRank))
			}
			require.InDelta(t, want, h.RRF, 1e-12, "memory %s", h.ID)
		}
	}
	hits := search(t, db.Pool, "search", conv, "quiet zebra lake", 10)
	check(hits, w)
	byID := map[uuid.UUID]hit{}
	for _, h := range hits {
		byID[h.ID] = h
	}
	a, b := byID[twinA], byID[twinB]
	require.NotNil(t, a.BM25Rank)
	require.Equal(t, 1, *a.BM25Rank, "the best match")
	require.Equal(t, *a.BM25Rank, *b.BM25Rank, "equal BM25 scores share a rank")
	require.Equal(t, *a.VectorRank, *b.VectorRank, "equal distances share a rank")
	require.Equal(t, a.RRF, b.RRF)

	_, err := db.Pool.Exec(ctx, `SELECT mneme.set_setting('rrf_hash_vector_weight', '0.5')`)
	require.NoError(t, err)
	check(search(t, db.Pool, "search", conv, "quiet zebra lake", 10), 0.5)

	// An external embedder's leg always weighs 1.
	var emb []float32
	require.NoError(t, db.Pool.QueryRow(ctx, `SELECT mneme.hash_embed('quiet zebra lake')`).Scan(&emb))
	_, err = db.Pool.Exec(ctx, `SELECT mneme.set_setting('embedder', '"external"')`)
	require.NoError(t, err)
	check(search(t, db.Pool, "search", conv, "quiet zebra lake", 10, emb), 1)
}
