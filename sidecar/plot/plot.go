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
	// Color of the line; "": the next of Colors.
	Color string
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
	// Width and Height of the drawing (viewBox units); 0: 760 × 440.
	Width, Height int
	// FontSize of the text; 0: 12.
	FontSize float64
	// Compact puts the legend under the plot area instead of beside it
	// (a chart read on a phone: the plot gets the whole width).
	Compact bool
	// YMin and YMax, when not both 0, fix the y range (linear y): the
	// ticks outside it are dropped.
	YMin, YMax float64
}

// Marker is a dashed vertical line at X with a label beside its top.
type Marker struct {
	X     float64
	Label string
	// Title, when set, is the marker's tooltip (an SVG title).
	Title string
	// Color of the line and label; "": grey.
	Color string
	// Solid draws the line solid and wider (e.g. "now").
	Solid bool
	// Class is the marker group's class attribute (for styles and tests).
	Class string
}

// WriteSVG draws the chart.
func (c Chart) WriteSVG(w io.Writer) error {
	width, height := 760, 440
	left, right, top, bottom := 60.0, 230.0, 44.0, 56.0
	fs := 12.0
	if c.Width > 0 && c.Height > 0 {
		width, height = c.Width, c.Height
	}
	if c.FontSize > 0 {
		fs = c.FontSize
	}
	if c.Compact {
		// The legend in one or two rows under the x label.
		right, bottom, left, top = 12, 3.6*fs+float64((len(c.Series)+1)/2)*1.6*fs, 4.2*fs, 2.8*fs
	}
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
	if c.YMin != 0 || c.YMax != 0 {
		ylo, yhi = c.YMin, c.YMax
		kept := yTicks[:0:0]
		for _, v := range yTicks {
			if v >= ylo-1e-9 && v <= yhi+1e-9 {
				kept = append(kept, v)
			}
		}
		yTicks = kept
	}
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
	fmt.Fprintf(&s, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" font-family="sans-serif" font-size="%g">`+"\n",
		width, height, width, height, fs)
	fmt.Fprintf(&s, `<rect width="%d" height="%d" fill="white"/>`+"\n", width, height)
	if c.Title != "" {
		fmt.Fprintf(&s, `<text x="%.1f" y="%.1f" font-size="%g" font-weight="bold">%s</text>`+"\n", left, top-fs, fs*1.25, html.EscapeString(c.Title))
	}
	for _, v := range yTicks {
		fmt.Fprintf(&s, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#e4e4e4"/>`+"\n", left, y(v), left+pw, y(v))
		fmt.Fprintf(&s, `<text x="%.1f" y="%.1f" text-anchor="end">%s</text>`+"\n", left-6, y(v)+fs/3, html.EscapeString(yf(v)))
	}
	for _, v := range xTicks {
		fmt.Fprintf(&s, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#e4e4e4"/>`+"\n", x(v), top, x(v), top+ph)
		fmt.Fprintf(&s, `<text x="%.1f" y="%.1f" text-anchor="middle" class="xtick">%s</text>`+"\n", x(v), top+ph+1.5*fs, html.EscapeString(xf(v)))
	}
	fmt.Fprintf(&s, `<rect x="%.1f" y="%.1f" width="%.1f" height="%.1f" fill="none" stroke="#888"/>`+"\n", left, top, pw, ph)
	fmt.Fprintf(&s, `<text x="%.1f" y="%.1f" text-anchor="middle">%s</text>`+"\n", left+pw/2, top+ph+3*fs, html.EscapeString(c.XLabel))
	fmt.Fprintf(&s, `<text x="%.1f" y="%.1f" text-anchor="middle" transform="rotate(-90 %.1f %.1f)">%s</text>`+"\n",
		fs*1.2, top+ph/2, fs*1.2, top+ph/2, html.EscapeString(c.YLabel))
	// A marker's label that would overlap the previous one's goes a line
	// lower (about 7 pixels a character).
	lastEnd, level := math.Inf(-1), 0
	for _, m := range c.Markers {
		color, style := m.Color, ` stroke-dasharray="4 3"`
		if color == "" {
			color = "#999"
		}
		if m.Solid {
			style = ` stroke-width="2"`
		}
		fmt.Fprintf(&s, `<g class="%s">`, html.EscapeString(strings.TrimSpace("marker "+m.Class)))
		if m.Title != "" {
			fmt.Fprintf(&s, `<title>%s</title>`, html.EscapeString(m.Title))
		}
		fmt.Fprintf(&s, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="%s"%s/>`+"\n", x(m.X), top, x(m.X), top+ph, color, style)
		if m.Label != "" {
			// A label that would run past the plot's right edge goes on the
			// line's left; one that would overlap the previous goes lower.
			w := 0.58 * fs * float64(len([]rune(m.Label)))
			lx, anchor := x(m.X)+4, "start"
			if lx+w > left+pw {
				lx, anchor = x(m.X)-4, "end"
			}
			if math.Min(lx, lx-w*b2f(anchor == "end")) < lastEnd {
				level++
			} else {
				level = 0
			}
			lastEnd = math.Max(lastEnd, math.Max(lx, lx+w*b2f(anchor == "start")))
			fmt.Fprintf(&s, `<text x="%.1f" y="%.1f" fill="%s" text-anchor="%s">%s</text>`+"\n", lx, top+1.1*fs+1.15*fs*float64(level%6), color, anchor, html.EscapeString(m.Label))
		}
		s.WriteString("</g>\n")
	}
	for i, sr := range c.Series {
		color := Colors[i%len(Colors)]
		if sr.Color != "" {
			color = sr.Color
		}
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
		fmt.Fprintf(&s, `<polyline class="series" data-label="%s" points="%s" fill="none" stroke="%s" stroke-width="%d"%s/>`+"\n", html.EscapeString(sr.Label), strings.Join(pts, " "), color, width, dash)
		for j := range sr.X {
			if sr.NoPoints {
				break
			}
			fmt.Fprintf(&s, `<circle cx="%.1f" cy="%.1f" r="3.5" fill="%s"><title>%s: %s, %s</title></circle>`+"\n",
				x(sr.X[j]), y(sr.Y[j]), color, html.EscapeString(sr.Label), html.EscapeString(xf(sr.X[j])), html.EscapeString(yf(sr.Y[j])))
		}
		ly, lx := top+10+float64(i)*22, left+pw+16
		if c.Compact {
			ly, lx = top+ph+4.2*fs+float64(i/2)*1.6*fs, left+float64(i%2)*pw/2
		}
		fmt.Fprintf(&s, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="%s" stroke-width="%d"%s/>`+"\n", lx, ly, lx+26, ly, color, width, dash)
		fmt.Fprintf(&s, `<text x="%.1f" y="%.1f">%s</text>`+"\n", lx+32, ly+fs/3, html.EscapeString(sr.Label))
	}
	s.WriteString("</svg>\n")
	_, err := io.WriteString(w, s.String())
	return err
}

func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
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
