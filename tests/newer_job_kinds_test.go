package tests

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/mneme-memory/mneme/sidecar/config"
	"github.com/mneme-memory/mneme/sidecar/daemon"
	"github.com/mneme-memory/mneme/sidecar/dbtest"
	"github.com/mneme-memory/mneme/sidecar/jobs"
)

// The upgrade window (issue 53, docs/migrations.md): a migrate of a later
// release adds a job kind this sidecar does not know. The sidecar starts
// all the same, leaves that kind's jobs pending (attempts not counted)
// for the newer sidecars, and keeps serving the kinds it knows; a sidecar
// that was already running when the kind came gives back the first such
// job it claims and leaves the kind from then on. A kind this sidecar
// declares but has no handler for is still refused at start.
func TestOlderSidecarLeavesNewerKinds(t *testing.T) {
	t.Parallel()
	db := dbtest.New(t)
	ctx := context.Background()
	cfg := config.Config{DatabaseURL: db.URL, Events: "poll", Concurrency: 2, PollEvery: time.Hour, SlotName: "unused",
		MaxAttempts: 1, JobLease: 30 * time.Second, ShutdownTimeout: time.Second}
	log := slog.New(slog.NewTextHandler(testWriter{t}, nil))
	// A sidecar already running when the newer kind comes.
	running, err := daemon.New(ctx, cfg, db.Pool, log)
	require.NoError(t, err)
	require.Empty(t, running.Runner.Left())

	// The later release's migrate: a kind of its own in mneme.job_kinds,
	// and its first jobs.
	_, err = db.Pool.Exec(ctx, `INSERT INTO mneme.job_kinds (kind, needs_conversation, payload_rule, payload_hint, description)
		VALUES ('from_a_later_release', false, '$ == $', 'anything', 'a kind of a later release')`)
	require.NoError(t, err)
	state := func(kind string) (states []string) {
		rows, err := db.Pool.Query(ctx, `SELECT format('%s %s', state, attempts) FROM mneme.jobs WHERE kind = $1 ORDER BY id`, kind)
		require.NoError(t, err)
		for rows.Next() {
			var s string
			require.NoError(t, rows.Scan(&s))
			states = append(states, s)
		}
		require.NoError(t, rows.Err())
		return states
	}
	enqueue := func(kind string, n int) {
		for range n {
			_, err := db.Pool.Exec(ctx, `SELECT mneme.enqueue_job($1, NULL)`, kind)
			require.NoError(t, err)
		}
	}
	enqueue("from_a_later_release", 3)
	enqueue(jobs.KindNoop, 2)

	// The running sidecar claims a newer job, gives it back uncounted and
	// leaves the kind; its own kinds are done.
	require.NoError(t, running.Runner.Drain(ctx))
	require.Equal(t, []string{"from_a_later_release"}, running.Runner.Left())
	require.Equal(t, []string{"pending 0", "pending 0", "pending 0"}, state("from_a_later_release"))
	require.Equal(t, []string{"done 1", "done 1"}, state(jobs.KindNoop))

	// A sidecar (re)started now starts (it refused before), leaves the
	// newer kind from the start and serves its own.
	restarted, err := daemon.New(ctx, cfg, db.Pool, log)
	require.NoError(t, err, "a sidecar older than the schema starts")
	require.Equal(t, []string{"from_a_later_release"}, restarted.Runner.Left())
	enqueue(jobs.KindNoop, 2)
	enqueue("from_a_later_release", 1)
	require.NoError(t, restarted.Runner.Drain(ctx))
	require.Equal(t, []string{"done 1", "done 1", "done 1", "done 1"}, state(jobs.KindNoop))
	require.Equal(t, []string{"pending 0", "pending 0", "pending 0", "pending 0"}, state("from_a_later_release"))

	// The newer sidecars, which handle the kind, find its jobs waiting.
	var claimed int
	require.NoError(t, db.Pool.QueryRow(ctx, `SELECT count(*) FROM mneme.claim_jobs('newer', 10, interval '1 minute')`).Scan(&claimed))
	require.Equal(t, 4, claimed)

	// A kind this sidecar declares but has no handler for: refused.
	partial := jobs.NewRunner(db.Pool, jobs.Options{})
	for _, k := range jobs.Kinds {
		if k.Name() != jobs.KindConsolidate {
			partial.Register(k.Name(), func(context.Context, jobs.Store, jobs.Job) error { return nil })
		}
	}
	err = daemon.CheckKinds(ctx, db.Pool, partial)
	require.ErrorContains(t, err, "job kinds [consolidate] of mneme.job_kinds have no handler in this sidecar")

	// claim_jobs' except_kinds: NULL is refused (22004), an empty list
	// leaves nothing out.
	_, err = db.Pool.Exec(ctx, `SELECT count(*) FROM mneme.claim_jobs('w', 1, interval '1 minute', NULL, NULL)`)
	require.Equal(t, "22004", sqlState(t, err))
}
