package feedback

import (
	"fmt"
	"io"
	"strings"

	"github.com/mneme-memory/mneme/sidecar/plot"
)

// WriteSVG plots precision@K per session for each policy (the "none"
// policy dashed), with the session where new answers arrive marked.
func WriteSVG(w io.Writer, r Result) error {
	c := plot.Chart{
		Title:  fmt.Sprintf("precision@%d of mneme.search over %d sessions, by feedback policy", r.K, r.Sessions),
		XLabel: "session (one simulated day each)", YLabel: fmt.Sprintf("precision@%d", r.K),
		YTicks:  []float64{0, 0.2, 0.4, 0.6, 0.8, 1},
		YFormat: func(v float64) string { return fmt.Sprintf("%.1f", v) },
	}
	n := len(r.Points)
	for s := 1; s <= n; s += max(1, n/10) {
		c.XTicks = append(c.XTicks, float64(s))
	}
	if a := r.NewAnswersAt; a > 0 && a <= n {
		c.Markers = []plot.Marker{{X: float64(a), Label: "new answers arrive"}}
	}
	// "none" first, wide and dashed: where a line coincides with it, both show.
	for _, p := range []Policy{None, AutoGood, Review} {
		sr := plot.Series{Label: string(p), Dashed: p == None, Wide: p == None}
		for _, pt := range r.Points {
			sr.X = append(sr.X, float64(pt.Session))
			sr.Y = append(sr.Y, pt.Precision[p])
		}
		c.Series = append(c.Series, sr)
	}
	return c.WriteSVG(w)
}

// WriteTable prints precision@K at a few sessions and the mean over the
// first and last five, as a markdown table.
func WriteTable(w io.Writer, r Result) error {
	var b strings.Builder
	fmt.Fprintf(&b, "| session |")
	for _, p := range Policies {
		fmt.Fprintf(&b, " %s |", p)
	}
	b.WriteString("\n| ---: |")
	for range Policies {
		b.WriteString(" ---: |")
	}
	b.WriteString("\n")
	for _, pt := range r.Points {
		if pt.Session != 1 && pt.Session%5 != 0 && pt.Session != len(r.Points) {
			continue
		}
		fmt.Fprintf(&b, "| %d |", pt.Session)
		for _, p := range Policies {
			fmt.Fprintf(&b, " %.3f |", pt.Precision[p])
		}
		b.WriteString("\n")
	}
	avg := func(pts []Point, p Policy) float64 {
		s := 0.0
		for _, pt := range pts {
			s += pt.Precision[p]
		}
		return s / float64(len(pts))
	}
	if n := len(r.Points); n >= 10 {
		for _, row := range []struct {
			name string
			pts  []Point
		}{{"mean of sessions 1-5", r.Points[:5]},
			{fmt.Sprintf("mean of sessions %d-%d (before new answers)", n/2-4, n/2), r.Points[n/2-5 : n/2]},
			{fmt.Sprintf("mean of sessions %d-%d", n-4, n), r.Points[n-5:]}} {
			fmt.Fprintf(&b, "| %s |", row.name)
			for _, p := range Policies {
				fmt.Fprintf(&b, " %.3f |", avg(row.pts, p))
			}
			b.WriteString("\n")
		}
	}
	fmt.Fprintf(&b, "| mean stability at the end: answers |")
	for _, p := range Policies {
		fmt.Fprintf(&b, " %.2f |", r.RelevantStability[p])
	}
	fmt.Fprintf(&b, "\n| mean stability at the end: lookalikes and digests |")
	for _, p := range Policies {
		fmt.Fprintf(&b, " %.2f |", r.NoiseStability[p])
	}
	b.WriteString("\n")
	_, err := io.WriteString(w, b.String())
	return err
}
