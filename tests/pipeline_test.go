package tests

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/sashabaranov/go-openai"
	"github.com/stretchr/testify/require"

	"github.com/mneme-memory/mneme/sidecar/backoff"
	"github.com/mneme-memory/mneme/sidecar/config"
	"github.com/mneme-memory/mneme/sidecar/daemon"
	"github.com/mneme-memory/mneme/sidecar/dbtest"
	"github.com/mneme-memory/mneme/sidecar/embed"
	"github.com/mneme-memory/mneme/sidecar/jobs"
	"github.com/mneme-memory/mneme/sidecar/llm"
	"github.com/mneme-memory/mneme/sidecar/llm/llmtest"
	"github.com/mneme-memory/mneme/sidecar/pipeline"
)

// pipelineEnv is a database with the pipelines, offline or against the
// fake LLM server.
type pipelineEnv struct {
	t    *testing.T
	db   *dbtest.DB
	p    *pipeline.Pipelines
	deps pipeline.Deps
	log  *slog.Logger
	srv  *llmtest.Server // nil offline
	conv uuid.UUID
}

func newPipelineEnv(t *testing.T, withLLM bool, opts ...dbtest.Option) *pipelineEnv {
	t.Helper()
	e := &pipelineEnv{t: t, db: dbtest.New(t, opts...), conv: uuid.New()}
	e.log = slog.New(slog.NewTextHandler(testWriter{t}, nil))
	deps := pipeline.Deps{Embedder: embed.NewHash(config.DefaultEmbedDim), Log: e.log}
	if withLLM {
		e.srv = llmtest.New(t)
		deps.LLM = llm.New(config.Endpoint{BaseURL: e.srv.URL(), Model: "fake", APIKey: "k"}, 5*time.Second, llm.WithAttempts(1))
	}
	p, err := pipeline.New(deps)
	require.NoError(t, err)
	e.p, e.deps = p, deps
	return e
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(b []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(b), "\n"))
	return len(b), nil
}

func (e *pipelineEnv) say(at string, role, content string) int64 {
	e.t.Helper()
	var id int64
	require.NoError(e.t, e.db.Pool.QueryRow(context.Background(),
		`SELECT mneme.add_message($1, $2, $3, $4::timestamptz)`, e.conv, role, content, at).Scan(&id))
	return id
}

// drain runs the conversation's jobs with the real job runner (the
// pipelines registered as `mneme run` registers them, fast retries) until
// none is pending: a failing job is retried up to its max_attempts and then
// failed with its error kept.
func (e *pipelineEnv) drain() {
	e.t.Helper()
	drainJobs(e.t, e.db.Pool, e.deps, e.log)
}

