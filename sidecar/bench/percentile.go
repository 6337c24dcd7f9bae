package bench

import (
	"sort"

	"github.com/mneme-memory/mneme/sidecar/eval/recall"
)

// percentiles sorts ms (milliseconds) and summarises them with the
// evaluations' nearest-rank percentile.
func percentiles(ms []float64) Latencies {
	sort.Float64s(ms)
	return Latencies{P50: recall.Percentile(ms, 0.50), P95: recall.Percentile(ms, 0.95), P99: recall.Percentile(ms, 0.99)}
}
