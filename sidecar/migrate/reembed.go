package migrate

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
)

// EmbedFunc embeds texts; nil means the built-in hash embedder, which SQL
// runs itself.
type EmbedFunc func(ctx context.Context, texts []string) ([][]float32, error)

// reembedBatch is how many memories go to the embedder at once.
const reembedBatch = 64

// Reembed changes the database's embedding dimension to dim and recomputes
// every memory's embedding, in one transaction: readers see the old
// embeddings until it commits, writers wait. With embed nil the setting
// `embedder` must be "hash" (SQL embeds); otherwise embed computes them and
// the setting is switched to "external".
func Reembed(ctx context.Context, conn *pgx.Conn, dim int, embed EmbedFunc) (int64, error) {
	tx, err := conn.Begin(ctx)
	if err != nil {
		return 0, err
	}
	defer tx.Rollback(ctx) //nolint:errcheck // no-op after Commit
	// Not on Citus: the type change of the distributed tables' embedding
	// columns (with the triggers that name them dropped and created again,
	// and the domain replaced) ended in a distributed deadlock on the test
	// cluster (docs/scale.md). Refused before anything changes.
	citus, err := Distributed(ctx, tx)
	if err != nil {
		return 0, err
	}
	if citus {
		return 0, errors.New("mneme reembed does not run on a distributed mneme (Citus) yet: choose the dimension at migrate time " +
			"(MNEME_EMBED_DIM), or migrate a new database with the new dimension and copy the memories over (docs/scale.md)")
	}
	mode := `"hash"`
	if embed != nil {
		mode = `"external"`
	}
	if _, err := tx.Exec(ctx, `SELECT mneme.set_setting('embedder', $1::jsonb)`, mode); err != nil {
		return 0, fmt.Errorf("set embedder: %w", err)
	}
	var n int64
	if err := tx.QueryRow(ctx, `SELECT mneme.change_embedding_dim($1)`, dim).Scan(&n); err != nil {
		return 0, fmt.Errorf("change embedding dimension: %w", err)
	}
	if embed != nil {
		if err := fillEmbeddings(ctx, tx, dim, embed); err != nil {
			return 0, err
		}
	}
	return n, tx.Commit(ctx)
}

func fillEmbeddings(ctx context.Context, tx pgx.Tx, dim int, embed EmbedFunc) error {
	rows, err := tx.Query(ctx, `SELECT memory_id::text, memory_text FROM mneme.memories_to_embed()`)
	if err != nil {
		return fmt.Errorf("read memories: %w", err)
	}
	var ids, texts []string
	for rows.Next() {
		var id, text string
		if err := rows.Scan(&id, &text); err != nil {
			rows.Close()
			return err
		}
		ids, texts = append(ids, id), append(texts, text)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return err
	}
	for start := 0; start < len(ids); start += reembedBatch {
		end := min(start+reembedBatch, len(ids))
		vecs, err := embed(ctx, texts[start:end])
		if err != nil {
			return fmt.Errorf("embed memories %d to %d: %w", start, end, err)
		}
		if len(vecs) != end-start {
			return fmt.Errorf("embedder returned %d vectors for %d texts", len(vecs), end-start)
		}
		for i, v := range vecs {
			if len(v) != dim {
				return fmt.Errorf("embedder returned %d dimensions, want %d", len(v), dim)
			}
			if _, err := tx.Exec(ctx, `SELECT mneme.set_embedding($1::uuid, $2::real[])`, ids[start+i], v); err != nil {
				return fmt.Errorf("store embedding of %s: %w", ids[start+i], err)
			}
		}
	}
	return nil
}

// Distributed reports whether mneme's tables are distributed by Citus
// (mneme._distributed), for the commands that refuse to run there.
func Distributed(ctx context.Context, q interface {
	QueryRow(context.Context, string, ...any) pgx.Row
}) (bool, error) {
	var d bool
	if err := q.QueryRow(ctx, `SELECT mneme._distributed('mneme.memories')`).Scan(&d); err != nil {
		return false, fmt.Errorf("is mneme distributed: %w", err)
	}
	return d, nil
}
