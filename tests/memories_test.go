package tests

import (
	"context"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/mneme-memory/mneme/sidecar/dbtest"
)

func TestRememberSupersedeForgetHistory(t *testing.T) {
	t.Parallel()
	db := dbtest.New(t)
	ctx := context.Background()
	cid := uuid.New()
	var v1, v2, v3 uuid.UUID
	require.NoError(t, db.Pool.QueryRow(ctx, `SELECT mneme.remember($1, 'Alice lives in Paris', 'user_profile')`, cid).Scan(&v1))
	require.NoError(t, db.Pool.QueryRow(ctx, `SELECT mneme.remember($1, 'Alice lives in Berlin', 'user_profile', supersedes => $2)`, cid, v1).Scan(&v2))
	require.NoError(t, db.Pool.QueryRow(ctx, `SELECT mneme.remember($1, 'Alice lives in Rome', 'user_profile', supersedes => $2)`, cid, v2).Scan(&v3))

	// Nothing was overwritten: all three rows exist, the old ones superseded.
	var status, reason string
	var supersedes uuid.UUID
	require.NoError(t, db.Pool.QueryRow(ctx, `SELECT status, status_reason FROM mneme.memories WHERE id = $1`, v1).Scan(&status, &reason))
	require.Equal(t, "superseded", status)
	require.Contains(t, reason, v2.String())
	require.NoError(t, db.Pool.QueryRow(ctx, `SELECT supersedes_id FROM mneme.memories WHERE id = $1`, v3).Scan(&supersedes))
	require.Equal(t, v2, supersedes)

	// History from the middle shows the whole lineage in order.
	rows, err := db.Pool.Query(ctx, `SELECT depth, memory_id, status FROM mneme.history($1)`, v2)
	require.NoError(t, err)
	var depths []int
	var ids []uuid.UUID
	for rows.Next() {
		var d int
		var id uuid.UUID
		var st string
		require.NoError(t, rows.Scan(&d, &id, &st))
		depths, ids = append(depths, d), append(ids, id)
	}
	require.NoError(t, rows.Err())
	require.Equal(t, []int{-1, 0, 1}, depths)
	require.Equal(t, []uuid.UUID{v1, v2, v3}, ids)

	// A superseded memory cannot be superseded again.
	_, err = db.Pool.Exec(ctx, `SELECT mneme.remember($1, 'Alice lives in Oslo', supersedes => $2)`, cid, v1)
	require.Equal(t, "55000", sqlState(t, err))

	// Forget invalidates with a reason and keeps the row; inspect shows links.
	_, err = db.Pool.Exec(ctx, `SELECT mneme.forget($1, 'user asked to forget')`, v3)
	require.NoError(t, err)
	var by *uuid.UUID
	require.NoError(t, db.Pool.QueryRow(ctx, `SELECT status, status_reason, superseded_by FROM mneme.inspect($1)`, v3).Scan(&status, &reason, &by))
	require.Equal(t, "invalidated", status)
	require.Equal(t, "user asked to forget", reason)
	require.Nil(t, by)
	require.NoError(t, db.Pool.QueryRow(ctx, `SELECT superseded_by FROM mneme.inspect($1)`, v1).Scan(&by))
	require.Equal(t, v2, *by)
	var n int
	require.NoError(t, db.Pool.QueryRow(ctx, `SELECT count(*) FROM mneme.memories WHERE conversation_id = $1`, cid).Scan(&n))
	require.Equal(t, 3, n, "nothing deleted")
}

func TestPinUnpin(t *testing.T) {
	t.Parallel()
	db := dbtest.New(t)
	ctx := context.Background()
	var id uuid.UUID
	require.NoError(t, db.Pool.QueryRow(ctx, `SELECT mneme.remember($1, 'my name is Sam', 'user_profile', true)`, uuid.New()).Scan(&id))
	var pinned bool
	require.NoError(t, db.Pool.QueryRow(ctx, `SELECT pinned FROM mneme.memories WHERE id = $1`, id).Scan(&pinned))
	require.True(t, pinned)
	_, err := db.Pool.Exec(ctx, `SELECT mneme.unpin($1)`, id)
	require.NoError(t, err)
	require.NoError(t, db.Pool.QueryRow(ctx, `SELECT pinned FROM mneme.memories WHERE id = $1`, id).Scan(&pinned))
	require.False(t, pinned)
}

