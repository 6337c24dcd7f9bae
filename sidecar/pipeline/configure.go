package pipeline

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/mneme-memory/mneme/sidecar/config"
	"github.com/mneme-memory/mneme/sidecar/embed"
	"github.com/mneme-memory/mneme/sidecar/jobs"
	"github.com/mneme-memory/mneme/sidecar/llm"
	"github.com/mneme-memory/mneme/sidecar/usage"
)

// Observer is told about every model call's HTTP attempt (metrics); nil is
// fine.
type Observer = llm.Observer

// Configure builds the pipelines' dependencies from the configuration: an
// LLM client only when MNEME_LLM_BASE_URL is set (otherwise the offline
// segmenter and reviewer), the OpenAI-compatible embedder when
// MNEME_EMBED_BASE_URL is set, else the built-in hash embedder, with the
// database's dimension (setting embedding_dim, fixed at migrate). `mneme
// run` and the evaluations both wire their pipelines here.
//
// Every model call reports to rec (nil: only the job's ledger, sidecar/usage).
func Configure(ctx context.Context, cfg config.Config, db jobs.Querier, log *slog.Logger, llmObs, embedObs Observer,
	rec *usage.Recorder) (Deps, error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	d := Deps{Log: log}
	var dim int
	var embedder string
	err := db.QueryRow(ctx, `SELECT (mneme.setting('embedding_dim') #>> '{}')::int, mneme.setting('embedder') #>> '{}'`).
		Scan(&dim, &embedder)
	if err != nil {
		return d, fmt.Errorf("read embedding settings (has `mneme migrate` run?): %w", err)
	}
	if cfg.EmbedDimSet && cfg.EmbedDim != dim {
		return d, fmt.Errorf("%w: MNEME_EMBED_DIM=%d but the database's embedding column has %d dimensions; "+
			"unset MNEME_EMBED_DIM or re-embed into the new dimension", config.ErrInvalid, cfg.EmbedDim, dim)
	}
	if cfg.LLM.Configured() {
		opts := []llm.Option{llm.WithRecorder(rec)}
		if llmObs != nil {
			opts = append(opts, llm.WithObserver(llmObs))
		}
		d.LLM = llm.New(cfg.LLM, cfg.LLMTimeout, opts...)
		log.Info("LLM configured", "base_url", cfg.LLM.BaseURL, "model", cfg.LLM.Model)
	} else {
		log.Info("no LLM configured (MNEME_LLM_BASE_URL unset): offline segmenter and reviewer")
	}
	eopts := []embed.OpenAIOption{embed.WithRecorder(rec)}
	if embedObs != nil {
		eopts = append(eopts, embed.WithObserver(embedObs))
	}
	d.Embedder = embed.New(cfg.Embed, dim, eopts...)
	switch {
	case cfg.Embed.Configured() && embedder != "external":
		log.Warn("MNEME_EMBED_BASE_URL is set but the database setting embedder is "+embedder+
			"; SQL keeps embedding queries with the hash embedder", "fix", `SELECT mneme.set_setting('embedder', '"external"')`)
	case !cfg.Embed.Configured() && embedder == "external":
		log.Warn("the database setting embedder is external but MNEME_EMBED_BASE_URL is unset; embedding with the built-in hash embedder")
	}
	return d, nil
}
