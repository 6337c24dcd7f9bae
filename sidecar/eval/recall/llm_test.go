package recall_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/sashabaranov/go-openai"
	"github.com/stretchr/testify/require"

	"github.com/mneme-memory/mneme/sidecar/config"
	"github.com/mneme-memory/mneme/sidecar/dbtest"
	"github.com/mneme-memory/mneme/sidecar/eval/recall"
	"github.com/mneme-memory/mneme/sidecar/llm/llmtest"
)

// With an LLM configured, segmentation goes through it (the real go-openai
// client against the fake server) and the evaluation runs the same way.
func TestRunWithLLMSegmenter(t *testing.T) {
	srv := llmtest.New(t)
	srv.Default(func(openai.ChatCompletionRequest) llmtest.Reply {
		b, _ := json.Marshal(map[string]any{"action": "create", "summary": "Two friends catch up.", "surprise": 0.5, "label": "general", "pinned": false, "facts": []any{}})
		return llmtest.Reply{Content: string(b)}
	})
	db := dbtest.New(t)
	cfg := config.Config{LLM: config.Endpoint{BaseURL: srv.URL(), Model: "fake"}, LLMTimeout: 10 * time.Second}
	rep, err := recall.Run(context.Background(), db.Pool, recall.Options{Budgets: []int{2000}, Config: cfg}, load(t))
	require.NoError(t, err)
	require.NotEmpty(t, srv.Requests(), "the LLM segmented")
	require.Equal(t, "offline, LLM fake", rep.Mode)
	require.Positive(t, rep.Memories.Count)
	require.InDelta(t, (1+1+1+0.5+1+1)/6.0, rep.Result(recall.MethodMneme, 2000).Overall.Recall, 1e-4)

	var withSummary int
	require.NoError(t, db.Pool.QueryRow(context.Background(),
		`SELECT count(*) FROM mneme.memories WHERE summary = 'Two friends catch up.'`).Scan(&withSummary))
	require.Equal(t, rep.Memories.Count, withSummary)
}
