// Package llmtest is a fake OpenAI-compatible server for tests: it replays
// scripted chat replies and serves deterministic embeddings, so tests drive
// the real go-openai client over real HTTP.
package llmtest

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	openai "github.com/sashabaranov/go-openai"
)

// Reply is one scripted answer.
type Reply struct {
	Content string        // the assistant message content (chat)
	Status  int           // HTTP status; 0 means 200. Non-200 sends an OpenAI error body.
	Delay   time.Duration // wait before answering (cut short if the client goes away)
	// Usage is the token usage reported with a 200 answer; nil reports
	// Words: a token per word sent and received (a test can tell it from
	// the client's estimate, a token per 4 characters).
	Usage *openai.Usage
	// NoUsage leaves usage out of the answer, as some endpoints do.
	NoUsage bool
}

// Words is the usage the server reports by default: a token per
// whitespace-separated word of the request's messages (prompt) and of the
// answer (completion).
func Words(prompt []string, completion string) openai.Usage {
	var p int
	for _, m := range prompt {
		p += len(strings.Fields(m))
	}
	c := len(strings.Fields(completion))
	return openai.Usage{PromptTokens: p, CompletionTokens: c, TotalTokens: p + c}
}

// EmbedRequest is one received embeddings request.
type EmbedRequest struct {
	Model      string   `json:"model"`
	Input      []string `json:"input"`
	Dimensions int      `json:"dimensions,omitempty"`
}

// Server is the fake endpoint. Its methods are safe for concurrent use.
type Server struct {
	srv *httptest.Server

	mu        sync.Mutex
	script    []Reply
	embScript []Reply
	respond   func(openai.ChatCompletionRequest) Reply
	chats     []openai.ChatCompletionRequest
	embeds    []EmbedRequest
	dim       int
	vectors   func(text string, dim int) []float32
}

// New starts a server that t closes at the end.
func New(t testing.TB) *Server {
	s := &Server{dim: 256}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/chat/completions", s.chat)
	mux.HandleFunc("POST /v1/embeddings", s.embeddings)
	s.srv = httptest.NewServer(mux)
	t.Cleanup(s.Close)
	return s
}

// Close stops the server. Safe to call twice.
func (s *Server) Close() { s.srv.Close() }

// URL is the base URL including /v1, for config.Endpoint.BaseURL.
func (s *Server) URL() string { return s.srv.URL + "/v1" }

// Script queues chat replies, served in order, one per request.
func (s *Server) Script(replies ...Reply) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.script = append(s.script, replies...)
}

// Default sets the responder used when the chat script is empty. Without
// one, an unscripted chat request gets HTTP 500 with a message saying so.
func (s *Server) Default(f func(openai.ChatCompletionRequest) Reply) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.respond = f
}

// ScriptEmbed queues replies for embeddings requests (Status and Delay are
// used; a 200 reply serves the deterministic vectors). When empty, every
// embeddings request succeeds.
func (s *Server) ScriptEmbed(replies ...Reply) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.embScript = append(s.embScript, replies...)
}

// SetEmbedDim sets the dimension of served embeddings when the request does
// not ask for one (default 256).
func (s *Server) SetEmbedDim(n int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.dim = n
}

// Requests returns the chat requests received so far.
func (s *Server) Requests() []openai.ChatCompletionRequest {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]openai.ChatCompletionRequest(nil), s.chats...)
}

// EmbedRequests returns the embeddings requests received so far.
func (s *Server) EmbedRequests() []EmbedRequest {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]EmbedRequest(nil), s.embeds...)
}

