package daemon

import (
	"context"
	"log/slog"

	"github.com/mneme-memory/mneme/sidecar/jobs"
	"github.com/mneme-memory/mneme/sidecar/lifecycle"
	"github.com/mneme-memory/mneme/sidecar/pipeline"
)

// Handlers is the one place job kinds get handlers: one for every kind of
// the declaration (jobs.Kinds), which jobs.Runner.RegisterAll checks, so a
// kind declared without a handler fails the start (and the tests) rather
// than wait for ever. Adding a kind: docs/pipelines.md.
func Handlers(p *pipeline.Pipelines, log *slog.Logger) map[string]jobs.Handler {
	return map[string]jobs.Handler{
		jobs.KindSegment:     p.Segment,
		jobs.KindReview:      p.Review,
		jobs.KindRevise:      p.Revise,
		jobs.KindConsolidate: p.Consolidate,
		jobs.KindCleanup:     lifecycle.Handler(log),
		jobs.KindNoop:        noop,
	}
}

// noop does nothing and completes: benchmarks and smoke tests use it.
func noop(context.Context, jobs.Store, jobs.Job) error { return nil }
