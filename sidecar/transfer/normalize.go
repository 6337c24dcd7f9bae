package transfer

import "math"

// l2Normalized is mneme.l2_normalize (sql/101-hash-embed.sql) in the same
// arithmetic, so the array variant's rows come out bit for bit as its
// trigger would store them: the squares summed in float64 in order, the
// square root, each component divided in float64 and rounded to float32;
// v itself when the norm is 0 or within 1e-7 of 1. (The conversions keep
// the compiler from fusing a multiply and an add, which Go permits and
// PostgreSQL does not do.)
func l2Normalized(v []float32) []float32 {
	var sum float64
	for _, x := range v {
		sum += float64(float64(x) * float64(x))
	}
	norm := math.Sqrt(sum)
	if !(norm > 0 && math.Abs(norm-1) > 1e-7) {
		return v
	}
	out := make([]float32, len(v))
	for i, x := range v {
		out[i] = float32(float64(x) / norm)
	}
	return out
}