func TestMemoryAPIBadInput(t *testing.T) {
	t.Parallel()
	db := dbtest.New(t)
	ctx := context.Background()
	cid := uuid.New()
	var existing uuid.UUID
	require.NoError(t, db.Pool.QueryRow(ctx, `SELECT mneme.remember($1, 'a fact')`, cid).Scan(&existing))
	// A forgotten memory is not pinned (issue 51: it showed "invalidated ·
	// pinned"); the refusal leaves it unpinned.
	var forgotten uuid.UUID
	require.NoError(t, db.Pool.QueryRow(ctx, `SELECT mneme.remember($1, 'a wrong fact')`, cid).Scan(&forgotten))
	_, err := db.Pool.Exec(ctx, `SELECT mneme.forget($1, 'wrong')`, forgotten)
	require.NoError(t, err)
	t.Cleanup(func() {
		var pinned bool
		require.NoError(t, db.Pool.QueryRow(ctx, `SELECT pinned FROM mneme.memories WHERE id = $1`, forgotten).Scan(&pinned))
		require.False(t, pinned)
	})
	count := func() int {
		var n int
		require.NoError(t, db.Pool.QueryRow(ctx, `SELECT count(*) FROM mneme.memories WHERE status = 'active'`).Scan(&n))
		return n
	}
	before := count()
	cases := []struct {
		name, sql, state string
		args             []any
	}{
		{"null conversation", `SELECT mneme.remember(NULL, 'x y z')`, "22004", nil},
		{"empty content", `SELECT mneme.remember($1, '  ')`, "22023", []any{cid}},
		{"bad label", `SELECT mneme.remember($1, 'fact', 'Not A Label')`, "22023", []any{cid}},
		{"past valid_until", `SELECT mneme.remember($1, 'fact', valid_until => $2)`, "22023", []any{cid, time.Now().Add(-time.Hour)}},
		{"supersede unknown", `SELECT mneme.remember($1, 'fact', supersedes => $2)`, "P0002", []any{cid, uuid.New()}},
		{"supersede other conversation", `SELECT mneme.remember($1, 'fact', supersedes => $2)`, "22023", []any{uuid.New(), existing}},
		{"forget without reason", `SELECT mneme.forget($1, '')`, "22023", []any{existing}},
		{"forget unknown", `SELECT mneme.forget($1, 'why')`, "P0002", []any{uuid.New()}},
		{"pin unknown", `SELECT mneme.pin($1)`, "P0002", []any{uuid.New()}},
		{"pin forgotten", `SELECT mneme.pin($1)`, "55000", []any{forgotten}},
		{"inspect unknown", `SELECT * FROM mneme.inspect($1)`, "P0002", []any{uuid.New()}},
		{"history unknown", `SELECT * FROM mneme.history($1)`, "P0002", []any{uuid.New()}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := db.Pool.Exec(ctx, tc.sql, tc.args...)
			require.Error(t, err)
			require.Equal(t, tc.state, sqlState(t, err), err.Error())
			require.Equal(t, before, count())
		})
	}
}

func TestPlainMemoryInsertIsActive(t *testing.T) {
	t.Parallel()
	db := dbtest.New(t)
	ctx := context.Background()
	var status, label, kind string
	var stab float64
	require.NoError(t, db.Pool.QueryRow(ctx, `INSERT INTO mneme.memories (conversation_id, content)
		VALUES ($1, 'likes tea') RETURNING status, label, kind, stability`, uuid.New()).Scan(&status, &label, &kind, &stab))
	require.Equal(t, "active", status)
	require.Equal(t, "general", label)
	require.Equal(t, "semantic", kind)
	require.Greater(t, stab, 0.0)
	// A memory never supersedes itself.
	_, err := db.Pool.Exec(ctx, `UPDATE mneme.memories SET supersedes_id = id`)
	require.Equal(t, "23514", sqlState(t, err))
	_, err = db.Pool.Exec(ctx, `UPDATE mneme.memories SET confidence_score = 1.5`)
	require.Equal(t, "23514", sqlState(t, err))
}
