package main

import (
	"context"
	"log/slog"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/mneme-memory/mneme/sidecar/config"
	"github.com/mneme-memory/mneme/sidecar/embed"
	"github.com/mneme-memory/mneme/sidecar/jobs"
	"github.com/mneme-memory/mneme/sidecar/llm"
	"github.com/mneme-memory/mneme/sidecar/metrics"
)

// deps is what job handlers may use. LLM is nil when no LLM endpoint is
// configured (offline fallbacks); Embedder is the OpenAI-compatible client
// when configured, else nil (the built-in hash embedder).
type deps struct {
	Config   config.Config
	Pool     *pgxpool.Pool
	Log      *slog.Logger
	LLM      *llm.Client
	Embedder *embed.OpenAI
}

// newDeps builds the clients the configuration asks for.
func newDeps(cfg config.Config, pool *pgxpool.Pool, log *slog.Logger, m metrics.Sidecar) deps {
	d := deps{Config: cfg, Pool: pool, Log: log}
	if cfg.LLM.Configured() {
		d.LLM = llm.New(cfg.LLM, cfg.LLMTimeout, llm.WithObserver(m.LLM))
	}
	if cfg.Embed.Configured() {
		d.Embedder = embed.NewOpenAI(cfg.Embed, cfg.EmbedDim, embed.WithObserver(m.Embed))
	}
	return d
}

// registerHandlers is the one place job kinds get their handlers in
// `mneme run`. Pipelines add one line each.
func registerHandlers(r *jobs.Runner, d deps) error {
	r.Register("noop", noop)
	return nil
}

// noop does nothing and completes: benchmarks and smoke tests use it.
func noop(context.Context, pgx.Tx, jobs.Job) error { return nil }
