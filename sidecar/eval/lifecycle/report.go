package lifecycle

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"strings"

	"github.com/mneme-memory/mneme/sidecar/cli"
	"github.com/mneme-memory/mneme/sidecar/config"
	"github.com/mneme-memory/mneme/sidecar/scratch"
)

// Eval runs the simulation on a scratch database (on the server of
// cfg.DatabaseURL, else a private cluster) freshly migrated with the
// defaults and cfg's vector layout (MNEME_VECTOR, MNEME_EMBED_DIM); the cleanup schedule is the setting cleanup_interval's.
func Eval(ctx context.Context, cfg config.Config, opts Options, log *slog.Logger) (Result, error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	db, err := scratch.Open(ctx, scratch.ForEval(cfg, false, log))
	if err != nil {
		return Result{}, err
	}
	defer db.Close()
	res, err := Run(ctx, db.Pool, opts, log)
	if err != nil {
		return res, fmt.Errorf("lifecycle simulation: %w", err)
	}
	return res, nil
}

// Command is `mneme eval lifecycle`: its flags bound to fs and parsed from
// args, the simulation, and its table (or --json) printed and --plot drawn.
func Command(ctx context.Context, log *slog.Logger, fs *flag.FlagSet, args []string) error {
	asJSON := fs.Bool("json", false, "print the result as JSON")
	plot := fs.String("plot", "", "write the per-label plot to this SVG file")
	var o Options
	fs.IntVar(&o.Days, "days", 365, "simulated days")
	fs.Float64Var(&o.PurgeAfterDays, "purge-after-days", 60, "purge_after_days in the purge-on scenario")
	if err := cli.Parse(fs, args, false); err != nil {
		return err
	}
	if o.Days < 1 || o.Days > 3650 || !(o.PurgeAfterDays > 0) {
		return fmt.Errorf("%w: --days must be 1 to 3650 and --purge-after-days positive", cli.ErrUsage)
	}
	cfg, err := config.Load(false)
	if err != nil {
		return err
	}
	res, err := Eval(ctx, cfg, o, log)
	if err != nil {
		return err
	}
	return cli.Report(res, *asJSON, *plot, func(w io.Writer) error { return WriteSVG(w, res) },
		func(w io.Writer) error { return WriteTable(w, res) })
}

// Checkpoints are the days the table shows.
var Checkpoints = []int{30, 90, 180, 365}

// WriteTable prints, per scenario and label, the share of the label's
// memories active / inactive / purged at each checkpoint, then the rules.
func WriteTable(w io.Writer, r Result) error {
	fmt.Fprintf(w, "lifecycle simulation: %d days, cleanup every %s, inactive below R %.2f; share active / inactive / purged of the memories created so far\n",
		r.Days, r.CleanupEvery, r.InactiveBelowR)
	for _, sc := range r.Scenarios {
		fmt.Fprintf(w, "\n%s (%d reviews, %d of them again; %d cleanups; %d purged)\n", sc.Name, sc.Reviews, sc.Again, sc.Cleanups, sc.Purged)
		fmt.Fprintf(w, "  %-15s %8s", "label", "S0 days")
		var days []int
		for _, d := range Checkpoints {
			if d <= len(sc.Days) {
				days = append(days, d)
				fmt.Fprintf(w, " %17s", fmt.Sprintf("day %d", d))
			}
		}
		fmt.Fprintln(w)
		for _, label := range Labels {
			s0 := r.InitialDays[label]
			if strings.HasPrefix(label, "project_") {
				s0 = r.InitialDays["project"]
			}
			fmt.Fprintf(w, "  %-15s %8g", label, s0)
			for _, d := range days {
				s := sc.Days[d-1].Labels[label]
				fmt.Fprintf(w, " %17s", fmt.Sprintf("%.2f/%.2f/%.2f", s.Active, s.Inactive, s.Purged))
			}
			fmt.Fprintln(w)
		}
		fmt.Fprintf(w, "  rules: pinned or important ever inactive or purged: %d; purged before the grace: %d\n",
			sc.PinnedOrImportantLeft, sc.PurgedEarly)
	}
	return nil
}

// colors per state in the plot.
var colors = map[string]string{"active": "#2ca02c", "inactive": "#ff7f0e", "purged": "#d62728"}

// WriteSVG plots, per label (one panel each), the share of memories active,
// inactive and purged over the simulated days: solid for purge off, dashed
// for purge on. A plain SVG, no dependencies.
func WriteSVG(w io.Writer, r Result) error {
	const (
		cols, rows      = 3, 2
		pw, ph          = 230.0, 150.0
		left, top, gapX = 50.0, 50.0, 40.0
		gapY            = 60.0
	)
	width := left + cols*(pw+gapX) + 10
	height := top + rows*(ph+gapY) + 30
	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%.0f" height="%.0f" viewBox="0 0 %.0f %.0f" font-family="sans-serif" font-size="11">`+"\n", width, height, width, height)
	fmt.Fprintf(&b, `<rect width="%.0f" height="%.0f" fill="white"/>`+"\n", width, height)
	fmt.Fprintf(&b, `<text x="%.0f" y="20" font-size="14">mneme eval lifecycle: share of memories by state over %d days (solid: purge off, dashed: purge on)</text>`+"\n", left, r.Days)
	lx := left
	for _, st := range []string{"active", "inactive", "purged"} {
		fmt.Fprintf(&b, `<line x1="%.0f" x2="%.0f" y1="34" y2="34" stroke="%s" stroke-width="2"/><text x="%.0f" y="38">%s</text>`+"\n", lx, lx+18, colors[st], lx+22, st)
		lx += 90
	}
	for i, label := range Labels {
		x0 := left + float64(i%cols)*(pw+gapX)
		y0 := top + float64(i/cols)*(ph+gapY) + 10
		fmt.Fprintf(&b, `<text x="%.1f" y="%.1f" font-size="12">%s</text>`+"\n", x0, y0-6, label)
		fmt.Fprintf(&b, `<rect x="%.1f" y="%.1f" width="%.1f" height="%.1f" fill="none" stroke="#999"/>`+"\n", x0, y0, pw, ph)
		for _, p := range []float64{0, 0.5, 1} {
			fmt.Fprintf(&b, `<text x="%.1f" y="%.1f" text-anchor="end">%.1f</text>`+"\n", x0-4, y0+ph*(1-p)+4, p)
		}
		fmt.Fprintf(&b, `<text x="%.1f" y="%.1f" text-anchor="end">day %d</text>`+"\n", x0+pw, y0+ph+14, r.Days)
		for si, sc := range r.Scenarios {
			n := len(sc.Days)
			for _, st := range []string{"active", "inactive", "purged"} {
				var pts []string
				for d, day := range sc.Days {
					s := day.Labels[label]
					v := map[string]float64{"active": s.Active, "inactive": s.Inactive, "purged": s.Purged}[st]
					pts = append(pts, fmt.Sprintf("%.1f,%.1f", x0+pw*float64(d)/float64(max(1, n-1)), y0+ph*(1-v)))
				}
				dash := ""
				if si > 0 {
					dash = ` stroke-dasharray="5 4"`
				}
				fmt.Fprintf(&b, `<polyline fill="none" stroke="%s" stroke-width="1.5"%s points="%s"/>`+"\n", colors[st], dash, strings.Join(pts, " "))
			}
		}
	}
	b.WriteString("</svg>\n")
	_, err := io.WriteString(w, b.String())
	return err
}
