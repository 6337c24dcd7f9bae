package bench

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestPercentiles(t *testing.T) {
	ms := []float64{9, 1, 5, 3, 7}
	require.Equal(t, Latencies{P50: 5, P95: 9, P99: 9}, percentiles(ms))
	require.Equal(t, []float64{1, 3, 5, 7, 9}, ms, "sorted in place")
	require.Equal(t, Latencies{}, percentiles(nil), "no samples, no panic")
}
