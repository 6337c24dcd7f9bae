package events_test

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/mneme-memory/mneme/sidecar/backoff"
	"github.com/mneme-memory/mneme/sidecar/dbtest"
	"github.com/mneme-memory/mneme/sidecar/events"
	"github.com/mneme-memory/mneme/sidecar/jobs"
)

func TestMain(m *testing.M) { dbtest.Main(m) }

const noSweep = time.Hour // so a test passes only if the transport delivered

type sidecar struct {
	runner *jobs.Runner
	cancel context.CancelFunc
	done   chan error
	calls  atomic.Int64
}

func (s *sidecar) stop(t *testing.T) {
	t.Helper()
	s.cancel()
	err := <-s.done
	s.done <- err // for the cleanup
	require.NoError(t, err)
	require.NoError(t, s.runner.Stop(context.Background()))
}

func testLogger(t *testing.T) *slog.Logger {
	if testing.Verbose() {
		return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug})).With("test", t.Name())
	}
	return slog.New(slog.DiscardHandler)
}

func newDB(t *testing.T) *dbtest.DB {
	db := dbtest.New(t, dbtest.WithVector("array"))
	_, err := db.Pool.Exec(context.Background(), `CREATE TABLE effects (job_id bigint NOT NULL, worker text NOT NULL)`)
	require.NoError(t, err)
	return db
}

// slotName is unique per test database: slot names are cluster-global.
func slotName(db *dbtest.DB) string { return "s_" + db.Name }

func start(t *testing.T, db *dbtest.DB, transport, worker string, sweep time.Duration) *sidecar {
	t.Helper()
	log := testLogger(t)
	r := jobs.NewRunner(db.Pool, jobs.Options{
		WorkerID: worker, Concurrency: 4, Lease: 5 * time.Second, PollEvery: sweep,
		Retry: backoff.Policy{Base: 10 * time.Millisecond, Max: 50 * time.Millisecond}, Logger: log,
	})
	s := &sidecar{runner: r, done: make(chan error, 1)}
	r.Register("work", func(ctx context.Context, db jobs.Store, job jobs.Job) error {
		return db.Commit(ctx, func(tx pgx.Tx) error {
			s.calls.Add(1)
			_, err := tx.Exec(ctx, `INSERT INTO effects VALUES ($1, $2)`, job.ID, worker)
			return err
		})
	})
	src, err := events.New(transport, events.Options{
		DSN: db.URL, Pool: db.Pool, Slot: slotName(db), Logger: log,
		StatusEvery: 100 * time.Millisecond,
		Reconnect:   backoff.Policy{Base: 50 * time.Millisecond, Max: 500 * time.Millisecond},
	}, r)
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	s.cancel = cancel
	r.Start(context.Background())
	go func() { s.done <- src.Run(ctx) }()
	t.Cleanup(func() {
		// Wait for the stream to end so the slot is inactive when dbtest
		// drops it (an active slot would keep the database from dropping).
		cancel()
		select {
		case err := <-s.done:
			s.done <- err
		case <-time.After(30 * time.Second):
			t.Log("event source did not stop within 30 s")
		}
		_ = r.Stop(context.Background())
	})
	return s
}

// ready waits until the transport listens (notify) or streams (replication).
func ready(t *testing.T, db *dbtest.DB, transport string) {
	t.Helper()
	q := map[string]string{
		events.Notify: `SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND query = 'LISTEN mneme_jobs'
			AND application_name = '` + events.ListenerName + `'`,
		// Active and held by a walsender: while the slot is being created its
		// creator holds it too.
		events.Replication: fmt.Sprintf(`SELECT count(*) FROM pg_replication_slots s JOIN pg_stat_replication r ON r.pid = s.active_pid
			WHERE s.slot_name = '%s'`, slotName(db)),
	}[transport]
	if q == "" {
		return
	}
	waitCount(t, db, transport+" ready", q, 1)
}

