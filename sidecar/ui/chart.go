package ui

import (
	"bytes"
	"fmt"
	"html"
	"html/template"
	"math"
	"sort"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/mneme-memory/mneme/sidecar/fsrs"
	"github.com/mneme-memory/mneme/sidecar/plot"
)

const day = 24 * time.Hour

// retrievabilityPlot draws a memory's FSRS retrievability from its creation
// to a year after now: each review restarts the curve from 1 with the
// stability it left (review_log's before and after), and is marked with its
// rating and reviewer. Drawn by eval/plot, which escapes every text.
func retrievabilityPlot(m Memory, reviews []Review, now time.Time) (template.HTML, error) {
	start := m.CreatedAt
	end := now.Add(365 * day)
	if end.Before(start) {
		end = start.Add(365 * day)
	}
	x := func(t time.Time) float64 { return t.Sub(start).Hours() / 24 }
	type seg struct {
		from, to time.Time
		s        float64
	}
	var segs []seg
	last, stab := m.LastReviewedAt, m.Stability
	if len(reviews) > 0 {
		last, stab = reviews[0].LastReviewedBefore, reviews[0].StabilityBefore
	}
	if last.Before(start) {
		start = last
	}
	for _, rv := range reviews {
		segs = append(segs, seg{last, rv.At, stab})
		last, stab = rv.At, rv.StabilityAfter
	}
	segs = append(segs, seg{last, end, stab})

	var past, future plot.Series
	past.Label, future.Label = "retrievability", "ahead (no review)"
	future.Dashed = true
	past.NoPoints, future.NoPoints = true, true
	add := func(t time.Time, r float64) {
		if !t.After(now) {
			past.X, past.Y = append(past.X, x(t)), append(past.Y, r)
		}
		if !t.Before(now) {
			future.X, future.Y = append(future.X, x(t)), append(future.Y, r)
		}
	}
	for _, sg := range segs {
		const steps = 60
		span := sg.to.Sub(sg.from)
		for i := 0; i <= steps; i++ {
			t := sg.from.Add(time.Duration(float64(span) * float64(i) / steps))
			if i < steps && t.Before(now) && sg.from.Add(time.Duration(float64(span)*float64(i+1)/steps)).After(now) {
				add(t, curve(m.Pinned, sg.s, sg.from, t))
				add(now, curve(m.Pinned, sg.s, sg.from, now))
				continue
			}
			add(t, curve(m.Pinned, sg.s, sg.from, t))
		}
	}
	c := plot.Chart{
		Title:   "Retrievability over time",
		XLabel:  "days since the memory was created",
		YLabel:  "retrievability",
		XTicks:  ticks(x(end)),
		XFormat: func(v float64) string { return fmt.Sprintf("%g", math.Round(v*10)/10) },
		YFormat: func(v float64) string { return fmt.Sprintf("%.1f", v) },
	}
	if m.Pinned {
		c.Title += " (pinned: counts as 1)"
	}
	if len(past.X) > 0 {
		c.Series = append(c.Series, past)
	}
	if len(future.X) > 0 {
		c.Series = append(c.Series, future)
	}
	for _, rv := range reviews {
		label := rv.Rating
		if len(reviews) <= 6 {
			label += " · " + rv.Reviewer
		}
		title := fmt.Sprintf("%s: %s by %s, stability %.1f → %.1f days", rv.At.UTC().Format("2006-01-02 15:04"), rv.Rating, rv.Reviewer,
			rv.StabilityBefore, rv.StabilityAfter)
		if len(rv.Queries) > 0 {
			title += "; matched: " + strings.Join(rv.Queries, "; ")
		}
		c.Markers = append(c.Markers, plot.Marker{X: x(rv.At), Label: label, Title: title})
	}
	var b bytes.Buffer
	if err := c.WriteSVG(&b); err != nil {
		return "", fmt.Errorf("retrievability plot: %w", err)
	}
	// The chart's text went through html.EscapeString in plot.
	return template.HTML(b.String()), nil //nolint:gosec
}

func curve(pinned bool, s float64, from, t time.Time) float64 {
	if pinned {
		return 1
	}
	return fsrs.Retrievability(s, from, t)
}

// ticks are 5 to 12 round steps over [0, span] days.
func ticks(span float64) []float64 {
	step := 1.0
	for _, s := range []float64{1, 2, 7, 14, 30, 60, 90, 180, 365, 730, 1825} {
		step = s
		if span/s <= 12 {
			break
		}
	}
	var out []float64
	for v := 0.0; v <= span+step/2; v += step {
		out = append(out, v)
	}
	return out
}