// drainJobs runs the jobs of the database behind pool with the real job
// runner (the pipelines of deps registered as `mneme run` registers them,
// fast retries) until none is pending or running.
func drainJobs(t *testing.T, pool *pgxpool.Pool, deps pipeline.Deps, log *slog.Logger) {
	t.Helper()
	ctx := context.Background()
	r := jobs.NewRunner(pool, jobs.Options{Concurrency: 2, Lease: 5 * time.Second, PollEvery: 50 * time.Millisecond,
		Retry: backoff.Policy{Base: 5 * time.Millisecond, Max: 10 * time.Millisecond}, Logger: log})
	p, err := pipeline.New(deps)
	require.NoError(t, err)
	require.NoError(t, r.RegisterAll(daemon.Handlers(p, log)))
	for range 200 {
		require.NoError(t, r.Drain(ctx))
		var open int
		require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM mneme.jobs WHERE state IN ('pending', 'running')`).Scan(&open))
		if open == 0 {
			return
		}
		time.Sleep(10 * time.Millisecond) // a retry waits for its run_at
	}
	t.Fatal("jobs still pending after 200 drains")
}

type memRow struct {
	ID          uuid.UUID
	Summary     string
	Content     string
	Stability   float64
	Difficulty  float64
	State       string
	Reviews     int
	LastReview  time.Time
	Label       string
	Surprise    float32
	SourceIDs   []int64
	HasEmbeding bool
}

func (e *pipelineEnv) memories() []memRow {
	e.t.Helper()
	rows, err := e.db.Pool.Query(context.Background(), `
		SELECT id, coalesce(summary, ''), content, stability, difficulty, fsrs_state, review_count, last_reviewed_at,
		       label, surprise, source_message_ids, embedding IS NOT NULL
		FROM mneme.memories WHERE conversation_id = $1 ORDER BY created_at, id`, e.conv)
	require.NoError(e.t, err)
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (memRow, error) {
		var m memRow
		err := r.Scan(&m.ID, &m.Summary, &m.Content, &m.Stability, &m.Difficulty, &m.State, &m.Reviews, &m.LastReview,
			&m.Label, &m.Surprise, &m.SourceIDs, &m.HasEmbeding)
		return m, err
	})
	require.NoError(e.t, err)
	return out
}

func (e *pipelineEnv) memory(id uuid.UUID) memRow {
	for _, m := range e.memories() {
		if m.ID == id {
			return m
		}
	}
	e.t.Fatalf("memory %s not found", id)
	return memRow{}
}

// retrieve records a retrieval of the given memories for query, as
// mneme.retrieve does.
func (e *pipelineEnv) retrieve(query string, ids ...uuid.UUID) {
	e.t.Helper()
	_, err := e.db.Pool.Exec(context.Background(), `SELECT mneme.add_pending_review($1, $2, $3)`, e.conv, ids, query)
	require.NoError(e.t, err)
}

// search runs the real mneme.retrieve and returns the memory ids.
func (e *pipelineEnv) search(query string, k int) []uuid.UUID {
	e.t.Helper()
	rows, err := e.db.Pool.Query(context.Background(), `SELECT memory_id FROM mneme.retrieve($1, $2, $3)`, e.conv, query, k)
	require.NoError(e.t, err)
	ids, err := pgx.CollectRows(rows, pgx.RowTo[uuid.UUID])
	require.NoError(e.t, err)
	return ids
}

var weatherSession = [][2]string{
	{"user", "What's the weather like in Berlin this weekend?"},
	{"assistant", "Sunny on Saturday, around 24 degrees, with rain on Sunday afternoon."},
	{"user", "Perfect for a bike ride by the Wannsee lake on Saturday then."},
	{"assistant", "Take a jacket; the wind by the lake can be chilly."},
	{"user", "Good idea, I'll pack my windbreaker."},
	{"assistant", "Enjoy the ride!"},
}

var rustSession = [][2]string{
	{"user", "I want to learn Rust this year, mostly for systems programming."},
	{"assistant", "Start with The Rust Programming Language book and do the rustlings exercises alongside."},
	{"user", "How does ownership work?"},
	{"assistant", "Every value has one owner; when the owner goes out of scope the value is dropped. Borrowing lets you use a value without taking ownership."},
	{"user", "And the borrow checker enforces that at compile time?"},
	{"assistant", "Yes: one mutable reference or any number of shared references, and lifetimes make sure references never outlive their data."},
}

var rustFollowUp = [][2]string{
	{"assistant", "Welcome back! Last time we covered ownership and the borrow checker."},
	{"user", "Right, I did the rustlings move semantics exercises yesterday."},
	{"assistant", "Great, next are references and borrowing, then lifetimes."},
	{"user", "Lifetimes still confuse me: why must a reference not outlive its data?"},
	{"assistant", "Otherwise the borrow checker would allow dangling references; lifetime annotations name those scopes."},
}

// segmentNow ends the conversation's session (mneme.segment_now): what is
// queued is stored whole at the next drain.
func (e *pipelineEnv) segmentNow() {
	e.t.Helper()
	_, err := e.db.Pool.Exec(context.Background(), `SELECT mneme.segment_now($1)`, e.conv)
	require.NoError(e.t, err)
}

func (e *pipelineEnv) session(day time.Time, msgs [][2]string) {
	for i, m := range msgs {
		e.say(day.Add(time.Duration(i)*time.Minute).Format(time.RFC3339), m[0], m[1])
	}
}

var (
	day1 = time.Date(2026, 3, 1, 8, 0, 0, 0, time.UTC)
	day3 = time.Date(2026, 3, 3, 9, 0, 0, 0, time.UTC)
	day4 = time.Date(2026, 3, 4, 9, 0, 0, 0, time.UTC)
)

var memHeading = regexp.MustCompile(`### Memory ([0-9a-f-]{36})\n\*\*Summary:\*\* ([^\n]*)`)

// rateBySummary is the fake LLM reviewer: easy for memories whose summary
// mentions Rust, again for the others, plus a rating for an id it was not
// asked about (which must be ignored).
func rateBySummary(req openai.ChatCompletionRequest) llmtest.Reply {
	var rs []map[string]string
	for _, m := range memHeading.FindAllStringSubmatch(req.Messages[1].Content, -1) {
		r, why := "again", "the conversation never mentions it"
		if strings.Contains(strings.ToLower(m[2]), "rust") {
			r, why = "easy", "the conversation goes on about Rust"
		}
		rs = append(rs, map[string]string{"memory_id": m[1], "rating": r, "reason": why})
	}
	rs = append(rs, map[string]string{"memory_id": uuid.NewString(), "rating": "easy", "reason": "not asked"})
	b, _ := json.Marshal(map[string]any{"ratings": rs})
	return llmtest.Reply{Content: string(b)}
}

func segmentReply(summary, label string) llmtest.Reply {
	b, _ := json.Marshal(map[string]any{"action": "create", "summary": summary, "surprise": 0.4, "label": label, "pinned": false, "facts": []any{}})
	return llmtest.Reply{Content: string(b)}
}

// The design's example: a Rust conversation retrieves a relevant memory and
// a weather chat; the conversation goes on about Rust; at the next
// segmentation the review strengthens the Rust memory and weakens the
// weather one.
func TestPipelineSeedExample(t *testing.T) {
	t.Parallel()
	for _, variant := range variants(t) {
		for _, withLLM := range []bool{false, true} {
			t.Run(variant+"/"+map[bool]string{false: "offline", true: "llm"}[withLLM], func(t *testing.T) {
				seedExample(t, withLLM, variant)
			})
		}
	}
}

func seedExample(t *testing.T, withLLM bool, variant string) {
	e := newPipelineEnv(t, withLLM, dbtest.WithVector(variant))
	ctx := context.Background()
	if withLLM {
		e.srv.Script(
			segmentReply("The user plans a bike ride by the Wannsee on a sunny Saturday in Berlin.", "temporary"),
			segmentReply("The user is learning Rust: ownership, borrowing and the borrow checker.", "project_rust"),
			segmentReply("The user practised Rust move semantics and asked about lifetimes.", "project_rust"),
		)
		e.srv.Default(rateBySummary)
	}
	e.session(day1, weatherSession)
	e.session(day1.Add(2*time.Hour), rustSession) // the gap cuts the weather episode
	e.drain()
	e.say(day3.Format(time.RFC3339), "user", "I'm back at Rust after two days.") // the gap cuts the Rust episode
	e.drain()
	mems := e.memories()
	require.Len(t, mems, 2, "one memory per session")
	weather, rust := mems[0], mems[1]
	require.Contains(t, weather.Content, "Wannsee")
	require.Contains(t, rust.Content, "borrow checker")
	// The time heads the episode; lines minutes later carry none (eval tuning, docs/eval.md).
	require.True(t, strings.HasPrefix(rust.Content, "[2026-03-01 10:00] user: I want to learn Rust"), rust.Content)
	require.Contains(t, rust.Content, "\nassistant: Start with The Rust")
	require.True(t, rust.HasEmbeding)
	require.Equal(t, "review", rust.State, "a new memory is a graduated card (docs/forgetting.md)")
	require.Equal(t, day1.Add(2*time.Hour+5*time.Minute), rust.LastReview.UTC(), "last_reviewed_at = the episode's time")
	require.GreaterOrEqual(t, rust.Stability, 3.173)

	// The real retrieval: BM25 finds the Rust memory, the vector leg
	// also brings the weather chat (the only other memory).
	got := e.search("rust ownership borrowing", 5)
	require.Equal(t, []uuid.UUID{rust.ID, weather.ID}, got)
	e.session(day3.Add(time.Minute), rustFollowUp)
	e.say(day4.Format(time.RFC3339), "user", "Today: traits.") // the gap cuts the follow-up
	e.drain()

	var pending *string
	require.NoError(t, e.db.Pool.QueryRow(ctx, `SELECT pending_reviews::text FROM mneme.message_queue WHERE id = $1`, e.conv).Scan(&pending))
	require.Nil(t, pending, "pending reviews taken")
	var failed int
	require.NoError(t, e.db.Pool.QueryRow(ctx, `SELECT count(*) FROM mneme.jobs WHERE state <> 'done'`).Scan(&failed))
	require.Zero(t, failed)

	r2, w2 := e.memory(rust.ID), e.memory(weather.ID)
	require.Greater(t, r2.Stability, rust.Stability, "the used memory strengthens")
	require.Less(t, w2.Stability, weather.Stability, "the noise fades")
	require.Equal(t, 1, r2.Reviews)
	require.Equal(t, 1, w2.Reviews)
	require.Equal(t, day3.Add(5*time.Minute), r2.LastReview.UTC(), "last_reviewed_at = reviewed_at")

	rows, err := e.db.Pool.Query(ctx, `
		SELECT memory_id, rating, reviewer, stability_before, stability_after, `+reviewQueries+`, evidence
		FROM mneme.review_log l WHERE conversation_id = $1 ORDER BY id`, e.conv)
	require.NoError(t, err)
	type logRow struct {
		ID               uuid.UUID
		Rating, Reviewer string
		SB, SA           float64
		Queries          []string
		Evidence         map[string]any
	}
	logs, err := pgx.CollectRows(rows, pgx.RowToStructByPos[logRow])
	require.NoError(t, err)
	require.Len(t, logs, 2)
	reviewer := map[bool]string{false: "heuristic", true: "llm"}[withLLM]
	for _, l := range logs {
		require.Equal(t, reviewer, l.Reviewer)
		require.Equal(t, []string{"rust ownership borrowing"}, l.Queries)
		// Why it was rated so (shown by mneme ui with the review).
		if withLLM {
			require.Equal(t, map[string]any{"reason": map[string]string{"easy": "the conversation goes on about Rust",
				"again": "the conversation never mentions it"}[l.Rating]}, l.Evidence)
		} else {
			require.Contains(t, l.Evidence, "score")
			require.Equal(t, map[string]any{"hard": 0.04, "good": 0.09, "easy": 0.25}, l.Evidence["thresholds"])
		}
		switch l.ID {
		case rust.ID:
			require.Contains(t, []string{"good", "easy"}, l.Rating)
			require.Equal(t, rust.Stability, l.SB)
			require.Equal(t, r2.Stability, l.SA)
		case weather.ID:
			require.Equal(t, "again", l.Rating)
		default:
			t.Fatalf("review of unexpected memory %s", l.ID)
		}
	}
	if withLLM {
		reqs := e.srv.Requests()
		require.Len(t, reqs, 4)
		user := reqs[3].Messages[1].Content
		require.Contains(t, reqs[3].Messages[0].Content, "You are a memory relevance reviewer")
		require.Contains(t, user, "## Conversation Context\n- user: \"I'm back at Rust after two days.\"")
		require.Contains(t, user, "### Memory "+rust.ID.String())
		require.Contains(t, user, `**Matched queries:** "rust ownership borrowing"`)
		require.Equal(t, "project_rust", r2.Label)
	}
}

// rustMemory runs the Rust session into one memory and returns it.
func (e *pipelineEnv) rustMemory() memRow {
	e.t.Helper()
	e.session(day1, rustSession)
	e.say(day3.Format(time.RFC3339), "user", "I'm back at Rust after two days.")
	e.drain()
	mems := e.memories()
	require.Len(e.t, mems, 1)
	return mems[0]
}

func (e *pipelineEnv) count(q string, args ...any) int {
	e.t.Helper()
	var n int
	require.NoError(e.t, e.db.Pool.QueryRow(context.Background(), q, args...).Scan(&n))
	return n
}

// A check job whose segmenter says skip still hands the pending reviews
// to a review job, and the messages stay queued.
func TestPipelineSkipPathReviews(t *testing.T) {
	t.Parallel()
	for _, withLLM := range []bool{false, true} {
		t.Run(map[bool]string{false: "offline", true: "llm"}[withLLM], func(t *testing.T) {
			e := newPipelineEnv(t, withLLM)
			if withLLM {
				e.srv.Script(segmentReply("The user is learning Rust.", "project_rust"),
					llmtest.Reply{Content: `{"action":"skip","summary":"","surprise":0,"label":"general","pinned":false,"facts":[]}`})
				e.srv.Default(rateBySummary)
			}
			rust := e.rustMemory()
			e.retrieve("rust ownership", rust.ID)
			e.session(day3.Add(time.Minute), rustFollowUp[:4]) // 5 queued: a check job
			require.Equal(t, 1, e.count(`SELECT count(*) FROM mneme.jobs WHERE kind = 'segment' AND state = 'pending' AND payload->>'check' = 'true'`))
			e.drain()
			require.Len(t, e.memories(), 1, "skip: no new memory")
			require.Equal(t, 5, e.count(`SELECT count(*) FROM mneme.messages WHERE conversation_id = $1 AND consumed_at IS NULL`, e.conv))
			require.Equal(t, 1, e.count(`SELECT count(*) FROM mneme.jobs WHERE kind = 'review' AND state = 'done'`))
			require.Equal(t, 1, e.count(`SELECT count(*) FROM mneme.review_log WHERE memory_id = $1`, rust.ID))
			require.Equal(t, 1, e.memory(rust.ID).Reviews)
			require.Equal(t, 1, e.count(`SELECT count(*) FROM mneme.message_queue WHERE id = $1 AND pending_reviews IS NULL`, e.conv))
		})
	}
}

// enqueueReview puts a review job in the queue as Segment would.
func (e *pipelineEnv) enqueueReview(at time.Time, ids ...uuid.UUID) {
	e.t.Helper()
	reviews, _ := json.Marshal([]map[string]any{{"query": "rust", "memory_ids": ids}})
	payload, _ := json.Marshal(map[string]any{"reviews": json.RawMessage(reviews), "context": []map[string]any{
		{"id": 1, "role": "user", "content": "the borrow checker and rustlings again", "at": at}}, "reviewed_at": at})
	_, err := e.db.Pool.Exec(context.Background(), `SELECT mneme.enqueue_job('review', $1, $2)`, e.conv, payload)
	require.NoError(e.t, err)
}

// A review not newer than the memory's last review writes nothing.
func TestPipelineStaleReviewSkipped(t *testing.T) {
	t.Parallel()
	e := newPipelineEnv(t, false)
	rust := e.rustMemory()
	e.enqueueReview(rust.LastReview, rust.ID)                 // equal: stale
	e.enqueueReview(rust.LastReview.Add(-time.Hour), rust.ID) // older: stale
	e.drain()
	after := e.memory(rust.ID)
	require.Equal(t, rust.Stability, after.Stability)
	require.Equal(t, rust.LastReview, after.LastReview)
	require.Zero(t, after.Reviews)
	require.Zero(t, e.count(`SELECT count(*) FROM mneme.review_log`))
	require.Equal(t, 2, e.count(`SELECT count(*) FROM mneme.jobs WHERE kind = 'review' AND state = 'done'`), "stale is done, not failed")

	later := rust.LastReview.Add(48 * time.Hour)
	e.enqueueReview(later, rust.ID)
	e.enqueueReview(later, rust.ID) // delivered twice: the second is stale
	e.drain()
	require.Equal(t, 1, e.memory(rust.ID).Reviews)
	require.Equal(t, 1, e.count(`SELECT count(*) FROM mneme.review_log`))

	// Memories forgotten since the retrieval are skipped.
	_, err := e.db.Pool.Exec(context.Background(), `UPDATE mneme.memories SET status = 'invalidated' WHERE id = $1`, rust.ID)
	require.NoError(t, err)
	e.enqueueReview(later.Add(48*time.Hour), rust.ID, uuid.New())
	e.drain()
	require.Equal(t, 1, e.count(`SELECT count(*) FROM mneme.review_log`))
}

// Two segmentations of one conversation at once (a running job and the
// next one claimed by another sidecar): each message is consumed once and
// the job that lost does nothing, pending reviews included.
func TestPipelineSegmentRace(t *testing.T) {
	t.Parallel()
	e := newPipelineEnv(t, true)
	// Both LLM calls are in flight together, so both jobs read the same queue.
	e.srv.Default(func(openai.ChatCompletionRequest) llmtest.Reply {
		r := segmentReply("The user is learning Rust.", "project_rust")
		r.Delay = 300 * time.Millisecond
		return r
	})
	e.session(day1, rustSession)
	e.retrieve("rust", uuid.New())
	ctx := context.Background()
	payload := []byte(`{"reason":"check","check":true,"through_message_id":6,"trigger_message_id":6}`)
	var wg sync.WaitGroup
	errs := make([]error, 2)
	for i := range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			job := jobs.Job{ID: int64(100 + i), Kind: "segment", ConversationID: uuid.NullUUID{UUID: e.conv, Valid: true}, Payload: payload, Attempts: 1}
			errs[i] = e.p.Segment(ctx, jobs.Inline(e.db.Pool), job)
		}()
	}
	wg.Wait()
	require.NoError(t, errs[0])
	require.NoError(t, errs[1])
	require.Len(t, e.srv.Requests(), 2, "both decided concurrently")
	mems := e.memories()
	require.Len(t, mems, 1, "one segmentation won")
	require.Equal(t, []int64{1, 2, 3, 4, 5, 6}, mems[0].SourceIDs)
	require.Equal(t, 6, e.count(`SELECT count(*) FROM mneme.messages WHERE memory_id = $1`, mems[0].ID))
	require.Equal(t, 1, e.count(`SELECT count(*) FROM mneme.jobs WHERE kind = 'review'`), "pending reviews handed over once")
}

