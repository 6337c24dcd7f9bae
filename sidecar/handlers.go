package main

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/mneme-memory/mneme/sidecar/config"
	"github.com/mneme-memory/mneme/sidecar/embed"
	"github.com/mneme-memory/mneme/sidecar/jobs"
	"github.com/mneme-memory/mneme/sidecar/lifecycle"
	"github.com/mneme-memory/mneme/sidecar/llm"
	"github.com/mneme-memory/mneme/sidecar/metrics"
	"github.com/mneme-memory/mneme/sidecar/pipeline"
)

// deps is what job handlers may use. LLM is nil when no LLM endpoint is
// configured (offline fallbacks). Embedder is the OpenAI-compatible client
// when MNEME_EMBED_BASE_URL is set, else the built-in hash embedder; its
// dimension is the database's (setting embedding_dim, fixed at migrate).
type deps struct {
	Config   config.Config
	Pool     *pgxpool.Pool
	Log      *slog.Logger
	LLM      *llm.Client
	Embedder embed.Embedder
}

// newDeps builds the clients the configuration asks for.
func newDeps(ctx context.Context, cfg config.Config, pool *pgxpool.Pool, log *slog.Logger, m metrics.Sidecar) (deps, error) {
	d := deps{Config: cfg, Pool: pool, Log: log}
	var dim int
	var embedder string
	err := pool.QueryRow(ctx, `SELECT (mneme.setting('embedding_dim') #>> '{}')::int, mneme.setting('embedder') #>> '{}'`).
		Scan(&dim, &embedder)
	if err != nil {
		return d, fmt.Errorf("read embedding settings (has `mneme migrate` run?): %w", err)
	}
	if cfg.EmbedDimSet && cfg.EmbedDim != dim {
		return d, fmt.Errorf("%w: MNEME_EMBED_DIM=%d but the database's embedding column has %d dimensions; "+
			"unset MNEME_EMBED_DIM or re-embed into the new dimension", config.ErrInvalid, cfg.EmbedDim, dim)
	}
	if cfg.LLM.Configured() {
		d.LLM = llm.New(cfg.LLM, cfg.LLMTimeout, llm.WithObserver(m.LLM))
		log.Info("LLM configured", "base_url", cfg.LLM.BaseURL, "model", cfg.LLM.Model)
	} else {
		log.Info("no LLM configured (MNEME_LLM_BASE_URL unset): offline segmenter and reviewer")
	}
	d.Embedder = embed.New(cfg.Embed, dim, embed.WithObserver(m.Embed))
	switch {
	case cfg.Embed.Configured() && embedder != "external":
		log.Warn("MNEME_EMBED_BASE_URL is set but the database setting embedder is "+embedder+
			"; SQL keeps embedding queries with the hash embedder", "fix", `SELECT mneme.set_setting('embedder', '"external"')`)
	case !cfg.Embed.Configured() && embedder == "external":
		log.Warn("the database setting embedder is external but MNEME_EMBED_BASE_URL is unset; embedding with the built-in hash embedder")
	}
	return d, nil
}

// registerHandlers is the one place job kinds get their handlers in
// `mneme run`. Pipelines add one line each.
func registerHandlers(r *jobs.Runner, d deps) error {
	r.Register("noop", noop)
	pd := pipeline.Deps{Embedder: d.Embedder, Log: d.Log}
	if d.LLM != nil { // a nil *llm.Client must stay a nil interface: offline
		pd.LLM = d.LLM
	}
	if err := pipeline.Register(r, pd); err != nil {
		return fmt.Errorf("register pipelines: %w", err)
	}
	lifecycle.Register(r, d.Log)
	return nil
}

// noop does nothing and completes: benchmarks and smoke tests use it.
func noop(context.Context, pgx.Tx, jobs.Job) error { return nil }
