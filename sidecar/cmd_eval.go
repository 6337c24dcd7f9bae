package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"

	"github.com/mneme-memory/mneme/sidecar/cli"
	"github.com/mneme-memory/mneme/sidecar/config"
	"github.com/mneme-memory/mneme/sidecar/eval/beam"
	"github.com/mneme-memory/mneme/sidecar/eval/feedback"
	"github.com/mneme-memory/mneme/sidecar/eval/lifecycle"
	"github.com/mneme-memory/mneme/sidecar/eval/locomo"
	"github.com/mneme-memory/mneme/sidecar/eval/recall"
	revisioneval "github.com/mneme-memory/mneme/sidecar/eval/revision"
)

func cmdEvalLocomo(ctx context.Context, log *slog.Logger, args []string) error {
	return evalRecall(ctx, log, args, "eval locomo", "../shared/data/locomo/locomo-dev.json",
		"LoCoMo JSON file (locomo10.json or a subset)", locomo.Load)
}

func cmdEvalBeam(ctx context.Context, log *slog.Logger, args []string) error {
	return evalRecall(ctx, log, args, "eval beam", "../shared/data/beam/100K",
		"a BEAM conversation folder (chat.json, probing_questions.json) or a folder of them (a tier, e.g. 100K)",
		func(dir string) (*recall.Data, error) {
			if st, err := os.Stat(dir); err != nil || !st.IsDir() {
				return nil, fmt.Errorf("%w: --data %q: want a folder of BEAM conversations", cli.ErrUsage, dir)
			}
			return beam.Load(dir)
		})
}

// evalRecall runs an evidence-recall evaluation: the harness's flags, the
// benchmark's reader (load) for --data, one report.
func evalRecall(ctx context.Context, log *slog.Logger, args []string, name, data, dataHelp string,
	load func(string) (*recall.Data, error)) error {
	fs := flags(name)
	f := recall.NewFlags(fs, data, dataHelp)
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
	rep, err := recall.Eval(ctx, f.Options, d)
	if err != nil {
		return err
	}
	if questions != nil {
		if err := questions.Flush(); err != nil {
			return fmt.Errorf("--questions: %w", err)
		}
	}
	return report(rep, *f.JSON, *f.Plot, rep.WritePlot, rep.WriteTable)
}

func cmdEvalFeedback(ctx context.Context, log *slog.Logger, args []string) error {
	fs := flags("eval feedback")
	asJSON := fs.Bool("json", false, "print the result as JSON")
	plot := fs.String("plot", "", "write the precision plot to this SVG file")
	var o feedback.Options
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
	res, err := feedback.Eval(ctx, cfg, o, settings, log)
	if err != nil {
		return err
	}
	return report(res, *asJSON, *plot, func(w io.Writer) error { return feedback.WriteSVG(w, res) },
		func(w io.Writer) error { return feedback.WriteReport(w, res) })
}

func cmdEvalLifecycle(ctx context.Context, log *slog.Logger, args []string) error {
	fs := flags("eval lifecycle")
	asJSON := fs.Bool("json", false, "print the result as JSON")
	plot := fs.String("plot", "", "write the per-label plot to this SVG file")
	var o lifecycle.Options
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
	res, err := lifecycle.Eval(ctx, cfg, o, log)
	if err != nil {
		return err
	}
	return report(res, *asJSON, *plot, func(w io.Writer) error { return lifecycle.WriteSVG(w, res) },
		func(w io.Writer) error { return lifecycle.WriteTable(w, res) })
}

func cmdEvalRevision(ctx context.Context, log *slog.Logger, args []string) error {
	fs := flags("eval revision")
	model := fs.String("llm", "", `the classifier: none (the offline classifier) or "scripted" (the LLM classifier against an in-process fake `+
		`OpenAI-compatible server that answers from the labels, a deterministic share of its answers bad on purpose)`)
	asJSON := fs.Bool("json", false, "print the result as JSON")
	keep := fs.Bool("keep-db", false, "keep the scratch database afterwards (its name is logged)")
	quiet := fs.Bool("quiet", false, "no progress, and only errors from the pipelines")
	folds := fs.Int("folds", 0, "cross-validate the revision settings over N folds of the conversations (with --choose; 0: off)")
	var choose recall.Choices
	fs.Var(&choose, "choose", `with --folds: values of a setting to choose among, key=JSON|JSON|... (repeatable; every combination is a candidate), e.g. --choose revision_duplicate_similarity=0.7|0.8|0.9`)
	if err := cli.Parse(fs, args, false); err != nil {
		return err
	}
	o := revisioneval.Options{Mode: revisioneval.ModeOffline, Keep: *keep, Log: log, Folds: *folds}
	var err error
	if o.Candidates, err = choose.Candidates(*folds); err != nil {
		return err
	}
	switch *model {
	case "":
	case revisioneval.ModeScripted:
		o.Mode = revisioneval.ModeScripted
	default:
		return fmt.Errorf("%w: --llm %q: want scripted, or no --llm for the offline classifier", cli.ErrUsage, *model)
	}
	// The pipelines warn of every unusable model answer and retry: the
	// scripted mode sends those on purpose.
	level := slog.LevelWarn
	if *quiet {
		level = slog.LevelError
	} else {
		o.Progress = os.Stderr
	}
	o.PipeLog = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level}))
	if o.Config, err = config.Load(false); err != nil {
		return err
	}
	rep, err := revisioneval.Eval(ctx, o)
	if err != nil {
		return err
	}
	return report(rep, *asJSON, "", nil, rep.WriteTable)
}

// report writes an evaluation's plot (when asked) and prints the result as
// indented JSON or as its table.
func report(res any, asJSON bool, plot string, svg, table func(io.Writer) error) error {
	if plot != "" {
		if err := writeFile(plot, func(f *os.File) error { return svg(f) }); err != nil {
			return fmt.Errorf("plot: %w", err)
		}
	}
	if asJSON {
		enc := json.NewEncoder(os.Stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(res)
	}
	return table(os.Stdout)
}

// writeFile creates path and writes it with write.
func writeFile(path string, write func(*os.File) error) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := write(f); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
