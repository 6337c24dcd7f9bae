package tests

import (
	"context"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/mneme-memory/mneme/sidecar/dbtest"
)

// TestRetrieveRacingAnEraseRecordsNoQuery: a retrieval that found a memory
// while an erase of it was under way must not record its query once the erase
// commits (found by `mneme-lab bench soak`). Read committed: the recording waits
// for the erase and drops the entry. Repeatable read (the search's snapshot
// from before the erase): the recording fails with 40001 and writes nothing.
func TestRetrieveRacingAnEraseRecordsNoQuery(t *testing.T) {
	t.Parallel()
	for _, variant := range variants(t) {
		t.Run(variant, func(t *testing.T) {
			db := dbtest.New(t, dbtest.WithVector(variant))
			ctx := context.Background()
			conv := uuid.New()
			var secret, kept uuid.UUID
			require.NoError(t, db.Pool.QueryRow(ctx, `SELECT mneme.remember($1, 'The vault codeword is quokkazest', 'general')`, conv).Scan(&secret))
			require.NoError(t, db.Pool.QueryRow(ctx, `SELECT mneme.remember($1, 'The vault is in the cellar', 'general')`, conv).Scan(&kept))

			pendingQueries := func() int {
				var n int
				require.NoError(t, db.Pool.QueryRow(ctx, `SELECT count(*) FROM mneme.message_queue q,
					jsonb_array_elements(coalesce(q.pending_reviews, '[]')) e WHERE q.id = $1 AND e ->> 'query' LIKE '%quokkazest%'`, conv).Scan(&n))
				return n
			}

			t.Run("read committed", func(t *testing.T) {
				eraser, err := db.Pool.Begin(ctx)
				require.NoError(t, err)
				defer func() { _ = eraser.Rollback(ctx) }()
				_, err = eraser.Exec(ctx, `SELECT mneme.erase($1, 'user request 7')`, secret)
				require.NoError(t, err)

				done := make(chan error, 1)
				var found []uuid.UUID
				go func() {
					rows, err := db.Pool.Query(ctx, `SELECT memory_id FROM mneme.retrieve($1, 'vault codeword quokkazest /*rc-race*/', 5)`, conv)
					if err == nil {
						found, err = pgx.CollectRows(rows, pgx.RowTo[uuid.UUID])
					}
					done <- err
				}()
				waitBlocked(t, db, "rc-race")
				require.NoError(t, eraser.Commit(ctx))
				select {
				case err := <-done:
					require.NoError(t, err)
				case <-time.After(30 * time.Second):
					t.Fatal("the retrieval did not finish after the erase committed")
				}
				require.Contains(t, found, secret, "the search ran before the erase committed")
				require.Zero(t, pendingQueries(), "no pending review quotes a query that retrieved the erased memory")
			})

			t.Run("repeatable read", func(t *testing.T) {
				var other uuid.UUID
				require.NoError(t, db.Pool.QueryRow(ctx, `SELECT mneme.remember($1, 'The second codeword is quokkazest too', 'general')`, conv).Scan(&other))
				reader, err := db.Pool.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.RepeatableRead})
				require.NoError(t, err)
				defer func() { _ = reader.Rollback(ctx) }()
				var n int
				require.NoError(t, reader.QueryRow(ctx, `SELECT count(*) FROM mneme.search($1, 'vault codeword quokkazest', 5)`, conv).Scan(&n))
				require.Positive(t, n)
				_, err = db.Pool.Exec(ctx, `SELECT mneme.erase($1, 'user request 8')`, other)
				require.NoError(t, err)
				_, err = reader.Exec(ctx, `SELECT mneme.context($1, 'vault codeword quokkazest', 200)`, conv)
				require.Equal(t, "40001", sqlState(t, err), "the erase committed after the snapshot: retry")
				require.NoError(t, reader.Rollback(ctx))
				require.Zero(t, pendingQueries())
			})
		})
	}
}
