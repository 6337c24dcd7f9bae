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
	"github.com/mneme-memory/mneme/sidecar/plot"
	"github.com/mneme-memory/mneme/sidecar/scratch"
)

// Command is `mneme eval lifecycle`: its flags bound to fs and parsed from
// args, the simulation on a scratch database (on the server of
// DATABASE_URL, else a private cluster) freshly migrated with the defaults
// and the configured vector layout (the cleanup schedule is the setting
// cleanup_interval's), and its table (or --json) printed and --plot drawn.
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
	db, err := scratch.Open(ctx, scratch.ForEval(cfg, false, log))
	if err != nil {
		return err
	}
	defer db.Close()
	res, err := Run(ctx, db.Pool, o, log)
	if err != nil {
		return fmt.Errorf("lifecycle simulation: %w", err)
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

// WriteSVG plots, per label, the share of its memories still active over
// the simulated days (purge off; purging moves inactive memories only, so
// the active share is the same with it on). The table has the inactive and
// purged shares.
func WriteSVG(w io.Writer, r Result) error {
	if len(r.Scenarios) == 0 {
		return fmt.Errorf("lifecycle: nothing to plot")
	}
	c := plot.Chart{Title: fmt.Sprintf("mneme eval lifecycle: share of memories active over %d days", r.Days),
		XLabel: "day", YLabel: "share of the label's memories active", YFormat: func(v float64) string { return fmt.Sprintf("%.1f", v) }}
	for _, d := range Checkpoints {
		if d <= r.Days {
			c.XTicks = append(c.XTicks, float64(d))
		}
	}
	for _, label := range Labels {
		sr := plot.Series{Label: label, NoPoints: true}
		for _, day := range r.Scenarios[0].Days {
			sr.X, sr.Y = append(sr.X, float64(day.Day)), append(sr.Y, day.Labels[label].Active)
		}
		c.Series = append(c.Series, sr)
	}
	return c.WriteSVG(w)
}