var statusColor = map[string]string{
	"active": "#009E73", "superseded": "#999999", "invalidated": "#D55E00", "merged": "#0072B2", "inactive": "#E69F00",
}

var relationText = map[string]string{
	"confirmed_by": "confirms", "invalidated_by": "invalidates", "confirms": "confirmed by", "invalidates": "invalidated by",
}

// lineageGraph draws mneme.history's rows: the supersedes chain from left
// (oldest) to right, each arrow "superseded by"; beside a link, below it,
// the memories that confirmed it (merged duplicates) or invalidated it, and
// those it confirmed or invalidated. Every box links to its memory.
func lineageGraph(links []Link, self uuid.UUID, tenant string) template.HTML {
	if len(links) == 0 {
		return ""
	}
	const bw, bh, gx, gy, pad = 210.0, 58.0, 70.0, 34.0, 10.0
	var chain []Link
	side := map[int][]Link{}
	for _, l := range links {
		switch l.Relation {
		case "self", "replaced", "replaced_by":
			chain = append(chain, l)
		default:
			side[l.Depth] = append(side[l.Depth], l)
		}
	}
	sort.SliceStable(chain, func(i, j int) bool { return chain[i].Depth < chain[j].Depth })
	col := map[int]int{}
	for i, l := range chain {
		col[l.Depth] = i
	}
	rows := 1
	for _, s := range side {
		rows = max(rows, len(s)+1)
	}
	w := pad*2 + float64(len(chain))*bw + float64(max(len(chain)-1, 0))*gx
	h := pad*2 + float64(rows)*bh + float64(rows-1)*gy
	var b strings.Builder
	fmt.Fprintf(&b, `<svg class="lineage" xmlns="http://www.w3.org/2000/svg" width="%.0f" height="%.0f" viewBox="0 0 %.0f %.0f" font-family="sans-serif" font-size="11">`, w, h, w, h)
	b.WriteString(`<defs><marker id="arrow" viewBox="0 0 10 10" refX="10" refY="5" markerWidth="7" markerHeight="7" orient="auto-start-reverse"><path d="M0,0L10,5L0,10z" fill="#555"/></marker></defs>`)
	box := func(l Link, x, y float64) {
		stroke, sw := statusColor[l.Status], 1.5
		if stroke == "" {
			stroke = "#555"
		}
		if l.ID == self {
			sw = 3.5
		}
		fmt.Fprintf(&b, `<a href="%s" class="node" data-memory="%s"><title>%s</title>`, html.EscapeString(href(tenant, "/memories/", l.ID)), l.ID, html.EscapeString(l.Content))
		fmt.Fprintf(&b, `<rect x="%.0f" y="%.0f" width="%.0f" height="%.0f" rx="6" fill="white" stroke="%s" stroke-width="%.1f"/>`, x, y, bw, bh, stroke, sw)
		fmt.Fprintf(&b, `<text x="%.0f" y="%.0f" font-weight="bold" fill="%s">%s · %s</text>`, x+8, y+16, stroke, html.EscapeString(l.Status), l.ID.String()[:8])
		text := []rune(strings.Join(strings.Fields(l.Content), " "))
		for i := 0; i < 2 && len(text) > 0; i++ {
			n := min(len(text), 32)
			line := string(text[:n])
			text = text[n:]
			if i == 1 && len(text) > 0 {
				line = string([]rune(line)[:n-1]) + "…"
			}
			fmt.Fprintf(&b, `<text x="%.0f" y="%.0f">%s</text>`, x+8, y+32+float64(i)*14, html.EscapeString(line))
		}
		b.WriteString(`</a>`)
	}
	arrow := func(x1, y1, x2, y2 float64, label string) {
		fmt.Fprintf(&b, `<line x1="%.0f" y1="%.0f" x2="%.0f" y2="%.0f" stroke="#555" stroke-width="1.5" marker-end="url(#arrow)"/>`, x1, y1, x2, y2)
		fmt.Fprintf(&b, `<text x="%.0f" y="%.0f" text-anchor="middle" fill="#555">%s</text>`, (x1+x2)/2, (y1+y2)/2-4, html.EscapeString(label))
	}
	for i, l := range chain {
		x := pad + float64(i)*(bw+gx)
		box(l, x, pad)
		if i > 0 {
			arrow(x-gx, pad+bh/2, x, pad+bh/2, "superseded by")
		}
		for j, sl := range side[l.Depth] {
			y := pad + float64(j+1)*(bh+gy)
			box(sl, x, y)
			arrow(x+bw/2, y, x+bw/2, y-gy, relationText[sl.Relation])
		}
	}
	b.WriteString(`</svg>`)
	return template.HTML(b.String()) //nolint:gosec // every text escaped above
}
