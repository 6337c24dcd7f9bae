package locomo

import (
	"fmt"
	"html"
	"io"
	"math"
	"strings"
)

// plotColors are distinguishable on white and for most colour blindness
// (Okabe-Ito).
var plotColors = []string{"#0072B2", "#E69F00", "#009E73", "#CC79A7", "#D55E00", "#56B4E9", "#F0E442", "#000000"}

// WritePlot draws evidence recall against budget, one line per method, as
// an SVG (budgets on a log scale).
func (r *Report) WritePlot(w io.Writer, title string) error {
	const (
		width, height            = 760, 440
		left, right, top, bottom = 60.0, 210.0, 44.0, 56.0
	)
	pw, ph := float64(width)-left-right, float64(height)-top-bottom
	if len(r.Budgets) == 0 {
		return fmt.Errorf("plot: no budgets")
	}
	lo, hi := math.Log(float64(r.Budgets[0])), math.Log(float64(r.Budgets[len(r.Budgets)-1]))
	x := func(b int) float64 {
		if hi == lo {
			return left + pw/2
		}
		return left + (math.Log(float64(b))-lo)/(hi-lo)*pw
	}
	y := func(v float64) float64 { return top + (1-v)*ph }

	var s strings.Builder
	fmt.Fprintf(&s, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" font-family="sans-serif" font-size="12">`+"\n",
		width, height, width, height)
	fmt.Fprintf(&s, `<rect width="%d" height="%d" fill="white"/>`+"\n", width, height)
	fmt.Fprintf(&s, `<text x="%.1f" y="24" font-size="15" font-weight="bold">%s</text>`+"\n", left, html.EscapeString(title))
	for i := 0; i <= 10; i++ {
		v := float64(i) / 10
		fmt.Fprintf(&s, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#e4e4e4"/>`+"\n", left, y(v), left+pw, y(v))
		fmt.Fprintf(&s, `<text x="%.1f" y="%.1f" text-anchor="end">%.1f</text>`+"\n", left-6, y(v)+4, v)
	}
	for _, b := range r.Budgets {
		fmt.Fprintf(&s, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#e4e4e4"/>`+"\n", x(b), top, x(b), top+ph)
		fmt.Fprintf(&s, `<text x="%.1f" y="%.1f" text-anchor="middle">%d</text>`+"\n", x(b), top+ph+18, b)
	}
	fmt.Fprintf(&s, `<rect x="%.1f" y="%.1f" width="%.1f" height="%.1f" fill="none" stroke="#888"/>`+"\n", left, top, pw, ph)
	fmt.Fprintf(&s, `<text x="%.1f" y="%.1f" text-anchor="middle">context budget (words, log scale)</text>`+"\n", left+pw/2, top+ph+42)
	fmt.Fprintf(&s, `<text x="16" y="%.1f" text-anchor="middle" transform="rotate(-90 16 %.1f)">evidence recall</text>`+"\n", top+ph/2, top+ph/2)

	for i, m := range r.Methods {
		color := plotColors[i%len(plotColors)]
		dash := ""
		if i >= 4 { // the raw-text baselines, dashed
			dash = ` stroke-dasharray="6 4"`
		}
		var pts []string
		for _, res := range m.Results {
			pts = append(pts, fmt.Sprintf("%.1f,%.1f", x(res.Budget), y(res.Overall.Recall)))
		}
		fmt.Fprintf(&s, `<polyline points="%s" fill="none" stroke="%s" stroke-width="2"%s/>`+"\n", strings.Join(pts, " "), color, dash)
		for _, res := range m.Results {
			fmt.Fprintf(&s, `<circle cx="%.1f" cy="%.1f" r="3.5" fill="%s"><title>%s at %d words: %.3f</title></circle>`+"\n",
				x(res.Budget), y(res.Overall.Recall), color, html.EscapeString(m.Label), res.Budget, res.Overall.Recall)
		}
		ly := top + 10 + float64(i)*22
		lx := left + pw + 16
		fmt.Fprintf(&s, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="%s" stroke-width="2"%s/>`+"\n", lx, ly, lx+26, ly, color, dash)
		fmt.Fprintf(&s, `<text x="%.1f" y="%.1f">%s</text>`+"\n", lx+32, ly+4, html.EscapeString(m.Label))
	}
	s.WriteString("</svg>\n")
	_, err := io.WriteString(w, s.String())
	return err
}
