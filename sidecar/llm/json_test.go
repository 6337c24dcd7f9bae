package llm_test

import (
	"context"
	"errors"
	"net/http"
	"sync"
	"testing"
	"time"

	openai "github.com/sashabaranov/go-openai"
	"github.com/stretchr/testify/require"

	"github.com/mneme-memory/mneme/sidecar/backoff"
	"github.com/mneme-memory/mneme/sidecar/config"
	"github.com/mneme-memory/mneme/sidecar/llm"
	"github.com/mneme-memory/mneme/sidecar/llm/llmtest"
)

type verdict struct {
	Decision string  `json:"decision" enum:"create,skip"`
	Summary  string  `json:"summary"`
	Surprise float64 `json:"surprise"`
}

func (v verdict) Validate() error {
	if v.Surprise < 0 || v.Surprise > 1 {
		return errors.New("surprise must be between 0 and 1")
	}
	return nil
}

type calls struct {
	mu   sync.Mutex
	errs []error
}

func (c *calls) observe(_ string, _ time.Duration, err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.errs = append(c.errs, err)
}

func (c *calls) count() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.errs)
}

func newClient(srv *llmtest.Server, timeout time.Duration, obs *calls) *llm.Client {
	return llm.New(config.Endpoint{BaseURL: srv.URL(), Model: "test-model", APIKey: "k"}, timeout,
		llm.WithBackoff(backoff.Policy{Base: time.Millisecond, Max: 5 * time.Millisecond}),
		llm.WithObserver(obs.observe))
}

var untouched = verdict{Decision: "untouched", Summary: "keep me", Surprise: 0.5}

func TestJSONSuccess(t *testing.T) {
	srv := llmtest.New(t)
	srv.Script(llmtest.Reply{Content: `{"decision":"create","summary":"moved to Lisbon","surprise":0.25}`})
	obs := &calls{}
	var out verdict
	require.NoError(t, newClient(srv, time.Second, obs).JSON(context.Background(), "sys", "usr", "segment", &out))
	require.Equal(t, verdict{Decision: "create", Summary: "moved to Lisbon", Surprise: 0.25}, out)

	reqs := srv.Requests()
	require.Len(t, reqs, 1)
	req := reqs[0]
	require.Equal(t, "test-model", req.Model)
	require.Len(t, req.Messages, 2)
	require.Equal(t, "sys", req.Messages[0].Content)
	require.Equal(t, "usr", req.Messages[1].Content)
	require.NotNil(t, req.ResponseFormat)
	require.Equal(t, openai.ChatCompletionResponseFormatTypeJSONSchema, req.ResponseFormat.Type)
	require.Equal(t, "segment", req.ResponseFormat.JSONSchema.Name)
	require.True(t, req.ResponseFormat.JSONSchema.Strict)
	schema, err := req.ResponseFormat.JSONSchema.Schema.MarshalJSON()
	require.NoError(t, err)
	require.JSONEq(t, `{"type":"object","additionalProperties":false,
		"properties":{"decision":{"type":"string","enum":["create","skip"]},"summary":{"type":"string"},"surprise":{"type":"number"}},
		"required":["decision","summary","surprise"]}`, string(schema))
	require.Equal(t, 1, obs.count())
}

func TestJSONInvalidOutputLeavesOutUntouched(t *testing.T) {
	cases := map[string]string{
		"malformed":        `{"decision":"create","summary":`,
		"not an object":    `["create"]`,
		"missing field":    `{"decision":"create","summary":"x"}`,
		"wrong type":       `{"decision":"create","summary":"x","surprise":"high"}`,
		"enum violated":    `{"decision":"maybe","summary":"x","surprise":0.1}`,
		"extra field":      `{"decision":"create","summary":"x","surprise":0.1,"extra":1}`,
		"Validate refuses": `{"decision":"create","summary":"x","surprise":7}`,
	}
	for name, content := range cases {
		t.Run(name, func(t *testing.T) {
			srv := llmtest.New(t)
			srv.Script(llmtest.Reply{Content: content})
			out := untouched
			err := newClient(srv, time.Second, &calls{}).JSON(context.Background(), "s", "u", "segment", &out)
			require.ErrorIs(t, err, llm.ErrInvalidOutput)
			require.Equal(t, untouched, out)
			require.Len(t, srv.Requests(), 1, "invalid output is not retried by the client")
		})
	}
}

