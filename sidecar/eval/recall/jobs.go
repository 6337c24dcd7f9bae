package recall

import (
	"log/slog"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/mneme-memory/mneme/sidecar/daemon"
	"github.com/mneme-memory/mneme/sidecar/jobs"
	"github.com/mneme-memory/mneme/sidecar/pipeline"
)

// PipelineJobs is the sidecar's job runner with its handlers registered,
// for ingest to drain in process. One job at a time: segmentation of a
// conversation is sequential anyway, and the run stays deterministic.
func PipelineJobs(pool *pgxpool.Pool, deps pipeline.Deps) (Jobs, error) {
	log := deps.Log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	r := jobs.NewRunner(pool, jobs.Options{Concurrency: 1, Logger: log})
	p, err := pipeline.New(deps)
	if err != nil {
		return nil, err
	}
	if err := r.RegisterAll(daemon.Handlers(p, log)); err != nil {
		return nil, err
	}
	return r, nil
}
