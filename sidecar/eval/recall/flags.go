package recall

import (
	"bufio"
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os"

	"github.com/mneme-memory/mneme/sidecar/cli"
	"github.com/mneme-memory/mneme/sidecar/config"
	"github.com/mneme-memory/mneme/sidecar/scratch"
)

// Candidates checks --folds against --choose (both or neither, folds 0 or
// at least 2) and gives every combination of the values to choose among
// (nil without --choose).
func Candidates(c cli.Choices, folds int) ([]Candidate, error) {
	switch {
	case folds < 0 || folds == 1:
		return nil, fmt.Errorf("%w: --folds must be 0 (off) or at least 2", cli.ErrUsage)
	case folds > 1 && len(c) == 0:
		return nil, fmt.Errorf("%w: --folds needs the settings to choose among: --choose key=v1|v2", cli.ErrUsage)
	case folds == 0 && len(c) > 0:
		return nil, fmt.Errorf("%w: --choose needs --folds N (N >= 2)", cli.ErrUsage)
	case len(c) == 0:
		return nil, nil
	}
	return Grid(c), nil
}

// Command is `mneme eval locomo` and `mneme eval beam`: the flags bound to
// fs (data is --data's default) and parsed from args, the data read by
// load, the run on a fresh scratch database, and the report printed
// (tables, or --json) and plotted (--plot).
func Command(ctx context.Context, log *slog.Logger, fs *flag.FlagSet, args []string, data, dataHelp string,
	load func(string) (*Data, error)) error {
	o := Options{Log: log}
	var sets cli.Settings
	var choose cli.Choices
	fs.StringVar(&data, "data", data, dataHelp)
	fs.IntVar(&o.Headline, "budget", 1000, "context budget in words of the per-category table (200, 500, 1000 and 2000 are always reported)")
	asJSON := fs.Bool("json", false, "print one JSON object instead of the tables")
	plot := fs.String("plot", "", "write an SVG plot of recall against budget to this file")
	questionsFile := fs.String("questions", "", "write one JSON line per question, method and budget to this file: the turns each put inside, its recall and measures (to compare methods question by question)")
	fs.IntVar(&o.Limit, "limit", 0, "evaluate only the first N conversations (0: all)")
	fs.BoolVar(&o.Keep, "keep-db", false, "keep the scratch database afterwards (its name is logged)")
	fs.BoolVar(&o.Citus, "citus", false, "DATABASE_URL is a Citus coordinator: the scratch database is created on every node and distributed (migrate --citus; docs/scale.md)")
	quiet := fs.Bool("quiet", false, "no progress bars")
	fs.IntVar(&o.AgentK, "agent-k", 0, "simulate a live agent: mneme.retrieve with k memories for every turn during ingest, reviewed by the pipeline (0: no retrievals, no reviews)")
	fs.Var(&sets, "set", "mneme setting for the run, key=JSON (repeatable), e.g. --set segment_max_messages=20")
	fs.BoolVar(&o.Consolidate, "consolidate", false, "run mneme.consolidate on each conversation after its ingest, before the questions (the consolidation's effect)")
	fs.IntVar(&o.Folds, "folds", 0, "cross-validate the context's settings over N folds of the conversations (with --choose; 0: off)")
	fs.Var(&choose, "choose", `with --folds: values of a query-time setting to choose among, key=JSON|JSON|... (repeatable; every combination is a candidate), e.g. --choose context_window=1|2|3 --choose 'context_order="rank"|"newest"'`)
	if err := cli.Parse(fs, args, false); err != nil {
		return err
	}
	if o.Headline <= 0 {
		return fmt.Errorf("%w: --budget must be a positive number of words", cli.ErrUsage)
	}
	var err error
	if o.Settings, err = sets.Parse(); err != nil {
		return err
	}
	if o.AgentK < 0 || o.AgentK > 100 {
		return fmt.Errorf("%w: --agent-k must be 0 (off) to 100", cli.ErrUsage)
	}
	if o.Candidates, err = Candidates(choose, o.Folds); err != nil {
		return err
	}
	if !*quiet {
		o.Progress = os.Stderr
	}
	// The pipelines log every episode at info.
	o.PipeLog = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	if o.Config, err = config.Load(false); err != nil {
		return err
	}
	d, err := load(data)
	if err != nil {
		return err
	}
	var questions *bufio.Writer
	if *questionsFile != "" {
		qf, err := os.Create(*questionsFile)
		if err != nil {
			return fmt.Errorf("--questions: %w", err)
		}
		defer qf.Close()
		questions = bufio.NewWriter(qf)
		o.Questions = questions
	}
	so := scratch.ForEval(o.Config, o.Keep, o.Log)
	so.Citus = o.Citus
	db, err := scratch.Open(ctx, so)
	if err != nil {
		return err
	}
	defer db.Close()
	rep, err := Run(ctx, db.Pool, o, d)
	if err != nil {
		return err
	}
	if questions != nil {
		if err := questions.Flush(); err != nil {
			return fmt.Errorf("--questions: %w", err)
		}
	}
	return cli.Report(rep, *asJSON, *plot, rep.WritePlot, rep.WriteTable)
}
