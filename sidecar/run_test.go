package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"
	openai "github.com/sashabaranov/go-openai"
	"github.com/stretchr/testify/require"

	"github.com/mneme-memory/mneme/sidecar/config"
	"github.com/mneme-memory/mneme/sidecar/daemon"
	"github.com/mneme-memory/mneme/sidecar/dbtest"
	"github.com/mneme-memory/mneme/sidecar/llm/llmtest"
	"github.com/mneme-memory/mneme/sidecar/version"
)

func TestMain(m *testing.M) {
	// TestRunSIGTERM re-executes this binary as the real `mneme`.
	if os.Getenv("MNEME_TEST_AS_MAIN") == "1" {
		main()
		os.Exit(0)
	}
	dbtest.Main(m)
}

func freeAddr(t *testing.T) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer ln.Close()
	return ln.Addr().String()
}

func get(t *testing.T, url string) (int, string) {
	resp, err := http.Get(url)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, string(b)
}

// TestServe runs the daemon as `mneme run` does: a job enqueued by SQL is
// done by the noop handler, /healthz and /metrics answer, and cancelling
// the context (SIGINT) shuts it down cleanly.
func TestServe(t *testing.T) {
	db := dbtest.New(t, dbtest.WithVector("array"))
	cfg := config.Config{DatabaseURL: db.URL, Events: "notify", Concurrency: 2, PollEvery: time.Hour,
		MetricsAddr: freeAddr(t), SlotName: "unused"}
	log := slog.New(slog.DiscardHandler)
	d, err := daemon.New(context.Background(), cfg, db.Pool, log)
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- d.Serve(ctx) }()

	base := "http://" + cfg.MetricsAddr
	require.Eventually(t, func() bool {
		resp, err := http.Get(base + "/healthz")
		if err == nil {
			resp.Body.Close()
		}
		return err == nil && resp.StatusCode == 200
	}, 30*time.Second, 20*time.Millisecond)
	code, body := get(t, base+"/healthz")
	require.Equal(t, 200, code)
	require.Contains(t, body, "transport=notify")

	// Wait for the LISTEN, then enqueue: only the notification can wake it.
	require.Eventually(t, func() bool {
		var n int
		_ = db.Pool.QueryRow(context.Background(),
			`SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND query = 'LISTEN mneme_jobs'`).Scan(&n)
		return n == 1
	}, 30*time.Second, 20*time.Millisecond)
	_, err = db.Pool.Exec(context.Background(), `SELECT mneme.enqueue_job('noop', NULL)`)
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		var n int
		_ = db.Pool.QueryRow(context.Background(), `SELECT count(*) FROM mneme.jobs WHERE kind = 'noop' AND state = 'done'`).Scan(&n)
		return n == 1
	}, 30*time.Second, 20*time.Millisecond)

	code, body = get(t, base+"/metrics")
	require.Equal(t, 200, code)
	for _, want := range []string{
		`mneme_jobs_claimed_total{kind="noop"} 1`,
		`mneme_jobs_done_total{kind="noop"} 1`,
		`mneme_job_claim_wait_seconds_count{kind="noop"} 1`,
		`mneme_jobs{kind="noop",state="done"} 1`,
		// (client_golang writes the labels in name order)
		fmt.Sprintf(`mneme_build_info{database_sql_api="%s",sql_api="%s",version="%s"} 1`, version.SQLAPI(), version.SQLAPI(), version.Binary()),
	} {
		require.Contains(t, body, want)
	}
	cancel()
	select {
	case err := <-done:
		require.NoError(t, err)
	case <-time.After(30 * time.Second):
		t.Fatal("serve did not shut down")
	}
}

