package tests

import (
	"context"
	"fmt"
	"math"
	"math/rand"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/stretchr/testify/require"

	"github.com/mneme-memory/mneme/sidecar/dbtest"
	"github.com/mneme-memory/mneme/sidecar/embed"
)

// One definition of "empty": SQL's mneme._is_blank and the Go embedder's
// embed.IsBlank agree on every character of the Basic Multilingual Plane
// alone and after a letter, so a message add_message accepts never fails
// the embedder as empty.
func TestBlankIsOneDefinition(t *testing.T) {
	t.Parallel()
	db := dbtest.New(t)
	ctx := context.Background()
	var texts []string
	for r := rune(1); r < 0x10000; r++ {
		if r >= 0xD800 && r <= 0xDFFF {
			continue // surrogates are not text
		}
		texts = append(texts, string(r))
	}
	var blanks []bool
	require.NoError(t, db.Pool.QueryRow(ctx, `SELECT array_agg(mneme._is_blank(x) ORDER BY o) FROM unnest($1::text[]) WITH ORDINALITY AS t(x, o)`,
		texts).Scan(&blanks))
	require.Len(t, blanks, len(texts))
	n := 0
	for i, s := range texts {
		require.Equal(t, embed.IsBlank(s), blanks[i], "U+%04X", []rune(s)[0])
		_, err := embed.NewHash(8).EmbedOne(s + " " + s)
		require.Equal(t, blanks[i], err != nil, "U+%04X: the embedder fails exactly on blank text", []rune(s)[0])
		if blanks[i] {
			n++
		}
	}
	require.Greater(t, n, 60, "whitespace, zero-width and control characters")
}

// Long messages (under message_max_chars) make an episode larger than a
// tsvector can hold: the episode is still stored and found.
func TestLongMessagesSegment(t *testing.T) {
	t.Parallel()
	e := newPipelineEnv(t, false)
	ctx := context.Background()
	_, err := e.db.Pool.Exec(ctx, `SELECT mneme.set_setting('segment_max_messages', '8')`)
	require.NoError(t, err)
	words := strings.Fields("alpha bravo charlie delta echo foxtrot golf hotel india juliet kilo lima mike november")
	for i := 0; i < 8; i++ {
		var b strings.Builder
		for b.Len() < 99_000 {
			fmt.Fprintf(&b, "%s%d ", words[b.Len()%len(words)], b.Len())
		}
		e.say(day1.Add(time.Duration(i)*time.Minute).Format(time.RFC3339), "user", b.String())
	}
	e.drain()
	require.Zero(t, e.count(`SELECT count(*) FROM mneme.jobs WHERE state = 'failed'`))
	require.Len(t, e.memories(), 1)
	require.NotEmpty(t, e.search("alpha0", 3))
}

// Writers racing on one conversation (a user message and the agent's reply,
// many times over) all succeed without a time, in arrival order, none lost.
func TestConcurrentAddMessage(t *testing.T) {
	t.Parallel()
	db := dbtest.New(t)
	ctx := context.Background()
	conv := uuid.New()
	const writers, each = 20, 15
	var wg sync.WaitGroup
	errs := make(chan error, writers*each)
	for w := 0; w < writers; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			for i := 0; i < each; i++ {
				// A transaction that starts before it gets the conversation's
				// lock: the case where a default of now() would be earlier.
				tx, err := db.Pool.Begin(ctx)
				if err == nil {
					_, err = tx.Exec(ctx, `SELECT pg_sleep(0.001)`)
				}
				if err == nil {
					_, err = tx.Exec(ctx, `SELECT mneme.add_message($1, 'user', $2)`, conv, fmt.Sprintf("writer %d message %d", w, i))
				}
				if err == nil {
					err = tx.Commit(ctx)
				} else {
					_ = tx.Rollback(ctx)
				}
				if err != nil {
					errs <- err
				}
			}
		}(w)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	var n, ordered int
	require.NoError(t, db.Pool.QueryRow(ctx, `SELECT count(*), count(*) FILTER (WHERE created_at >= prev)
		FROM (SELECT created_at, lag(created_at, 1, '-infinity') OVER (ORDER BY id) AS prev
		      FROM mneme.messages WHERE conversation_id = $1) x`, conv).Scan(&n, &ordered))
	require.Equal(t, writers*each, n, "no message lost")
	require.Equal(t, n, ordered, "times follow arrival (id) order")
}

