package locomo

import (
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/mneme-memory/mneme/sidecar/jobs"
	"github.com/mneme-memory/mneme/sidecar/pipeline"
)

// PipelineJobs is the sidecar's job runner with the pipelines registered,
// for ingest to drain in process.
func PipelineJobs(pool *pgxpool.Pool, deps pipeline.Deps) (Jobs, error) {
	r := &miniRunner{pool: pool, handlers: map[string]jobs.Handler{}}
	if err := pipeline.Register(r, deps); err != nil {
		return nil, err
	}
	return r, nil
}
