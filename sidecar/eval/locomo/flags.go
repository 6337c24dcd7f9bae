package locomo

import (
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
	Options EvalOptions
	JSON    *bool
	Plot    *string
	quiet   *bool
	asOf    *string
	sets    cli.Settings
}

// NewFlags binds the flags to fs; data is --data's default.
func NewFlags(fs *flag.FlagSet, data, dataHelp string) *Flags {
	f := &Flags{Options: EvalOptions{PipeLevel: slog.LevelWarn}}
	fs.StringVar(&f.Options.Data, "data", data, dataHelp)
	fs.IntVar(&f.Options.Run.Headline, "budget", 1000, "context budget in words of the per-category table (200, 500, 1000 and 2000 are always reported)")
	f.JSON = fs.Bool("json", false, "print one JSON object instead of the tables")
	f.Plot = fs.String("plot", "", "write an SVG plot of recall against budget to this file")
	fs.IntVar(&f.Options.Limit, "limit", 0, "evaluate only the first N conversations (0: all)")
	fs.BoolVar(&f.Options.Keep, "keep-db", false, "keep the scratch database afterwards (its name is logged)")
	f.quiet = fs.Bool("quiet", false, "no progress bars")
	fs.StringVar(&f.Options.Run.Count, "count", CountContent, "what of a memory fills the budget: content (its transcript) or memory_text (title, summary and content, as indexed)")
	fs.IntVar(&f.Options.Run.AgentK, "agent-k", 0, "simulate a live agent: mneme.retrieve with k memories for every turn during ingest, reviewed by the pipeline (0: no retrievals, no reviews)")
	f.asOf = fs.String("as-of", "last", `the time mneme.search evaluates retrievability at: "last" (each conversation's last turn, when a live agent would be asked) or an RFC 3339 time`)
	fs.Var(&f.sets, "set", "mneme setting for the run, key=JSON (repeatable), e.g. --set segment_max_messages=20")
	return f
}

// Check validates the parsed flags and loads the configuration.
func (f *Flags) Check(log *slog.Logger) error {
	f.Options.Log = log
	if f.Options.Run.Headline <= 0 {
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
	if f.Options.Run.AgentK < 0 || f.Options.Run.AgentK > 100 {
		return fmt.Errorf("%w: --agent-k must be 0 (off) to 100", cli.ErrUsage)
	}
	if f.Options.Run.Count != CountContent && f.Options.Run.Count != CountMemoryText {
		return fmt.Errorf("%w: --count must be %s or %s", cli.ErrUsage, CountContent, CountMemoryText)
	}
	if !*f.quiet {
		f.Options.Run.Progress = os.Stderr
	}
	f.Options.Config, err = config.Load(false)
	return err
}