// A writer's open transaction does not hide the conversation's pending
// segment job from claim_jobs (SKIP LOCKED): enqueue_segment locks the job
// only to change it.
func TestOpenWriterDoesNotHideSegmentJob(t *testing.T) {
	t.Parallel()
	db := dbtest.New(t)
	ctx := context.Background()
	conv := uuid.New()
	at := time.Date(2026, 3, 1, 9, 0, 0, 0, time.UTC)
	for i := 0; i < 5; i++ {
		_, err := db.Pool.Exec(ctx, `SELECT mneme.add_message($1, 'user', 'a message long enough to check', $2)`, conv, at.Add(time.Duration(i)*time.Minute))
		require.NoError(t, err)
	}
	tx, err := db.Pool.Begin(ctx)
	require.NoError(t, err)
	defer tx.Rollback(ctx) //nolint:errcheck
	_, err = tx.Exec(ctx, `SELECT mneme.add_message($1, 'user', 'one more message, not yet committed', $2)`, conv, at.Add(6*time.Minute))
	require.NoError(t, err)
	var claimed int
	require.NoError(t, db.Pool.QueryRow(ctx, `SELECT count(*) FROM mneme.claim_jobs('w', 10, interval '1 minute') WHERE kind = 'segment'`).Scan(&claimed))
	require.Equal(t, 1, claimed, "the pending check is claimable while a writer's transaction is open")
}

// A pending forced cut keeps its boundary; the messages that arrive while
// it waits get their own job when it runs, so a drain leaves nothing queued
// without a job.
func TestMessagesAfterAForcedCutSegment(t *testing.T) {
	t.Parallel()
	e := newPipelineEnv(t, false)
	ctx := context.Background()
	_, err := e.db.Pool.Exec(ctx, `SELECT mneme.set_setting('segment_max_messages', '10')`)
	require.NoError(t, err)
	var cutVersion string
	for i := 0; i < 25; i++ { // a forced cut at 10; 15 more arrive while it is pending
		e.say(day1.Add(time.Duration(i)*time.Minute).Format(time.RFC3339), "user", fmt.Sprintf("the garden plan, step %d: water the tomatoes", i))
		if i == 9 {
			require.NoError(t, e.db.Pool.QueryRow(ctx, `SELECT xmin::text FROM mneme.jobs WHERE kind = 'segment' AND state = 'pending'`).Scan(&cutVersion))
		}
	}
	require.Equal(t, 1, e.count(`SELECT count(*) FROM mneme.jobs WHERE kind = 'segment' AND state = 'pending'`))
	require.Equal(t, 1, e.count(`SELECT count(*) FROM mneme.jobs WHERE kind = 'segment' AND state = 'pending' AND xmin::text = $1`, cutVersion),
		"the pending cut is not rewritten at each later message (its follow-up counts them)")
	e.drain()
	queued := e.count(`SELECT count(*) FROM mneme.messages WHERE conversation_id = $1 AND consumed_at IS NULL`, e.conv)
	require.Less(t, queued, 10, "fewer than segment_max_messages stay queued (the next message checks them)")
	require.Zero(t, e.count(`SELECT count(*) FROM mneme.jobs WHERE state IN ('pending', 'failed')`))
}

