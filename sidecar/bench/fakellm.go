package bench

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"regexp"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"
)

// fakeLLM is the OpenAI-compatible chat endpoint of `mneme bench ingest
// --llm fake`: it answers every schema the pipelines ask for at once and
// deterministically, and reports a token per word sent and received, so
// the run counts the calls and tokens the LLM paths make per message (not
// a model's quality or speed). The segmenter creates an episode on forced
// cuts with one fact, the reviser adds, the reviewer rates every memory
// good. (Not sidecar/llm/llmtest: that is test-only and this ships in the
// binary.)
type fakeLLM struct {
	srv *http.Server
	url string
}

var fakeMemoryID = regexp.MustCompile(`### Memory ([0-9a-f-]{36})`)

func startFakeLLM() (*fakeLLM, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("fake LLM: %w", err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/chat/completions", fakeChat)
	f := &fakeLLM{srv: &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}, url: "http://" + ln.Addr().String() + "/v1"}
	go func() { _ = f.srv.Serve(ln) }()
	return f, nil
}

func (f *fakeLLM) close() {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = f.srv.Shutdown(ctx)
}

type fakeRequest struct {
	Model    string `json:"model"`
	Messages []struct {
		Content string `json:"content"`
	} `json:"messages"`
	ResponseFormat struct {
		JSONSchema struct {
			Name string `json:"name"`
		} `json:"json_schema"`
	} `json:"response_format"`
}

func fakeChat(w http.ResponseWriter, r *http.Request) {
	var req fakeRequest
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil || len(req.Messages) < 2 {
		http.Error(w, `{"error":{"message":"bad request"}}`, http.StatusBadRequest)
		return
	}
	user := req.Messages[len(req.Messages)-1].Content
	var out any
	switch req.ResponseFormat.JSONSchema.Name {
	case "segment_decision":
		action, summary, facts := "skip", "", []any{}
		if strings.Contains(user, "The cut is forced") {
			action, summary = "create", "The user talks about their plans."
			facts = []any{map[string]any{"text": "The user has plans.", "messages": []int{1}}}
		}
		out = map[string]any{"action": action, "summary": summary, "surprise": 0.2, "label": "general", "pinned": false, "facts": facts}
	case "revision_decision":
		out = map[string]any{"action": "ADD", "target": 0, "reason": "new information", "confidence": 0.8}
	case "memory_ratings":
		rs := []map[string]string{}
		for _, m := range fakeMemoryID.FindAllStringSubmatch(user, -1) {
			rs = append(rs, map[string]string{"memory_id": m[1], "rating": "good"})
		}
		out = map[string]any{"ratings": rs}
	default:
		http.Error(w, `{"error":{"message":"unknown schema"}}`, http.StatusBadRequest)
		return
	}
	content, _ := json.Marshal(out)
	prompt := 0
	for _, m := range req.Messages {
		prompt += len(strings.Fields(m.Content))
	}
	completion := len(strings.Fields(string(content)))
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(map[string]any{
		"id": "fake", "object": "chat.completion", "created": time.Now().Unix(), "model": req.Model,
		"choices": []any{map[string]any{"index": 0, "finish_reason": "stop",
			"message": map[string]any{"role": "assistant", "content": string(content)}}},
		"usage": map[string]any{"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion},
	})
}

// LLMUse is the LLM use of one job kind in a run, per 1,000 messages
// written (from the usage ledger, mneme.llm_calls).
type LLMUse struct {
	Kind             string  `json:"kind"`
	Calls            float64 `json:"calls"`
	PromptTokens     float64 `json:"prompt_tokens"`
	CompletionTokens float64 `json:"completion_tokens"`
}

// llmUse reads the ledger rows of the run's conversations.
func llmUse(ctx context.Context, pool *pgxpool.Pool, convs []uuid.UUID, messages int64) ([]LLMUse, error) {
	if messages <= 0 {
		return nil, errors.New("no messages written")
	}
	rows, err := pool.Query(ctx, `
		SELECT job_kind || '/' || call, count(*), sum(prompt_tokens), sum(completion_tokens)
		FROM mneme.llm_calls WHERE conversation_id = ANY ($1) GROUP BY 1 ORDER BY 1`, convs)
	if err != nil {
		return nil, fmt.Errorf("read the usage ledger: %w", err)
	}
	defer rows.Close()
	var out []LLMUse
	per := 1000 / float64(messages)
	for rows.Next() {
		var u LLMUse
		var calls, p, c int64
		if err := rows.Scan(&u.Kind, &calls, &p, &c); err != nil {
			return nil, err
		}
		u.Calls, u.PromptTokens, u.CompletionTokens = float64(calls)*per, float64(p)*per, float64(c)*per
		out = append(out, u)
	}
	return out, rows.Err()
}