// TestRunDrain is `mneme run --drain`: every ready job is processed, an
// unknown kind fails with a clear error, and the command returns.
func TestRunDrain(t *testing.T) {
	db := dbtest.New(t, dbtest.WithVector("array"))
	t.Setenv("DATABASE_URL", db.URL)
	t.Setenv("MNEME_METRICS_ADDR", "off")
	ctx := context.Background()
	_, err := db.Pool.Exec(ctx, `SELECT mneme.enqueue_job('noop', NULL) FROM generate_series(1, 3)`)
	require.NoError(t, err)
	_, err = db.Pool.Exec(ctx, `SELECT mneme.enqueue_job('nobody_handles_this', NULL)`)
	require.NoError(t, err)
	require.NoError(t, cmdRun(ctx, slog.New(slog.DiscardHandler), []string{"--drain"}))
	var done, failed int
	var lastErr string
	require.NoError(t, db.Pool.QueryRow(ctx, `
		SELECT count(*) FILTER (WHERE state = 'done'), count(*) FILTER (WHERE state = 'failed'),
		       coalesce(max(last_error), '')
		  FROM mneme.jobs`).Scan(&done, &failed, &lastErr))
	require.Equal(t, 3, done)
	require.Equal(t, 1, failed)
	require.True(t, strings.Contains(lastErr, `no handler for job kind "nobody_handles_this"`), lastErr)
}

func TestRunRejectsHalfSetConfig(t *testing.T) {
	t.Setenv("DATABASE_URL", "postgres://u@127.0.0.1:1/db")
	t.Setenv("MNEME_LLM_MODEL", "llama3.1")
	err := cmdRun(context.Background(), slog.New(slog.DiscardHandler), nil)
	require.ErrorIs(t, err, config.ErrInvalid)
	require.ErrorContains(t, err, "MNEME_LLM_BASE_URL is not")
}

// TestRunSIGTERM runs `mneme run` as a process: it does a job enqueued by
// SQL and exits 0 after SIGTERM, having stopped its runner.
func TestRunSIGTERM(t *testing.T) {
	db := dbtest.New(t, dbtest.WithVector("array"))
	cmd := exec.Command(os.Args[0], "run")
	cmd.Env = append(os.Environ(), "MNEME_TEST_AS_MAIN=1", "DATABASE_URL="+db.URL,
		"MNEME_EVENTS=notify", "MNEME_METRICS_ADDR=off", "MNEME_POLL_INTERVAL=200ms",
		"MNEME_JOB_LEASE=9s", "MNEME_SHUTDOWN_TIMEOUT=7s")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	require.NoError(t, cmd.Start())
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() { _ = cmd.Process.Kill() })

	_, err := db.Pool.Exec(context.Background(), `SELECT mneme.enqueue_job('noop', NULL)`)
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		var n int
		_ = db.Pool.QueryRow(context.Background(), `SELECT count(*) FROM mneme.jobs WHERE kind = 'noop' AND state = 'done'`).Scan(&n)
		return n == 1
	}, 60*time.Second, 50*time.Millisecond)

	require.NoError(t, cmd.Process.Signal(syscall.SIGTERM))
	select {
	case err := <-exited:
		require.NoError(t, err, stderr.String())
	case <-time.After(60 * time.Second):
		t.Fatalf("mneme run did not exit after SIGTERM:\n%s", stderr.String())
	}
	require.Contains(t, stderr.String(), "lease=9s", "MNEME_JOB_LEASE reaches the runner")
	require.Contains(t, stderr.String(), "shutdown_timeout=7s", "MNEME_SHUTDOWN_TIMEOUT reaches the runner")
	require.Contains(t, stderr.String(), "shutting down")
	require.Contains(t, stderr.String(), "job runner stopped")
}