// A job reads past a gap but never cuts across it: the session before the
// gap is closed and stored whole (a forced call), the open one after it,
// shorter than segment_min_messages, is not even shown to the model.
func TestPipelineCheckStopsAtGap(t *testing.T) {
	t.Parallel()
	e := newPipelineEnv(t, true)
	var seen []string
	var mu sync.Mutex
	e.srv.Default(func(req openai.ChatCompletionRequest) llmtest.Reply {
		mu.Lock()
		seen = append(seen, req.Messages[1].Content)
		mu.Unlock()
		return segmentReply("Weather and a bike ride.", "general")
	})
	e.session(day1, weatherSession)
	e.session(day1.Add(2*time.Hour), rustSession[:2])
	ctx := context.Background()
	var sessions, closed int
	require.NoError(t, e.db.Pool.QueryRow(ctx, `SELECT count(DISTINCT session), count(*) FILTER (WHERE closed)
		FROM mneme.queued_sessions($1, 100)`, e.conv).Scan(&sessions, &closed))
	require.Equal(t, 2, sessions)
	require.Equal(t, 6, closed, "the session before the gap is closed")

	job := jobs.Job{ID: 300, Kind: "segment", ConversationID: uuid.NullUUID{UUID: e.conv, Valid: true},
		Payload: []byte(`{"reason":"check","check":true,"through_message_id":8,"trigger_message_id":8}`), Attempts: 1}
	require.NoError(t, e.p.Segment(ctx, jobs.Inline(e.db.Pool), job))
	require.Len(t, seen, 1)
	require.Contains(t, seen[0], "Wannsee")
	require.NotContains(t, seen[0], "Rust", "the job cut across the gap")
	mems := e.memories()
	require.Len(t, mems, 1)
	require.Equal(t, []int64{1, 2, 3, 4, 5, 6}, mems[0].SourceIDs)
}

