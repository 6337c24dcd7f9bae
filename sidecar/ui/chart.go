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

// ratingColor: the reviews' marks, by rating (Okabe-Ito).
var ratingColor = map[string]string{"again": "#D55E00", "hard": "#E69F00", "good": "#009E73", "easy": "#0072B2"}

// eventMark: the lifecycle events drawn as marks, with their colour.
var eventMark = map[string]string{
	"pinned": "#CC79A7", "unpinned": "#CC79A7", "forgotten": "#D55E00", "superseded": "#555555", "merged": "#0060a0",
	"inactivated": "#b07000", "reactivated": "#009E73", "expired": "#b07000",
}

// retrievabilityPlot draws a memory's FSRS retrievability on calendar
// dates: each review restarts the curve from 1 with the stability it left
// (review_log's before and after) and is marked by its rating; a "now"
// line; the curve ahead (dashed) while the memory is live, none after it
// stopped being active (superseded, forgotten, merged, inactive); marks
// for pin, unpin, forget, supersession and the other lifecycle events and
// for valid_until; the y range fitted to the curve. Drawn by sidecar/plot,
// which escapes every text; small enough to read on a phone.
func retrievabilityPlot(m Memory, reviews []Review, events []Event, lineage []Link, now time.Time) (template.HTML, error) {
	start := m.CreatedAt
	last, stab := m.LastReviewedAt, m.Stability
	if len(reviews) > 0 {
		last, stab = reviews[0].LastReviewedBefore, reviews[0].StabilityBefore
	}
	if last.Before(start) {
		start = last
	}
	// When it stopped being active: valid_until for a superseded or
	// forgotten belief, else its last status event.
	var stop *time.Time
	if m.Status != "active" {
		for _, e := range events {
			if e.Event == "superseded" || e.Event == "forgotten" || e.Event == "merged" || e.Event == "inactivated" || e.Event == "expired" {
				t := e.At
				stop = &t
			}
		}
		if m.ValidUntil != nil && m.Status != "inactive" && (stop == nil || m.ValidUntil.Before(*stop)) {
			t := *m.ValidUntil
			stop = &t
		}
		if stop != nil && stop.Before(start) {
			stop = &start
		}
	}
	span := now.Sub(start)
	if span < 7*day {
		span = 7 * day
	}
	end := now.Add(max(30*day, span/4))
	if stop != nil {
		end = now.Add(span / 12)
	}
	for _, e := range events {
		if eventMark[e.Event] != "" && e.At.After(end) {
			end = e.At.Add(span / 12)
		}
	}
	curveEnd := end
	if stop != nil {
		curveEnd = *stop
	}
	x := func(t time.Time) float64 { return float64(t.Unix()) / 86400 }

	type seg struct {
		from, to time.Time
		s        float64
	}
	var segs []seg
	for _, rv := range reviews {
		segs = append(segs, seg{last, rv.At, stab})
		last, stab = rv.At, rv.StabilityAfter
	}
	segs = append(segs, seg{last, end, stab})

	past := plot.Series{Label: "retrievability (FSRS)", NoPoints: true, Color: "#0072B2"}
	future := plot.Series{Label: "ahead, if not reviewed", NoPoints: true, Dashed: true, Color: "#56B4E9"}
	lo := 1.0
	add := func(t time.Time, r float64) {
		if t.After(curveEnd) {
			return
		}
		lo = math.Min(lo, r)
		if !t.After(now) {
			past.X, past.Y = append(past.X, x(t)), append(past.Y, r)
		}
		if !t.Before(now) {
			future.X, future.Y = append(future.X, x(t)), append(future.Y, r)
		}
	}
	for _, sg := range segs {
		const steps = 60
		from, to := sg.from, sg.to
		if to.After(curveEnd) {
			to = curveEnd
		}
		if !to.After(from) {
			add(from, fsrs.Retrievability(sg.s, sg.from, from))
			continue
		}
		span := to.Sub(from)
		for i := 0; i <= steps; i++ {
			t := from.Add(time.Duration(float64(span) * float64(i) / steps))
			next := from.Add(time.Duration(float64(span) * float64(i+1) / steps))
			add(t, fsrs.Retrievability(sg.s, sg.from, t))
			if i < steps && t.Before(now) && next.After(now) {
				add(now, fsrs.Retrievability(sg.s, sg.from, now))
			}
		}
	}
	ylo := math.Max(0, math.Floor((lo-0.02)*20)/20)
	step := 0.2
	switch {
	case 1-ylo <= 0.1:
		step = 0.02
	case 1-ylo <= 0.25:
		step = 0.05
	case 1-ylo <= 0.5:
		step = 0.1
	}
	var yTicks []float64
	for v := 1.0; v >= ylo-1e-9; v -= step {
		yTicks = append(yTicks, math.Round(v*100)/100)
	}
	xTicks, xFormat := dateTicks(start, end)
	c := plot.Chart{
		XLabel:   "date (UTC): the curve and reviews as said, events as stored",
		YLabel:   "retrievability",
		XTicks:   xTicks,
		XFormat:  xFormat,
		YTicks:   yTicks,
		YFormat:  func(v float64) string { return fmt.Sprintf("%.2f", v) },
		YMin:     ylo,
		YMax:     1,
		Width:    540,
		Height:   360,
		FontSize: 14,
		Compact:  true,
	}
	if len(past.X) > 0 {
		c.Series = append(c.Series, past)
	}
	if len(future.X) > 0 {
		c.Series = append(c.Series, future)
	}
	if m.Pinned {
		pinAt := start
		for _, e := range events {
			if e.Event == "pinned" {
				pinAt = e.At
			}
		}
		c.Series = append(c.Series, plot.Series{Label: "ranks as 1 (pinned)", NoPoints: true, Color: "#CC79A7", Wide: true,
			X: []float64{x(pinAt), x(curveEnd)}, Y: []float64{1, 1}})
	}
	if len(c.Series) == 0 { // a curve that stopped before it started
		c.Series = append(c.Series, plot.Series{Label: "retrievability (FSRS)", NoPoints: true, X: []float64{x(start)}, Y: []float64{1}})
	}
	for _, rv := range reviews {
		label := rv.Rating
		if len(reviews) > 8 {
			label = ""
		}
		title := fmt.Sprintf("%s (said): %s by %s, stability %.1f → %.1f days", rv.At.UTC().Format("2006-01-02 15:04 UTC"), rv.Rating, rv.Reviewer,
			rv.StabilityBefore, rv.StabilityAfter)
		if why := rv.Why(); why != "" {
			title += "; why: " + why
		}
		if len(rv.Queries) > 0 {
			title += "; matched: " + strings.Join(rv.Queries, "; ")
		}
		c.Markers = append(c.Markers, plot.Marker{X: x(rv.At), Label: label, Title: title, Color: ratingColor[rv.Rating],
			Class: "review review-" + rv.Rating})
	}
	for _, l := range lineage {
		if l.Relation == "replaced_by" && l.Depth == 1 {
			c.Markers = append(c.Markers, plot.Marker{X: x(l.CreatedAt), Label: "superseded by " + l.ID.String()[:8], Color: "#555555",
				Title: "superseded by " + l.ID.String() + ", dated " + l.CreatedAt.UTC().Format("2006-01-02 15:04 UTC"), Class: "supersession"})
		}
	}
	for _, e := range events {
		if color := eventMark[e.Event]; color != "" {
			title := e.Event + " " + e.At.UTC().Format("2006-01-02 15:04 UTC") + " (stored) by " + e.Actor
			if e.Reason != nil {
				title += ": " + *e.Reason
			}
			c.Markers = append(c.Markers, plot.Marker{X: x(e.At), Label: e.Event, Title: title, Color: color, Class: "event event-" + e.Event})
		}
	}
	if m.ValidUntil != nil && !m.ValidUntil.After(end) {
		c.Markers = append(c.Markers, plot.Marker{X: x(*m.ValidUntil), Label: "valid until", Color: "#b07000", Class: "valid-until",
			Title: "valid until " + m.ValidUntil.UTC().Format("2006-01-02 15:04 UTC")})
	}
	c.Markers = append(c.Markers, plot.Marker{X: x(now), Label: "now", Color: "#222222", Solid: true, Class: "now",
		Title: "now: " + now.UTC().Format("2006-01-02 15:04 UTC")})
	var b bytes.Buffer
	if err := c.WriteSVG(&b); err != nil {
		return "", fmt.Errorf("retrievability plot: %w", err)
	}
	// The chart's text went through html.EscapeString in plot.
	return template.HTML(b.String()), nil //nolint:gosec
}