// TestRunShutdownTimeout: on SIGTERM, `mneme run` waits for an in-flight
// job only MNEME_SHUTDOWN_TIMEOUT (here 1 s, while the LLM it waits on takes
// a minute), then releases the job for another worker and exits.
func TestRunShutdownTimeout(t *testing.T) {
	db := dbtest.New(t, dbtest.WithVector("array"))
	srv := llmtest.New(t)
	srv.Default(func(openai.ChatCompletionRequest) llmtest.Reply {
		return llmtest.Reply{Content: `{"action":"skip","summary":"","surprise":0,"label":"general","pinned":false}`, Delay: time.Minute}
	})
	cmd := exec.Command(os.Args[0], "run")
	cmd.Env = append(os.Environ(), "MNEME_TEST_AS_MAIN=1", "DATABASE_URL="+db.URL,
		"MNEME_EVENTS=notify", "MNEME_METRICS_ADDR=off", "MNEME_POLL_INTERVAL=200ms",
		"MNEME_SHUTDOWN_TIMEOUT=1s", "MNEME_LLM_TIMEOUT=5m",
		"MNEME_LLM_BASE_URL="+srv.URL(), "MNEME_LLM_MODEL=fake", "MNEME_LLM_API_KEY=k")
	// The messages first: with the sidecar already claiming, a message
	// that arrives after the first check job was claimed enqueues a second
	// one, and two jobs would wait on the LLM at once.
	ctx := context.Background()
	conv := uuid.New()
	for i := range 6 {
		_, err := db.Pool.Exec(ctx, `SELECT mneme.add_message($1, 'user', $2, $3)`, conv,
			fmt.Sprintf("message number %d about the garden", i), time.Date(2026, 3, 1, 8, i, 0, 0, time.UTC))
		require.NoError(t, err)
	}
	var stderr syncBuffer
	cmd.Stderr = &stderr
	require.NoError(t, cmd.Start())
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() { _ = cmd.Process.Kill() })

	var running int
	for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		_ = db.Pool.QueryRow(ctx, `SELECT count(*) FROM mneme.jobs WHERE kind = 'segment' AND state = 'running'`).Scan(&running)
		if running == 1 && len(srv.Requests()) == 1 {
			break
		}
		if time.Now().After(deadline) {
			var jobs string
			_ = db.Pool.QueryRow(ctx, `SELECT coalesce(string_agg(kind || ' ' || state || ' ' || attempts, ', ' ORDER BY id), 'none')
				FROM mneme.jobs`).Scan(&jobs)
			t.Fatalf("the segment job never waited on the LLM alone: %d running, %d LLM requests, jobs: %s\nmneme run:\n%s",
				running, len(srv.Requests()), jobs, stderr.String())
		}
	}

	stopAt := time.Now()
	require.NoError(t, cmd.Process.Signal(syscall.SIGTERM))
	select {
	case err := <-exited:
		require.NoError(t, err, stderr.String())
	case <-time.After(60 * time.Second):
		t.Fatalf("mneme run did not exit after SIGTERM:\n%s", stderr.String())
	}
	require.Less(t, time.Since(stopAt), 20*time.Second, "exits after the 1 s shutdown timeout, not a fixed 30 s")
	require.Contains(t, stderr.String(), "shutdown deadline reached: released in-flight jobs")
	var state string
	var attempts int
	require.NoError(t, db.Pool.QueryRow(ctx, `SELECT state, attempts FROM mneme.jobs WHERE kind = 'segment'`).Scan(&state, &attempts))
	require.Equal(t, "pending", state, "released for another worker")
	require.Zero(t, attempts, "a released attempt does not count")
}

// An inactive replication slot that nothing streams from is named at start
// (it keeps WAL until the disk fills) and exported as a gauge.
func TestServeWarnsAbandonedSlot(t *testing.T) {
	db := dbtest.New(t, dbtest.WithVector("array"))
	ctx := context.Background()
	slot := "abandoned_" + strings.ReplaceAll(uuid.NewString()[:8], "-", "")
	_, err := db.Pool.Exec(ctx, `SELECT pg_create_logical_replication_slot($1, 'pgoutput')`, slot)
	require.NoError(t, err)
	t.Cleanup(func() { _, _ = db.Pool.Exec(context.Background(), `SELECT pg_drop_replication_slot($1)`, slot) })

	cfg := config.Config{DatabaseURL: db.URL, Events: "notify", Concurrency: 1, PollEvery: time.Hour,
		MetricsAddr: freeAddr(t), SlotName: slot}
	var logged syncBuffer
	d, err := daemon.New(ctx, cfg, db.Pool, slog.New(slog.NewTextHandler(&logged, nil)))
	require.NoError(t, err)
	sctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- d.Serve(sctx) }()
	base := "http://" + cfg.MetricsAddr
	require.Eventually(t, func() bool {
		resp, err := http.Get(base + "/metrics")
		if err == nil {
			resp.Body.Close()
		}
		return err == nil && resp.StatusCode == 200
	}, 30*time.Second, 20*time.Millisecond)
	_, body := get(t, base+"/metrics")
	// (client_golang writes labels in name order)
	require.Contains(t, body, `mneme_replication_slot_retained_wal_bytes{active="false",slot="`+slot+`"}`)
	require.Contains(t, logged.String(), "an inactive replication slot keeps WAL")
	require.Contains(t, logged.String(), "mneme slot drop")
	cancel()
	require.NoError(t, <-done)
}

