// Package plot draws the line charts of mneme's evaluations and benchmarks
// as SVG: series of points on linear or logarithmic axes, colours that stay
// apart for most colour blindness, a legend beside the chart.
package plot

import (
	"fmt"
	"html"
	"io"
	"math"
	"strings"
)

// Colors are distinguishable on white and for most colour blindness
// (Okabe-Ito).
var Colors = []string{"#0072B2", "#E69F00", "#009E73", "#CC79A7", "#D55E00", "#56B4E9", "#F0E442", "#000000"}

// Series is one line.
type Series struct {
	Label  string
	X, Y   []float64
	Dashed bool
	// Wide draws the line twice as wide: drawn before a line it may
	// coincide with, it stays visible on both sides of it.
	Wide bool
	// NoPoints draws the line alone, without a circle at each point: a
	// curve sampled finely (mneme ui's retrievability over time).
	NoPoints bool
}

// Chart is a line chart.
type Chart struct {
	Title, XLabel, YLabel string
	XLog, YLog            bool
	// XTicks and YTicks are where grid lines and labels go; nil: the
	// points' x values (x), tenths of [0, 1] (linear y) or powers of ten
	// (log y).
	XTicks, YTicks []float64
	// Format prints a tick value; nil: %g.
	XFormat, YFormat func(float64) string
	Series           []Series
	// Markers are labelled vertical lines: an event at an x value.
	Markers []Marker
}

// Marker is a dashed vertical line at X with a label beside its top.
type Marker struct {
	X     float64
	Label string
	// Title, when set, is the marker's tooltip (an SVG title).
	Title string
}

