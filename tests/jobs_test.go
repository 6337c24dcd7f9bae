package tests

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	openai "github.com/sashabaranov/go-openai"
	"github.com/stretchr/testify/require"

	"github.com/mneme-memory/mneme/sidecar/dbtest"
	"github.com/mneme-memory/mneme/sidecar/llm/llmtest"
)

// A model call never runs inside an open database transaction: with the
// server killing sessions idle in a transaction for 1 s and an LLM that
// takes 2 s to answer, segment and review jobs still succeed (a handler
// that held its transaction across the call would lose its connection).
func TestJobsSurviveIdleInTransactionTimeout(t *testing.T) {
	t.Parallel()
	e := newPipelineEnv(t, true)
	ctx := context.Background()
	_, err := e.db.Pool.Exec(ctx, fmt.Sprintf(`ALTER DATABASE %s SET idle_in_transaction_session_timeout = '1s'`, e.db.Name))
	require.NoError(t, err)
	e.db.Pool.Reset() // new connections take the database's setting
	var timeout string
	require.NoError(t, e.db.Pool.QueryRow(ctx, `SHOW idle_in_transaction_session_timeout`).Scan(&timeout))
	require.Equal(t, "1s", timeout)

	slow := func(r llmtest.Reply) llmtest.Reply { r.Delay = 2 * time.Second; return r }
	e.srv.Script(
		slow(segmentReply("The user plans a bike ride by the Wannsee on a sunny Saturday in Berlin.", "temporary")),
		slow(segmentReply("The user is learning Rust: ownership, borrowing and the borrow checker.", "project_rust")),
		slow(segmentReply("The user practised Rust move semantics and asked about lifetimes.", "project_rust")),
	)
	e.srv.Default(func(req openai.ChatCompletionRequest) llmtest.Reply { return slow(rateBySummary(req)) })

	e.session(day1, weatherSession)
	e.session(day1.Add(2*time.Hour), rustSession)
	e.drain()
	e.say(day3.Format(time.RFC3339), "user", "I'm back at Rust after two days.")
	e.drain()
	require.Len(t, e.memories(), 2)
	rust := e.memories()[1]
	e.retrieve("rust ownership", rust.ID)
	e.session(day3.Add(time.Minute), rustFollowUp)
	e.say(day4.Format(time.RFC3339), "user", "Today: traits.")
	e.drain()

	require.Zero(t, e.count(`SELECT count(*) FROM mneme.jobs WHERE state <> 'done' OR attempts > 1`),
		"every job done at its first attempt")
	require.Equal(t, 1, e.count(`SELECT count(*) FROM mneme.review_log WHERE memory_id = $1 AND reviewer = 'llm'`, rust.ID))
	require.Len(t, e.memories(), 3)
}

