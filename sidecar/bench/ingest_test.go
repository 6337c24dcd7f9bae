package bench

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// The writers of bench ingest share a pool sized to the rate, not a
// connection per conversation (issue 53: 200 writer backends starved the
// sidecars' jobs of the CPU).
func TestWriterConnsSizedToTheRate(t *testing.T) {
	for _, c := range []struct{ nconv, rate, writers, want int }{
		{200, 2000, 0, 40},  // one per 50 messages/s
		{200, 1500, 0, 30},  //
		{200, 1010, 0, 21},  // rounded up
		{200, 150, 0, 4},    // at least 4
		{3, 2000, 0, 3},     // never more than the writers
		{200, 0, 0, 200},    // as fast as they can: one per writer
		{1000, 0, 0, 200},   // ... at most 200
		{200, 2000, 50, 50}, // --writers decides
		{10, 2000, 50, 10},
	} {
		require.Equal(t, c.want, writerConns(c.nconv, c.rate, c.writers), "%+v", c)
	}
}