func TestJSONRetriesTemporaryErrors(t *testing.T) {
	for _, status := range []int{http.StatusTooManyRequests, http.StatusInternalServerError, http.StatusBadGateway} {
		t.Run(http.StatusText(status), func(t *testing.T) {
			srv := llmtest.New(t)
			srv.Script(llmtest.Reply{Status: status}, llmtest.Reply{Content: `{"decision":"skip","summary":"","surprise":0}`})
			obs := &calls{}
			var out verdict
			require.NoError(t, newClient(srv, time.Second, obs).JSON(context.Background(), "s", "u", "segment", &out))
			require.Equal(t, "skip", out.Decision)
			require.Len(t, srv.Requests(), 2)
			require.Equal(t, 2, obs.count())
			require.Error(t, obs.errs[0])
			require.NoError(t, obs.errs[1])
		})
	}
}

func TestJSONGivesUpAfterAttempts(t *testing.T) {
	srv := llmtest.New(t)
	srv.Script(llmtest.Reply{Status: 503}, llmtest.Reply{Status: 503}, llmtest.Reply{Status: 503}, llmtest.Reply{Status: 503})
	out := untouched
	c := llm.New(config.Endpoint{BaseURL: srv.URL(), Model: "m"}, time.Second,
		llm.WithAttempts(3), llm.WithBackoff(backoff.Policy{Base: time.Millisecond, Max: time.Millisecond}))
	err := c.JSON(context.Background(), "s", "u", "segment", &out)
	require.Error(t, err)
	require.True(t, llm.Temporary(err), "the last error is the 503: %v", err)
	require.Len(t, srv.Requests(), 3)
	require.Equal(t, untouched, out)
}

func TestJSONDoesNotRetryClientErrors(t *testing.T) {
	srv := llmtest.New(t)
	srv.Script(llmtest.Reply{Status: http.StatusBadRequest, Content: "bad schema"})
	var out verdict
	err := newClient(srv, time.Second, &calls{}).JSON(context.Background(), "s", "u", "segment", &out)
	require.ErrorContains(t, err, "bad schema")
	require.Len(t, srv.Requests(), 1)
}

func TestJSONTimeoutIsRetried(t *testing.T) {
	srv := llmtest.New(t)
	srv.Script(llmtest.Reply{Delay: 5 * time.Second, Content: `{}`},
		llmtest.Reply{Content: `{"decision":"create","summary":"s","surprise":1}`})
	obs := &calls{}
	var out verdict
	start := time.Now()
	require.NoError(t, newClient(srv, 200*time.Millisecond, obs).JSON(context.Background(), "s", "u", "segment", &out))
	require.Less(t, time.Since(start), 4*time.Second, "the slow attempt was cut at the per-attempt timeout")
	require.Equal(t, "create", out.Decision)
	require.Equal(t, 2, obs.count())
	require.Error(t, obs.errs[0])
}

func TestJSONTimeoutEveryAttempt(t *testing.T) {
	srv := llmtest.New(t)
	srv.Default(func(openai.ChatCompletionRequest) llmtest.Reply { return llmtest.Reply{Delay: 5 * time.Second} })
	out := untouched
	c := llm.New(config.Endpoint{BaseURL: srv.URL(), Model: "m"}, 100*time.Millisecond,
		llm.WithAttempts(2), llm.WithBackoff(backoff.Policy{Base: time.Millisecond, Max: time.Millisecond}))
	err := c.JSON(context.Background(), "s", "u", "segment", &out)
	require.ErrorContains(t, err, "timed out")
	require.Len(t, srv.Requests(), 2)
	require.Equal(t, untouched, out)
}

func TestJSONHonoursCallerContext(t *testing.T) {
	srv := llmtest.New(t)
	srv.Default(func(openai.ChatCompletionRequest) llmtest.Reply { return llmtest.Reply{Delay: 5 * time.Second} })
	ctx, cancel := context.WithTimeout(context.Background(), 150*time.Millisecond)
	defer cancel()
	var out verdict
	err := newClient(srv, time.Minute, &calls{}).JSON(ctx, "s", "u", "segment", &out)
	require.ErrorIs(t, err, context.DeadlineExceeded)
	require.Len(t, srv.Requests(), 1, "a cancelled caller is not retried")
}

func TestJSONRejectsNonPointer(t *testing.T) {
	srv := llmtest.New(t)
	err := newClient(srv, time.Second, &calls{}).JSON(context.Background(), "s", "u", "x", verdict{})
	require.ErrorContains(t, err, "non-nil pointer")
	require.Empty(t, srv.Requests())
}