// pending_reviews is bounded: past pending_reviews_max, the oldest half go
// to a review job at once; every entry is in the array or in a job, none
// lost, and the review job rates them by the queued messages.
func TestPendingReviewsBounded(t *testing.T) {
	t.Parallel()
	e := newPipelineEnv(t, false)
	ctx := context.Background()
	_, err := e.db.Pool.Exec(ctx, `SELECT mneme.set_setting('pending_reviews_max', '10')`)
	require.NoError(t, err)
	var mem uuid.UUID
	require.NoError(t, e.db.Pool.QueryRow(ctx, `SELECT mneme.remember($1, 'The tomatoes need water every morning')`, e.conv).Scan(&mem))
	e.say(day1.Format(time.RFC3339), "user", "I water the tomatoes every morning before work.")
	for i := 0; i < 25; i++ {
		_, err := e.db.Pool.Exec(ctx, `SELECT count(*) FROM mneme.retrieve($1, $2, 3)`, e.conv, fmt.Sprintf("tomatoes water %d", i))
		require.NoError(t, err)
		require.LessOrEqual(t, e.count(`SELECT coalesce(jsonb_array_length(pending_reviews), 0) FROM mneme.message_queue WHERE id = $1`, e.conv), 10)
	}
	total := e.count(`SELECT coalesce(jsonb_array_length(pending_reviews), 0) FROM mneme.message_queue WHERE id = $1`, e.conv) +
		e.count(`SELECT coalesce(sum(jsonb_array_length(payload -> 'reviews')), 0)::int FROM mneme.jobs WHERE kind = 'review'`)
	require.Equal(t, 25, total, "no entry lost")
	require.Positive(t, e.count(`SELECT count(*) FROM mneme.jobs WHERE kind = 'review'`))
	e.drain()
	require.Zero(t, e.count(`SELECT count(*) FROM mneme.jobs WHERE state = 'failed'`))
	require.Positive(t, e.count(`SELECT count(*) FROM mneme.review_log WHERE memory_id = $1`, mem), "the handed-over entries were reviewed")
}

// NaN, Infinity and mismatched dimensions are errors, never numbers that
// rank first or break later searches; jobs the sidecar could only fail on
// are refused when enqueued.
func TestHostileNumbers(t *testing.T) {
	t.Parallel()
	db := dbtest.New(t)
	ctx := context.Background()
	conv := uuid.New()
	var mem uuid.UUID
	require.NoError(t, db.Pool.QueryRow(ctx, `SELECT mneme.remember($1, 'a memory to review')`, conv).Scan(&mem))
	for _, c := range []struct {
		q    string
		args []any
		code string
	}{
		{`SELECT mneme.retrievability('NaN', now(), now())`, nil, "22023"},
		{`SELECT mneme.retrievability('Infinity', now(), now())`, nil, "22023"},
		{`SELECT mneme.retrievability(3, '-infinity', now())`, nil, "22008"},
		{`SELECT mneme.retrievability(3, now(), 'infinity')`, nil, "22008"},
		{`SELECT mneme.cosine_distance(ARRAY[1, 0]::real[], ARRAY[1, 0, 0]::real[])`, nil, "22023"},
		{`SELECT mneme.apply_review($1, 'good', 'NaN', 5, 'review', now(), 'heuristic', '{}', false, NULL)`, []any{mem}, "22023"},
		{`SELECT mneme.apply_review($1, 'good', 'Infinity', 5, 'review', now(), 'heuristic', '{}', false, NULL)`, []any{mem}, "22023"},
		{`SELECT mneme.apply_review($1, 'good', 10, 'NaN', 'review', now(), 'heuristic', '{}', false, NULL)`, []any{mem}, "22023"},
		{`SELECT mneme.apply_review($1, 'good', 10, 5, 'review', 'infinity', 'heuristic', '{}', false, NULL)`, []any{mem}, "22008"},
		{`SELECT mneme.enqueue_job('noop', NULL, '{}', NULL, 'infinity')`, nil, "22008"},
		{`SELECT mneme.enqueue_job('noop', NULL, '[1]')`, nil, "22023"},
		{`SELECT mneme.enqueue_job('segment', $1, '{"reason": "gap", "check": false}')`, []any{conv}, "22023"},
		{`SELECT mneme.enqueue_job('review', $1, '{"reviews": "all"}')`, []any{conv}, "22023"},
		{`SELECT * FROM mneme.vector_search($1, mneme.hash_embed('x'), 5, '2026-02-01', '2026-01-01')`, []any{conv}, "22023"},
		{`SELECT * FROM mneme.bm25_search($1, 'x', 5, '2026-02-01', '2026-01-01')`, []any{conv}, "22023"},
	} {
		_, err := db.Pool.Exec(ctx, c.q, c.args...)
		require.Error(t, err, c.q)
		require.Equal(t, c.code, sqlState(t, err), "%s: %v", c.q, err)
	}
	var n int
	require.NoError(t, db.Pool.QueryRow(ctx, `SELECT count(*) FROM mneme.search($1, 'memory review', 5)`, conv).Scan(&n))
	require.Equal(t, 1, n, "nothing stored broke the search")
	var s float64
	require.NoError(t, db.Pool.QueryRow(ctx, `SELECT stability FROM mneme.memories WHERE id = $1`, mem).Scan(&s))
	require.False(t, math.IsNaN(s) || math.IsInf(s, 0))
}

