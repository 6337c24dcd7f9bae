package bench

import (
	"context"
	"hash/fnv"
	"math"
	mrand "math/rand/v2"
)

// clusteredCentres: the clusters of the clustered vectors, as in
// docs/experiments/ann-recall.sql.
const clusteredCentres = 2000

// clusteredEmbedder stands in for an external embedding model in bench
// scale --vectors clustered: deterministic vectors shaped like a model's
// (clustered and anisotropic), where the hash embedder's are sparse and
// near-orthogonal and so say nothing of how HNSW does on a model's. The
// set-up of docs/experiments/ann-recall.sql: 2,000 cluster centres, each a
// Gaussian direction plus 0.5 times one direction common to all,
// normalised; a text's vector is the centre of its cluster plus 0.8 times
// Gaussian noise, normalised (about 0.6 cosine similarity between two
// points of a cluster, 0.1 between clusters). Each coordinate of a
// direction is a standard Gaussian over sqrt(dim) (ann-recall.sql's /16 at
// dimension 256), so a direction has about unit length at any dimension.
// A text's cluster is its FNV-64a hash modulo 2,000, uniform over the
// clusters, so every large scope has points in every cluster (the
// scattered scopes of ann-recall.sql), and a query of three words lands
// in a uniform random cluster whose points of the scope are its true
// nearest neighbours. Not a model: the words of a text play no part.
type clusteredEmbedder struct {
	dim     int
	centres [][]float64 // unit length
}

// newClusteredEmbedder generates the centres from a fixed seed (the same
// for every run and every process).
func newClusteredEmbedder(dim int) *clusteredEmbedder {
	r := mrand.New(mrand.NewPCG(2000, 53))
	scale := 1 / math.Sqrt(float64(dim))
	common := make([]float64, dim)
	for i := range common {
		common[i] = r.NormFloat64() * scale
	}
	c := &clusteredEmbedder{dim: dim, centres: make([][]float64, clusteredCentres)}
	for k := range c.centres {
		v := make([]float64, dim)
		for i := range v {
			v[i] = r.NormFloat64()*scale + 0.5*common[i]
		}
		normalise(v)
		c.centres[k] = v
	}
	return c
}

// textHash is the text's FNV-64a hash: its cluster and its noise's seed.
func textHash(text string) uint64 {
	h := fnv.New64a()
	_, _ = h.Write([]byte(text))
	return h.Sum64()
}

// cluster is the text's cluster.
func (c *clusteredEmbedder) cluster(text string) int {
	return int(textHash(text) % clusteredCentres)
}

// EmbedOne is the text's vector (unit length, dimension dim).
func (c *clusteredEmbedder) EmbedOne(text string) ([]float32, error) {
	h := textHash(text)
	r := mrand.New(mrand.NewPCG(h, 0x6d6e656d65))
	centre := c.centres[h%clusteredCentres]
	scale := 0.8 / math.Sqrt(float64(c.dim))
	v := make([]float64, c.dim)
	for i := range v {
		v[i] = centre[i] + r.NormFloat64()*scale
	}
	normalise(v)
	out := make([]float32, c.dim)
	for i, x := range v {
		out[i] = float32(x)
	}
	return out, nil
}

// Embed embeds texts one by one (pghybrid.Embedder: the hybrid baseline
// gets the same query vectors as mneme's calls).
func (c *clusteredEmbedder) Embed(_ context.Context, texts []string) ([][]float32, error) {
	out := make([][]float32, len(texts))
	for i, t := range texts {
		out[i], _ = c.EmbedOne(t)
	}
	return out, nil
}

func normalise(v []float64) {
	var s float64
	for _, x := range v {
		s += x * x
	}
	s = math.Sqrt(s)
	for i := range v {
		v[i] /= s
	}
}
