package recall

import (
	"bufio"
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"time"

	"github.com/mneme-memory/mneme/sidecar/cli"
	"github.com/mneme-memory/mneme/sidecar/config"
)

// Flags are the command-line flags of the evidence-recall evaluations
// (mneme eval locomo, mneme eval beam): they share the run, the methods
// and the budgets.
type Flags struct {
	Data    string // --data: the reader's file or folder
	Options Options
	JSON    *bool
	Plot    *string
	// Questions (--questions) is the file that gets one JSON line per
	// question, method and budget (QuestionLine); "" none.
	Questions *string
	quiet     *bool
	asOf      *string
	sets      cli.Settings
	choose    cli.Choices
}

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

// NewFlags binds the flags to fs; data is --data's default.
func NewFlags(fs *flag.FlagSet, data, dataHelp string) *Flags {
	f := &Flags{}
	fs.StringVar(&f.Data, "data", data, dataHelp)
	fs.IntVar(&f.Options.Headline, "budget", 1000, "context budget in words of the per-category table (200, 500, 1000 and 2000 are always reported)")
	f.JSON = fs.Bool("json", false, "print one JSON object instead of the tables")
	f.Plot = fs.String("plot", "", "write an SVG plot of recall against budget to this file")
	f.Questions = fs.String("questions", "", "write one JSON line per question, method and budget to this file: the turns each put inside, its recall and measures (to compare methods question by question)")
	fs.IntVar(&f.Options.Limit, "limit", 0, "evaluate only the first N conversations (0: all)")
	fs.BoolVar(&f.Options.Keep, "keep-db", false, "keep the scratch database afterwards (its name is logged)")
	fs.BoolVar(&f.Options.Citus, "citus", false, "DATABASE_URL is a Citus coordinator: the scratch database is created on every node and distributed (migrate --citus; docs/scale.md)")
	f.quiet = fs.Bool("quiet", false, "no progress bars")
	fs.StringVar(&f.Options.Count, "count", CountContent, "what of a memory fills the budget: content (its transcript) or memory_text (title, summary and content, as indexed)")
	fs.IntVar(&f.Options.AgentK, "agent-k", 0, "simulate a live agent: mneme.retrieve with k memories for every turn during ingest, reviewed by the pipeline (0: no retrievals, no reviews)")
	f.asOf = fs.String("as-of", "last", `the time mneme.search evaluates retrievability at: "last" (each conversation's last turn, when a live agent would be asked) or an RFC 3339 time`)
	fs.Var(&f.sets, "set", "mneme setting for the run, key=JSON (repeatable), e.g. --set segment_max_messages=20")
	fs.IntVar(&f.Options.Folds, "folds", 0, "cross-validate the context's settings over N folds of the conversations (with --choose; 0: off)")
	fs.Var(&f.choose, "choose", `with --folds: values of a query-time setting to choose among, key=JSON|JSON|... (repeatable; every combination is a candidate), e.g. --choose context_window=1|2|3 --choose 'context_order="rank"|"newest"'`)
	return f
}

// Check validates the parsed flags and loads the configuration.
func (f *Flags) Check(log *slog.Logger) error {
	f.Options.Log = log
	if f.Options.Headline <= 0 {
		return fmt.Errorf("%w: --budget must be a positive number of words", cli.ErrUsage)
	}
	var err error
	if f.Options.Settings, err = f.sets.Parse(); err != nil {
		return err
	}
	if *f.asOf != "last" {
		t, err := time.Parse(time.RFC3339, *f.asOf)
		if err != nil {
			return fmt.Errorf("%w: --as-of %q: want last or an RFC 3339 time, e.g. 2026-01-01T00:00:00Z", cli.ErrUsage, *f.asOf)
		}
		f.Options.AsOf = t
	}
	if f.Options.AgentK < 0 || f.Options.AgentK > 100 {
		return fmt.Errorf("%w: --agent-k must be 0 (off) to 100", cli.ErrUsage)
	}
	if f.Options.Count != CountContent && f.Options.Count != CountMemoryText {
		return fmt.Errorf("%w: --count must be %s or %s", cli.ErrUsage, CountContent, CountMemoryText)
	}
	if f.Options.Candidates, err = Candidates(f.choose, f.Options.Folds); err != nil {
		return err
	}
	if !*f.quiet {
		f.Options.Progress = os.Stderr
	}
	// The pipelines log every episode at info.
	f.Options.PipeLog = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	f.Options.Config, err = config.Load(false)
	return err
}

// Command is `mneme eval locomo` and `mneme eval beam`: the flags bound to
// fs (data is --data's default) and parsed from args, the data read by
// load, and the report printed (tables, or --json) and plotted (--plot).
func Command(ctx context.Context, log *slog.Logger, fs *flag.FlagSet, args []string, data, dataHelp string,
	load func(string) (*Data, error)) error {
	f := NewFlags(fs, data, dataHelp)
	if err := cli.Parse(fs, args, false); err != nil {
		return err
	}
	if err := f.Check(log); err != nil {
		return err
	}
	d, err := load(f.Data)
	if err != nil {
		return err
	}
	var questions *bufio.Writer
	if *f.Questions != "" {
		qf, err := os.Create(*f.Questions)
		if err != nil {
			return fmt.Errorf("--questions: %w", err)
		}
		defer qf.Close()
		questions = bufio.NewWriter(qf)
		f.Options.Questions = questions
	}
	rep, err := Eval(ctx, f.Options, d)
	if err != nil {
		return err
	}
	if questions != nil {
		if err := questions.Flush(); err != nil {
			return fmt.Errorf("--questions: %w", err)
		}
	}
	return cli.Report(rep, *f.JSON, *f.Plot, rep.WritePlot, rep.WriteTable)
}
