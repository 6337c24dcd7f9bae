package recall

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestPercentile(t *testing.T) {
	require.Zero(t, Percentile(nil, 0.5))
	require.Equal(t, 7.0, Percentile([]float64{7}, 0.5))
	require.Equal(t, 7.0, Percentile([]float64{7}, 0.99))

	ten := []float64{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}
	require.Equal(t, 5.0, Percentile(ten, 0.50), "the 5th of 10")
	require.Equal(t, 10.0, Percentile(ten, 0.95), "nearest rank: ceil(9.5) = the 10th")
	require.Equal(t, 1.0, Percentile(ten, 0.01))
	require.Equal(t, 10.0, Percentile(ten, 1))

	seven := []float64{10, 20, 30, 40, 50, 60, 70}
	require.Equal(t, 40.0, Percentile(seven, 0.50), "ceil(3.5) = the 4th")
	require.Equal(t, 70.0, Percentile(seven, 0.95))
}

func TestLatency(t *testing.T) {
	require.Equal(t, Latency{}, latency(nil))
	ds := []time.Duration{3 * time.Millisecond, 1234567 * time.Nanosecond, 2 * time.Millisecond, 10 * time.Millisecond}
	require.Equal(t, Latency{P50: 2, P95: 10}, latency(ds))
	require.Equal(t, 3*time.Millisecond, ds[0], "the caller's samples stay in their order")
	require.Equal(t, Latency{P50: 1.23, P95: 1.23}, latency(ds[1:2]), "milliseconds, two places")
}