// Text arguments have limits, and an error quotes at most a short prefix of
// what it rejects: a 1 MB argument gives a short error.
func TestLongArgumentsShortErrors(t *testing.T) {
	t.Parallel()
	db := dbtest.New(t)
	ctx := context.Background()
	conv := uuid.New()
	var mem uuid.UUID
	require.NoError(t, db.Pool.QueryRow(ctx, `SELECT mneme.remember($1, 'a memory')`, conv).Scan(&mem))
	huge := strings.Repeat("x", 1<<20)
	for _, c := range []struct {
		q    string
		args []any
		code string
	}{
		{`SELECT mneme.add_message($1, $2, 'hello there')`, []any{conv, huge}, "22023"},
		{`SELECT mneme.remember($1, 'fact', $2)`, []any{conv, huge}, "22023"},
		{`SELECT mneme.remember($1, 'fact', title => $2)`, []any{conv, huge}, "22001"},
		{`SELECT mneme.remember($1, 'fact', source_ref => $2)`, []any{conv, huge}, "22001"},
		{`SELECT mneme.forget($1, $2)`, []any{mem, huge}, "22001"},
		{`SELECT mneme.erase($1, $2)`, []any{mem, huge}, "22001"},
		{`SELECT * FROM mneme.search($1, $2, 5)`, []any{conv, huge}, "22001"},
		{`SELECT mneme.enqueue_job($1, NULL)`, []any{huge}, "22023"},
		{`SELECT mneme.set_setting($1, '1')`, []any{huge}, "22023"},
		{`SELECT mneme.set_tenant($1)`, []any{huge}, "22023"},
		{`SELECT mneme.create_tenant($1)`, []any{huge}, "22023"},
		{`SELECT mneme.set_setting('label_weights', jsonb_build_object($1::text, 1))`, []any{huge}, "22023"},
	} {
		_, err := db.Pool.Exec(ctx, c.q, c.args...)
		require.Error(t, err, c.q)
		require.Equal(t, c.code, sqlState(t, err), "%s", c.q)
		require.Less(t, len(err.Error()), 400, "%s: the error quotes a prefix at most", c.q)
	}
}

// TestBatchImportCutsAtEveryGap: messages added faster than the sidecar
// segments (a batch import, a sidecar that was down) are checked against
// the one pending segment job; when that forced cut is done, the follow-up
// cuts at each later gap and then where segment_now asked, so every
// episode stays within one session and nothing stays queued.
func TestBatchImportCutsAtEveryGap(t *testing.T) {
	t.Parallel()
	e := contextConversation(t) // four sessions two days apart, then a farewell, segment_now, drained
	require.Zero(t, e.count(`SELECT count(*) FROM mneme.messages WHERE conversation_id = $1 AND consumed_at IS NULL`, e.conv))
	require.Equal(t, 5, e.count(`SELECT count(*) FROM mneme.memories WHERE conversation_id = $1 AND kind = 'episodic'`, e.conv))
	require.Zero(t, e.count(`SELECT count(*) FROM mneme.memories WHERE conversation_id = $1 AND kind = 'episodic'
		AND source_last_at - source_first_at > interval '1 hour'`, e.conv), "no episode spans a gap")
}