// A forced cut whose messages another segmentation partly consumed while it
// decided reads the queue again and still cuts at its boundary: the rest of
// the episode before the gap is stored, not left queued to be merged into
// the next one.
func TestPipelineForcedCutReadsAgainAfterConcurrentCut(t *testing.T) {
	t.Parallel()
	e := newPipelineEnv(t, true)
	ctx := context.Background()
	var calls atomic.Int32
	e.srv.Default(func(req openai.ChatCompletionRequest) llmtest.Reply {
		if calls.Add(1) == 1 {
			// Another segmentation cuts the first three messages while this
			// job's model call is in flight.
			_, err := e.db.Pool.Exec(ctx, `SELECT mneme.create_episode($1,
				ARRAY(SELECT id FROM mneme.queued_messages($1) ORDER BY id LIMIT 3),
				'content', 'summary', NULL, 0.5, 'general', false, 3, 5)`, e.conv)
			if err != nil {
				t.Error(err)
			}
		}
		return segmentReply("Weather and a bike ride.", "general")
	})
	e.session(day1, weatherSession)
	late := e.say(day1.Add(2*time.Hour).Format(time.RFC3339), "user", "I want to learn Rust this year.")
	var through int64
	require.NoError(t, e.db.Pool.QueryRow(ctx, `SELECT max(id) FROM mneme.messages WHERE id < $1`, late).Scan(&through))
	job := jobs.Job{ID: 301, Kind: "segment", ConversationID: uuid.NullUUID{UUID: e.conv, Valid: true},
		Payload: []byte(fmt.Sprintf(`{"reason":"gap","check":false,"through_message_id":%d,"trigger_message_id":%d}`, through, late)), Attempts: 1}
	require.NoError(t, e.p.Segment(ctx, jobs.Inline(e.db.Pool), job))
	require.EqualValues(t, 2, calls.Load(), "the forced cut decided again on what was left")
	mems := e.memories()
	require.Len(t, mems, 2)
	require.Len(t, mems[0].SourceIDs, 3)
	require.Len(t, mems[1].SourceIDs, 3, "the rest of the episode before the gap")
	require.Equal(t, through, mems[1].SourceIDs[2])
	var queued []int64
	require.NoError(t, e.db.Pool.QueryRow(ctx, `SELECT array_agg(id) FROM mneme.queued_messages($1)`, e.conv).Scan(&queued))
	require.Equal(t, []int64{late}, queued, "only the late message is still queued")
}

