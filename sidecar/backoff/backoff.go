// Package backoff owns the one retry schedule mneme uses everywhere it waits
// after a failure (LLM and embedding calls, job retries, event transport
// reconnects): exponential growth, capped, with "equal jitter": each wait
// is drawn between half the exponential delay and all of it (not AWS's
// "full jitter", which draws from zero and can retry at once).
package backoff

import (
	"context"
	"math/rand/v2"
	"time"
)

// Policy is an exponential backoff schedule.
type Policy struct {
	Base time.Duration // delay before the first retry (before jitter)
	Max  time.Duration // cap on any single delay
}

// Delay is the wait before retry number attempt (1 = first retry): a random
// duration in [d/2, d] where d = min(Max, Base * 2^(attempt-1)). Half of it
// is fixed so a retry never comes back at once; half is jitter so many
// clients that failed together do not come back together.
func (p Policy) Delay(attempt int) time.Duration {
	if attempt < 1 {
		attempt = 1
	}
	base, maxd := p.Base, p.Max
	if base <= 0 {
		base = 100 * time.Millisecond
	}
	if maxd < base {
		maxd = base
	}
	d := base
	for i := 1; i < attempt && d < maxd; i++ {
		d *= 2
	}
	if d > maxd {
		d = maxd
	}
	half := d / 2
	return half + time.Duration(rand.Int64N(int64(d-half)+1))
}

// Sleep waits for d or until ctx is done, whichever is first.
func Sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
