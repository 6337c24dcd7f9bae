package transfer

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5"
)

// vectorIndex is the HNSW index of the pgvector variant (goose 00002,
// sql/060-reembed.sql).
const vectorIndex = "memories_embedding_hnsw"

// indexBuildMemory is maintenance_work_mem for building it again (the
// floats alone of 100,000 embeddings of 256 dimensions are 100 MB).
const indexBuildMemory = "1GB"

// deferIndex drops the pgvector HNSW index for a restore (ImportOptions
// DeferIndex) and returns the function that builds it again from its own
// definition: one build after the load instead of an insertion per row.
// It needs the table's owner, and every tenant searches without the index
// meanwhile; with no such index (the array variant) it does nothing.
func deferIndex(ctx context.Context, conn *pgx.Conn, log *slog.Logger) (func() error, error) {
	var def string
	err := conn.QueryRow(ctx, `SELECT pg_get_indexdef(i.indexrelid) FROM pg_index i
		WHERE i.indexrelid = to_regclass('mneme.`+vectorIndex+`')`).Scan(&def)
	if err == pgx.ErrNoRows {
		return func() error { return nil }, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read the definition of %s: %w", vectorIndex, err)
	}
	if _, err := conn.Exec(ctx, `DROP INDEX mneme.`+vectorIndex); err != nil {
		return nil, fmt.Errorf("--defer-index: drop %s (the table's owner may, an admin may not): %w", vectorIndex, err)
	}
	log.Warn("import: vector index dropped until the import ends; searches meanwhile scan every embedding", "index", vectorIndex)
	return func() error {
		t0 := time.Now()
		// A fresh context: the index is built again even when the import
		// was cancelled.
		bctx := context.WithoutCancel(ctx)
		c := conn
		if c.IsClosed() { // pgx closes a connection whose query was cancelled
			var err error
			if c, err = pgx.ConnectConfig(bctx, conn.Config().Copy()); err != nil {
				return fmt.Errorf("build %s again (run: %s): connect: %w", vectorIndex, def, err)
			}
			defer c.Close(bctx)
		}
		// HNSW builds far faster while the graph fits in
		// maintenance_work_mem (pgvector's advice): raised for this one
		// statement, never lowered.
		if _, err := c.Exec(bctx, `SELECT set_config('maintenance_work_mem', $1, false)
			WHERE pg_size_bytes(current_setting('maintenance_work_mem')) < pg_size_bytes($1)`, indexBuildMemory); err != nil {
			return fmt.Errorf("build %s again (run: %s): %w", vectorIndex, def, err)
		}
		_, err := c.Exec(bctx, def)
		if _, rerr := c.Exec(bctx, `RESET maintenance_work_mem`); err == nil && rerr != nil {
			log.Warn("import: reset maintenance_work_mem", "err", rerr)
		}
		if err != nil {
			return fmt.Errorf("build %s again (run: %s): %w", vectorIndex, def, err)
		}
		log.Info("import: vector index built", "index", vectorIndex, "seconds", time.Since(t0).Seconds())
		return nil
	}, nil
}