// Many offline segmentations racing over a long conversation: every
// message ends in exactly one memory, spans never overlap.
func TestPipelineSegmentRaceOffline(t *testing.T) {
	t.Parallel()
	e := newPipelineEnv(t, false)
	all := append(append(append([][2]string{}, weatherSession...), rustSession...), rustFollowUp...)
	for i, m := range all {
		e.say(day1.Add(time.Duration(i)*time.Minute).Format(time.RFC3339), m[0], m[1])
	}
	e.segmentNow() // the conversation is over: every message is owed an episode
	ctx := context.Background()
	payload := []byte(fmt.Sprintf(`{"reason":"max_messages","check":false,"through_message_id":%d}`, len(all)))
	var wg sync.WaitGroup
	for i := range 6 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			job := jobs.Job{ID: int64(200 + i), Kind: "segment", ConversationID: uuid.NullUUID{UUID: e.conv, Valid: true}, Payload: payload, Attempts: 1}
			if err := e.p.Segment(ctx, jobs.Inline(e.db.Pool), job); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	seen := map[int64]bool{}
	for _, m := range e.memories() {
		for _, id := range m.SourceIDs {
			require.False(t, seen[id], "message %d in two memories", id)
			seen[id] = true
		}
		require.Equal(t, len(m.SourceIDs), e.count(`SELECT count(*) FROM mneme.messages WHERE memory_id = $1`, m.ID))
	}
	require.Len(t, seen, len(all))
	require.Zero(t, e.count(`SELECT count(*) FROM mneme.messages WHERE conversation_id = $1 AND consumed_at IS NULL`, e.conv))
}

