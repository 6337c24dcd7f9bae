// Package llm is mneme's client for OpenAI-compatible chat endpoints
// (OpenAI, Ollama, vLLM, ...) through go-openai: structured output with a
// JSON schema generated from a Go type, per-attempt timeouts, retries on
// 429 and 5xx, and validation of what comes back before the caller sees it.
package llm

import (
	"context"
	"errors"
	"net"
	"net/http"
	"time"

	openai "github.com/sashabaranov/go-openai"

	"github.com/mneme-memory/mneme/sidecar/backoff"
	"github.com/mneme-memory/mneme/sidecar/config"
	"github.com/mneme-memory/mneme/sidecar/usage"
)

// Observer is told about every HTTP attempt: its latency and its error (nil
// on success). Metrics hook in here.
type Observer func(op string, d time.Duration, err error)

// Client calls one chat model. It is safe for concurrent use.
type Client struct {
	api        *openai.Client
	httpClient *http.Client
	model      string
	timeout    time.Duration
	attempts   int
	policy     backoff.Policy
	observe    Observer
	record     *usage.Recorder
	endpoint   string
}

// Option tunes New.
type Option func(*Client)

// WithAttempts sets how many HTTP attempts one call may make (default 4).
func WithAttempts(n int) Option {
	return func(c *Client) {
		if n > 0 {
			c.attempts = n
		}
	}
}

// WithBackoff sets the retry schedule (default 500ms doubling to 10s).
func WithBackoff(p backoff.Policy) Option { return func(c *Client) { c.policy = p } }

// WithObserver reports each attempt's latency and error.
func WithObserver(o Observer) Option { return func(c *Client) { c.observe = o } }

// WithRecorder records every call (the usage ledger and its metrics).
func WithRecorder(r *usage.Recorder) Option { return func(c *Client) { c.record = r } }

// New returns a client for ep. timeout bounds each HTTP attempt.
func New(ep config.Endpoint, timeout time.Duration, opts ...Option) *Client {
	c := &Client{
		model:    ep.Model,
		endpoint: usage.Endpoint(ep.BaseURL),
		timeout:  timeout,
		attempts: 4,
		policy:   backoff.Policy{Base: 500 * time.Millisecond, Max: 10 * time.Second},
		observe:  func(string, time.Duration, error) {},
	}
	for _, o := range opts {
		if o != nil {
			o(c)
		}
	}
	c.api = NewAPI(ep, c.httpClient)
	return c
}

// NewAPI returns a bare go-openai client for ep, for callers (the embedding
// client) that share this package's retry rules but not its chat method.
// A nil h means http.DefaultClient.
func NewAPI(ep config.Endpoint, h *http.Client) *openai.Client {
	cfg := openai.DefaultConfig(ep.APIKey)
	cfg.BaseURL = ep.BaseURL
	if h != nil {
		cfg.HTTPClient = h
	}
	return openai.NewClientWithConfig(cfg)
}

// Model is the configured model name.
func (c *Client) Model() string { return c.model }

// TimedOut reports whether err ended on an attempt's own timeout.
func TimedOut(err error) bool { return errors.Is(err, errAttemptTimeout) }

// Temporary reports whether err is worth retrying: HTTP 429 and 5xx,
// transport errors and an attempt's own timeout. The caller's cancellation
// is never temporary.
func Temporary(err error) bool {
	if err == nil {
		return false
	}
	var apiErr *openai.APIError
	if errors.As(err, &apiErr) {
		return retryableStatus(apiErr.HTTPStatusCode)
	}
	var reqErr *openai.RequestError
	if errors.As(err, &reqErr) {
		return retryableStatus(reqErr.HTTPStatusCode)
	}
	if errors.Is(err, errAttemptTimeout) {
		return true
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return false
	}
	var netErr net.Error
	return errors.As(err, &netErr)
}

func retryableStatus(code int) bool {
	return code == http.StatusTooManyRequests || code >= 500
}

// Retry runs call up to attempts times with a per-attempt timeout, retrying
// Temporary errors with backoff. It returns the last error, wrapped.
func Retry(ctx context.Context, op string, attempts int, timeout time.Duration, p backoff.Policy, observe Observer,
	call func(ctx context.Context) error) error {
	var err error
	for attempt := 1; ; attempt++ {
		start := time.Now()
		err = runAttempt(ctx, timeout, call)
		if observe != nil {
			observe(op, time.Since(start), err)
		}
		if err == nil || !Temporary(err) || attempt >= attempts || ctx.Err() != nil {
			break
		}
		if serr := backoff.Sleep(ctx, p.Delay(attempt)); serr != nil {
			return errors.Join(err, serr)
		}
	}
	return err
}

var errAttemptTimeout = errors.New("attempt timed out")

func runAttempt(ctx context.Context, timeout time.Duration, call func(ctx context.Context) error) error {
	actx := ctx
	cancel := func() {}
	if timeout > 0 {
		actx, cancel = context.WithTimeoutCause(ctx, timeout, errAttemptTimeout)
	}
	defer cancel()
	err := call(actx)
	if err != nil && ctx.Err() == nil && errors.Is(context.Cause(actx), errAttemptTimeout) {
		return errors.Join(errAttemptTimeout, err)
	}
	return err
}
