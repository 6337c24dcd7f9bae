package bench

import (
	"fmt"
	"math"
	"testing"

	"github.com/stretchr/testify/require"
)

func cosine(a, b []float32) float64 {
	var s float64
	for i := range a {
		s += float64(a[i]) * float64(b[i])
	}
	return s // unit vectors
}

// The clustered vectors: deterministic (also across embedders, so another
// process makes the same), unit length, the database's dimension, and
// clustered as in docs/experiments/ann-recall.sql: texts of one cluster
// clearly closer than texts of different clusters, the clusters used
// evenly.
func TestClusteredEmbedder(t *testing.T) {
	const dim = 256
	c := newClusteredEmbedder(dim)
	a, err := c.EmbedOne("alpha beta gamma")
	require.NoError(t, err)
	b, err := newClusteredEmbedder(dim).EmbedOne("alpha beta gamma")
	require.NoError(t, err)
	require.Equal(t, a, b, "deterministic")
	require.Len(t, a, dim)
	other, err := c.EmbedOne("alpha beta delta")
	require.NoError(t, err)
	require.NotEqual(t, a, other)

	byCluster := map[int][][]float32{}
	for i := 0; len(byCluster[7]) < 20 || len(byCluster[8]) < 20 || i < 20000; i++ {
		text := fmt.Sprintf("memory %d of the bench", i)
		v, err := c.EmbedOne(text)
		require.NoError(t, err)
		require.InDelta(t, 1, math.Sqrt(cosine(v, v)), 1e-5, "unit length")
		cl := c.cluster(text)
		byCluster[cl] = append(byCluster[cl], v)
	}
	require.Greater(t, len(byCluster), 1990, "20,000 texts fall in nearly every one of the 2,000 clusters")
	var same, cross float64
	var nSame, nCross int
	for _, cl := range []int{7, 8} {
		vs := byCluster[cl]
		for i := range vs {
			for j := i + 1; j < len(vs); j++ {
				same += cosine(vs[i], vs[j])
				nSame++
			}
			for _, w := range byCluster[cl+100] {
				cross += cosine(vs[i], w)
				nCross++
			}
		}
	}
	same, cross = same/float64(nSame), cross/float64(nCross)
	t.Logf("mean cosine: same cluster %.3f, different clusters %.3f", same, cross)
	require.Greater(t, same, 0.5)
	require.Less(t, cross, 0.35)
	require.Greater(t, cross, 0.0, "anisotropic: the common direction")

	// Another dimension: the same shape.
	v, err := newClusteredEmbedder(384).EmbedOne("alpha beta gamma")
	require.NoError(t, err)
	require.Len(t, v, 384)
	require.InDelta(t, 1, math.Sqrt(cosine(v, v)), 1e-5)
}
