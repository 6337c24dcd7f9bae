package backoff

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestDelayGrowsAndIsCapped(t *testing.T) {
	p := Policy{Base: 100 * time.Millisecond, Max: time.Second}
	for i := 0; i < 200; i++ {
		d1 := p.Delay(1)
		require.GreaterOrEqual(t, d1, 50*time.Millisecond)
		require.LessOrEqual(t, d1, 100*time.Millisecond)
		d3 := p.Delay(3)
		require.GreaterOrEqual(t, d3, 200*time.Millisecond)
		require.LessOrEqual(t, d3, 400*time.Millisecond)
		d20 := p.Delay(20)
		require.GreaterOrEqual(t, d20, 500*time.Millisecond)
		require.LessOrEqual(t, d20, time.Second)
	}
}

func TestSleepHonoursContext(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	require.ErrorIs(t, Sleep(ctx, time.Hour), context.Canceled)
	require.NoError(t, Sleep(context.Background(), time.Millisecond))
}
