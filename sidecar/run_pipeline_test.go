package main

import (
	"context"
	"encoding/json"
	"log/slog"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/sashabaranov/go-openai"
	"github.com/stretchr/testify/require"

	"github.com/mneme-memory/mneme/sidecar/config"
	"github.com/mneme-memory/mneme/sidecar/daemon"
	"github.com/mneme-memory/mneme/sidecar/dbtest"
	"github.com/mneme-memory/mneme/sidecar/llm/llmtest"
)

var memoryHeading = regexp.MustCompile(`### Memory ([0-9a-f-]{36})\n\*\*Summary:\*\* ([^\n]*)`)

// fakeModel answers the segmenter (create on forced cuts only, a summary
// naming Rust when the messages do) and the reviewer (easy for Rust
// memories, again for the rest).
func fakeModel(req openai.ChatCompletionRequest) llmtest.Reply {
	user := req.Messages[1].Content
	var out any
	if strings.Contains(req.Messages[0].Content, "memory relevance reviewer") {
		var rs []map[string]string
		for _, m := range memoryHeading.FindAllStringSubmatch(user, -1) {
			r := "again"
			if strings.Contains(m[2], "Rust") {
				r = "easy"
			}
			rs = append(rs, map[string]string{"memory_id": m[1], "rating": r, "reason": "scripted"})
		}
		out = map[string]any{"ratings": rs}
	} else {
		action, summary := "skip", ""
		if strings.Contains(user, "The cut is forced") {
			action, summary = "create", "Small talk about the weather."
			if strings.Contains(user, "Rust") {
				summary = "The user is learning Rust."
			}
		}
		out = map[string]any{"action": action, "summary": summary, "surprise": 0.2, "label": "general", "pinned": false, "facts": []any{}}
	}
	b, _ := json.Marshal(out)
	return llmtest.Reply{Content: string(b)}
}

// testLog writes the daemon's log to the test's (shown when it fails) until
// the test ends.
type testLog struct {
	t    *testing.T
	mu   sync.Mutex
	done bool
}

func newTestLog(t *testing.T) *testLog {
	l := &testLog{t: t}
	t.Cleanup(func() { l.mu.Lock(); l.done = true; l.mu.Unlock() })
	return l
}

func (l *testLog) Write(b []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.done {
		l.t.Log(strings.TrimRight(string(b), "\n"))
	}
	return len(b), nil
}

