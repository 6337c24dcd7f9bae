package transfer

import (
	"fmt"
	"io"
	"os"
	"time"
)

// Progress reports counts and rates on a terminal, at most once a second. A
// nil *Progress reports nothing.
type Progress struct {
	w     io.Writer
	verb  string
	start time.Time
	last  time.Time
}

// NewProgress reports to w as "<verb> N memories ...". It returns nil (no
// reports) when quiet, or when w is not a terminal.
func NewProgress(w io.Writer, verb string, quiet bool) *Progress {
	if quiet || !isTerminal(w) {
		return nil
	}
	now := time.Now()
	return &Progress{w: w, verb: verb, start: now, last: now}
}

func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}

// Set reports the counts so far if a second passed since the last report.
func (p *Progress) Set(memories, lines int64) {
	if p == nil {
		return
	}
	now := time.Now()
	if now.Sub(p.last) < time.Second {
		return
	}
	p.last = now
	p.print(memories, lines, "")
}

// Done reports the final counts.
func (p *Progress) Done(memories, lines int64) {
	if p == nil {
		return
	}
	p.print(memories, lines, "\n")
}

func (p *Progress) print(memories, lines int64, end string) {
	secs := time.Since(p.start).Seconds()
	rate := 0.0
	if secs > 0 {
		rate = float64(memories) / secs
	}
	fmt.Fprintf(p.w, "\r%s %d memories, %d lines (%.0f memories/s)%s", p.verb, memories, lines, rate, end)
}
