package recall

import (
	"fmt"
	"io"
	"os"
	"strings"
	"time"
)

// progress draws a bar on a terminal (redrawn in place, at most ten times a
// second) and, on anything else, a line at every tenth of the way.
type progress struct {
	w     io.Writer
	tty   bool
	label string
	total int
	n     int
	last  time.Time
	step  int // last tenth printed (non-tty)
	start time.Time
}

func newProgress(w io.Writer, label string, total int) *progress {
	p := &progress{w: w, label: label, total: total, start: time.Now()}
	if f, ok := w.(*os.File); ok {
		if st, err := f.Stat(); err == nil && st.Mode()&os.ModeCharDevice != 0 {
			p.tty = true
		}
	}
	return p
}

func (p *progress) add(n int) {
	if p == nil || p.w == nil {
		return
	}
	p.n += n
	if p.tty {
		if time.Since(p.last) >= 100*time.Millisecond || p.n == p.total {
			p.last = time.Now()
			p.draw()
		}
		return
	}
	if p.total > 0 {
		if tenth := p.n * 10 / p.total; tenth > p.step {
			p.step = tenth
			fmt.Fprintf(p.w, "%s: %d/%d (%d%%) %s\n", p.label, p.n, p.total, tenth*10, time.Since(p.start).Round(time.Second))
		}
	}
}

func (p *progress) draw() {
	const width = 30
	filled := 0
	if p.total > 0 {
		filled = p.n * width / p.total
	}
	fmt.Fprintf(p.w, "\r\033[K%-24s [%s%s] %d/%d %s", p.label, strings.Repeat("#", filled),
		strings.Repeat(".", width-filled), p.n, p.total, time.Since(p.start).Round(time.Second))
}

// done ends the bar's line.
func (p *progress) done() {
	if p == nil || p.w == nil || !p.tty {
		return
	}
	p.draw()
	fmt.Fprintln(p.w)
}

// Progress is the progress bar for other packages (benchmarks).
type Progress struct{ p *progress }

// NewProgress starts a bar of total steps on w (nil: none).
func NewProgress(w io.Writer, label string, total int) *Progress {
	return &Progress{p: newProgress(w, label, total)}
}

// Add advances the bar by n.
func (b *Progress) Add(n int) { b.p.add(n) }

// Done ends the bar.
func (b *Progress) Done() { b.p.done() }
