package feedback

import (
	"fmt"
	"io"
	"strings"
)

// colors per policy in the plot.
var colors = map[Policy]string{AutoGood: "#d62728", Review: "#2ca02c", None: "#7f7f7f"}

// WriteSVG plots precision@K per session for each policy: a plain SVG line
// chart, no dependencies.
func WriteSVG(w io.Writer, r Result) error {
	const (
		width, height          = 720, 420
		left, right, top, bott = 60, 170, 40, 50
	)
	pw, ph := float64(width-left-right), float64(height-top-bott)
	n := len(r.Points)
	x := func(session int) float64 {
		if n <= 1 {
			return float64(left)
		}
		return float64(left) + pw*float64(session-1)/float64(n-1)
	}
	y := func(p float64) float64 { return float64(top) + ph*(1-p) }
	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" font-family="sans-serif" font-size="12">`+"\n", width, height, width, height)
	fmt.Fprintf(&b, `<rect width="%d" height="%d" fill="white"/>`+"\n", width, height)
	fmt.Fprintf(&b, `<text x="%d" y="22" font-size="15">precision@%d of mneme.search over %d sessions, by feedback policy</text>`+"\n", left, r.K, r.Sessions)
	for i := 0; i <= 5; i++ {
		p := float64(i) / 5
		fmt.Fprintf(&b, `<line x1="%d" x2="%.1f" y1="%.1f" y2="%.1f" stroke="#ddd"/>`+"\n", left, float64(left)+pw, y(p), y(p))
		fmt.Fprintf(&b, `<text x="%d" y="%.1f" text-anchor="end">%.1f</text>`+"\n", left-6, y(p)+4, p)
	}
	step := max(1, n/10)
	for s := 1; s <= n; s += step {
		fmt.Fprintf(&b, `<text x="%.1f" y="%.1f" text-anchor="middle">%d</text>`+"\n", x(s), float64(top)+ph+18, s)
	}
	fmt.Fprintf(&b, `<text x="%.1f" y="%d" text-anchor="middle">session (one simulated day each)</text>`+"\n", float64(left)+pw/2, height-10)
	if a := r.NewAnswersAt; a > 0 && a <= n {
		fmt.Fprintf(&b, `<line x1="%.1f" x2="%.1f" y1="%d" y2="%.1f" stroke="#999" stroke-dasharray="4 3"/>`+"\n", x(a), x(a), top, float64(top)+ph)
		fmt.Fprintf(&b, `<text x="%.1f" y="%d" fill="#666">new answers arrive</text>`+"\n", x(a)+4, top+12)
	}
	fmt.Fprintf(&b, `<line x1="%d" x2="%d" y1="%d" y2="%.1f" stroke="black"/>`+"\n", left, left, top, float64(top)+ph)
	fmt.Fprintf(&b, `<line x1="%d" x2="%.1f" y1="%.1f" y2="%.1f" stroke="black"/>`+"\n", left, float64(left)+pw, float64(top)+ph, float64(top)+ph)
	// "none" first, wide and dashed: where a line coincides with it, both show.
	for _, p := range []Policy{None, AutoGood, Review} {
		var pts []string
		for _, pt := range r.Points {
			pts = append(pts, fmt.Sprintf("%.1f,%.1f", x(pt.Session), y(pt.Precision[p])))
		}
		style := `stroke-width="2"`
		if p == None {
			style = `stroke-width="4" stroke-dasharray="7 5"`
		}
		fmt.Fprintf(&b, `<polyline fill="none" stroke="%s" %s points="%s"/>`+"\n", colors[p], style, strings.Join(pts, " "))
	}
	for i, p := range Policies {
		ly := top + 20 + 22*i
		dash := ""
		if p == None {
			dash = ` stroke-dasharray="7 5"`
		}
		fmt.Fprintf(&b, `<line x1="%d" x2="%d" y1="%d" y2="%d" stroke="%s" stroke-width="3"%s/>`+"\n", width-right+15, width-right+40, ly, ly, colors[p], dash)
		fmt.Fprintf(&b, `<text x="%d" y="%d">%s</text>`+"\n", width-right+46, ly+4, p)
	}
	b.WriteString("</svg>\n")
	_, err := io.WriteString(w, b.String())
	return err
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
