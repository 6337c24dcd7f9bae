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
		if _, err := c.Exec(bctx, def); err != nil {
			return fmt.Errorf("build %s again (run: %s): %w", vectorIndex, def, err)
		}
		log.Info("import: vector index built", "index", vectorIndex, "seconds", time.Since(t0).Seconds())
		return nil
	}, nil
}