// TestJobQueueLimits: the job queue's text and payload arguments have
// limits that name the argument (a 12.8 kB dedupe key used to fail in the
// index with 54000, a 1 MB worker id was stored); a worker's error is cut,
// never refused; a refused call writes nothing.
func TestJobQueueLimits(t *testing.T) {
	t.Parallel()
	db := dbtest.New(t)
	ctx := context.Background()
	jobsState := func() string {
		var s string
		require.NoError(t, db.Pool.QueryRow(ctx, `SELECT count(*) || '/' || coalesce(md5(string_agg(j::text, ',' ORDER BY id)), '')
			FROM mneme.jobs j`).Scan(&s))
		return s
	}
	conv := uuid.New()
	bigPayload := `{"pad": "` + strings.Repeat("p", 1<<20) + `"}`
	bigReview := `{"reviews": [], "reviewed_at": "2026-01-01T00:00:00Z", "pad": "` + strings.Repeat("p", 2<<20) + `"}`
	for _, c := range []struct {
		q    string
		args []any
		code string
		arg  string
	}{
		{`SELECT mneme.enqueue_job('noop', NULL, '{}', $1)`, []any{incompressible(1, 6400)}, "22001", "dedupe_key"},
		{`SELECT mneme.enqueue_job('noop', NULL, '{}', $1)`, []any{strings.Repeat("d", 257)}, "22001", "dedupe_key"},
		{`SELECT mneme.enqueue_job('noop', NULL, $1::jsonb)`, []any{bigPayload}, "22001", "payload"},
		{`SELECT mneme.enqueue_job('revise', $1, $2::jsonb)`, []any{conv, `{"memory_id": "` + uuid.NewString() + `", "pad": "` + strings.Repeat("p", 1<<20) + `"}`}, "22001", "payload"},
		{`SELECT mneme.enqueue_job($1, NULL)`, []any{strings.Repeat("k", 65)}, "22023", "kind"},
		{`SELECT mneme.enqueue_job('noop', NULL, '{}', NULL, 'infinity')`, nil, "22008", "run_at"},
		{`SELECT count(*) FROM mneme.claim_jobs($1, 10, interval '1 minute')`, []any{strings.Repeat("w", 1<<20)}, "22001", "worker"},
		{`SELECT count(*) FROM mneme.claim_jobs($1, 10, interval '1 minute')`, []any{incompressible(2, 257)}, "22001", "worker"},
		{`SELECT count(*) FROM mneme.claim_jobs('', 10, interval '1 minute')`, nil, "22023", "worker"},
		{`SELECT count(*) FROM mneme.claim_jobs('w', 0, interval '1 minute')`, nil, "22023", "max_jobs"},
		{`SELECT count(*) FROM mneme.claim_jobs('w', 1, interval '-1 minute')`, nil, "22023", "lease"},
		{`SELECT count(*) FROM mneme.claim_jobs('w', 1, interval '1 minute', 0)`, nil, "22023", "max_attempts"},
		{`SELECT mneme.fail_job(1, 'w', 1, 'e', NULL)`, nil, "22023", "retry_in"},
	} {
		// A pending job, so a claim that got through would change it.
		_, err := db.Pool.Exec(ctx, `SELECT mneme.enqueue_job('noop', NULL, '{}', 'the-one-noop')`)
		require.NoError(t, err)
		before := jobsState()
		_, err = db.Pool.Exec(ctx, c.q, c.args...)
		require.Error(t, err, "%.120s", c.q)
		require.Equal(t, c.code, sqlState(t, err), "%.120s: %v", c.q, err)
		require.Contains(t, err.Error(), c.arg, "%.120s: the message names the argument", c.q)
		require.Less(t, len(err.Error()), 400, "%.120s: the error quotes a prefix at most", c.q)
		require.Equal(t, before, jobsState(), "%.120s: nothing written", c.q)
	}

	// At the limits: accepted. A review job carries pending reviews, which
	// may be far over 1 MB: its hand-over never fails on the cap.
	var id int64
	require.NoError(t, db.Pool.QueryRow(ctx, `SELECT mneme.enqueue_job('noop', NULL, '{}', $1)`, incompressible(3, 256)).Scan(&id))
	require.NoError(t, db.Pool.QueryRow(ctx, `SELECT mneme.enqueue_job('review', $1, $2::jsonb)`, conv, bigReview).Scan(&id))

	// A worker's error is always recorded: a 1 MB one is cut to its first
	// 10,000 characters, whether the job is retried or failed for good.
	worker := strings.Repeat("w", 256)
	_, err := db.Pool.Exec(ctx, `UPDATE mneme.jobs SET run_at = now() - interval '1 minute'`)
	require.NoError(t, err)
	var claimed []int64
	rows, err := db.Pool.Query(ctx, `SELECT id FROM mneme.claim_jobs($1, 10, interval '1 minute')`, worker)
	require.NoError(t, err)
	claimed, err = pgx.CollectRows(rows, pgx.RowTo[int64])
	require.NoError(t, err)
	require.Len(t, claimed, 3)
	longErr := "boom " + incompressible(4, 1<<20)
	for i, id := range claimed {
		var state string
		require.NoError(t, db.Pool.QueryRow(ctx, `SELECT mneme.fail_job($1, $2, 1, $3, interval '1 hour', $4)`,
			id, worker, longErr, i == 0).Scan(&state))
		require.Equal(t, map[bool]string{true: "failed", false: "pending"}[i == 0], state)
		var lastErr string
		require.NoError(t, db.Pool.QueryRow(ctx, `SELECT last_error FROM mneme.jobs WHERE id = $1`, id).Scan(&lastErr))
		require.True(t, strings.HasPrefix(lastErr, longErr[:100]), "the error's beginning is kept")
		require.Less(t, len([]rune(lastErr)), 10100)
		require.Contains(t, lastErr, fmt.Sprintf("(%d characters)", len([]rune(longErr))))
	}
}