// Malformed LLM output fails the attempt; after max_attempts the job is
// failed with the error kept, and nothing was written from it.
func TestPipelineMalformedLLMOutput(t *testing.T) {
	t.Parallel()
	t.Run("segmenter", func(t *testing.T) {
		e := newPipelineEnv(t, true)
		e.srv.Script(llmtest.Reply{Content: "not json"},
			llmtest.Reply{Content: `{"action":"maybe","summary":"x","surprise":0.5,"label":"general","pinned":false,"facts":[]}`},
			llmtest.Reply{Content: `{"action":"create","summary":"x","surprise":7,"label":"general","pinned":false,"facts":[]}`})
		e.session(day1, rustSession)
		e.retrieve("rust", uuid.New())
		_, err := e.db.Pool.Exec(context.Background(), `UPDATE mneme.jobs SET max_attempts = 3`)
		require.NoError(t, err)
		e.drain()
		var state, lastErr string
		var attempts int
		require.NoError(t, e.db.Pool.QueryRow(context.Background(),
			`SELECT state, attempts, last_error FROM mneme.jobs WHERE kind = 'segment'`).Scan(&state, &attempts, &lastErr))
		require.Equal(t, "failed", state)
		require.Equal(t, 3, attempts)
		require.Contains(t, lastErr, "invalid LLM output")
		require.Contains(t, lastErr, "surprise 7")
		require.Empty(t, e.memories())
		require.Equal(t, 1, e.count(`SELECT count(*) FROM mneme.message_queue WHERE pending_reviews IS NOT NULL`), "pending reviews kept")
		require.Zero(t, e.count(`SELECT count(*) FROM mneme.jobs WHERE kind = 'review'`))

		// The failed job does not stop the conversation: its messages are
		// set aside (kept, listed with the error) and the next ones segment.
		require.Zero(t, e.count(`SELECT count(*) FROM mneme.messages WHERE consumed_at IS NULL`))
		require.Equal(t, 6, e.count(`SELECT count(*) FROM mneme.set_aside_messages WHERE conversation_id = $1
			AND last_error LIKE '%invalid LLM output%'`, e.conv))
		e.srv.Default(func(openai.ChatCompletionRequest) llmtest.Reply {
			return segmentReply("The user asked about Rust lifetimes.", "project_rust")
		})
		e.session(day3, rustFollowUp)
		e.say(day4.Format(time.RFC3339), "user", "Back again, a day later.") // the gap cuts the follow-up
		e.drain()
		require.Len(t, e.memories(), 1, "the next messages segment")
		require.NotContains(t, e.memories()[0].Content, "I want to learn Rust")

		// retry_job puts the set-aside messages back; they segment too.
		var jobID int64
		require.NoError(t, e.db.Pool.QueryRow(context.Background(),
			`SELECT id FROM mneme.jobs WHERE kind = 'segment' AND state = 'failed'`).Scan(&jobID))
		_, err = e.db.Pool.Exec(context.Background(), `SELECT mneme.retry_job($1)`, jobID)
		require.NoError(t, err)
		require.Zero(t, e.count(`SELECT count(*) FROM mneme.set_aside_messages`))
		e.drain()
		require.Zero(t, e.count(`SELECT count(*) FROM mneme.jobs WHERE state = 'failed'`))
		require.Len(t, e.memories(), 2)
		require.Zero(t, e.count(`SELECT count(*) FROM mneme.messages WHERE consumed_at IS NOT NULL AND memory_id IS NULL`),
			"every consumed message is in a memory")
	})
	t.Run("reviewer", func(t *testing.T) {
		e := newPipelineEnv(t, true)
		e.srv.Script(segmentReply("The user is learning Rust.", "project_rust"))
		rust := e.rustMemory()
		e.srv.Script(llmtest.Reply{Content: `{"ratings": "all good"}`},
			llmtest.Reply{Content: `{"ratings": [{"memory_id": 5, "rating": "good", "reason": "x"}]}`},
			llmtest.Reply{Content: `{"verdict": "good"}`})
		e.enqueueReview(rust.LastReview.Add(48*time.Hour), rust.ID)
		_, err := e.db.Pool.Exec(context.Background(), `UPDATE mneme.jobs SET max_attempts = 3 WHERE kind = 'review'`)
		require.NoError(t, err)
		e.drain()
		var state, lastErr string
		require.NoError(t, e.db.Pool.QueryRow(context.Background(),
			`SELECT state, last_error FROM mneme.jobs WHERE kind = 'review'`).Scan(&state, &lastErr))
		require.Equal(t, "failed", state)
		require.Contains(t, lastErr, "invalid LLM output")
		after := e.memory(rust.ID)
		require.Equal(t, rust.Stability, after.Stability)
		require.Zero(t, after.Reviews)
		require.Zero(t, e.count(`SELECT count(*) FROM mneme.review_log`))
	})
}

