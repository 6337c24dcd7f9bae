package tests

import (
	"context"
	"fmt"
	"testing"
	"time"

	openai "github.com/sashabaranov/go-openai"
	"github.com/stretchr/testify/require"

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
