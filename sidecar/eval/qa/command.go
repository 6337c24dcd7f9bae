package qa

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os"

	"github.com/mneme-memory/mneme/sidecar/cli"
	"github.com/mneme-memory/mneme/sidecar/config"
	"github.com/mneme-memory/mneme/sidecar/eval/beam"
	"github.com/mneme-memory/mneme/sidecar/eval/locomo"
	"github.com/mneme-memory/mneme/sidecar/eval/recall"
	"github.com/mneme-memory/mneme/sidecar/llm"
	"github.com/mneme-memory/mneme/sidecar/scratch"
)

// Load reads --data: a folder is BEAM (a conversation or a tier), a file
// LoCoMo.
func Load(path string) (*recall.Data, error) {
	st, err := os.Stat(path)
	if err != nil {
		return nil, fmt.Errorf("qa: --data: %w", err)
	}
	if st.IsDir() {
		return beam.Load(path)
	}
	return locomo.Load(path)
}

// Command is `mneme eval qa`: the conversations ingested offline into a
// scratch database as `mneme eval locomo` and `eval beam` ingest them,
// then every question with a reference answer answered and judged by the
// model of MNEME_LLM_* (--llm says so, explicitly: every question costs two
// calls).
func Command(ctx context.Context, log *slog.Logger, fs *flag.FlagSet, args []string) error {
	data := fs.String("data", "", "LoCoMo JSON file, or a BEAM conversation folder or tier folder")
	useLLM := fs.Bool("llm", false, "answer and judge with the model of MNEME_LLM_BASE_URL, MNEME_LLM_MODEL (and MNEME_LLM_API_KEY): required, every question costs two calls")
	budget := fs.Int("budget", 1000, "words of mneme.context given to the model")
	limit := fs.Int("limit", 0, "evaluate only the first N conversations (0: all)")
	asJSON := fs.Bool("json", false, "print one JSON object instead of the table")
	keep := fs.Bool("keep-db", false, "keep the scratch database afterwards (its name is logged)")
	quiet := fs.Bool("quiet", false, "no progress bars")
	if err := cli.Parse(fs, args, false); err != nil {
		return err
	}
	if *data == "" {
		return fmt.Errorf("%w: eval qa needs --data", cli.ErrUsage)
	}
	if *budget < 1 || *budget > 100000 {
		return fmt.Errorf("%w: --budget must be 1 to 100000 words", cli.ErrUsage)
	}
	cfg, err := config.Load(false)
	if err != nil {
		return err
	}
	if !*useLLM {
		return fmt.Errorf("%w: eval qa asks a model: pass --llm, with MNEME_LLM_BASE_URL and MNEME_LLM_MODEL set", cli.ErrUsage)
	}
	if !cfg.LLM.Configured() {
		return fmt.Errorf("%w: eval qa --llm needs MNEME_LLM_BASE_URL and MNEME_LLM_MODEL (and MNEME_LLM_API_KEY if the endpoint wants one)", cli.ErrUsage)
	}
	d, err := Load(*data)
	if err != nil {
		return err
	}
	o := recall.Options{Limit: *limit, Log: log, Config: cfg}
	// The pipelines run offline, as in `eval locomo` and `eval beam`: the
	// model answers and judges, it does not segment (the context measured
	// is the one the recall numbers describe).
	o.Config.LLM = config.Endpoint{}
	o.PipeLog = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	qo := Options{Budget: *budget}
	if !*quiet {
		o.Progress, qo.Progress = os.Stderr, os.Stderr
	}
	db, err := scratch.Open(ctx, scratch.ForEval(o.Config, *keep, log))
	if err != nil {
		return err
	}
	defer db.Close()
	p, err := recall.IngestAll(ctx, db.Pool, o, d)
	if err != nil {
		return err
	}
	model := llm.New(cfg.LLM, cfg.LLMTimeout)
	rep, err := Evaluate(ctx, db.Pool, p, d, model, cfg.LLM.Model, qo)
	if err != nil {
		return err
	}
	return cli.Report(rep, *asJSON, "", nil, rep.WriteTable)
}
