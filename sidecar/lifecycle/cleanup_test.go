package lifecycle_test

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
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
	var logged bytes.Buffer
	r.Register(jobs.KindCleanup, lifecycle.Handler(slog.New(slog.NewTextHandler(&logged, nil))))
	require.NoError(t, r.Drain(ctx))
	var next int64
	require.NoError(t, db.Pool.QueryRow(ctx, `SELECT id FROM mneme.jobs WHERE kind = 'cleanup' AND state = 'pending'`).Scan(&next))
	require.Contains(t, logged.String(), fmt.Sprintf("next_job=%d", next), "the next job's id, not a pointer")

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

// After an erase the cleanup job vacuums the tables the erase touched
// (dead row versions keep the erased text until then) when its role may;
// a mneme_worker login may not (it owns no table), and its job still ends
// done.
func TestCleanupVacuumsAfterErase(t *testing.T) {
	t.Parallel()
	db := dbtest.New(t)
	ctx := context.Background()
	targets := func(q interface {
		Query(context.Context, string, ...any) (pgx.Rows, error)
	}) map[string]bool {
		rows, err := q.Query(ctx, `SELECT table_name, may_vacuum FROM mneme.erase_vacuum_targets()`)
		require.NoError(t, err)
		out := map[string]bool{}
		for rows.Next() {
			var n string
			var may bool
			require.NoError(t, rows.Scan(&n, &may))
			out[n] = may
		}
		require.NoError(t, rows.Err())
		return out
	}
	var id uuid.UUID
	require.NoError(t, db.Pool.QueryRow(ctx, `SELECT mneme.remember(gen_random_uuid(), 'The spare key is under the third flowerpot.')`).Scan(&id))
	_, err := db.Pool.Exec(ctx, `VACUUM mneme.memories`)
	require.NoError(t, err)
	require.Empty(t, targets(db.Pool), "no erase since the last vacuum")
	_, err = db.Pool.Exec(ctx, `SELECT mneme.erase($1, 'user request')`, id)
	require.NoError(t, err)

	worker, _ := db.PoolAs(t, "mneme_worker")
	asWorker := targets(worker)
	require.Contains(t, asWorker, "memories")
	require.False(t, asWorker["memories"], "a mneme_worker login owns no table")
	require.True(t, targets(db.Pool)["memories"], "the owner may")

	// As the worker: the job ends done, nothing vacuumed.
	_, err = lifecycle.Schedule(ctx, worker)
	require.NoError(t, err)
	var logged bytes.Buffer
	r := jobs.NewRunner(worker, jobs.Options{Concurrency: 1, Lease: 5 * time.Second, PollEvery: 50 * time.Millisecond})
	r.Register(jobs.KindCleanup, lifecycle.Handler(slog.New(slog.NewTextHandler(&logged, nil))))
	require.NoError(t, r.Drain(ctx))
	require.Contains(t, targets(db.Pool), "memories", "a worker that may not vacuum leaves it to the operator")
	require.Contains(t, logged.String(), `run_as_table_owner="VACUUM `, "and says what to run")
	var failed int
	require.NoError(t, db.Pool.QueryRow(ctx, `SELECT count(*) FROM mneme.jobs WHERE kind = 'cleanup' AND state <> 'pending' AND state <> 'done'`).Scan(&failed))
	require.Zero(t, failed)

	// As the owner: vacuumed, nothing left to do.
	_, err = db.Pool.Exec(ctx, `UPDATE mneme.jobs SET run_at = now() WHERE kind = 'cleanup' AND state = 'pending'`)
	require.NoError(t, err)
	r = jobs.NewRunner(db.Pool, jobs.Options{Concurrency: 1, Lease: 5 * time.Second, PollEvery: 50 * time.Millisecond})
	r.Register(jobs.KindCleanup, lifecycle.Handler(nil))
	require.NoError(t, r.Drain(ctx))
	require.Eventually(t, func() bool { return len(targets(db.Pool)) == 0 }, 5*time.Second, 100*time.Millisecond,
		"the cleanup job vacuumed every table the erase touched")
}
