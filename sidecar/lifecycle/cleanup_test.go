package lifecycle_test

import (
	"context"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/mneme-memory/mneme/sidecar/dbtest"
	"github.com/mneme-memory/mneme/sidecar/jobs"
	"github.com/mneme-memory/mneme/sidecar/lifecycle"
)

func TestMain(m *testing.M) { dbtest.Main(m) }

// The cleanup job through the real runner: it applies the policy and
// leaves exactly one successor pending, cleanup_interval from now.
func TestCleanupJob(t *testing.T) {
	t.Parallel()
	db := dbtest.New(t)
	ctx := context.Background()
	old := time.Now().AddDate(-1, 0, 0)
	var faded uuid.UUID
	require.NoError(t, db.Pool.QueryRow(ctx, `INSERT INTO mneme.memories (conversation_id, content, label, created_at, last_reviewed_at)
		VALUES (gen_random_uuid(), 'hi there', 'trivial', $1, $1) RETURNING id`, old).Scan(&faded))

	first, err := lifecycle.Schedule(ctx, db.Pool)
	require.NoError(t, err)
	require.NotZero(t, first)
	again, err := lifecycle.Schedule(ctx, db.Pool)
	require.NoError(t, err)
	require.Equal(t, first, again, "one pending cleanup at a time")

	r := jobs.NewRunner(db.Pool, jobs.Options{Concurrency: 1, Lease: 5 * time.Second, PollEvery: 50 * time.Millisecond})
	lifecycle.Register(r, nil)
	require.NoError(t, r.Drain(ctx))

	var status, reason string
	require.NoError(t, db.Pool.QueryRow(ctx, `SELECT status, status_reason FROM mneme.memories WHERE id = $1`, faded).Scan(&status, &reason))
	require.Equal(t, "inactive", status)
	require.Contains(t, reason, "inactive_below_r")
	var state string
	require.NoError(t, db.Pool.QueryRow(ctx, `SELECT state FROM mneme.jobs WHERE id = $1`, first).Scan(&state))
	require.Equal(t, "done", state)
	var pending int
	var wait float64
	require.NoError(t, db.Pool.QueryRow(ctx, `SELECT count(*), extract(epoch FROM min(run_at) - now()) FROM mneme.jobs
		WHERE kind = 'cleanup' AND state = 'pending'`).Scan(&pending, &wait))
	require.Equal(t, 1, pending)
	require.InDelta(t, 86400, wait, 60, "the next one a cleanup_interval (1 day) later")

	// No schedule when the operator turned it off.
	_, err = db.Pool.Exec(ctx, `DELETE FROM mneme.jobs; SELECT mneme.set_setting('cleanup_interval', 'null')`)
	require.NoError(t, err)
	id, err := lifecycle.Schedule(ctx, db.Pool)
	require.NoError(t, err)
	require.Zero(t, id)
}
