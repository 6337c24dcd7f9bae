package revision

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"time"

	openai "github.com/sashabaranov/go-openai"
)

// reply is one answer of the scripted model: the assistant message's
// content, or with a status other than 200 an OpenAI error whose message
// is content.
type reply struct {
	status  int
	content string
}

// server is the scripted model's OpenAI-compatible endpoint: POST
// /v1/chat/completions on a loopback port, each request answered by
// respond. It is the evaluation's own, a few lines, so that the binary
// does not carry the tests' fake server (package llmtest).
type server struct {
	http *http.Server
	url  string // the base URL, with /v1
}

func serve(respond func(openai.ChatCompletionRequest) reply) (*server, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("scripted model: %w", err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/chat/completions", func(w http.ResponseWriter, r *http.Request) {
		var req openai.ChatCompletionRequest
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
			writeJSON(w, reply{status: http.StatusBadRequest, content: "bad request body: " + err.Error()}, "")
			return
		}
		writeJSON(w, respond(req), req.Model)
	})
	s := &server{http: &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}, url: "http://" + ln.Addr().String() + "/v1"}
	go func() { _ = s.http.Serve(ln) }() // returns when closed
	return s, nil
}

// close stops the server. Safe to call twice.
func (s *server) close() {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = s.http.Shutdown(ctx)
}

// writeJSON sends rep as a chat completion, or as an OpenAI error body.
func writeJSON(w http.ResponseWriter, rep reply, model string) {
	status := http.StatusOK
	var body any = openai.ChatCompletionResponse{
		Object: "chat.completion", Created: time.Now().Unix(), Model: model,
		Choices: []openai.ChatCompletionChoice{{
			Message:      openai.ChatCompletionMessage{Role: openai.ChatMessageRoleAssistant, Content: rep.content},
			FinishReason: openai.FinishReasonStop,
		}},
	}
	if rep.status != 0 && rep.status != http.StatusOK {
		status = rep.status
		body = map[string]any{"error": map[string]any{"message": "scripted: " + rep.content, "type": "scripted_error", "code": status}}
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(body)
}
