package tests

import (
	"context"
	"testing"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/mneme-memory/mneme/sidecar/dbtest"
)

// Maintenance and views never cross tenants: a reindex by an admin under
// one tenant rebuilds that tenant's statistics only and leaves the other's
// keyword search working; the views show an admin its tenant's rows; the
// BM25 tables (every tenant's words) are readable by no mneme role; and
// vector_search of another tenant's conversation reads none of its
// memories, so its size does not show in the time an empty answer takes.
func TestMaintenanceStaysInItsTenant(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := dbtest.New(t)
	admin, _ := db.PoolAs(t, "mneme_admin")
	worker, _ := db.PoolAs(t, "mneme_worker")
	for _, tn := range []string{"ta", "tb"} {
		_, err := admin.Exec(ctx, `SELECT mneme.create_tenant($1)`, tn)
		require.NoError(t, err)
	}
	convA, convB := uuid.New(), uuid.New()
	for c, tn := range map[uuid.UUID]string{convA: "ta", convB: "tb"} {
		require.NoError(t, inTenant(t, admin, tn, func(tx pgx.Tx) error {
			for _, text := range []string{"The lighthouse keeper paints the stairs blue.", "The ferry to the island leaves at noon.",
				"Gulls nest on the old pier every spring."} {
				if _, err := tx.Exec(ctx, `SELECT mneme.remember($1, $2)`, c, text+" "+tn); err != nil {
					return err
				}
			}
			if _, err := tx.Exec(ctx, `SELECT mneme.add_message($1, 'user', 'queued words of '||$2)`, c, tn); err != nil {
				return err
			}
			_, err := tx.Exec(ctx, `SELECT mneme.segment_now($1)`, c)
			return err
		}))
	}
	// The segment jobs fail for good: their messages are set aside.
	_, err := db.Pool.Exec(ctx, `UPDATE mneme.jobs SET state = 'failed', last_error = 'x', finished_at = now() WHERE kind = 'segment'`)
	require.NoError(t, err)

	keyword := func(tn string, c uuid.UUID) int {
		var n int
		require.NoError(t, inTenant(t, admin, tn, func(tx pgx.Tx) error {
			return tx.QueryRow(ctx, `SELECT count(*) FROM mneme.bm25_search($1, 'lighthouse ferry gulls', 10)`, c).Scan(&n)
		}))
		return n
	}
	require.Equal(t, 3, keyword("tb", convB))
	var n int64
	require.NoError(t, inTenant(t, admin, "ta", func(tx pgx.Tx) error {
		return tx.QueryRow(ctx, `SELECT mneme.bm25_reindex()`).Scan(&n)
	}))
	require.Equal(t, int64(3), n, "the admin's tenant's memories only")
	require.Equal(t, 3, keyword("tb", convB), "the other tenant's keyword search still works")
	require.Equal(t, 3, keyword("ta", convA))
	bm25Equal(t, db) // and the statistics equal a full rebuild

	// The views: an admin under ta sees ta's rows only.
	var other int
	require.NoError(t, inTenant(t, admin, "ta", func(tx pgx.Tx) error {
		return tx.QueryRow(ctx, `SELECT count(*) FROM mneme.set_aside_messages WHERE conversation_id = $1`, convB).Scan(&other)
	}))
	require.Zero(t, other, "tb's set-aside messages")
	var failed int
	require.NoError(t, inTenant(t, admin, "ta", func(tx pgx.Tx) error {
		return tx.QueryRow(ctx, `SELECT coalesce(sum(jobs), 0) FROM mneme.job_stats WHERE state = 'failed'`).Scan(&failed)
	}))
	require.Equal(t, 1, failed, "job_stats counts the admin's tenant's jobs")
	var aside int
	require.NoError(t, inTenant(t, admin, "ta", func(tx pgx.Tx) error {
		return tx.QueryRow(ctx, `SELECT count(*) FROM mneme.set_aside_messages`).Scan(&aside)
	}))
	require.Equal(t, 1, aside)

	// The BM25 tables: no mneme role reads them directly.
	for _, tbl := range []string{"bm25_postings", "bm25_docs", "bm25_terms", "bm25_stats"} {
		for name, pool := range map[string]interface {
			QueryRow(context.Context, string, ...any) pgx.Row
		}{"admin": admin, "worker": worker} {
			var c int
			err := pool.QueryRow(ctx, `SELECT count(*) FROM mneme.`+tbl).Scan(&c)
			require.Equal(t, "42501", sqlState(t, err), "%s reads mneme.%s", name, tbl)
		}
	}

	// vector_search of another tenant's conversation touches no memory.
	require.NoError(t, inTenant(t, admin, "ta", func(tx pgx.Tx) error {
		scans := func() int {
			var n int
			require.NoError(t, tx.QueryRow(ctx, `SELECT coalesce(seq_scan, 0) + coalesce(idx_scan, 0) FROM pg_stat_xact_user_tables
				WHERE schemaname = 'mneme' AND relname = 'memories'`).Scan(&n))
			return n
		}
		before := scans()
		var got int
		if err := tx.QueryRow(ctx, `SELECT count(*) FROM mneme.vector_search($1, mneme.hash_embed('lighthouse ferry'), 10)`, convB).Scan(&got); err != nil {
			return err
		}
		require.Zero(t, got)
		require.Equal(t, before, scans(), "vector_search read memories of a conversation not this tenant's")
		require.NoError(t, tx.QueryRow(ctx, `SELECT count(*) FROM mneme.vector_search($1, mneme.hash_embed('lighthouse ferry'), 10)`, convA).Scan(&got))
		require.Equal(t, 3, got, "its own conversation is searched")
		return nil
	}))
}
