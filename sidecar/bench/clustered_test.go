package bench

import (
	"fmt"
	"math"
	"strings"
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

// The timed statements: with hash vectors as before --vectors (the query
// embedded in SQL, two arguments); with clustered vectors none embeds in
// SQL, each that needs the query's vector gets it as a parameter, and the
// bare lookups and the vector leg (which read no text) as $2.
func TestScaleVectorsStatements(t *testing.T) {
	for _, embedder := range []string{"hash", "external"} {
		v := newScaleVectors(ScaleOptions{Embedder: embedder, Vectors: "hash"}, 256)
		for _, c := range scaleCalls {
			sql, args, err := v.statement(c.sql, "conv", "three query words")
			require.NoError(t, err)
			require.Len(t, args, 2, c.name)
			require.NotContains(t, sql, "@q", c.name)
			if strings.HasPrefix(c.name, "bare ") {
				require.Contains(t, sql, "(SELECT mneme.hash_embed($2)::mneme.embedding)", c.name)
			}
			require.Equal(t, embedder == "external" && strings.Contains(c.sql, "@qe@"), strings.Contains(sql, "query_embedding => mneme.hash_embed($2)"), c.name)
		}
	}
	v := newScaleVectors(ScaleOptions{Embedder: "external", Vectors: "clustered"}, 256)
	want, err := v.clustered.EmbedOne("three query words")
	require.NoError(t, err)
	for _, c := range scaleCalls {
		if c.sql == "" {
			continue // the hybrid baseline: SearchEmbedding
		}
		sql, args, err := v.statement(c.sql, "conv", "three query words")
		require.NoError(t, err)
		require.NotContains(t, sql, "hash_embed", c.name)
		switch {
		case c.name == "BM25 leg":
			require.Equal(t, []any{"conv", "three query words"}, args)
		case c.name == "vector leg":
			require.Equal(t, "SELECT count(*) FROM mneme.vector_search($1, $2::real[], 100)", sql)
			require.Equal(t, []any{"conv", want}, args)
		case strings.HasPrefix(c.name, "bare "):
			require.Contains(t, sql, "(SELECT $2::real[]::mneme.embedding)", c.name)
			require.Equal(t, []any{"conv", want}, args, c.name)
		default:
			require.Contains(t, sql, "$3::real[]", c.name)
			require.Equal(t, []any{"conv", "three query words", want}, args, c.name)
		}
	}
}
