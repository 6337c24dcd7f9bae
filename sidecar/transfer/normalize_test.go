package transfer

import (
	"math"
	"testing"

	"github.com/stretchr/testify/require"
)

// The rule of mneme.l2_normalize: zero and (nearly) unit vectors are kept
// as they are, others divided by their norm. Bit-for-bit agreement with
// SQL is tests/transfer_bulk_test.go's TestImportBulkEqualsRowPath.
func TestL2Normalized(t *testing.T) {
	zero := []float32{0, 0, 0}
	require.Equal(t, zero, l2Normalized(zero))

	unit := []float32{0.6, 0.8, 0}
	got := l2Normalized(unit)
	require.Equal(t, unit, got)
	require.Same(t, &unit[0], &got[0], "a unit vector is not copied")

	scaled := []float32{3, 4, 0}
	require.Equal(t, []float32{0.6, 0.8, 0}, l2Normalized(scaled))
	require.Equal(t, []float32{3, 4, 0}, scaled, "the input is not changed")

	// Within 1e-7 of unit length: kept, as SQL keeps it.
	near := []float32{float32(1 + 4e-8), 0}
	require.Equal(t, near, l2Normalized(near))
	far := []float32{float32(1 + 1e-6), 0}
	n := l2Normalized(far)
	require.InDelta(t, 1, math.Abs(float64(n[0])), 1e-7)
}
