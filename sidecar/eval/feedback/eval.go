package feedback

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"

	"github.com/mneme-memory/mneme/sidecar/cli"
	"github.com/mneme-memory/mneme/sidecar/config"
	"github.com/mneme-memory/mneme/sidecar/embed"
	"github.com/mneme-memory/mneme/sidecar/pipeline"
	"github.com/mneme-memory/mneme/sidecar/scratch"
)

// WriteReport prints the run's shape and its table.
func WriteReport(w io.Writer, res Result) error {
	fmt.Fprintf(w, "feedback simulation: %d needs (%d answers and %d lookalikes each, plus digests), %d memories per policy at the start, "+
		"%d sessions, %d new answers per need at session %d, precision@%d\n\n",
		res.Needs, res.Relevant, res.Lookalikes, res.Memories, res.Sessions, res.Relevant, res.NewAnswersAt, res.K)
	return WriteTable(w, res)
}

// Command is `mneme eval feedback`: its flags bound to fs and parsed from
// args, the simulation on a scratch database (on the server of
// DATABASE_URL, else a private cluster) freshly migrated with the defaults
// and the configured vector layout, so the numbers are the same every time
// and nothing lands in a real database, and its table (or --json) printed
// and --plot drawn. The reviewer is the offline one, as `mneme run` uses it
// with no LLM configured.
func Command(ctx context.Context, log *slog.Logger, fs *flag.FlagSet, args []string) error {
	asJSON := fs.Bool("json", false, "print the result as JSON")
	plot := fs.String("plot", "", "write the precision plot to this SVG file")
	var o Options
	fs.IntVar(&o.Sessions, "sessions", 30, "simulated sessions (days)")
	var sets cli.Settings
	fs.Var(&sets, "set", "mneme setting for the run, key=JSON (repeatable), e.g. --set retrievability_weight=1")
	if err := cli.Parse(fs, args, false); err != nil {
		return err
	}
	settings, err := sets.Parse()
	if err != nil {
		return err
	}
	if o.Sessions < 1 {
		return fmt.Errorf("%w: --sessions must be positive", cli.ErrUsage)
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
	for k, v := range settings {
		if _, err := db.Pool.Exec(ctx, `SELECT mneme.set_setting($1, $2::jsonb)`, k, string(v)); err != nil {
			return fmt.Errorf("--set %s: %w", k, err)
		}
	}
	var dim int
	if err := db.Pool.QueryRow(ctx, `SELECT (mneme.setting('embedding_dim') #>> '{}')::int`).Scan(&dim); err != nil {
		return fmt.Errorf("read embedding_dim: %w", err)
	}
	// Its per-memory logs are thousands of lines here: warnings only.
	quiet := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	p, err := pipeline.New(pipeline.Deps{Embedder: embed.NewHash(dim), Log: quiet})
	if err != nil {
		return err
	}
	res, err := Run(ctx, db.Pool, p.Review, o, log)
	if err != nil {
		return fmt.Errorf("feedback simulation: %w", err)
	}
	return cli.Report(res, *asJSON, *plot, func(w io.Writer) error { return WriteSVG(w, res) },
		func(w io.Writer) error { return WriteReport(w, res) })
}