// An unknown or missing rating falls back to review_default_rating
// (logged, marked defaulted); a rating for an unknown id is ignored.
func TestPipelineReviewDefaultRating(t *testing.T) {
	t.Parallel()
	e := newPipelineEnv(t, true)
	e.srv.Script(segmentReply("The user is learning Rust.", "project_rust"))
	rust := e.rustMemory()
	e.session(day3.Add(time.Minute), weatherSession) // a second memory
	e.say(day4.Format(time.RFC3339), "user", "Next day.")
	e.srv.Script(segmentReply("Weather in Berlin.", "temporary"))
	e.drain()
	mems := e.memories()
	require.Len(t, mems, 2)
	weather := mems[1]
	e.srv.Script(llmtest.Reply{Content: fmt.Sprintf(`{"ratings": [{"memory_id": %q, "rating": "superb", "reason": "x"}, {"memory_id": %q, "rating": "easy", "reason": "x"}]}`,
		rust.ID, uuid.NewString())})
	e.enqueueReview(day4.Add(24*time.Hour), rust.ID, weather.ID)
	e.drain()
	rows, err := e.db.Pool.Query(context.Background(), `SELECT memory_id, rating, defaulted FROM mneme.review_log ORDER BY memory_id`)
	require.NoError(t, err)
	type r struct {
		ID        uuid.UUID
		Rating    string
		Defaulted bool
	}
	got, err := pgx.CollectRows(rows, pgx.RowToStructByPos[r])
	require.NoError(t, err)
	require.ElementsMatch(t, []r{{rust.ID, "hard", true}, {weather.ID, "hard", true}}, got)
}

