package jobs_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/stretchr/testify/require"

	"github.com/mneme-memory/mneme/sidecar/backoff"
	"github.com/mneme-memory/mneme/sidecar/dbtest"
	"github.com/mneme-memory/mneme/sidecar/jobs"
)

func TestMain(m *testing.M) { dbtest.Main(m) }

func newDB(t *testing.T) *dbtest.DB {
	db := dbtest.New(t, dbtest.WithVector("array"))
	_, err := db.Pool.Exec(context.Background(), `CREATE TABLE effects (job_id bigint NOT NULL, worker text NOT NULL)`)
	require.NoError(t, err)
	return db
}

func fastOpts() jobs.Options {
	return jobs.Options{
		Concurrency: 4,
		Lease:       time.Second,
		PollEvery:   50 * time.Millisecond,
		Retry:       backoff.Policy{Base: 10 * time.Millisecond, Max: 20 * time.Millisecond},
	}
}

// effect is a handler that writes one row per run in the job's transaction.
func effect(worker string) jobs.Handler {
	return func(ctx context.Context, db jobs.Store, job jobs.Job) error {
		return db.Commit(ctx, func(tx pgx.Tx) error { return insertEffect(ctx, tx, job, worker) })
	}
}

func insertEffect(ctx context.Context, tx pgx.Tx, job jobs.Job, worker string) error {
	_, err := tx.Exec(ctx, `INSERT INTO effects VALUES ($1, $2)`, job.ID, worker)
	return err
}

func enqueue(t *testing.T, db *dbtest.DB, kind string, n int) {
	t.Helper()
	_, err := db.Pool.Exec(context.Background(),
		`SELECT mneme.enqueue_job($1, NULL, jsonb_build_object('i', i)) FROM generate_series(1, $2) i`, kind, n)
	require.NoError(t, err)
}

