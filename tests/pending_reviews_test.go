package tests

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/mneme-memory/mneme/sidecar/dbtest"
)

// pending_reviews is bounded: past pending_reviews_max, the oldest half go
// to a review job at once; every entry is in the array or in a job, none
// lost, and the review job rates them by the queued messages.
func TestPendingReviewsBounded(t *testing.T) {
	t.Parallel()
	e := newPipelineEnv(t, false)
	ctx := context.Background()
	_, err := e.db.Pool.Exec(ctx, `SELECT mneme.set_setting('pending_reviews_max', '10')`)
	require.NoError(t, err)
	var mem uuid.UUID
	require.NoError(t, e.db.Pool.QueryRow(ctx, `SELECT mneme.remember($1, 'The tomatoes need water every morning')`, e.conv).Scan(&mem))
	e.say(day1.Format(time.RFC3339), "user", "I water the tomatoes every morning before work.")
	for i := 0; i < 25; i++ {
		_, err := e.db.Pool.Exec(ctx, `SELECT count(*) FROM mneme.retrieve($1, $2, 3)`, e.conv, fmt.Sprintf("tomatoes water %d", i))
		require.NoError(t, err)
		require.LessOrEqual(t, e.count(`SELECT coalesce(jsonb_array_length(pending_reviews), 0) FROM mneme.message_queue WHERE id = $1`, e.conv), 10)
	}
	total := e.count(`SELECT coalesce(jsonb_array_length(pending_reviews), 0) FROM mneme.message_queue WHERE id = $1`, e.conv) +
		e.count(`SELECT coalesce(sum(jsonb_array_length(payload -> 'reviews')), 0)::int FROM mneme.jobs WHERE kind = 'review'`)
	require.Equal(t, 25, total, "no entry lost")
	require.Positive(t, e.count(`SELECT count(*) FROM mneme.jobs WHERE kind = 'review'`))
	e.drain()
	require.Zero(t, e.count(`SELECT count(*) FROM mneme.jobs WHERE state = 'failed'`))
	require.Positive(t, e.count(`SELECT count(*) FROM mneme.review_log WHERE memory_id = $1`, mem), "the handed-over entries were reviewed")
}

func TestPendingReviewsAppendAndTake(t *testing.T) {
	t.Parallel()
	db := dbtest.New(t)
	ctx := context.Background()
	cid := uuid.New()
	var got *string
	require.NoError(t, db.Pool.QueryRow(ctx, `SELECT mneme.take_pending_reviews($1)::text`, cid).Scan(&got))
	require.Nil(t, got, "unknown conversation: NULL")
	m1, m2 := uuid.New(), uuid.New()
	_, err := db.Pool.Exec(ctx, `SELECT mneme.add_pending_review($1, $2, 'rust lifetimes')`, cid, []uuid.UUID{m1, m2})
	require.NoError(t, err)
	_, err = db.Pool.Exec(ctx, `SELECT mneme.add_pending_review($1, $2, 'weather')`, cid, []uuid.UUID{m2})
	require.NoError(t, err)
	var entries []struct {
		Query     string      `json:"query"`
		MemoryIDs []uuid.UUID `json:"memory_ids"`
	}
	require.NoError(t, db.Pool.QueryRow(ctx, `SELECT mneme.take_pending_reviews($1)`, cid).Scan(&entries))
	require.Len(t, entries, 2)
	require.Equal(t, "rust lifetimes", entries[0].Query)
	require.Equal(t, []uuid.UUID{m1, m2}, entries[0].MemoryIDs)
	require.Equal(t, []uuid.UUID{m2}, entries[1].MemoryIDs)
	var isNull bool
	require.NoError(t, db.Pool.QueryRow(ctx, `SELECT pending_reviews IS NULL FROM mneme.message_queue WHERE id = $1`, cid).Scan(&isNull))
	require.True(t, isNull, "take leaves NULL")
}

// TestPendingReviewsConcurrentTakeLosesNothing: 50 connections append while
// another takes in a loop; every entry is returned by exactly one take.
// Run it with -count=20 to shake out interleavings.
func TestPendingReviewsConcurrentTakeLosesNothing(t *testing.T) {
	t.Parallel()
	db := dbtest.New(t)
	ctx := context.Background()
	cfg, err := pgxpool.ParseConfig(db.URL)
	require.NoError(t, err)
	cfg.MaxConns = 60
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	require.NoError(t, err)
	defer pool.Close()
	cid := uuid.New()
	const writers, perWriter = 50, 20

	seen := map[string]int{}
	var mu sync.Mutex
	take := func() {
		var entries []struct {
			Query string `json:"query"`
		}
		require.NoError(t, pool.QueryRow(ctx, `SELECT coalesce(mneme.take_pending_reviews($1), '[]')`, cid).Scan(&entries))
		mu.Lock()
		for _, e := range entries {
			seen[e.Query]++
		}
		mu.Unlock()
	}
	done := make(chan struct{})
	takerDone := make(chan struct{})
	go func() {
		defer close(takerDone)
		for {
			select {
			case <-done:
				return
			default:
				take()
			}
		}
	}()
	var wg sync.WaitGroup
	for w := 0; w < writers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < perWriter; i++ {
				_, err := pool.Exec(ctx, `SELECT mneme.add_pending_review($1, $2, $3)`,
					cid, []uuid.UUID{uuid.New()}, fmt.Sprintf("w%d-%d", w, i))
				require.NoError(t, err)
			}
		}()
	}
	wg.Wait()
	close(done)
	<-takerDone
	take()
	require.Len(t, seen, writers*perWriter, "every appended entry was taken")
	for q, n := range seen {
		require.Equal(t, 1, n, "entry %s taken %d times", q, n)
	}
}

// --- bad input ----------------------------------------------------------------
