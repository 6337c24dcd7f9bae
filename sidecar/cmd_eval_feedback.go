package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"log/slog"
	"os"

	"github.com/mneme-memory/mneme/sidecar/config"
	"github.com/mneme-memory/mneme/sidecar/embed"
	"github.com/mneme-memory/mneme/sidecar/feedback"
	"github.com/mneme-memory/mneme/sidecar/pipeline"
)

func init() {
	evalCommands["feedback"] = command{
		"review-based vs auto-GOOD vs no reinforcement: precision@5 over simulated sessions [--json] [--plot FILE.svg] [--sessions N]",
		cmdEvalFeedback,
	}
}

func cmdEvalFeedback(ctx context.Context, log *slog.Logger, args []string) error {
	fs := flag.NewFlagSet("eval feedback", flag.ContinueOnError)
	asJSON := fs.Bool("json", false, "print the result as JSON")
	plot := fs.String("plot", "", "write the precision plot to this SVG file")
	sessions := fs.Int("sessions", 30, "simulated sessions (days)")
	if err := fs.Parse(args); err != nil {
		return errUsage
	}
	cfg, err := config.Load(false)
	if err != nil {
		return err
	}
	// A scratch database (on DATABASE_URL's server, else a private cluster)
	// freshly migrated with the defaults: the same numbers every time, and
	// nothing lands in a real database.
	pool, cleanup, err := openScratch(ctx, log, cfg, false)
	if err != nil {
		return err
	}
	defer cleanup()
	var dim int
	if err := pool.QueryRow(ctx, `SELECT (mneme.setting('embedding_dim') #>> '{}')::int`).Scan(&dim); err != nil {
		return fmt.Errorf("read embedding_dim: %w", err)
	}
	// The offline reviewer, as `mneme run` uses it with no LLM configured.
	// Its per-memory logs are thousands of lines here: warnings only.
	quiet := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	p, err := pipeline.New(pipeline.Deps{Embedder: embed.NewHash(dim), Log: quiet})
	if err != nil {
		return err
	}
	res, err := feedback.Run(ctx, pool, p.Review, feedback.Options{Sessions: *sessions}, log)
	if err != nil {
		return fmt.Errorf("feedback simulation: %w", err)
	}
	if *plot != "" {
		f, err := os.Create(*plot)
		if err != nil {
			return err
		}
		if err := feedback.WriteSVG(f, res); err != nil {
			f.Close()
			return err
		}
		if err := f.Close(); err != nil {
			return err
		}
	}
	if *asJSON {
		enc := json.NewEncoder(os.Stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(res)
	}
	fmt.Printf("feedback simulation: %d needs (%d answers and %d lookalikes each, plus digests), %d memories per policy at the start, "+
		"%d sessions, %d new answers per need at session %d, precision@%d\n\n",
		res.Needs, res.Relevant, res.Lookalikes, res.Memories, res.Sessions, res.Relevant, res.NewAnswersAt, res.K)
	return feedback.WriteTable(os.Stdout, res)
}
