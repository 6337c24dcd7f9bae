package recall

import (
	"fmt"
	"io"

	"github.com/mneme-memory/mneme/sidecar/plot"
)

// WritePlot draws evidence recall against budget, one line per method, as
// an SVG (budgets on a log scale; the raw-turn baselines dashed).
func (r *Report) WritePlot(w io.Writer) error {
	if len(r.Budgets) == 0 {
		return fmt.Errorf("plot: no budgets")
	}
	c := plot.Chart{Title: r.Benchmark + " evidence recall, " + r.Data + ", " + r.Mode,
		XLabel: "context budget (words, log scale)", YLabel: "evidence recall", XLog: true,
		XFormat: func(v float64) string { return fmt.Sprintf("%.0f", v) }, YFormat: func(v float64) string { return fmt.Sprintf("%.1f", v) }}
	for _, m := range r.Methods {
		sr := plot.Series{Label: m.Label, Dashed: m.Name == MethodBM25Turns || m.Name == MethodBM25Windows || m.Name == MethodPGHybrid}
		for _, res := range m.Results {
			sr.X, sr.Y = append(sr.X, float64(res.Budget)), append(sr.Y, res.Overall.Recall)
		}
		c.Series = append(c.Series, sr)
	}
	return c.WriteSVG(w)
}
