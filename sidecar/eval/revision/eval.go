package revision

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/mneme-memory/mneme/sidecar/cli"
	"github.com/mneme-memory/mneme/sidecar/config"
	"github.com/mneme-memory/mneme/sidecar/eval/recall"
	"github.com/mneme-memory/mneme/sidecar/pipeline"
	"github.com/mneme-memory/mneme/sidecar/scratch"
)

// Options are `mneme eval revision`'s.
type Options struct {
	Keep     bool          // keep the scratch database
	Config   config.Config // DATABASE_URL and the vector layout; its LLM and embedder are not used
	Log      *slog.Logger  // the run's (the scratch database)
	PipeLog  *slog.Logger  // the pipelines' (warnings: unusable model answers, retries); nil: none
	Progress io.Writer     // nil: quiet
	// Folds > 1 cross-validates the settings in Candidates: the suite runs
	// once per candidate (a scratch database each), and each fold of the
	// conversations is scored with the candidate most accurate on the others.
	Folds      int
	Candidates []recall.Candidate
}

// Command is `mneme eval revision`: its flags bound to fs and parsed from
// args, the suite run, and its table (or --json) printed.
func Command(ctx context.Context, log *slog.Logger, fs *flag.FlagSet, args []string) error {
	asJSON := fs.Bool("json", false, "print the result as JSON")
	keep := fs.Bool("keep-db", false, "keep the scratch database afterwards (its name is logged)")
	quiet := fs.Bool("quiet", false, "no progress, and only errors from the pipelines")
	folds := fs.Int("folds", 0, "cross-validate the revision settings over N folds of the conversations (with --choose; 0: off)")
	var choose cli.Choices
	fs.Var(&choose, "choose", `with --folds: values of a setting to choose among, key=JSON|JSON|... (repeatable; every combination is a candidate), e.g. --choose revision_duplicate_similarity=0.7|0.8|0.9`)
	if err := cli.Parse(fs, args, false); err != nil {
		return err
	}
	o := Options{Keep: *keep, Log: log, Folds: *folds}
	var err error
	if o.Candidates, err = recall.Candidates(choose, *folds); err != nil {
		return err
	}
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
	rep, err := Eval(ctx, o)
	if err != nil {
		return err
	}
	return cli.Report(rep, *asJSON, "", nil, rep.WriteTable)
}

// Eval runs the suite in a fresh scratch database.
func Eval(ctx context.Context, o Options) (*Report, error) {
	log := o.Log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	db, err := scratch.Open(ctx, scratch.ForEval(o.Config, o.Keep, log))
	if err != nil {
		return nil, err
	}
	defer db.Close()
	rep, err := RunOffline(ctx, db.Pool, o.Config, o.PipeLog, o.Progress)
	if err != nil {
		return rep, err
	}
	if rep.Contradictions, err = RunContradictionsOffline(ctx, db.Pool, o.Config, o.PipeLog, o.Progress); err != nil || o.Folds < 2 {
		return rep, err
	}
	rep.CrossValidation, err = crossValidate(ctx, o, log)
	return rep, err
}

// crossValidate runs the suite with each candidate's settings in a scratch
// database of its own and folds the per-conversation accuracy (one point
// per write revised as labelled) with recall.FoldScores.
func crossValidate(ctx context.Context, o Options, log *slog.Logger) (*recall.CrossValidation, error) {
	suite := Suite()
	if o.Folds > len(suite) {
		return nil, fmt.Errorf("revision: %d folds of %d conversations", o.Folds, len(suite))
	}
	names := make([]string, len(o.Candidates))
	ids := make([]string, len(suite))
	for i, c := range suite {
		ids[i] = c.Name
	}
	sc := recall.Scores{Sum: map[int]map[int]map[int]float64{}, N: map[int]int{}}
	for ci, cand := range o.Candidates {
		names[ci] = cand.String()
		rep, err := func() (*Report, error) {
			db, err := scratch.Open(ctx, scratch.ForEval(o.Config, false, log))
			if err != nil {
				return nil, err
			}
			defer db.Close()
			for k, v := range cand {
				if _, err := db.Pool.Exec(ctx, `SELECT mneme.set_setting($1, $2::jsonb)`, k, v); err != nil {
					return nil, fmt.Errorf("revision: candidate %s: %w", cand, err)
				}
			}
			return RunOffline(ctx, db.Pool, o.Config, o.PipeLog, o.Progress)
		}()
		if err != nil {
			return nil, err
		}
		sc.Sum[ci] = map[int]map[int]float64{}
		for i, name := range ids {
			pc := rep.perConv[name]
			sc.Sum[ci][i] = map[int]float64{0: float64(pc[0])}
			sc.N[i] = pc[1]
		}
	}
	return recall.FoldScores(names, ids, sc, o.Folds, []int{0}, 0), nil
}

// RunOffline runs the suite on pool (a migrated, empty mneme database)
// through the sidecar's own pipelines (pipeline.Configure) and job runner,
// with the offline classifier and the built-in hash embedder, so the
// numbers depend on no endpoint (MNEME_LLM_* and MNEME_EMBED_* are
// ignored). The LLM path is checked by TestScriptedModel, against a
// scripted model: a test of the mechanism, not a measurement of a model.
// log is the pipelines' (nil: none).
func RunOffline(ctx context.Context, pool *pgxpool.Pool, cfg config.Config, log *slog.Logger, progress io.Writer) (*Report, error) {
	cfg.LLM, cfg.Embed = config.Endpoint{}, config.Endpoint{}
	rep, err := runPipelines(ctx, pool, cfg, log, progress, nil)
	if rep != nil {
		rep.Mode = "offline classifier"
	}
	return rep, err
}

// runPipelines runs the suite through the pipelines cfg configures; obs
// (nil: none) is told which write is being revised.
func runPipelines(ctx context.Context, pool *pgxpool.Pool, cfg config.Config, log *slog.Logger, progress io.Writer, obs observer) (*Report, error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	deps, err := pipeline.Configure(ctx, cfg, pool, log, nil, nil, nil)
	if err != nil {
		return nil, err
	}
	jobs, err := recall.PipelineJobs(pool, deps)
	if err != nil {
		return nil, err
	}
	return Run(ctx, pool, jobs, Suite(), obs, progress)
}

// RunContradictionsOffline runs the contradiction suite on pool through
// the sidecar's pipelines, offline like RunOffline.
func RunContradictionsOffline(ctx context.Context, pool *pgxpool.Pool, cfg config.Config, log *slog.Logger, progress io.Writer) (*ContradictionReport, error) {
	cfg.LLM, cfg.Embed = config.Endpoint{}, config.Endpoint{}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	deps, err := pipeline.Configure(ctx, cfg, pool, log, nil, nil, nil)
	if err != nil {
		return nil, err
	}
	jobs, err := recall.PipelineJobs(pool, deps)
	if err != nil {
		return nil, err
	}
	return RunContradictions(ctx, pool, jobs, progress)
}
