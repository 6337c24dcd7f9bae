// Package progress draws the progress bars of mneme's evaluations and
// benchmarks (mneme eval, mneme bench) on stderr.
package progress

import (
	"fmt"
	"io"
	"os"
	"strings"
	"time"
)

// Bar draws a bar on a terminal (redrawn in place, at most ten times a
// second) and, on anything else, a line at every tenth of the way; a nil
// Bar, or one on a nil writer, draws nothing.
type Bar struct {
	Label string // shown before the bar; may change as the work goes on
	w     io.Writer
	tty   bool
	total int
	n     int
	last  time.Time
	step  int // last tenth printed (non-tty)
	start time.Time
}

// New starts a bar of total steps on w (nil: none).
func New(w io.Writer, label string, total int) *Bar {
	p := &Bar{w: w, Label: label, total: total, start: time.Now()}
	if f, ok := w.(*os.File); ok {
		if st, err := f.Stat(); err == nil && st.Mode()&os.ModeCharDevice != 0 {
			p.tty = true
		}
	}
	return p
}

// Add advances the bar by n.
func (p *Bar) Add(n int) {
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
			fmt.Fprintf(p.w, "%s: %d/%d (%d%%) %s\n", p.Label, p.n, p.total, tenth*10, time.Since(p.start).Round(time.Second))
		}
	}
}

func (p *Bar) draw() {
	const width = 30
	filled := 0
	if p.total > 0 {
		filled = p.n * width / p.total
	}
	fmt.Fprintf(p.w, "\r\033[K%-24s [%s%s] %d/%d %s", p.Label, strings.Repeat("#", filled),
		strings.Repeat(".", width-filled), p.n, p.total, time.Since(p.start).Round(time.Second))
}

// Done ends the bar's line.
func (p *Bar) Done() {
	if p == nil || p.w == nil || !p.tty {
		return
	}
	p.draw()
	fmt.Fprintln(p.w)
}