// TestServePipelines runs the design's example (a Rust conversation) against the daemon as `mneme
// run` starts it (notify transport, the pipelines registered), messages
// arriving while it works: with the fake LLM and offline. The sidecar
// connects as a member of mneme_worker and the application as a member of
// mneme_app, as in `make demo`; only the assertions read as superuser.
func TestServePipelines(t *testing.T) {
	for _, withLLM := range []bool{false, true} {
		t.Run(map[bool]string{false: "offline", true: "llm"}[withLLM], func(t *testing.T) {
			db := dbtest.New(t)
			ctx := context.Background()
			worker, workerURL := db.PoolAs(t, "mneme_worker")
			app, _ := db.PoolAs(t, "mneme_app")
			var super bool
			require.NoError(t, worker.QueryRow(ctx, `SELECT rolsuper FROM pg_roles WHERE rolname = current_user`).Scan(&super))
			require.False(t, super, "the sidecar is no superuser")
			cfg := config.Config{DatabaseURL: workerURL, Events: "notify", Concurrency: 2, PollEvery: 200 * time.Millisecond,
				SlotName: "unused", LLMTimeout: 5 * time.Second}
			if withLLM {
				srv := llmtest.New(t)
				srv.Default(fakeModel)
				cfg.LLM = config.Endpoint{BaseURL: srv.URL(), Model: "fake", APIKey: "k"}
			}
			log := slog.New(slog.NewTextHandler(newTestLog(t), &slog.HandlerOptions{Level: slog.LevelDebug}))
			d, err := daemon.New(ctx, cfg, worker, log)
			require.NoError(t, err)
			runCtx, cancel := context.WithCancel(ctx)
			done := make(chan error, 1)
			go func() { done <- d.Serve(runCtx) }()
			defer func() { cancel(); require.NoError(t, <-done) }()

			conv := uuid.New()
			say := func(at time.Time, role, content string) {
				_, err := app.Exec(ctx, `SELECT mneme.add_message($1, $2, $3, $4)`, conv, role, content, at)
				require.NoError(t, err)
			}
			waitCount := func(q string, want int) {
				require.Eventually(t, func() bool {
					var n int
					_ = db.Pool.QueryRow(ctx, q, conv).Scan(&n)
					return n == want
				}, 30*time.Second, 20*time.Millisecond, "waiting for %s = %d", q, want)
			}
			day1 := time.Date(2026, 3, 1, 8, 0, 0, 0, time.UTC)
			weather := []string{"What's the weather like in Berlin this weekend?", "Sunny on Saturday, around 24 degrees.",
				"Perfect for a bike ride by the Wannsee lake.", "Take a jacket; the wind by the lake is chilly.",
				"Good idea, I'll pack my windbreaker.", "Enjoy the ride!"}
			rust := []string{"I want to learn Rust this year.", "Start with the Rust book and the rustlings exercises.",
				"How does ownership work?", "Every value has one owner; borrowing lets you use it without taking ownership.",
				"And the borrow checker enforces that?", "Yes, the borrow checker checks references and lifetimes at compile time."}
			follow := []string{"Welcome back! Last time: ownership and the borrow checker.", "I did the rustlings move semantics exercises.",
				"Next are references, then lifetimes.", "Why must a reference not outlive its data?",
				"Otherwise the borrow checker would allow dangling references."}
			roles := []string{"user", "assistant"}
			for i, c := range weather {
				say(day1.Add(time.Duration(i)*time.Minute), roles[i%2], c)
			}
			for i, c := range rust {
				say(day1.Add(2*time.Hour+time.Duration(i)*time.Minute), roles[i%2], c)
			}
			waitCount(`SELECT count(*) FROM mneme.memories WHERE conversation_id = $1`, 1)
			day3 := day1.Add(48 * time.Hour)
			say(day3, "user", "I'm back at Rust after two days.")
			waitCount(`SELECT count(*) FROM mneme.memories WHERE conversation_id = $1`, 2)

			var n int
			require.NoError(t, app.QueryRow(ctx, `SELECT count(*) FROM mneme.retrieve($1, 'rust ownership borrow checker', 5)`, conv).Scan(&n))
			require.Equal(t, 2, n)
			for i, c := range follow {
				say(day3.Add(time.Duration(i+1)*time.Minute), roles[(i+1)%2], c)
			}
			say(day3.Add(24*time.Hour), "user", "Today: traits.")
			waitCount(`SELECT count(*) FROM mneme.review_log WHERE conversation_id = $1`, 2)
			waitCount(`SELECT count(*) FROM mneme.jobs WHERE conversation_id = $1 AND state NOT IN ('done')`, 0)

			rows, err := db.Pool.Query(ctx, `
				SELECT l.rating, l.stability_after > l.stability_before, m.content LIKE '%Rust%'
				FROM mneme.review_log l JOIN mneme.memories m ON m.conversation_id = l.conversation_id AND m.id = l.memory_id
				WHERE l.conversation_id = $1`, conv)
			require.NoError(t, err)
			defer rows.Close()
			for rows.Next() {
				var rating string
				var up, isRust bool
				require.NoError(t, rows.Scan(&rating, &up, &isRust))
				if isRust {
					require.Contains(t, []string{"good", "easy"}, rating)
					require.True(t, up)
				} else {
					require.Equal(t, "again", rating)
					require.False(t, up)
				}
			}
			require.NoError(t, rows.Err())
			waitCount(`SELECT count(*) FROM mneme.message_queue WHERE id = $1 AND pending_reviews IS NULL`, 1)
		})
	}
}