// incompressible returns n characters that TOAST cannot compress (seeded,
// so a failure reproduces): letters and digits from a 1,000-character
// alphabet of two-byte runes.
func incompressible(seed int64, n int) string {
	r := rand.New(rand.NewSource(seed))
	var b strings.Builder
	for i := 0; i < n; i++ {
		b.WriteRune(rune(0x400 + r.Intn(1000)))
	}
	return b.String()
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

// Every SECURITY DEFINER function of the schema sets its search_path, so
// no caller's search_path (a schema of theirs with an operator or function
// of the same name) runs inside it with the owner's rights.
func TestSecurityDefinerSetsSearchPath(t *testing.T) {
	t.Parallel()
	db := dbtest.New(t)
	rows, err := db.Pool.Query(context.Background(), `
		SELECT p.oid::regprocedure::text FROM pg_proc p
		WHERE p.pronamespace = 'mneme'::regnamespace AND p.prosecdef
		  AND NOT EXISTS (SELECT 1 FROM unnest(p.proconfig) c WHERE c LIKE 'search_path=%')
		ORDER BY 1`)
	require.NoError(t, err)
	missing, err := pgx.CollectRows(rows, pgx.RowTo[string])
	require.NoError(t, err)
	require.Empty(t, missing)
	var n int
	require.NoError(t, db.Pool.QueryRow(context.Background(), `SELECT count(*) FROM pg_proc p
		WHERE p.pronamespace = 'mneme'::regnamespace AND p.prosecdef`).Scan(&n))
	require.Greater(t, n, 50, "the API functions are SECURITY DEFINER (sql/900-access.sql)")
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

// TestJobPayloadRules: mneme.enqueue_job checks every job against its row of
// mneme.job_kinds (a conversation when the kind needs one, the payload
// rule), names what the handler reads in the hint, and writes nothing when
// it refuses; a review job without reviewed_at is refused at once instead
// of failing in the sidecar.
func TestJobPayloadRules(t *testing.T) {
	t.Parallel()
	db := dbtest.New(t)
	ctx := context.Background()
	conv := uuid.New()
	_, err := db.Pool.Exec(ctx, `SELECT mneme.add_message($1, 'user', 'hello there')`, conv)
	require.NoError(t, err)
	var kinds []string
	rows, err := db.Pool.Query(ctx, `SELECT kind FROM mneme.job_kinds ORDER BY kind`)
	require.NoError(t, err)
	kinds, err = pgx.CollectRows(rows, pgx.RowTo[string])
	require.NoError(t, err)
	require.Equal(t, []string{"cleanup", "noop", "review", "revise", "segment"}, kinds)

	count := func() int {
		var n int
		require.NoError(t, db.Pool.QueryRow(ctx, `SELECT count(*) FROM mneme.jobs`).Scan(&n))
		return n
	}
	before := count()
	for _, c := range []struct {
		kind    string
		conv    any
		payload string
		hint    string
	}{
		{"review", conv, `{"reviews": []}`, "reviewed_at"},
		{"review", conv, `{"reviews": {}, "reviewed_at": "2026-01-01T00:00:00Z"}`, "reviews"},
		{"review", nil, `{"reviews": [], "reviewed_at": "2026-01-01T00:00:00Z"}`, "a conversation"},
		{"segment", conv, `{"check": "yes"}`, "check"},
		{"segment", conv, `{"check": false}`, "through_message_id"},
		{"revise", conv, `{"memory_id": "not-a-uuid"}`, "memory_id"},
		{"revise", conv, `{"memory_id": 7}`, "memory_id"},
	} {
		_, err := db.Pool.Exec(ctx, `SELECT mneme.enqueue_job($1, $2, $3::jsonb)`, c.kind, c.conv, c.payload)
		require.Equal(t, "22023", sqlState(t, err), "%s %s", c.kind, c.payload)
		require.ErrorContains(t, err, "not what its handler reads")
		var pgErr *pgconn.PgError
		require.ErrorAs(t, err, &pgErr)
		require.Contains(t, pgErr.Hint, c.hint, "%s %s", c.kind, c.payload)
	}
	require.Equal(t, before, count(), "nothing written")
	for _, c := range []struct{ kind, payload string }{
		{"review", `{"reviews": [], "reviewed_at": "2026-01-01T00:00:00Z"}`},
		{"segment", `{"check": false, "through_message_id": 1}`},
		{"revise", `{"memory_id": "` + uuid.NewString() + `"}`},
	} {
		_, err := db.Pool.Exec(ctx, `SELECT mneme.enqueue_job($1, $2, $3::jsonb)`, c.kind, conv, c.payload)
		require.NoError(t, err, "%s %s", c.kind, c.payload)
	}
}

// TestInlinedHelpersStayInlinable: the helpers the ranking calls per row
// (and add_message's blank check, per message, and cleanup's eligibility,
// per memory) are plain immutable SQL
// without SET and stay SECURITY INVOKER (the
// access script keeps such functions so), which is what lets the planner
// inline them; made SECURITY DEFINER or given a SET they would be called
// once per row.
func TestInlinedHelpersStayInlinable(t *testing.T) {
	t.Parallel()
	db := dbtest.New(t)
	rows, err := db.Pool.Query(context.Background(), `
		SELECT p.proname || ': ' || CASE WHEN l.lanname = 'sql' AND NOT p.prosecdef AND p.proconfig IS NULL
		                                      AND p.provolatile = 'i' THEN 'inlinable' ELSE 'not inlinable' END
		FROM pg_proc p JOIN pg_language l ON l.oid = p.prolang
		WHERE p.pronamespace = 'mneme'::regnamespace
		  AND p.proname IN ('_retrievability', '_bm25_weight', '_bm25_tf', '_label_key', '_word_separator', '_is_blank',
		                   '_cleanup_eligible')
		ORDER BY 1`)
	require.NoError(t, err)
	got, err := pgx.CollectRows(rows, pgx.RowTo[string])
	require.NoError(t, err)
	require.Equal(t, []string{"_bm25_tf: inlinable", "_bm25_weight: inlinable", "_cleanup_eligible: inlinable", "_is_blank: inlinable",
		"_label_key: inlinable", "_retrievability: inlinable", "_word_separator: inlinable"}, got)

	// And the planner does inline cleanup's predicate: the plan filters on
	// the columns, with no call left.
	rows, err = db.Pool.Query(context.Background(), `EXPLAIN (VERBOSE) SELECT count(*) FROM mneme.memories m
		WHERE mneme._cleanup_eligible(m.status, m.pinned, m.label, 'active')`)
	require.NoError(t, err)
	plan, err := pgx.CollectRows(rows, pgx.RowTo[string])
	require.NoError(t, err)
	require.NotContains(t, strings.Join(plan, "\n"), "_cleanup_eligible")
	require.Contains(t, strings.Join(plan, "\n"), "(m.status = 'active'::text)")
}

// TestEntryPointsRunWithoutJIT: every PL/pgSQL function a role may call
// runs with jit = off (the access script sets it), so a planner estimate
// that passes jit_above_cost inside a call never compiles (JIT took 300 ms
// of a 10 ms extractive_summary). The function named here is the one that
// showed it; the query lists any entry point without the setting.
func TestEntryPointsRunWithoutJIT(t *testing.T) {
	t.Parallel()
	db := dbtest.New(t)
	ctx := context.Background()
	rows, err := db.Pool.Query(ctx, `
		SELECT p.oid::regprocedure::text
		FROM pg_proc p JOIN pg_language l ON l.oid = p.prolang
		WHERE p.pronamespace = 'mneme'::regnamespace AND l.lanname = 'plpgsql'
		  AND (has_function_privilege('mneme_app', p.oid, 'EXECUTE')
		       OR has_function_privilege('mneme_worker', p.oid, 'EXECUTE')
		       OR has_function_privilege('mneme_admin', p.oid, 'EXECUTE'))
		  AND NOT coalesce('jit=off' = ANY (p.proconfig), false)
		  AND p.proname NOT IN ('_tenant', '_resolve_tenant', '_is_worker', 'change_embedding_dim', 'erase_vacuum_targets')
		ORDER BY 1`)
	require.NoError(t, err)
	missing, err := pgx.CollectRows(rows, pgx.RowTo[string])
	require.NoError(t, err)
	require.Empty(t, missing, "entry points that may JIT-compile their statements")

	var cfg []string
	require.NoError(t, db.Pool.QueryRow(ctx, `SELECT proconfig FROM pg_proc
		WHERE oid = 'mneme.extractive_summary(uuid, text[], text[], int)'::regprocedure`).Scan(&cfg))
	require.Contains(t, cfg, "jit=off")
}
