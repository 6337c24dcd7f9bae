package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"

	"github.com/jackc/pgx/v5"

	"github.com/mneme-memory/mneme/sidecar/cli"
	"github.com/mneme-memory/mneme/sidecar/config"
	"github.com/mneme-memory/mneme/sidecar/migrate"
)

// cmdVectorIndexes shows, or with --apply runs, the plan of per-scope HNSW
// indexes (mneme.vector_index_plan; docs/performance.md).
func cmdVectorIndexes(ctx context.Context, log *slog.Logger, args []string) error {
	fs := flags("vector-indexes")
	apply := fs.Bool("apply", false, "run the statements (CREATE/DROP INDEX CONCURRENTLY, one at a time) instead of printing them")
	asJSON := fs.Bool("json", false, "print the plan as one JSON array")
	if err := cli.Parse(fs, args, false); err != nil {
		return err
	}
	if err := useDemoCluster(ctx, log); err != nil {
		return err
	}
	cfg, err := config.Load(true)
	if err != nil {
		return err
	}
	conn, err := pgx.Connect(ctx, cfg.DatabaseURL)
	if err != nil {
		return fmt.Errorf("connect: %w", err)
	}
	defer conn.Close(context.Background())
	plan, err := migrate.VectorIndexes(ctx, conn, *apply, log)
	if werr := migrate.WritePlan(os.Stdout, plan, *asJSON); werr != nil && err == nil {
		err = werr
	}
	return err
}