// WriteSVG draws the chart.
func (c Chart) WriteSVG(w io.Writer) error {
	const (
		width, height            = 760, 440
		left, right, top, bottom = 60.0, 230.0, 44.0, 56.0
	)
	pw, ph := float64(width)-left-right, float64(height)-top-bottom
	var xs, ys []float64
	for _, s := range c.Series {
		if len(s.X) != len(s.Y) {
			return fmt.Errorf("plot: series %q has %d x and %d y values", s.Label, len(s.X), len(s.Y))
		}
		xs, ys = append(xs, s.X...), append(ys, s.Y...)
	}
	if len(xs) == 0 {
		return fmt.Errorf("plot: no points")
	}
	xTicks, yTicks := c.XTicks, c.YTicks
	if xTicks == nil {
		xTicks = xs
	}
	if yTicks == nil {
		if c.YLog {
			for v := math.Pow(10, math.Floor(math.Log10(minOf(ys)))); v <= maxOf(ys)*10; v *= 10 {
				yTicks = append(yTicks, v)
			}
		} else {
			for i := 0; i <= 10; i++ {
				yTicks = append(yTicks, float64(i)/10)
			}
		}
	}
	scale := func(v float64, log bool) float64 {
		if log {
			return math.Log10(math.Max(v, 1e-9))
		}
		return v
	}
	xlo, xhi := scale(minOf(append(xs, xTicks...)), c.XLog), scale(maxOf(append(xs, xTicks...)), c.XLog)
	ylo, yhi := scale(minOf(append(ys, yTicks...)), c.YLog), scale(maxOf(append(ys, yTicks...)), c.YLog)
	x := func(v float64) float64 {
		if xhi == xlo {
			return left + pw/2
		}
		return left + (scale(v, c.XLog)-xlo)/(xhi-xlo)*pw
	}
	y := func(v float64) float64 {
		if yhi == ylo {
			return top + ph/2
		}
		return top + (1-(scale(v, c.YLog)-ylo)/(yhi-ylo))*ph
	}
	xf, yf := c.XFormat, c.YFormat
	if xf == nil {
		xf = func(v float64) string { return fmt.Sprintf("%g", v) }
	}
	if yf == nil {
		yf = func(v float64) string { return fmt.Sprintf("%g", v) }
	}

	var s strings.Builder
	fmt.Fprintf(&s, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" font-family="sans-serif" font-size="12">`+"\n",
		width, height, width, height)
	fmt.Fprintf(&s, `<rect width="%d" height="%d" fill="white"/>`+"\n", width, height)
	fmt.Fprintf(&s, `<text x="%.1f" y="24" font-size="15" font-weight="bold">%s</text>`+"\n", left, html.EscapeString(c.Title))
	for _, v := range yTicks {
		fmt.Fprintf(&s, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#e4e4e4"/>`+"\n", left, y(v), left+pw, y(v))
		fmt.Fprintf(&s, `<text x="%.1f" y="%.1f" text-anchor="end">%s</text>`+"\n", left-6, y(v)+4, html.EscapeString(yf(v)))
	}
	for _, v := range xTicks {
		fmt.Fprintf(&s, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#e4e4e4"/>`+"\n", x(v), top, x(v), top+ph)
		fmt.Fprintf(&s, `<text x="%.1f" y="%.1f" text-anchor="middle">%s</text>`+"\n", x(v), top+ph+18, html.EscapeString(xf(v)))
	}
	fmt.Fprintf(&s, `<rect x="%.1f" y="%.1f" width="%.1f" height="%.1f" fill="none" stroke="#888"/>`+"\n", left, top, pw, ph)
	fmt.Fprintf(&s, `<text x="%.1f" y="%.1f" text-anchor="middle">%s</text>`+"\n", left+pw/2, top+ph+42, html.EscapeString(c.XLabel))
	fmt.Fprintf(&s, `<text x="16" y="%.1f" text-anchor="middle" transform="rotate(-90 16 %.1f)">%s</text>`+"\n",
		top+ph/2, top+ph/2, html.EscapeString(c.YLabel))
	// A marker's label that would overlap the previous one's goes a line
	// lower (about 7 pixels a character).
	lastEnd, level := math.Inf(-1), 0
	for _, m := range c.Markers {
		if m.Title != "" {
			fmt.Fprintf(&s, `<g><title>%s</title>`, html.EscapeString(m.Title))
		}
		fmt.Fprintf(&s, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#999" stroke-dasharray="4 3"/>`+"\n", x(m.X), top, x(m.X), top+ph)
		if x(m.X)+4 < lastEnd {
			level++
		} else {
			level = 0
		}
		lastEnd = math.Max(lastEnd, x(m.X)+4+7*float64(len([]rune(m.Label))))
		fmt.Fprintf(&s, `<text x="%.1f" y="%.1f" fill="#666">%s</text>`+"\n", x(m.X)+4, top+14+14*float64(level), html.EscapeString(m.Label))
		if m.Title != "" {
			s.WriteString("</g>\n")
		}
	}
	for i, sr := range c.Series {
		color := Colors[i%len(Colors)]
		dash := ""
		if sr.Dashed {
			dash = ` stroke-dasharray="6 4"`
		}
		pts := make([]string, len(sr.X))
		for j := range sr.X {
			pts[j] = fmt.Sprintf("%.1f,%.1f", x(sr.X[j]), y(sr.Y[j]))
		}
		width := 2
		if sr.Wide {
			width = 4
		}
		fmt.Fprintf(&s, `<polyline points="%s" fill="none" stroke="%s" stroke-width="%d"%s/>`+"\n", strings.Join(pts, " "), color, width, dash)
		for j := range sr.X {
			if sr.NoPoints {
				break
			}
			fmt.Fprintf(&s, `<circle cx="%.1f" cy="%.1f" r="3.5" fill="%s"><title>%s: %s, %s</title></circle>`+"\n",
				x(sr.X[j]), y(sr.Y[j]), color, html.EscapeString(sr.Label), html.EscapeString(xf(sr.X[j])), html.EscapeString(yf(sr.Y[j])))
		}
		ly, lx := top+10+float64(i)*22, left+pw+16
		fmt.Fprintf(&s, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="%s" stroke-width="%d"%s/>`+"\n", lx, ly, lx+26, ly, color, width, dash)
		fmt.Fprintf(&s, `<text x="%.1f" y="%.1f">%s</text>`+"\n", lx+32, ly+4, html.EscapeString(sr.Label))
	}
	s.WriteString("</svg>\n")
	_, err := io.WriteString(w, s.String())
	return err
}

func minOf(v []float64) float64 {
	m := math.Inf(1)
	for _, x := range v {
		m = math.Min(m, x)
	}
	return m
}

func maxOf(v []float64) float64 {
	m := math.Inf(-1)
	for _, x := range v {
		m = math.Max(m, x)
	}
	return m
}