// dateTicks are at most 5 calendar-aligned ticks over [from, to] (days,
// weeks, months, years), as days since 1970 with their format.
func dateTicks(from, to time.Time) ([]float64, func(float64) string) {
	from, to = from.UTC(), to.UTC()
	days := to.Sub(from).Hours() / 24
	at := func(v float64) time.Time { return time.Unix(int64(math.Round(v*86400)), 0).UTC() }
	x := func(t time.Time) float64 { return float64(t.Unix()) / 86400 }
	var out []float64
	for _, d := range []int{1, 2, 7, 14} {
		if days/float64(d) <= 5 {
			t := time.Date(from.Year(), from.Month(), from.Day(), 0, 0, 0, 0, time.UTC)
			for ; !t.After(to); t = t.AddDate(0, 0, d) {
				if !t.Before(from) {
					out = append(out, x(t))
				}
			}
			return out, func(v float64) string { return at(v).Format("Jan 2") }
		}
	}
	for _, mo := range []int{1, 2, 3, 6, 12, 24, 60, 120} {
		if days/(30.44*float64(mo)) > 5 {
			continue
		}
		t := time.Date(from.Year(), from.Month(), 1, 0, 0, 0, 0, time.UTC)
		for (int(t.Month())-1)%min(mo, 12) != 0 || (mo > 12 && t.Year()%(mo/12) != 0) {
			t = t.AddDate(0, 1, 0)
		}
		for ; !t.After(to); t = t.AddDate(0, mo, 0) {
			if !t.Before(from) {
				out = append(out, x(t))
			}
		}
		if mo >= 12 {
			return out, func(v float64) string { return at(v).Format("2006") }
		}
		return out, func(v float64) string { return at(v).Format("Jan 2006") }
	}
	return []float64{x(from), x(to)}, func(v float64) string { return at(v).Format("2006") }
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
	const bw, bh, gx, gy, pad = 220.0, 72.0, 84.0, 34.0, 10.0
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
		for i, line := range wrapWords(l.Content, 31, 3) {
			fmt.Fprintf(&b, `<text x="%.0f" y="%.0f">%s</text>`, x+8, y+32+float64(i)*14, html.EscapeString(line))
		}
		b.WriteString(`</a>`)
	}
	// An arrow's label in lines of at most 12 characters, above a
	// horizontal arrow (which is gx wide: they fit between the boxes) or
	// beside a vertical one.
	arrow := func(x1, y1, x2, y2 float64, label string) {
		fmt.Fprintf(&b, `<line x1="%.0f" y1="%.0f" x2="%.0f" y2="%.0f" stroke="#555" stroke-width="1.5" marker-end="url(#arrow)"/>`, x1, y1, x2, y2)
		lines := wrapWords(label, 12, 2)
		for i, line := range lines {
			if y1 == y2 {
				fmt.Fprintf(&b, `<text x="%.0f" y="%.0f" text-anchor="middle" fill="#555">%s</text>`, (x1+x2)/2, y1-6-14*float64(len(lines)-1-i), html.EscapeString(line))
			} else {
				fmt.Fprintf(&b, `<text x="%.0f" y="%.0f" fill="#555">%s</text>`, x1+6, (y1+y2)/2+4+14*float64(i)-7*float64(len(lines)-1), html.EscapeString(line))
			}
		}
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

// wrapWords breaks text into at most n lines of at most width characters
// at word boundaries (a longer word is cut); "…" ends the last line when
// text is left over.
func wrapWords(text string, width, n int) []string {
	var lines []string
	var cur []rune
	words := strings.Fields(text)
	for i := 0; i < len(words); i++ {
		w := []rune(words[i])
		switch {
		case len(cur) == 0 && len(w) > width:
			cur = w[:width]
			words[i] = string(w[width:])
			i-- // the rest of the word on the next line
		case len(cur) == 0:
			cur = w
			continue
		case len(cur)+1+len(w) <= width:
			cur = append(append(cur, ' '), w...)
			continue
		default:
			i--
		}
		lines = append(lines, string(cur))
		cur = nil
		if len(lines) == n {
			last := []rune(lines[n-1])
			if len(last) >= width {
				last = last[:width-1]
			}
			lines[n-1] = strings.TrimRight(string(last), " ") + "…"
			return lines
		}
	}
	if len(cur) > 0 {
		lines = append(lines, string(cur))
	}
	return lines
}
