package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"time"

	"github.com/mneme-memory/mneme/sidecar/cli"
	"github.com/mneme-memory/mneme/sidecar/config"
	"github.com/mneme-memory/mneme/sidecar/eval/beam"
	"github.com/mneme-memory/mneme/sidecar/eval/feedback"
	"github.com/mneme-memory/mneme/sidecar/eval/lifecycle"
	"github.com/mneme-memory/mneme/sidecar/eval/locomo"
)

// settingFlags collects repeated --set key=json flags.
type settingFlags []string

func (s *settingFlags) String() string     { return strings.Join(*s, ",") }
func (s *settingFlags) Set(v string) error { *s = append(*s, v); return nil }

// parse checks every key=JSON pair (a usage error otherwise).
func (s settingFlags) parse() (map[string]json.RawMessage, error) {
	out := map[string]json.RawMessage{}
	for _, kv := range s {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || !json.Valid([]byte(v)) {
			return nil, fmt.Errorf("%w: --set %q: want key=JSON, e.g. segment_max_messages=20 or embedder='\"hash\"'", cli.ErrUsage, kv)
		}
		out[strings.TrimSpace(k)] = json.RawMessage(v)
	}
	return out, nil
}

// recallFlags are the flags of the evidence-recall evaluations (LoCoMo,
// BEAM): they share the run, the methods and the budgets.
type recallFlags struct {
	o      locomo.EvalOptions
	asJSON *bool
	plot   *string
	quiet  *bool
	asOf   *string
	sets   settingFlags
}

func newRecallFlags(fs *flag.FlagSet, data, dataHelp string) *recallFlags {
	f := &recallFlags{o: locomo.EvalOptions{PipeLevel: slog.LevelWarn}}
	fs.StringVar(&f.o.Data, "data", data, dataHelp)
	fs.IntVar(&f.o.Run.Headline, "budget", 1000, "context budget in words of the per-category table (200, 500, 1000 and 2000 are always reported)")
	f.asJSON = fs.Bool("json", false, "print one JSON object instead of the tables")
	f.plot = fs.String("plot", "", "write an SVG plot of recall against budget to this file")
	fs.IntVar(&f.o.Limit, "limit", 0, "evaluate only the first N conversations (0: all)")
	fs.BoolVar(&f.o.Keep, "keep-db", false, "keep the scratch database afterwards (its name is logged)")
	f.quiet = fs.Bool("quiet", false, "no progress bars")
	fs.StringVar(&f.o.Run.Count, "count", locomo.CountContent, "what of a memory fills the budget: content (its transcript) or memory_text (title, summary and content, as indexed)")
	fs.IntVar(&f.o.Run.AgentK, "agent-k", 0, "simulate a live agent: mneme.retrieve with k memories for every turn during ingest, reviewed by the pipeline (0: no retrievals, no reviews)")
	f.asOf = fs.String("as-of", "last", `the time mneme.search evaluates retrievability at: "last" (each conversation's last turn, when a live agent would be asked) or an RFC 3339 time`)
	fs.Var(&f.sets, "set", "mneme setting for the run, key=JSON (repeatable), e.g. --set segment_max_messages=20")
	return f
}

// check validates the parsed flags and loads the configuration.
func (f *recallFlags) check(log *slog.Logger) error {
	f.o.Log = log
	if f.o.Run.Headline <= 0 {
		return fmt.Errorf("%w: --budget must be a positive number of words", cli.ErrUsage)
	}
	var err error
	if f.o.Settings, err = f.sets.parse(); err != nil {
		return err
	}
	if *f.asOf != "last" {
		t, err := time.Parse(time.RFC3339, *f.asOf)
		if err != nil {
			return fmt.Errorf("%w: --as-of %q: want last or an RFC 3339 time, e.g. 2026-01-01T00:00:00Z", cli.ErrUsage, *f.asOf)
		}
		f.o.AsOf = t
	}
	if f.o.Run.AgentK < 0 || f.o.Run.AgentK > 100 {
		return fmt.Errorf("%w: --agent-k must be 0 (off) to 100", cli.ErrUsage)
	}
	if f.o.Run.Count != locomo.CountContent && f.o.Run.Count != locomo.CountMemoryText {
		return fmt.Errorf("%w: --count must be %s or %s", cli.ErrUsage, locomo.CountContent, locomo.CountMemoryText)
	}
	if !*f.quiet {
		f.o.Run.Progress = os.Stderr
	}
	f.o.Config, err = config.Load(false)
	return err
}

func cmdEvalLocomo(ctx context.Context, log *slog.Logger, args []string) error {
	fs := flags("eval locomo")
	f := newRecallFlags(fs, "../shared/data/locomo/locomo-dev.json", "LoCoMo JSON file (locomo10.json or a subset)")
	if err := cli.Parse(fs, args, false); err != nil {
		return err
	}
	if err := f.check(log); err != nil {
		return err
	}
	rep, err := locomo.Eval(ctx, f.o)
	if err != nil {
		return err
	}
	if *f.plot != "" {
		if err := writeFile(*f.plot, func(w *os.File) error {
			return rep.WritePlot(w, "LoCoMo evidence recall, "+rep.Data+", "+rep.Mode)
		}); err != nil {
			return fmt.Errorf("plot: %w", err)
		}
	}
	if *f.asJSON {
		return rep.WriteJSON(os.Stdout)
	}
	return rep.WriteTable(os.Stdout)
}

func cmdEvalBeam(ctx context.Context, log *slog.Logger, args []string) error {
	fs := flags("eval beam")
	f := newRecallFlags(fs, "../shared/data/beam/100K", "a BEAM conversation folder (chat.json, probing_questions.json) or a folder of them (a tier, e.g. 100K)")
	if err := cli.Parse(fs, args, false); err != nil {
		return err
	}
	if err := f.check(log); err != nil {
		return err
	}
	if st, err := os.Stat(f.o.Data); err != nil || !st.IsDir() {
		return fmt.Errorf("%w: --data %q: want a folder of BEAM conversations", cli.ErrUsage, f.o.Data)
	}
	rep, err := beam.Eval(ctx, f.o, f.o.Data)
	if err != nil {
		return err
	}
	if *f.plot != "" {
		if err := writeFile(*f.plot, func(w *os.File) error { return rep.WritePlot(w) }); err != nil {
			return fmt.Errorf("plot: %w", err)
		}
	}
	if *f.asJSON {
		return rep.WriteJSON(os.Stdout)
	}
	return rep.WriteTable(os.Stdout)
}

func cmdEvalFeedback(ctx context.Context, log *slog.Logger, args []string) error {
	fs := flags("eval feedback")
	asJSON := fs.Bool("json", false, "print the result as JSON")
	plot := fs.String("plot", "", "write the precision plot to this SVG file")
	var o feedback.Options
	fs.IntVar(&o.Sessions, "sessions", 30, "simulated sessions (days)")
	var sets settingFlags
	fs.Var(&sets, "set", "mneme setting for the run, key=JSON (repeatable), e.g. --set retrievability_weight=1")
	if err := cli.Parse(fs, args, false); err != nil {
		return err
	}
	settings, err := sets.parse()
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
	res, err := feedback.Eval(ctx, cfg.DatabaseURL, o, settings, log)
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
	res, err := lifecycle.Eval(ctx, cfg.DatabaseURL, o, log)
	if err != nil {
		return err
	}
	return report(res, *asJSON, *plot, func(w io.Writer) error { return lifecycle.WriteSVG(w, res) },
		func(w io.Writer) error { return lifecycle.WriteTable(w, res) })
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
