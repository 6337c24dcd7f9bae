package main

import (
	"context"
	"errors"
	"log/slog"
	"net/url"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/mneme-memory/mneme/sidecar/dbtest"
	"github.com/mneme-memory/mneme/sidecar/events"
)

// `mneme run` with a DATABASE_URL that points at PgBouncer (transaction
// pooling): every transport that needs a session (notify, replication,
// auto) is refused with a clear error before anything is written (no
// cleanup job scheduled), and so is poll in pgx's default mode (named
// prepared statements); poll, which needs no session, runs through the
// pool in pgx's exec mode and does a job. The same URL pointed at PostgreSQL
// itself runs (TestServe).
func TestRunRefusesPgBouncer(t *testing.T) {
	db := dbtest.New(t, dbtest.WithVector("array"))
	worker := db.As(t, "mneme_worker")
	bouncer := dbtest.PgBouncer(t, loginOfURL(t, worker))
	viaPool, err := bouncer.URL(worker)
	require.NoError(t, err)
	t.Setenv("DATABASE_URL", viaPool+"&default_query_exec_mode=exec")
	t.Setenv("MNEME_METRICS_ADDR", "off")
	t.Setenv("MNEME_POLL_INTERVAL", "100ms")
	log := slog.New(slog.DiscardHandler)
	for _, transport := range []string{"notify", "replication", "auto"} {
		t.Run(transport, func(t *testing.T) {
			t.Setenv("MNEME_EVENTS", transport)
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			err := cmdRun(ctx, log, nil)
			require.Error(t, err)
			require.True(t, errors.Is(err, events.ErrPooled), "%v", err)
			require.ErrorContains(t, err, "MNEME_EVENTS="+transport+" needs a session of its own")
			require.ErrorContains(t, err, "point the sidecar's DATABASE_URL at PostgreSQL itself")
			var jobs int
			require.NoError(t, db.Pool.QueryRow(ctx, `SELECT count(*) FROM mneme.jobs`).Scan(&jobs))
			require.Zero(t, jobs, "nothing written before the refusal")
		})
	}
	t.Run("poll with named statements", func(t *testing.T) {
		t.Setenv("MNEME_EVENTS", "poll")
		t.Setenv("DATABASE_URL", viaPool) // pgx's default mode, cache_statement
		err := cmdRun(context.Background(), log, nil)
		require.True(t, errors.Is(err, events.ErrPooled), "%v", err)
		require.ErrorContains(t, err, "add default_query_exec_mode=exec to DATABASE_URL")
		var jobs int
		require.NoError(t, db.Pool.QueryRow(context.Background(), `SELECT count(*) FROM mneme.jobs`).Scan(&jobs))
		require.Zero(t, jobs, "nothing written before the refusal")
	})
	t.Run("poll", func(t *testing.T) {
		t.Setenv("MNEME_EVENTS", "poll")
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		_, err := db.Pool.Exec(ctx, `SELECT mneme.enqueue_job('noop', NULL)`)
		require.NoError(t, err)
		runCtx, stop := context.WithCancel(ctx)
		done := make(chan error, 1)
		go func() { done <- cmdRun(runCtx, log, nil) }()
		require.Eventually(t, func() bool {
			var n int
			_ = db.Pool.QueryRow(ctx, `SELECT count(*) FROM mneme.jobs WHERE kind = 'noop' AND state = 'done'`).Scan(&n)
			return n == 1
		}, 30*time.Second, 50*time.Millisecond)
		stop()
		require.NoError(t, <-done)
	})
}

func loginOfURL(t *testing.T, u string) string {
	t.Helper()
	p, err := url.Parse(u)
	require.NoError(t, err)
	return p.User.Username()
}
