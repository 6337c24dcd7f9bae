package tests

import (
	"bytes"
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

// TestRecordingLocksInTheOneOrder: recording a retrieval (add_pending_review)
// locks the memories it found in the one lock order of every multi-memory
// writer (mneme._lock_memories: conversation, then id), as a review job
// locks its targets. Found by `mneme-lab bench soak` at load 44: a
// retrieve that locked its memories in the order its scan met them
// deadlocked (40P01) with a review job locking the same two in id order.
// Here the scan meets the higher id first (a sequential scan, the lower
// id's row rewritten after it): while another transaction holds the lower
// id, the recording waits for it holding nothing, so the higher id stays
// free.
func TestRecordingLocksInTheOneOrder(t *testing.T) {
	t.Parallel()
	db := dbtest.New(t)
	ctx := context.Background()
	conv := uuid.New()
	var a, b uuid.UUID
	require.NoError(t, db.Pool.QueryRow(ctx, `SELECT mneme.remember($1, 'The kettle is blue')`, conv).Scan(&a))
	require.NoError(t, db.Pool.QueryRow(ctx, `SELECT mneme.remember($1, 'The kettle is loud')`, conv).Scan(&b))
	lo, hi := a, b
	if bytes.Compare(hi[:], lo[:]) < 0 {
		lo, hi = hi, lo
	}
	// The lower id's row version comes after the higher id's in the heap.
	_, err := db.Pool.Exec(ctx, `UPDATE mneme.memories SET title = title WHERE id = $1`, lo)
	require.NoError(t, err)

	holder, err := db.Pool.Begin(ctx)
	require.NoError(t, err)
	defer func() { _ = holder.Rollback(ctx) }()
	_, err = holder.Exec(ctx, `SELECT 1 FROM mneme.memories WHERE id = $1 FOR UPDATE`, lo)
	require.NoError(t, err)

	rec, err := pgx.Connect(ctx, db.URL)
	require.NoError(t, err)
	defer rec.Close(ctx)
	for _, s := range []string{`SET enable_indexscan = off`, `SET enable_bitmapscan = off`} {
		_, err = rec.Exec(ctx, s)
		require.NoError(t, err, s)
	}
	done := make(chan error, 1)
	go func() {
		_, err := rec.Exec(ctx, `SELECT mneme.add_pending_review($1, $2, 'kettle /*lock-order*/')`, conv, []uuid.UUID{lo, hi})
		done <- err
	}()
	waitBlocked(t, db, "lock-order")

	other, err := db.Pool.Begin(ctx)
	require.NoError(t, err)
	_, free := other.Exec(ctx, `SELECT 1 FROM mneme.memories WHERE id = $1 FOR UPDATE NOWAIT`, hi)
	require.NoError(t, other.Rollback(ctx))
	// (the holder let go before any assertion, so that a failure does not
	// leave the recording waiting)
	require.NoError(t, holder.Commit(ctx))
	select {
	case err := <-done:
		require.NoError(t, err)
	case <-time.After(30 * time.Second):
		t.Fatal("the recording did not finish after the lock was released")
	}
	require.NoError(t, free, "the recording took the higher id before the lower one it waits for")
	var n int
	require.NoError(t, db.Pool.QueryRow(ctx, `SELECT jsonb_array_length(pending_reviews) FROM mneme.message_queue WHERE id = $1`, conv).Scan(&n))
	require.Equal(t, 1, n)
}