// syncBuffer is a bytes.Buffer safe for the logger's goroutines.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestDaemonChecksSQLAPIVersion: the sidecar starts against a database
// whose SQL API has its major (an older or newer minor too) and refuses
// another major, or a database without mneme.version() (migrated by a
// mneme before 0.10.0), naming both versions and what to run.
func TestDaemonChecksSQLAPIVersion(t *testing.T) {
	db := dbtest.New(t, dbtest.WithVector("array"))
	ctx := context.Background()
	cfg := config.Config{DatabaseURL: db.URL, Events: "notify", Concurrency: 1, PollEvery: time.Hour,
		MetricsAddr: freeAddr(t), SlotName: "unused"}
	speaks := version.SQLAPI()
	major, err := version.Major(speaks)
	require.NoError(t, err)
	setVersion := func(v string) {
		t.Helper()
		_, err := db.Pool.Exec(ctx, fmt.Sprintf(`CREATE OR REPLACE FUNCTION mneme.version() RETURNS text LANGUAGE sql AS $$ SELECT '%s'::text $$`, v))
		require.NoError(t, err)
	}
	for _, ok := range []string{speaks, fmt.Sprintf("%d.99.0", major)} {
		setVersion(ok)
		_, err := daemon.New(ctx, cfg, db.Pool, slog.New(slog.DiscardHandler))
		require.NoError(t, err, "database SQL API %s", ok)
	}
	newer := fmt.Sprintf("%d.0.0", major+1)
	setVersion(newer)
	_, err = daemon.New(ctx, cfg, db.Pool, slog.New(slog.DiscardHandler))
	require.ErrorIs(t, err, version.ErrIncompatible)
	require.ErrorContains(t, err, "the database's SQL API is "+newer+", this mneme "+version.Binary()+" speaks "+speaks)
	require.ErrorContains(t, err, "run that release's sidecar")
	if major > 0 {
		older := fmt.Sprintf("%d.5.0", major-1)
		setVersion(older)
		_, err = daemon.New(ctx, cfg, db.Pool, slog.New(slog.DiscardHandler))
		require.ErrorContains(t, err, "the database's SQL API is "+older)
		require.ErrorContains(t, err, "mneme migrate")
	}
	_, err = db.Pool.Exec(ctx, `DROP FUNCTION mneme.version()`)
	require.NoError(t, err)
	_, err = daemon.New(ctx, cfg, db.Pool, slog.New(slog.DiscardHandler))
	require.ErrorIs(t, err, version.ErrIncompatible)
	require.ErrorContains(t, err, "the database has no mneme.version()")
	require.ErrorContains(t, err, "mneme migrate")
}

// mneme run warns when it connects as a superuser or as the tables' owner,
// and not as a member of mneme_worker.
func TestRunWarnsPrivilegedLogin(t *testing.T) {
	db := dbtest.New(t, dbtest.WithVector("array"))
	ctx := context.Background()
	cfg := config.Config{DatabaseURL: db.URL, Events: "notify", Concurrency: 1, PollEvery: time.Hour,
		MetricsAddr: freeAddr(t), SlotName: "unused"}
	start := func(url string) string {
		t.Helper()
		pool, err := pgxpool.New(ctx, url)
		require.NoError(t, err)
		defer pool.Close()
		var logged bytes.Buffer
		_, err = daemon.New(ctx, cfg, pool, slog.New(slog.NewTextHandler(&logged, nil)))
		require.NoError(t, err)
		return logged.String()
	}
	require.Contains(t, start(db.URL), "the sidecar is connected as a superuser")
	worker := start(db.As(t, "mneme_worker"))
	require.NotContains(t, worker, "superuser")
	require.NotContains(t, worker, "owner")

	// The owner of the tables, not a superuser: a login that migrates.
	owner := db.As(t, "mneme_admin")
	u, err := url.Parse(owner)
	require.NoError(t, err)
	var tableOwner string
	require.NoError(t, db.Pool.QueryRow(ctx, `SELECT relowner::regrole::text FROM pg_class WHERE oid = 'mneme.memories'::regclass`).Scan(&tableOwner))
	_, err = db.Pool.Exec(ctx, fmt.Sprintf(`GRANT %s TO %s`, tableOwner, u.User.Username()))
	require.NoError(t, err)
	require.Contains(t, start(owner), "the sidecar is connected as the owner of mneme's tables")
}