func waitCount(t *testing.T, db *dbtest.DB, what, query string, want int) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	var got int
	for time.Now().Before(deadline) {
		if err := db.Pool.QueryRow(context.Background(), query).Scan(&got); err == nil && got == want {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("%s: got %d, want %d", what, got, want)
}

func enqueue(t *testing.T, db *dbtest.DB, n int) {
	t.Helper()
	_, err := db.Pool.Exec(context.Background(),
		`SELECT mneme.enqueue_job('work', NULL, jsonb_build_object('i', i)) FROM generate_series(1, $1) i`, n)
	require.NoError(t, err)
}

func requireExactlyOnce(t *testing.T, db *dbtest.DB, n int) {
	t.Helper()
	var total, distinct int
	require.NoError(t, db.Pool.QueryRow(context.Background(),
		`SELECT count(*), count(DISTINCT job_id) FROM effects`).Scan(&total, &distinct))
	require.Equal(t, n, distinct, "every job had its effect")
	require.Equal(t, n, total, "no job had its effect twice")
}

func TestEachTransportDeliversAJob(t *testing.T) {
	t.Parallel()
	for _, tr := range []string{events.Replication, events.Notify, events.Poll} {
		t.Run(tr, func(t *testing.T) {
			t.Parallel()
			db := newDB(t)
			sweep := noSweep
			if tr == events.Poll {
				sweep = 100 * time.Millisecond
			}
			s := start(t, db, tr, "w", sweep)
			ready(t, db, tr)
			_, err := db.Pool.Exec(context.Background(), `SELECT mneme.enqueue_job('work', NULL, '{"x":1}')`)
			require.NoError(t, err)
			waitCount(t, db, "done", `SELECT count(*) FROM mneme.jobs WHERE state = 'done'`, 1)
			requireExactlyOnce(t, db, 1)
			s.stop(t)
		})
	}
}

func slotLSN(t *testing.T, db *dbtest.DB) string {
	var lsn string
	err := db.Pool.QueryRow(context.Background(),
		`SELECT confirmed_flush_lsn::text FROM pg_replication_slots WHERE slot_name = $1`, slotName(db)).Scan(&lsn)
	if err != nil {
		var all string
		_ = db.Pool.QueryRow(context.Background(), `SELECT coalesce(string_agg(slot_name || ' ' || coalesce(database,'-') || ' ' || active::text || ' ' || coalesce(active_pid::text, '-'), '; '), 'none') FROM pg_replication_slots`).Scan(&all)
		t.Fatalf("slot %s: %v; slots: %s", slotName(db), err, all)
	}
	return lsn
}

// TestReplicationCatchUp: jobs enqueued while no sidecar runs are delivered
// from the slot when it starts (the sweep is off), each handled once, and
// the slot's confirmed position moves past them. The sidecars connect as
// a login role of mneme_worker with REPLICATION, never a superuser (as
// `make demo` runs it); the superuser pool only checks.
func TestReplicationCatchUp(t *testing.T) {
	t.Parallel()
	db := newDB(t)
	ctx := context.Background()
	_, err := db.Pool.Exec(ctx, `GRANT INSERT ON effects TO mneme_worker`)
	require.NoError(t, err)
	pool, url := db.PoolAs(t, "mneme_worker", "REPLICATION")
	var super bool
	require.NoError(t, pool.QueryRow(ctx, `SELECT rolsuper FROM pg_roles WHERE rolname = current_user`).Scan(&super))
	require.False(t, super)
	worker := &dbtest.DB{Name: db.Name, URL: url, Pool: pool, Variant: db.Variant}

	s := start(t, worker, events.Replication, "w1", noSweep)
	ready(t, db, events.Replication)
	s.stop(t)
	before := slotLSN(t, db)

	enqueue(t, worker, 1000)
	var lsnAfterEnqueue string
	require.NoError(t, db.Pool.QueryRow(ctx, `SELECT pg_current_wal_insert_lsn()::text`).Scan(&lsnAfterEnqueue))

	s = start(t, worker, events.Replication, "w2", noSweep)
	waitCount(t, db, "done", `SELECT count(*) FROM mneme.jobs WHERE state = 'done'`, 1000)
	requireExactlyOnce(t, db, 1000)
	// The slot confirms once the jobs are handled.
	waitCount(t, db, "slot confirmed past the enqueue",
		fmt.Sprintf(`SELECT (confirmed_flush_lsn >= '%s')::int FROM pg_replication_slots WHERE slot_name = '%s'`,
			lsnAfterEnqueue, slotName(db)), 1)
	require.NotEqual(t, before, slotLSN(t, db))
	s.stop(t)
}

// TestReplicationConfirmsOnlyHandled: a job that is still running holds the
// slot's confirmed position back.
func TestReplicationConfirmsOnlyHandled(t *testing.T) {
	t.Parallel()
	db := newDB(t)
	log := testLogger(t)
	release := make(chan struct{})
	r := jobs.NewRunner(db.Pool, jobs.Options{Concurrency: 1, Lease: 5 * time.Second, PollEvery: noSweep, Logger: log})
	r.Register("work", func(ctx context.Context, db jobs.Store, job jobs.Job) error {
		return db.Commit(ctx, func(tx pgx.Tx) error {
			select {
			case <-release:
			case <-ctx.Done():
			}
			return nil
		})
	})
	src, err := events.New(events.Replication, events.Options{DSN: db.URL, Pool: db.Pool, Slot: slotName(db),
		Logger: log, StatusEvery: 50 * time.Millisecond}, r)
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	r.Start(context.Background())
	go func() { done <- src.Run(ctx) }()
	defer func() { cancel(); <-done; _ = r.Stop(context.Background()) }()
	ready(t, db, events.Replication)

	enqueue(t, db, 1)
	// Every position up to here includes the job's commit.
	var afterJob string
	require.NoError(t, db.Pool.QueryRow(context.Background(), `SELECT pg_current_wal_insert_lsn()::text`).Scan(&afterJob))
	waitCount(t, db, "running", `SELECT count(*) FROM mneme.jobs WHERE state = 'running'`, 1)
	time.Sleep(300 * time.Millisecond) // several status updates
	var held bool
	require.NoError(t, db.Pool.QueryRow(context.Background(),
		`SELECT confirmed_flush_lsn < $2::pg_lsn FROM pg_replication_slots WHERE slot_name = $1`,
		slotName(db), afterJob).Scan(&held))
	require.True(t, held, "a running job's transaction is not confirmed")
	close(release)
	waitCount(t, db, "confirmed", fmt.Sprintf(
		`SELECT (confirmed_flush_lsn >= '%s')::int FROM pg_replication_slots WHERE slot_name = '%s'`, afterJob, slotName(db)), 1)
}

// TestTwoSidecarsEachJobOnce: one sidecar follows the slot, one LISTENs;
// 2,000 jobs, each handled exactly once, both do work.
func TestTwoSidecarsEachJobOnce(t *testing.T) {
	t.Parallel()
	db := newDB(t)
	a := start(t, db, events.Replication, "a", time.Second)
	b := start(t, db, events.Notify, "b", time.Second)
	ready(t, db, events.Replication)
	ready(t, db, events.Notify)
	for i := 0; i < 20; i++ {
		enqueue(t, db, 100)
	}
	waitCount(t, db, "done", `SELECT count(*) FROM mneme.jobs WHERE state = 'done'`, 2000)
	requireExactlyOnce(t, db, 2000)
	require.Positive(t, a.calls.Load())
	require.Positive(t, b.calls.Load())
	require.EqualValues(t, 2000, a.calls.Load()+b.calls.Load())
	a.stop(t)
	b.stop(t)
}

// TestRestartUnderSidecar: PostgreSQL restarts under running sidecars; they
// reconnect (the sweep is off, so the transports must) and lose nothing.
func TestRestartUnderSidecar(t *testing.T) {
	c := dbtest.Cluster(t)
	if c == nil {
		t.Skip("DATABASE_URL points at an external server: cannot restart it")
	}
	for _, tr := range []string{events.Replication, events.Notify} {
		t.Run(tr, func(t *testing.T) {
			db := newDB(t)
			s := start(t, db, tr, "w", noSweep)
			ready(t, db, tr)
			enqueue(t, db, 50)
			waitCount(t, db, "done before restart", `SELECT count(*) FROM mneme.jobs WHERE state = 'done'`, 50)

			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			require.NoError(t, c.Restart(ctx))
			db.Pool.Reset()
			ready(t, db, tr)
			enqueue(t, db, 50)
			waitCount(t, db, "done after restart", `SELECT count(*) FROM mneme.jobs WHERE state = 'done'`, 100)
			requireExactlyOnce(t, db, 100)
			s.stop(t)
		})
	}
}

func TestSlotDrop(t *testing.T) {
	t.Parallel()
	db := newDB(t)
	s := start(t, db, events.Replication, "w", noSweep)
	ready(t, db, events.Replication)
	lag, err := events.Lag(context.Background(), db.Pool, slotName(db))
	require.NoError(t, err)
	require.True(t, lag.Active)
	require.NotEmpty(t, lag.ConfirmedFlushLSN)
	_, err = events.DropSlot(context.Background(), db.Pool, slotName(db))
	require.ErrorIs(t, err, events.ErrSlotActive)
	s.stop(t)
	waitCount(t, db, "slot inactive", fmt.Sprintf(
		`SELECT count(*) FROM pg_replication_slots WHERE slot_name = '%s' AND NOT active`, slotName(db)), 1)
	dropped, err := events.DropSlot(context.Background(), db.Pool, slotName(db))
	require.NoError(t, err)
	require.True(t, dropped)
	dropped, err = events.DropSlot(context.Background(), db.Pool, slotName(db))
	require.NoError(t, err)
	require.False(t, dropped)
	_, err = events.Lag(context.Background(), db.Pool, slotName(db))
	require.ErrorContains(t, err, "no replication slot named")
}

func TestChooseAuto(t *testing.T) {
	t.Parallel()
	db := newDB(t)
	ctx := context.Background()
	tr, why, err := events.Choose(ctx, db.Pool, events.Auto)
	require.NoError(t, err)
	require.Equal(t, events.Replication, tr, why) // the private cluster runs wal_level=logical as superuser

	role := "plain_" + db.Name
	_, err = db.Pool.Exec(ctx, `CREATE ROLE `+role+` LOGIN`)
	require.NoError(t, err)
	t.Cleanup(func() { _, _ = db.Pool.Exec(context.Background(), `DROP ROLE IF EXISTS `+role) })
	cfg, err := pgxpool.ParseConfig(db.URL)
	require.NoError(t, err)
	cfg.ConnConfig.User = role
	plain, err := pgxpool.NewWithConfig(ctx, cfg)
	require.NoError(t, err)
	defer plain.Close()
	tr, why, err = events.Choose(ctx, plain, events.Auto)
	require.NoError(t, err)
	require.Equal(t, events.Notify, tr)
	require.Contains(t, why, "REPLICATION")

	tr, why, err = events.Choose(ctx, plain, events.Poll)
	require.NoError(t, err)
	require.Equal(t, events.Poll, tr)
	require.Contains(t, why, "MNEME_EVENTS")
}

// TestReplicationSlotBusyFallsBackToNotify: a second sidecar configured for
// replication finds the slot in use and still gets events (LISTEN).
func TestReplicationSlotBusyFallsBackToNotify(t *testing.T) {
	t.Parallel()
	db := newDB(t)
	a := start(t, db, events.Replication, "a", noSweep)
	ready(t, db, events.Replication)
	b := start(t, db, events.Replication, "b", noSweep)
	ready(t, db, events.Notify)
	a.stop(t) // only b is left, listening
	enqueue(t, db, 1)
	waitCount(t, db, "done", `SELECT count(*) FROM mneme.jobs WHERE state = 'done'`, 1)
	require.EqualValues(t, 1, b.calls.Load())
	b.stop(t)
}

// A failed job put back by mneme.retry_job is an update, which the
// replication stream does not carry: the transport's companion LISTEN
// delivers it, with no sweep to fall back on.
func TestRetriedJobIsDelivered(t *testing.T) {
	t.Parallel()
	for _, tr := range []string{events.Replication, events.Notify} {
		t.Run(tr, func(t *testing.T) {
			t.Parallel()
			db := newDB(t)
			ctx := context.Background()
			var id int64
			require.NoError(t, db.Pool.QueryRow(ctx, `SELECT mneme.enqueue_job('work', NULL, '{"x":1}')`).Scan(&id))
			_, err := db.Pool.Exec(ctx, `UPDATE mneme.jobs SET state = 'failed', attempts = 5, finished_at = now(),
				last_error = 'gave up' WHERE id = $1`, id)
			require.NoError(t, err)

			s := start(t, db, tr, "w", noSweep)
			ready(t, db, tr)
			listener := events.ListenerName
			if tr == events.Replication {
				listener = events.RequeueListenerName
			}
			waitCount(t, db, "listening", `SELECT count(*) FROM pg_stat_activity
				WHERE datname = current_database() AND query = 'LISTEN mneme_jobs' AND application_name = '`+listener+`'`, 1)
			_, err = db.Pool.Exec(ctx, `SELECT mneme.retry_job($1)`, id)
			require.NoError(t, err)
			waitCount(t, db, "done", `SELECT count(*) FROM mneme.jobs WHERE state = 'done'`, 1)
			requireExactlyOnce(t, db, 1)
			s.stop(t)
		})
	}
}