// Retrieval is search: a thousand retrievals leave FSRS state untouched,
// they only queue pending reviews.
func TestPipelineRetrievalNeverReviews(t *testing.T) {
	t.Parallel()
	e := newPipelineEnv(t, false)
	rust := e.rustMemory()
	// All 1,000 entries stay pending (TestPendingReviewsBounded covers the bound).
	_, err := e.db.Pool.Exec(context.Background(), `SELECT mneme.set_setting('pending_reviews_max', '2000')`)
	require.NoError(t, err)
	var n int
	require.NoError(t, e.db.Pool.QueryRow(context.Background(), `
		SELECT count(*) FROM generate_series(1, 1000) g, LATERAL mneme.retrieve($1, 'rust borrow checker ' || g, 5) r`, e.conv).Scan(&n))
	require.Equal(t, 1000, n)
	after := e.memory(rust.ID)
	require.Equal(t, rust.Stability, after.Stability)
	require.Equal(t, rust.Difficulty, after.Difficulty)
	require.Equal(t, rust.State, after.State)
	require.Equal(t, rust.LastReview, after.LastReview)
	require.Zero(t, after.Reviews)
	require.Zero(t, e.count(`SELECT count(*) FROM mneme.review_log`))
	require.Equal(t, 1000, e.count(`SELECT jsonb_array_length(pending_reviews) FROM mneme.message_queue WHERE id = $1`, e.conv))

	// The next segmentation hands all of them to one review, which rates
	// the memory once, keeping every query.
	e.session(day3.Add(time.Minute), rustFollowUp)
	e.say(day4.Format(time.RFC3339), "user", "Today: traits.")
	e.drain()
	require.Equal(t, 1, e.memory(rust.ID).Reviews)
	require.Equal(t, 1000, e.count(`SELECT cardinality(`+reviewQueries+`) FROM mneme.review_log l WHERE memory_id = $1`, rust.ID))
}

// With an external embedder the sidecar embeds new memories itself (SQL
// does not fill them): the vector is embed.MemoryText of the memory, in
// both embedding variants.
func TestPipelineExternalEmbedder(t *testing.T) {
	t.Parallel()
	for _, variant := range variants(t) {
		t.Run(variant, func(t *testing.T) {
			e := newPipelineEnv(t, false, dbtest.WithVector(variant))
			_, err := e.db.Pool.Exec(context.Background(), `SELECT mneme.set_setting('embedder', '"external"')`)
			require.NoError(t, err)
			rust := e.rustMemory()
			require.True(t, rust.HasEmbeding)
			var sim float64
			require.NoError(t, e.db.Pool.QueryRow(context.Background(), `
				SELECT 1 - mneme.cosine_distance(embedding::real[], mneme.hash_embed(mneme.memory_text(title, summary, content)))
				FROM mneme.memories WHERE id = $1`, rust.ID).Scan(&sim))
			require.InDelta(t, 1, sim, 1e-5)
		})
	}
}

// TestLLMLabelOutsideVocabulary: a model's label outside the vocabulary
// (mneme.is_label) does not fail the segment job, which would stop the
// conversation: SQL chooses the label (mneme.auto_label) and the episode is
// stored.
func TestLLMLabelOutsideVocabulary(t *testing.T) {
	t.Parallel()
	e := newPipelineEnv(t, true)
	e.srv.Script(segmentReply("The user's name is Dana and she lives in Lisbon.", "Project X"))
	for i, line := range []string{"My name is Dana and I live in Lisbon.", "Nice to meet you, Dana.",
		"I moved there from Porto.", "Lisbon is lovely.", "I work as a nurse.", "That sounds rewarding."} {
		e.say(day1.Add(time.Duration(i)*time.Minute).Format(time.RFC3339), []string{"user", "assistant"}[i%2], line)
	}
	e.say(day3.Format(time.RFC3339), "user", "Hello again.") // the gap cuts the first episode
	e.drain()
	require.Zero(t, e.count(`SELECT count(*) FROM mneme.jobs WHERE state = 'failed'`))
	mems := e.memories()
	require.NotEmpty(t, mems)
	require.Equal(t, "user_profile", mems[0].Label, "chosen by mneme.auto_label")
	require.Contains(t, mems[0].Content, "Lisbon")

	// The model was told the vocabulary SQL defines, every label with its
	// meaning (mneme.label_vocabulary), not a list written by hand.
	rows, err := e.db.Pool.Query(context.Background(), `SELECT label, meaning FROM mneme.label_vocabulary()`)
	require.NoError(t, err)
	vocab, err := pgx.CollectRows(rows, pgx.RowToMap)
	require.NoError(t, err)
	require.Len(t, vocab, 6)
	system := e.srv.Requests()[0].Messages[0].Content
	require.Contains(t, system, "You are a conversation segmenter")
	for _, v := range vocab {
		require.Contains(t, system, fmt.Sprintf("  - %s: %s\n", v["label"], v["meaning"]))
	}
}