func (s *Server) chat(w http.ResponseWriter, r *http.Request) {
	var req openai.ChatCompletionRequest
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
		writeError(w, http.StatusBadRequest, "llmtest: bad request body: "+err.Error())
		return
	}
	s.mu.Lock()
	s.chats = append(s.chats, req)
	var rep Reply
	switch {
	case len(s.script) > 0:
		rep, s.script = s.script[0], s.script[1:]
	case s.respond != nil:
		f := s.respond
		s.mu.Unlock()
		rep = f(req)
		s.mu.Lock()
	default:
		rep = Reply{Status: http.StatusInternalServerError, Content: "llmtest: no scripted reply left"}
	}
	s.mu.Unlock()
	if !wait(r, rep.Delay) {
		return
	}
	if rep.Status != 0 && rep.Status != http.StatusOK {
		writeError(w, rep.Status, "llmtest: scripted status: "+rep.Content)
		return
	}
	var prompt []string
	for _, m := range req.Messages {
		prompt = append(prompt, m.Content)
	}
	u := Words(prompt, rep.Content)
	if rep.Usage != nil {
		u = *rep.Usage
	}
	if rep.NoUsage {
		u = openai.Usage{}
	}
	writeJSON(w, http.StatusOK, openai.ChatCompletionResponse{
		Usage:   u,
		ID:      fmt.Sprintf("chatcmpl-%d", time.Now().UnixNano()),
		Object:  "chat.completion",
		Created: time.Now().Unix(),
		Model:   req.Model,
		Choices: []openai.ChatCompletionChoice{{
			Index:        0,
			Message:      openai.ChatCompletionMessage{Role: openai.ChatMessageRoleAssistant, Content: rep.Content},
			FinishReason: openai.FinishReasonStop,
		}},
	})
}

func (s *Server) embeddings(w http.ResponseWriter, r *http.Request) {
	var req EmbedRequest
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
		writeError(w, http.StatusBadRequest, "llmtest: bad embeddings body (input must be a list of strings): "+err.Error())
		return
	}
	s.mu.Lock()
	s.embeds = append(s.embeds, req)
	var rep Reply
	if len(s.embScript) > 0 {
		rep, s.embScript = s.embScript[0], s.embScript[1:]
	}
	dim := s.dim
	vectors := s.vectors
	s.mu.Unlock()
	if vectors == nil {
		vectors = Vector
	}
	if req.Dimensions > 0 {
		dim = req.Dimensions
	}
	if !wait(r, rep.Delay) {
		return
	}
	if rep.Status != 0 && rep.Status != http.StatusOK {
		writeError(w, rep.Status, "llmtest: scripted status: "+rep.Content)
		return
	}
	u := Words(req.Input, "")
	if rep.Usage != nil {
		u = *rep.Usage
	}
	if rep.NoUsage {
		u = openai.Usage{}
	}
	resp := openai.EmbeddingResponse{Object: "list", Model: openai.EmbeddingModel(req.Model), Usage: u}
	for i, text := range req.Input {
		resp.Data = append(resp.Data, openai.Embedding{Object: "embedding", Index: i, Embedding: vectors(text, dim)})
	}
	writeJSON(w, http.StatusOK, resp)
}

// Vectors sets the function that gives each text's embedding (default
// Vector): a test can put chosen paraphrases close together.
func (s *Server) Vectors(f func(text string, dim int) []float32) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.vectors = f
}

// Vector is the deterministic unit vector the server returns for text.
func Vector(text string, dim int) []float32 {
	v := make([]float32, dim)
	var norm float64
	for i := range v {
		h := sha256.Sum256([]byte(fmt.Sprintf("%d\x00%s", i/8, text)))
		x := binary.LittleEndian.Uint32(h[(i%8)*4:])
		f := float64(x)/float64(math.MaxUint32)*2 - 1
		v[i] = float32(f)
		norm += f * f
	}
	norm = math.Sqrt(norm)
	for i := range v {
		v[i] = float32(float64(v[i]) / norm)
	}
	return v
}

func wait(r *http.Request, d time.Duration) bool {
	if d <= 0 {
		return true
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-r.Context().Done():
		return false
	}
}

func writeError(w http.ResponseWriter, status int, msg string) {
	writeJSON(w, status, map[string]any{"error": map[string]any{
		"message": msg, "type": "llmtest_error", "code": status,
	}})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}
