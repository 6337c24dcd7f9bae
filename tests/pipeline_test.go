package tests

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/sashabaranov/go-openai"
	"github.com/stretchr/testify/require"

	"github.com/mneme-memory/mneme/sidecar/config"
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
	srv  *llmtest.Server // nil offline
	conv uuid.UUID
}

func newPipelineEnv(t *testing.T, withLLM bool) *pipelineEnv {
	t.Helper()
	e := &pipelineEnv{t: t, db: dbtest.New(t), conv: uuid.New()}
	deps := pipeline.Deps{Embedder: embed.NewHash(config.DefaultEmbedDim), Log: slog.New(slog.NewTextHandler(testWriter{t}, nil))}
	if withLLM {
		e.srv = llmtest.New(t)
		deps.LLM = llm.New(config.Endpoint{BaseURL: e.srv.URL(), Model: "fake", APIKey: "k"}, 5*time.Second, llm.WithAttempts(1))
	}
	p, err := pipeline.New(deps)
	require.NoError(t, err)
	e.p = p
	return e
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(b []byte) (int, error) { w.t.Log(strings.TrimRight(string(b), "\n")); return len(b), nil }

func (e *pipelineEnv) say(at string, role, content string) int64 {
	e.t.Helper()
	var id int64
	require.NoError(e.t, e.db.Pool.QueryRow(context.Background(),
		`SELECT mneme.add_message($1, $2, $3, $4::timestamptz)`, e.conv, role, content, at).Scan(&id))
	return id
}

// drain runs pending segment and review jobs of the conversation, oldest
// first, each in its own transaction, until none is left. A failing job is
// retried up to its max_attempts and then marked failed with its error,
// as the runner does. It returns the number of handler calls.
func (e *pipelineEnv) drain() int {
	e.t.Helper()
	ctx := context.Background()
	calls := 0
	for {
		tx, err := e.db.Pool.Begin(ctx)
		require.NoError(e.t, err)
		var j jobs.Job
		var maxAttempts int
		err = tx.QueryRow(ctx, `
			SELECT id, kind, conversation_id, payload, attempts + 1, created_at, max_attempts FROM mneme.jobs
			WHERE state = 'pending' AND conversation_id = $1 ORDER BY id LIMIT 1 FOR UPDATE SKIP LOCKED`, e.conv).
			Scan(&j.ID, &j.Kind, &j.ConversationID, &j.Payload, &j.Attempts, &j.CreatedAt, &maxAttempts)
		if errors.Is(err, pgx.ErrNoRows) {
			require.NoError(e.t, tx.Rollback(ctx))
			return calls
		}
		require.NoError(e.t, err)
		h := map[string]jobs.Handler{"segment": e.p.Segment, "review": e.p.Review}[j.Kind]
		require.NotNil(e.t, h, "job kind %s", j.Kind)
		calls++
		herr := h(ctx, tx, j)
		if herr == nil {
			_, err = tx.Exec(ctx, `UPDATE mneme.jobs SET state = 'done', attempts = $2, finished_at = now() WHERE id = $1`, j.ID, j.Attempts)
			require.NoError(e.t, err)
			require.NoError(e.t, tx.Commit(ctx))
			continue
		}
		require.NoError(e.t, tx.Rollback(ctx))
		state := "pending"
		if j.Attempts >= maxAttempts || errors.Is(herr, jobs.ErrPermanent) {
			state = "failed"
		}
		_, err = e.db.Pool.Exec(ctx, `UPDATE mneme.jobs SET state = $2, attempts = $3, last_error = $4 WHERE id = $1`,
			j.ID, state, j.Attempts, herr.Error())
		require.NoError(e.t, err)
	}
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
		r := "again"
		if strings.Contains(strings.ToLower(m[2]), "rust") {
			r = "easy"
		}
		rs = append(rs, map[string]string{"memory_id": m[1], "rating": r})
	}
	rs = append(rs, map[string]string{"memory_id": uuid.NewString(), "rating": "easy"})
	b, _ := json.Marshal(map[string]any{"ratings": rs})
	return llmtest.Reply{Content: string(b)}
}

func segmentReply(summary, label string) llmtest.Reply {
	b, _ := json.Marshal(map[string]any{"action": "create", "summary": summary, "surprise": 0.4, "label": label, "pinned": false})
	return llmtest.Reply{Content: string(b)}
}

// The seed's example: a Rust conversation retrieves a relevant memory and
// a weather chat; the conversation goes on about Rust; at the next
// segmentation the review strengthens the Rust memory and weakens the
// weather one.
func TestPipelineSeedExample(t *testing.T) {
	for _, withLLM := range []bool{false, true} {
		t.Run(map[bool]string{false: "offline", true: "llm"}[withLLM], func(t *testing.T) {
			e := newPipelineEnv(t, withLLM)
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
			require.Contains(t, rust.Content, "[2026-03-01 10:01] assistant: Start with The Rust")
			require.True(t, rust.HasEmbeding)
			require.Equal(t, "learning", rust.State)
			require.Equal(t, day1.Add(2*time.Hour+5*time.Minute), rust.LastReview.UTC(), "last_reviewed_at = the episode's time")
			require.GreaterOrEqual(t, rust.Stability, 3.173)

			e.retrieve("rust ownership borrowing", rust.ID, weather.ID)
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
				SELECT memory_id, rating, reviewer, stability_before, stability_after, matched_queries
				FROM mneme.review_log WHERE conversation_id = $1 ORDER BY id`, e.conv)
			require.NoError(t, err)
			type logRow struct {
				ID               uuid.UUID
				Rating, Reviewer string
				SB, SA           float64
				Queries          []string
			}
			logs, err := pgx.CollectRows(rows, pgx.RowToStructByPos[logRow])
			require.NoError(t, err)
			require.Len(t, logs, 2)
			reviewer := map[bool]string{false: "heuristic", true: "llm"}[withLLM]
			for _, l := range logs {
				require.Equal(t, reviewer, l.Reviewer)
				require.Equal(t, []string{"rust ownership borrowing"}, l.Queries)
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
		})
	}
}