func waitFor(t *testing.T, db *dbtest.DB, what string, query string, want int) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	var got int
	for time.Now().Before(deadline) {
		require.NoError(t, db.Pool.QueryRow(context.Background(), query).Scan(&got))
		if got == want {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("%s: got %d, want %d", what, got, want)
}

func states(t *testing.T, db *dbtest.DB) map[string]int {
	t.Helper()
	rows, err := db.Pool.Query(context.Background(), `SELECT state, jobs FROM mneme.job_stats`)
	require.NoError(t, err)
	out := map[string]int{}
	for rows.Next() {
		var s string
		var n int
		require.NoError(t, rows.Scan(&s, &n))
		out[s] += n
	}
	require.NoError(t, rows.Err())
	return out
}

func requireExactlyOnce(t *testing.T, db *dbtest.DB, n int) {
	t.Helper()
	var total, distinct int
	require.NoError(t, db.Pool.QueryRow(context.Background(),
		`SELECT count(*), count(DISTINCT job_id) FROM effects`).Scan(&total, &distinct))
	require.Equal(t, n, distinct, "every job had its effect")
	require.Equal(t, n, total, "no job had its effect twice")
}

func TestDrainRunsEverythingOnce(t *testing.T) {
	t.Parallel()
	db := newDB(t)
	enqueue(t, db, "work", 50)
	r := jobs.NewRunner(db.Pool, fastOpts())
	r.Register("work", func(ctx context.Context, db jobs.Store, job jobs.Job) error {
		return db.Commit(ctx, func(tx pgx.Tx) error {
			if job.ID%10 == 0 { // follow-up work enqueued by a handler is drained too
				if _, err := tx.Exec(ctx, `SELECT mneme.enqueue_job('follow', NULL)`); err != nil {
					return err
				}
			}
			return insertEffect(ctx, tx, job, "w")
		})
	})
	r.Register("follow", effect("w"))
	require.NoError(t, r.Drain(context.Background()))
	requireExactlyOnce(t, db, 55)
	require.Equal(t, map[string]int{"done": 55}, states(t, db))
}

// A handler whose Commit's fn fails (rolled back) may read again and Commit
// again in the same run; a Commit after one that completed the job is
// refused and changes nothing.
func TestCommitAgainOnlyAfterRollback(t *testing.T) {
	t.Parallel()
	db := newDB(t)
	enqueue(t, db, "k", 1)
	errRead := errors.New("read again")
	var second, third error
	r := jobs.NewRunner(db.Pool, fastOpts())
	r.Register("k", func(ctx context.Context, st jobs.Store, job jobs.Job) error {
		err := st.Commit(ctx, func(tx pgx.Tx) error {
			if err := insertEffect(ctx, tx, job, "rolled back"); err != nil {
				return err
			}
			return errRead
		})
		if !errors.Is(err, errRead) {
			return fmt.Errorf("first commit: %v", err)
		}
		second = st.Commit(ctx, func(tx pgx.Tx) error { return insertEffect(ctx, tx, job, "w") })
		third = st.Commit(ctx, func(tx pgx.Tx) error { return insertEffect(ctx, tx, job, "again") })
		return nil
	})
	require.NoError(t, r.Drain(context.Background()))
	require.NoError(t, second)
	require.ErrorContains(t, third, "already committed")
	requireExactlyOnce(t, db, 1)
	var worker string
	require.NoError(t, db.Pool.QueryRow(context.Background(), `SELECT worker FROM effects`).Scan(&worker))
	require.Equal(t, "w", worker)
	require.Equal(t, map[string]int{"done": 1}, states(t, db))
}

func TestRunnerRetriesThenFails(t *testing.T) {
	t.Parallel()
	db := newDB(t)
	var id int64
	require.NoError(t, db.Pool.QueryRow(context.Background(), `SELECT mneme.enqueue_job('flaky', NULL)`).Scan(&id))
	_, err := db.Pool.Exec(context.Background(), `UPDATE mneme.jobs SET max_attempts = 3 WHERE id = $1`, id)
	require.NoError(t, err)
	var calls atomic.Int32
	var wrongAttempts atomic.Bool
	r := jobs.NewRunner(db.Pool, fastOpts())
	r.Register("flaky", func(ctx context.Context, db jobs.Store, job jobs.Job) error {
		return db.Commit(ctx, func(tx pgx.Tx) error {
			n := calls.Add(1)
			if int(n) != job.Attempts {
				wrongAttempts.Store(true)
			}
			if _, err := tx.Exec(ctx, `INSERT INTO effects VALUES ($1, 'x')`, job.ID); err != nil {
				return err
			}
			return fmt.Errorf("upstream said no (call %d)", n)
		})
	})
	r.Start(context.Background())
	defer r.Stop(context.Background())
	waitFor(t, db, "failed jobs", `SELECT count(*) FROM mneme.jobs WHERE state = 'failed'`, 1)
	require.EqualValues(t, 3, calls.Load())
	require.False(t, wrongAttempts.Load(), "Job.Attempts counts this attempt")
	var attempts int
	var lastErr string
	require.NoError(t, db.Pool.QueryRow(context.Background(),
		`SELECT attempts, last_error FROM mneme.jobs WHERE id = $1`, id).Scan(&attempts, &lastErr))
	require.Equal(t, 3, attempts)
	require.Equal(t, "upstream said no (call 3)", lastErr)
	requireExactlyOnce(t, db, 0) // a failed attempt's writes are rolled back
}

func TestRunnerPermanentErrorFailsAtOnce(t *testing.T) {
	t.Parallel()
	db := newDB(t)
	enqueue(t, db, "bad", 1)
	var calls atomic.Int32
	r := jobs.NewRunner(db.Pool, fastOpts())
	r.Register("bad", func(context.Context, jobs.Store, jobs.Job) error {
		calls.Add(1)
		return fmt.Errorf("payload has no text: %w", jobs.ErrPermanent)
	})
	require.NoError(t, r.Drain(context.Background()))
	require.EqualValues(t, 1, calls.Load())
	var lastErr string
	require.NoError(t, db.Pool.QueryRow(context.Background(),
		`SELECT last_error FROM mneme.jobs WHERE state = 'failed'`).Scan(&lastErr))
	require.Contains(t, lastErr, "payload has no text")
}

func TestRunnerUnknownKindFailsClearly(t *testing.T) {
	t.Parallel()
	db := newDB(t)
	enqueue(t, db, "mystery", 1)
	r := jobs.NewRunner(db.Pool, fastOpts())
	r.Register("work", effect("w"))
	require.NoError(t, r.Drain(context.Background()))
	var state, lastErr string
	var attempts int
	require.NoError(t, db.Pool.QueryRow(context.Background(),
		`SELECT state, attempts, last_error FROM mneme.jobs`).Scan(&state, &attempts, &lastErr))
	require.Equal(t, "failed", state)
	require.Equal(t, 1, attempts)
	require.Contains(t, lastErr, `no handler for job kind "mystery"`)
	require.Contains(t, lastErr, "it handles: work")
}

func TestRunnerPanicIsRetried(t *testing.T) {
	t.Parallel()
	db := newDB(t)
	enqueue(t, db, "p", 1)
	var calls atomic.Int32
	r := jobs.NewRunner(db.Pool, fastOpts())
	r.Register("p", func(ctx context.Context, db jobs.Store, job jobs.Job) error {
		return db.Commit(ctx, func(tx pgx.Tx) error {
			if calls.Add(1) == 1 {
				panic("boom")
			}
			return insertEffect(ctx, tx, job, "w")
		})
	})
	r.Start(context.Background())
	defer r.Stop(context.Background())
	waitFor(t, db, "done", `SELECT count(*) FROM mneme.jobs WHERE state = 'done'`, 1)
	requireExactlyOnce(t, db, 1)
	var lastErr string
	require.NoError(t, db.Pool.QueryRow(context.Background(), `SELECT last_error FROM mneme.jobs`).Scan(&lastErr))
	require.Contains(t, lastErr, "panicked: boom")
}

// TestRunnerCrashMidJob: a runner dies in the middle of a job (its
// transaction rolls back, its lease stays); a second runner reclaims the job
// after the lease expires and completes it exactly once.
func TestRunnerCrashMidJob(t *testing.T) {
	t.Parallel()
	db := newDB(t)
	enqueue(t, db, "slow", 1)
	started := make(chan struct{})
	first := jobs.NewRunner(db.Pool, fastOpts())
	first.Register("slow", func(ctx context.Context, db jobs.Store, job jobs.Job) error {
		return db.Commit(ctx, func(tx pgx.Tx) error {
			if _, err := tx.Exec(ctx, `INSERT INTO effects VALUES ($1, 'first')`, job.ID); err != nil {
				return err
			}
			close(started)
			<-ctx.Done()
			return ctx.Err()
		})
	})
	first.Start(context.Background())
	waitStarted(t, started)
	first.Abort()
	var state string
	require.NoError(t, db.Pool.QueryRow(context.Background(), `SELECT state FROM mneme.jobs`).Scan(&state))
	require.Equal(t, "running", state, "a crash records nothing; the lease is left to expire")

	second := jobs.NewRunner(db.Pool, fastOpts())
	second.Register("slow", effect("second"))
	second.Start(context.Background())
	defer second.Stop(context.Background())
	waitFor(t, db, "done", `SELECT count(*) FROM mneme.jobs WHERE state = 'done'`, 1)
	requireExactlyOnce(t, db, 1)
	var worker string
	var attempts int
	require.NoError(t, db.Pool.QueryRow(context.Background(),
		`SELECT e.worker, j.attempts FROM effects e JOIN mneme.jobs j ON j.id = e.job_id`).Scan(&worker, &attempts))
	require.Equal(t, "second", worker)
	require.Equal(t, 2, attempts)
}

// TestRunnerStaleRunCommitsNothing: a run that outlives its lease (no
// heartbeat reached the database) and whose job was reclaimed cannot commit.
func TestRunnerStaleRunCommitsNothing(t *testing.T) {
	t.Parallel()
	db := newDB(t)
	enqueue(t, db, "k", 1)
	ctx := context.Background()
	// Claim by hand as a worker that then stalls past its lease.
	var id int64
	require.NoError(t, db.Pool.QueryRow(ctx, `SELECT id FROM mneme.claim_jobs('stale', 1, '10 ms')`).Scan(&id))
	time.Sleep(50 * time.Millisecond)
	r := jobs.NewRunner(db.Pool, fastOpts())
	r.Register("k", effect("fresh"))
	require.NoError(t, r.Drain(ctx))
	var ok bool
	require.NoError(t, db.Pool.QueryRow(ctx, `SELECT mneme.complete_job($1, 'stale', 1)`, id).Scan(&ok))
	require.False(t, ok, "the stale run lost its lease")
	var failState *string
	require.NoError(t, db.Pool.QueryRow(ctx, `SELECT mneme.fail_job($1, 'stale', 1, 'late', '1s')`, id).Scan(&failState))
	require.Nil(t, failState)
	requireExactlyOnce(t, db, 1)
}

func TestRunnerGracefulStopReleases(t *testing.T) {
	t.Parallel()
	db := newDB(t)
	enqueue(t, db, "hang", 1)
	started := make(chan struct{})
	r := jobs.NewRunner(db.Pool, fastOpts())
	r.Register("hang", func(ctx context.Context, db jobs.Store, job jobs.Job) error {
		return db.Commit(ctx, func(tx pgx.Tx) error {
			close(started)
			<-ctx.Done()
			return ctx.Err()
		})
	})
	r.Start(context.Background())
	waitStarted(t, started)
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	require.NoError(t, r.Stop(ctx))
	require.NoError(t, r.Stop(ctx), "Stop is safe twice")
	var state string
	var attempts int
	var lockedBy *string
	require.NoError(t, db.Pool.QueryRow(context.Background(),
		`SELECT state, attempts, locked_by FROM mneme.jobs`).Scan(&state, &attempts, &lockedBy))
	require.Equal(t, "pending", state)
	require.Equal(t, 0, attempts, "an interrupted run does not count")
	require.Nil(t, lockedBy)
}

func TestRunnerGracefulStopWaitsForInflight(t *testing.T) {
	t.Parallel()
	db := newDB(t)
	enqueue(t, db, "short", 1)
	started := make(chan struct{})
	r := jobs.NewRunner(db.Pool, fastOpts())
	r.Register("short", func(ctx context.Context, db jobs.Store, job jobs.Job) error {
		return db.Commit(ctx, func(tx pgx.Tx) error {
			close(started)
			time.Sleep(200 * time.Millisecond)
			return insertEffect(ctx, tx, job, "w")
		})
	})
	r.Start(context.Background())
	waitStarted(t, started)
	require.NoError(t, r.Stop(context.Background()))
	requireExactlyOnce(t, db, 1)
	require.Equal(t, map[string]int{"done": 1}, states(t, db))
}

// A claim under way when Stop begins still starts what it claims, and
// Stop waits for those runs too: none runs on after Stop returned (on a
// pool its caller then closes; a soak's sidecar logged "release job ...:
// closed pool"). The claim is held up by a lock on the tenant's turn row
// (claim_jobs records the turn after claiming).
func TestRunnerStopWaitsForAClaimUnderWay(t *testing.T) {
	t.Parallel()
	db := newDB(t)
	ctx := context.Background()
	enqueue(t, db, "late", 1)
	_, err := db.Pool.Exec(ctx, `INSERT INTO mneme.job_turns (tenant_id, served_at)
		SELECT DISTINCT tenant_id, now() FROM mneme.jobs ON CONFLICT DO NOTHING`)
	require.NoError(t, err)
	lock, err := db.Pool.Begin(ctx)
	require.NoError(t, err)
	defer func() { _ = lock.Rollback(ctx) }()
	_, err = lock.Exec(ctx, `SELECT 1 FROM mneme.job_turns FOR UPDATE`)
	require.NoError(t, err)

	var finished atomic.Bool
	r := jobs.NewRunner(db.Pool, fastOpts())
	r.Register("late", func(ctx context.Context, db jobs.Store, job jobs.Job) error {
		err := db.Commit(ctx, func(tx pgx.Tx) error { return insertEffect(ctx, tx, job, "w") })
		finished.Store(true)
		return err
	})
	r.Start(ctx)
	waitFor(t, db, "a claim waiting on the turn row", `SELECT count(*) FROM pg_stat_activity
		WHERE datname = current_database() AND wait_event_type = 'Lock' AND query LIKE '%claim_jobs%'`, 1)
	stopped := make(chan struct{})
	go func() { _ = r.Stop(context.Background()); close(stopped) }()
	time.Sleep(300 * time.Millisecond) // Stop is waiting
	select {
	case <-stopped:
		t.Fatal("Stop returned while a claim was under way")
	default:
	}
	require.NoError(t, lock.Rollback(ctx))
	select {
	case <-stopped:
	case <-time.After(30 * time.Second):
		t.Fatal("Stop did not return")
	}
	require.True(t, finished.Load(), "the claimed job ran before Stop returned")
	requireExactlyOnce(t, db, 1)
	require.Equal(t, map[string]int{"done": 1}, states(t, db))
}

func TestTwoRunnersEachJobOnce(t *testing.T) {
	t.Parallel()
	db := newDB(t)
	const n = 2000
	var wg sync.WaitGroup
	runners := make([]*jobs.Runner, 2)
	for i := range runners {
		o := fastOpts()
		o.WorkerID = fmt.Sprintf("r%d", i)
		runners[i] = jobs.NewRunner(db.Pool, o)
		runners[i].Register("work", effect(o.WorkerID))
		runners[i].Start(context.Background())
	}
	wg.Add(1)
	go func() { defer wg.Done(); enqueue(t, db, "work", n) }()
	wg.Wait()
	for _, r := range runners {
		r.Wake()
	}
	waitFor(t, db, "done", `SELECT count(*) FROM mneme.jobs WHERE state = 'done'`, n)
	for _, r := range runners {
		require.NoError(t, r.Stop(context.Background()))
	}
	requireExactlyOnce(t, db, n)
	var workers int
	require.NoError(t, db.Pool.QueryRow(context.Background(), `SELECT count(DISTINCT worker) FROM effects`).Scan(&workers))
	require.Equal(t, 2, workers, "both runners took work")
}

func TestRetryJob(t *testing.T) {
	t.Parallel()
	db := newDB(t)
	ctx := context.Background()
	enqueue(t, db, "once", 1)
	var fail atomic.Bool
	fail.Store(true)
	r := jobs.NewRunner(db.Pool, fastOpts())
	r.Register("once", func(ctx context.Context, db jobs.Store, job jobs.Job) error {
		return db.Commit(ctx, func(tx pgx.Tx) error {
			if fail.Load() {
				return fmt.Errorf("not yet: %w", jobs.ErrPermanent)
			}
			return insertEffect(ctx, tx, job, "w")
		})
	})
	require.NoError(t, r.Drain(ctx))
	var id int64
	require.NoError(t, db.Pool.QueryRow(ctx, `SELECT id FROM mneme.jobs WHERE state = 'failed'`).Scan(&id))

	_, err := db.Pool.Exec(ctx, `SELECT mneme.retry_job($1)`, id)
	require.NoError(t, err)
	fail.Store(false)
	require.NoError(t, r.Drain(ctx))
	requireExactlyOnce(t, db, 1)

	_, err = db.Pool.Exec(ctx, `SELECT mneme.retry_job($1)`, id)
	var pgErr *pgconn.PgError
	require.True(t, errors.As(err, &pgErr))
	require.Equal(t, "55000", pgErr.Code)
	require.Contains(t, pgErr.Message, "is done, only a failed job can be retried")

	_, err = db.Pool.Exec(ctx, `SELECT mneme.retry_job(999999)`)
	require.True(t, errors.As(err, &pgErr))
	require.Equal(t, "P0002", pgErr.Code)
}

func TestRetryMergesIntoPendingSegmentJob(t *testing.T) {
	t.Parallel()
	db := newDB(t)
	ctx := context.Background()
	conv := "7d0a4c3e-6c1e-4c36-9d0e-3f1a2b3c4d5e"
	// a queued message: enqueue_job refuses a segment job with nothing to segment
	_, err := db.Pool.Exec(ctx, `SELECT mneme.add_message($1, 'user', 'a message to segment')`, conv)
	require.NoError(t, err)
	var first int64
	require.NoError(t, db.Pool.QueryRow(ctx, `SELECT mneme.enqueue_job('segment', $1, '{"check": true}')`, conv).Scan(&first))
	require.NoError(t, db.Pool.QueryRow(ctx, `SELECT id FROM mneme.claim_jobs('w', 1, '1 min')`).Scan(&first))
	// While it runs, a new message enqueues the next segment job.
	var second int64
	require.NoError(t, db.Pool.QueryRow(ctx, `SELECT mneme.enqueue_job('segment', $1, '{"check": true}')`, conv).Scan(&second))
	require.NotEqual(t, first, second)
	var state string
	require.NoError(t, db.Pool.QueryRow(ctx, `SELECT mneme.fail_job($1, 'w', 1, 'llm down', '1s')`, first).Scan(&state))
	require.Equal(t, "done", state, "the pending job does the work; no unique violation")
	var lastErr string
	require.NoError(t, db.Pool.QueryRow(ctx, `SELECT last_error FROM mneme.jobs WHERE id = $1`, first).Scan(&lastErr))
	require.Contains(t, lastErr, fmt.Sprintf("equivalent pending job %d", second))
}

func TestJobStatsView(t *testing.T) {
	t.Parallel()
	db := newDB(t)
	enqueue(t, db, "a", 3)
	enqueue(t, db, "b", 2)
	r := jobs.NewRunner(db.Pool, fastOpts())
	r.Register("a", effect("w"))
	r.Register("b", func(context.Context, jobs.Store, jobs.Job) error { return jobs.ErrPermanent })
	require.NoError(t, r.Drain(context.Background()))
	rows, err := db.Pool.Query(context.Background(), `SELECT kind, state, jobs FROM mneme.job_stats ORDER BY 1, 2`)
	require.NoError(t, err)
	var got []string
	for rows.Next() {
		var k, s string
		var n int
		require.NoError(t, rows.Scan(&k, &s, &n))
		got = append(got, fmt.Sprintf("%s/%s=%d", k, s, n))
	}
	require.NoError(t, rows.Err())
	require.Equal(t, []string{"a/done=3", "b/failed=2"}, got)
}

func waitStarted(t *testing.T, started chan struct{}) {
	t.Helper()
	select {
	case <-started:
	case <-time.After(30 * time.Second):
		t.Fatal("handler never started")
	}
}

func TestRunnerMaxAttemptsOverride(t *testing.T) {
	t.Parallel()
	db := newDB(t)
	enqueue(t, db, "flaky", 1) // max_attempts column: 5
	var calls atomic.Int32
	o := fastOpts()
	o.MaxAttempts = 2
	r := jobs.NewRunner(db.Pool, o)
	r.Register("flaky", func(context.Context, jobs.Store, jobs.Job) error {
		calls.Add(1)
		return errors.New("nope")
	})
	r.Start(context.Background())
	defer r.Stop(context.Background())
	waitFor(t, db, "failed", `SELECT count(*) FROM mneme.jobs WHERE state = 'failed'`, 1)
	require.EqualValues(t, 2, calls.Load())
}

// TestRunnerCrashOnLastAttemptFails: a job whose worker died on its last
// allowed attempt is failed with a clear error instead of handed out again.
func TestRunnerCrashOnLastAttemptFails(t *testing.T) {
	t.Parallel()
	db := newDB(t)
	ctx := context.Background()
	enqueue(t, db, "k", 1)
	_, err := db.Pool.Exec(ctx, `UPDATE mneme.jobs SET max_attempts = 1`)
	require.NoError(t, err)
	var id int64
	require.NoError(t, db.Pool.QueryRow(ctx, `SELECT id FROM mneme.claim_jobs('dead', 1, '10 ms')`).Scan(&id))
	time.Sleep(50 * time.Millisecond)
	r := jobs.NewRunner(db.Pool, fastOpts())
	r.Register("k", effect("w"))
	require.NoError(t, r.Drain(ctx))
	var state, lastErr string
	require.NoError(t, db.Pool.QueryRow(ctx, `SELECT state, last_error FROM mneme.jobs WHERE id = $1`, id).Scan(&state, &lastErr))
	require.Equal(t, "failed", state)
	require.Contains(t, lastErr, "lease expired on attempt 1 of 1 (worker dead crashed or timed out)")
	requireExactlyOnce(t, db, 0)
}

func TestJobFunctionsRejectBadInput(t *testing.T) {
	t.Parallel()
	db := newDB(t)
	for _, q := range []string{
		`SELECT * FROM mneme.claim_jobs('', 1, '1 s')`,
		`SELECT * FROM mneme.claim_jobs('w', 0, '1 s')`,
		`SELECT * FROM mneme.claim_jobs('w', 1, '0 s')`,
		`SELECT * FROM mneme.claim_jobs('w', 1, '1 s', 0)`,
		`SELECT mneme.fail_job(1, 'w', 1, 'e', '-1 s')`,
	} {
		_, err := db.Pool.Exec(context.Background(), q)
		var pgErr *pgconn.PgError
		require.True(t, errors.As(err, &pgErr), q)
		require.Equal(t, "22023", pgErr.Code, q)
	}
	_, err := db.Pool.Exec(context.Background(), `SELECT mneme.retry_job(NULL)`)
	var pgErr *pgconn.PgError
	require.True(t, errors.As(err, &pgErr))
	require.Equal(t, "22004", pgErr.Code)
}

// TestRunnerUnstorableErrorStillFails: a handler's error that PostgreSQL
// cannot store as it is (a NUL byte, invalid UTF-8: an error quoting a
// message or model output) still ends the job failed with that error,
// instead of leaving it running until its lease expires.
func TestRunnerUnstorableErrorStillFails(t *testing.T) {
	t.Parallel()
	db := newDB(t)
	enqueue(t, db, "bad", 1)
	r := jobs.NewRunner(db.Pool, fastOpts())
	r.Register("bad", func(context.Context, jobs.Store, jobs.Job) error {
		return fmt.Errorf("model said \x00 and \xff\xfe: %w", jobs.ErrPermanent)
	})
	require.NoError(t, r.Drain(context.Background()))
	var state, lastErr string
	require.NoError(t, db.Pool.QueryRow(context.Background(),
		`SELECT state, coalesce(last_error, '') FROM mneme.jobs`).Scan(&state, &lastErr))
	require.Equal(t, "failed", state)
	require.Contains(t, lastErr, `model said \0 and`)
}
