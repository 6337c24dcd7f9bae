package locomo

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	"github.com/mneme-memory/mneme/sidecar/config"
	"github.com/mneme-memory/mneme/sidecar/pipeline"
	"github.com/mneme-memory/mneme/sidecar/scratch"
)

// EvalOptions are `mneme eval locomo`'s: what to load, the run's knobs, and
// the mneme settings to override on the scratch database.
type EvalOptions struct {
	Data      string // LoCoMo JSON file
	Limit     int    // first N conversations (0: all)
	Keep      bool   // keep the scratch database
	Settings  map[string]json.RawMessage
	AsOf      time.Time // zero: each conversation's last turn
	Run       Options   // Headline, Count, AgentK, Progress; the rest is filled here
	Config    config.Config
	Log       *slog.Logger
	PipeLevel slog.Level // the pipeline's log level (it logs every episode at info)
}

// Eval loads the data, ingests it into a fresh scratch database through the
// sidecar's pipelines (wired by pipeline.Configure, offline unless an LLM or
// embedder is configured) and measures every method.
func Eval(ctx context.Context, o EvalOptions) (*Report, error) {
	convs, err := Load(o.Data)
	if err != nil {
		return nil, err
	}
	return EvalLoaded(ctx, o, convs)
}

// EvalLoaded is Eval of conversations already loaded (and converted, for
// another benchmark's data); o.Data names them in the report.
func EvalLoaded(ctx context.Context, o EvalOptions, convs []Conversation) (*Report, error) {
	if o.Limit > 0 && o.Limit < len(convs) {
		convs = convs[:o.Limit]
	}
	log := o.Log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	db, err := scratch.Open(ctx, scratch.ForEval(o.Config, o.Keep, log))
	if err != nil {
		return nil, err
	}
	defer db.Close()
	pool := db.Pool
	for k, v := range o.Settings {
		if _, err := pool.Exec(ctx, `SELECT mneme.set_setting($1, $2::jsonb)`, k, string(v)); err != nil {
			return nil, fmt.Errorf("--set %s: %w", k, err)
		}
	}
	run := o.Run
	run.Data, run.AsOf = filepath.Base(o.Data), o.AsOf
	// A configured embedder embeds memories (pipeline) and questions (here);
	// SQL then skips its hash embedding of queries.
	if o.Config.Embed.Configured() {
		if _, err := pool.Exec(ctx, `SELECT mneme.set_setting('embedder', '"external"')`); err != nil {
			return nil, fmt.Errorf("set embedder: %w", err)
		}
	}
	pipeLog := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: o.PipeLevel}))
	deps, err := pipeline.Configure(ctx, o.Config, pool, pipeLog, nil, nil)
	if err != nil {
		return nil, err
	}
	run.Mode = "offline"
	if o.Config.Embed.Configured() {
		run.Embed = deps.Embedder
		run.Mode = "embedder " + o.Config.Embed.Model
	}
	if o.Config.LLM.Configured() {
		run.Mode += ", LLM " + o.Config.LLM.Model
	}
	if run.Jobs, err = PipelineJobs(pool, deps); err != nil {
		return nil, err
	}
	return Run(ctx, pool, convs, run)
}
