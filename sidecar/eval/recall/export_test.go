package recall

import (
	"context"
	"encoding/json"
	"io"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"
)

// The run's steps, for the tests of package recall_test (which read the
// LoCoMo reader's test data, and so cannot be in package recall).
var (
	Ingest       = ingest
	LoadMemories = loadMemories
)

// RankMneme ranks a conversation's memories for q as a run does: mneme,
// mneme without R, the BM25 leg, the vector leg (the hash embedder's).
func RankMneme(ctx context.Context, pool *pgxpool.Pool, conv uuid.UUID, at time.Time, mems map[uuid.UUID]*Memory, q string) ([][]Doc, error) {
	docs, _, err := (&mnemeSource{pool: pool, conv: conv, at: at, memories: mems}).rank(ctx, q)
	return docs, err
}

// WriteJSON writes the report as `mneme eval locomo --json` does.
func (r *Report) WriteJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(r)
}