// TestEnqueueJobKnownKinds: mneme.enqueue_job takes only the kinds the
// sidecar handles, unless the setting mneme.job_kinds lists others (or is
// '*', as the test harness sets it for the job queue's own tests); a
// refused kind writes nothing.
func TestEnqueueJobKnownKinds(t *testing.T) {
	t.Parallel()
	db := dbtest.New(t)
	ctx := context.Background()
	conn, err := db.Pool.Acquire(ctx)
	require.NoError(t, err)
	defer conn.Release()
	_, err = conn.Exec(ctx, `SET mneme.job_kinds = ''`)
	require.NoError(t, err)
	defer func() { _, _ = conn.Exec(ctx, `RESET mneme.job_kinds`) }()
	count := func() int {
		var n int
		require.NoError(t, conn.QueryRow(ctx, `SELECT count(*) FROM mneme.jobs`).Scan(&n))
		return n
	}
	before := count()
	_, err = conn.Exec(ctx, `SELECT mneme.enqueue_job('nobody_handles_this', NULL)`)
	require.Equal(t, "22023", sqlState(t, err))
	require.ErrorContains(t, err, "has no handler")
	var pgErr *pgconn.PgError
	require.ErrorAs(t, err, &pgErr)
	require.Contains(t, pgErr.Hint, "mneme.job_kinds")
	require.Equal(t, before, count(), "nothing written")
	_, err = conn.Exec(ctx, `SELECT mneme.enqueue_job('noop', NULL)`)
	require.NoError(t, err, "a kind the sidecar handles")
	_, err = conn.Exec(ctx, `SET mneme.job_kinds = 'reindex, export'`)
	require.NoError(t, err)
	_, err = conn.Exec(ctx, `SELECT mneme.enqueue_job('export', NULL)`)
	require.NoError(t, err, "a deployment's own kind, listed")
	_, err = conn.Exec(ctx, `SELECT mneme.enqueue_job('import', NULL)`)
	require.Equal(t, "22023", sqlState(t, err))
	require.Equal(t, before+2, count())
}

// TestClaimFairAcrossTenants: a burst of thousands of jobs in tenant ta,
// queued first, does not hold back tb's segmentation: one job at a time,
// tb's is the second claimed; three tenants with queues are served in
// turn; and a claim stays cheap with 10,000 jobs queued. Claims run as the
// sidecar's role, mneme_worker.
func TestClaimFairAcrossTenants(t *testing.T) {
	t.Parallel()
	db := dbtest.New(t)
	ctx := context.Background()
	for _, tn := range []string{"ta", "tb", "tc"} {
		_, err := db.Pool.Exec(ctx, `SELECT mneme.create_tenant($1)`, tn)
		require.NoError(t, err)
	}
	worker, _ := db.PoolAs(t, "mneme_worker")
	burst := func(tenant string, n int) {
		require.NoError(t, inTenant(t, db.Pool, tenant, func(tx pgx.Tx) error {
			_, err := tx.Exec(ctx, `SELECT mneme.enqueue_job('noop', NULL, jsonb_build_object('i', i)) FROM generate_series(1, $1) i`, n)
			return err
		}))
	}
	claim := func(n int) []string {
		rows, err := worker.Query(ctx, `SELECT tenant_id || ':' || kind FROM mneme.claim_jobs('w', $1, interval '1 minute')`, n)
		require.NoError(t, err)
		got, err := pgx.CollectRows(rows, pgx.RowTo[string])
		require.NoError(t, err)
		return got
	}
	burst("ta", 10000)
	time.Sleep(10 * time.Millisecond)
	conv := uuid.New()
	require.NoError(t, inTenant(t, db.Pool, "tb", func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `SELECT mneme.add_message($1, 'user', 'I moved to Lisbon last spring.')`, conv); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, `SELECT mneme.segment_now($1)`, conv)
		return err
	}))

	got := append(claim(1), claim(1)...)
	require.Equal(t, []string{"ta:noop", "tb:segment"}, got, "tb's segmentation waits for one claim of ta's burst, not 10,000")

	// Many at once: every tenant with ready jobs gets one before anyone a second.
	burst("tb", 50)
	burst("tc", 50)
	got = claim(3)
	sort.Strings(got)
	require.Equal(t, []string{"ta:noop", "tb:noop", "tc:noop"}, got)
	// One at a time: in turn, the tenant served longest ago first.
	var order []string
	for range 6 {
		order = append(order, strings.Split(claim(1)[0], ":")[0])
	}
	require.Equal(t, order[:3], order[3:], "a fixed rotation: %v", order)
	sort.Strings(order[:3])
	require.Equal(t, []string{"ta", "tb", "tc"}, order[:3])

	// Cheap with a long queue: one index probe per tenant.
	const claims = 20
	start := time.Now()
	for range claims {
		require.Len(t, claim(10), 10)
	}
	per := time.Since(start) / claims
	t.Logf("claim_jobs of 10 with about 10,000 jobs ready in 3 tenants: %v per claim", per)
	require.Less(t, per, 100*time.Millisecond, "a claim does not scan the queue")
}
