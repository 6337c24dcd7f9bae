package bench

import (
	"sort"

	"github.com/mneme-memory/mneme/sidecar/eval/locomo"
)

// percentiles sorts ms (milliseconds) and summarises them with the
// evaluations' nearest-rank percentile.
func percentiles(ms []float64) Latencies {
	sort.Float64s(ms)
	return Latencies{P50: locomo.Percentile(ms, 0.50), P95: locomo.Percentile(ms, 0.95), P99: locomo.Percentile(ms, 0.99)}
}
