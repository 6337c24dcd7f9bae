package fsrs

import (
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

var t0 = time.Date(2026, 3, 1, 9, 0, 0, 0, time.UTC)

// A new memory is a graduated card: its label's stability (times the
// surprise factor) and the difficulty of go-fsrs's first "good".
func TestInitial(t *testing.T) {
	s := Initial(365, 0, t0)
	require.Equal(t, 365.0, s.Stability)
	require.InDelta(t, 5.282434422319005, s.Difficulty, 1e-12)
	require.Equal(t, Review, s.Phase)
	require.Equal(t, t0, s.LastReviewedAt)
	require.Equal(t, 0, s.Reviews)
	require.Equal(t, 1.0, Retrievability(s.Stability, s.LastReviewedAt, t0))
}

func TestInitialSurprise(t *testing.T) {
	require.InDelta(t, 14*1.5, Initial(14, 1, t0).Stability, 1e-12)
	require.InDelta(t, 14*1.25, Initial(14, 0.5, t0).Stability, 1e-12)
	require.InDelta(t, 14*1.5, Initial(14, 7, t0).Stability, 1e-12, "clamped")
	require.InDelta(t, 14.0, Initial(14, -1, t0).Stability, 1e-12, "clamped")
	require.InDelta(t, 14.0, Initial(14, math.NaN(), t0).Stability, 1e-12)
}

// What go-fsrs does to a graduated card, the reason a new memory starts as
// one: "again" is a lapse to days whatever the stability was, "good" at
// high retrievability adds little (spacing), and a lapsed memory later used
// and rated good rebuilds.
func TestGraduatedCard(t *testing.T) {
	for _, s0 := range []float64{3, 14, 365, 1825, 3650} {
		s := Initial(s0, 0, t0)
		day := t0.Add(24 * time.Hour)
		again := Next(s, Again, day)
		require.Equal(t, Relearning, again.Phase)
		require.Less(t, again.Stability, 20.0, "a lapse leaves days (S0 %v)", s0)
		require.Less(t, again.Stability, s0, "S0 %v", s0)
		good := Next(s, Good, day)
		require.Equal(t, Review, good.Phase)
		require.Greater(t, good.Stability, s0)
		if s0 >= 365 {
			require.Less(t, good.Stability, s0*1.01, "spacing: a review the next day adds under 1%% (S0 %v)", s0)
			require.Less(t, Next(s, Easy, day).Stability, s0*1.02)
		}
		// Lapsed, then used and rated good a week later: it rebuilds.
		back := Next(again, Good, day.Add(7*24*time.Hour))
		require.Equal(t, Review, back.Phase)
		require.Greater(t, back.Stability, again.Stability)
		later := Next(back, Good, day.Add(60*24*time.Hour))
		require.Greater(t, later.Stability, back.Stability)
	}
	// Noise judged twice fades faster still.
	s := Initial(365, 0, t0)
	once := Next(s, Again, t0.Add(24*time.Hour))
	twice := Next(once, Again, t0.Add(48*time.Hour))
	require.Less(t, twice.Stability, once.Stability)
}

func TestNextOrdersRatings(t *testing.T) {
	for _, days := range []float64{0.01, 1, 3, 30} {
		for _, start := range []State{Initial(3, 0, t0), {Stability: 10, Difficulty: 5, Phase: Review, LastReviewedAt: t0, Reviews: 2},
			{Stability: 3.173, Difficulty: 5.28, Phase: Learning, LastReviewedAt: t0}} {
			at := t0.Add(time.Duration(days * 24 * float64(time.Hour)))
			again, hard, good, easy := Next(start, Again, at), Next(start, Hard, at), Next(start, Good, at), Next(start, Easy, at)
			require.Less(t, again.Stability, start.Stability, "again lowers stability (days=%v, phase=%s)", days, start.Phase)
			require.Less(t, again.Stability, hard.Stability)
			require.Greater(t, again.Difficulty, easy.Difficulty)
			require.Equal(t, at, good.LastReviewedAt)
			require.Equal(t, start.Reviews+1, good.Reviews)
			if start.Phase == Review && days < 1 {
				// go-fsrs counts whole days: a same-day review of a memory in
				// the review phase sees R = 1, and a recall leaves S as is.
				require.Equal(t, start.Stability, good.Stability)
				require.Equal(t, start.Stability, easy.Stability)
				continue
			}
			require.Less(t, hard.Stability, good.Stability)
			require.Less(t, good.Stability, easy.Stability)
			require.Greater(t, good.Stability, start.Stability, "good raises stability (days=%v, phase=%s)", days, start.Phase)
		}
	}
}

func TestNextPhases(t *testing.T) {
	s := Initial(365, 0, t0)
	at := t0.Add(48 * time.Hour)
	require.Equal(t, Review, Next(s, Good, at).Phase)
	require.Equal(t, Relearning, Next(s, Again, at).Phase)
	// A row from before graduated cards (learning) still follows go-fsrs.
	old := State{Stability: 3.173, Difficulty: 5.282434422319005, Phase: Learning, LastReviewedAt: t0}
	require.Equal(t, Learning, Next(old, Again, at).Phase)
	r := Next(old, Good, at)
	require.Equal(t, Review, r.Phase)
	require.InDelta(t, 3.173*math.Exp(0.51655*0.6621), r.Stability, 1e-9)
}

// The curve in DESIGN.md: R = (1 + 19/81 * t / S) ^ -0.5.
func TestRetrievability(t *testing.T) {
	for _, c := range []struct{ s, days float64 }{{3.173, 1}, {3.173, 0.25}, {10, 30}, {100, 365}} {
		at := t0.Add(time.Duration(c.days * 24 * float64(time.Hour)))
		want := math.Pow(1+19.0/81.0*c.days/c.s, -0.5)
		require.InDelta(t, want, Retrievability(c.s, t0, at), 1e-12)
	}
	require.Equal(t, 1.0, Retrievability(3, t0, t0.Add(-time.Hour)))
	require.InDelta(t, 0.9, Retrievability(5, t0, t0.Add(5*24*time.Hour)), 1e-12, "R = 0.9 after S days")
}

func TestParse(t *testing.T) {
	for s, want := range map[string]Rating{"again": Again, " Hard": Hard, "GOOD": Good, "easy\n": Easy} {
		r, err := ParseRating(s)
		require.NoError(t, err)
		require.Equal(t, want, r)
		require.Equal(t, want, must(ParseRating(Name(r))))
	}
	_, err := ParseRating("great")
	require.ErrorContains(t, err, "unknown rating")
	_, err = ParsePhase("new")
	require.Error(t, err)
	p, err := ParsePhase("relearning")
	require.NoError(t, err)
	require.Equal(t, Relearning, p)
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}
