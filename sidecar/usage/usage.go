// Package usage is the one place every model call (a chat completion or an
// embeddings request to an OpenAI-compatible endpoint) is recorded: the
// LLM and embedding clients report each call here, with its tokens as the
// endpoint reported them or estimated (marked), its latency, outcome and
// retries. A Recorder passes each call to its sink (metrics) and to the
// Ledger of the job the call was made for (carried by the context); the
// job runner writes a ledger's calls into mneme.llm_calls in the
// transaction that ends the job's attempt (Write), so a retried job counts
// each attempt once and a rolled-back one not at all.
package usage

import (
	"context"
	"errors"
	"net/url"
	"regexp"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/mneme-memory/mneme/sidecar/tracing"
)

// The calls.
const (
	CallChat      = "chat"
	CallEmbedding = "embedding"
)

// Usage: how the tokens of a call were counted.
const (
	UsageReported = "reported" // as the endpoint reported them
	UsageMissing  = "missing"  // the endpoint reported none: estimated
	UsageInvalid  = "invalid"  // the endpoint reported nonsense (negative, huge): estimated
)

// Outcomes of a call.
const (
	OutcomeOK            = "ok"
	OutcomeError         = "error"
	OutcomeTimeout       = "timeout"
	OutcomeInvalidOutput = "invalid_output"
	OutcomeCanceled      = "canceled"
)

// MaxTokens is the most tokens one call is believed to report for either
// side; more is nonsense (UsageInvalid).
const MaxTokens = 10_000_000

// NoJob is the kind of calls made outside a job (query embeddings of the
// MCP server and the UI, imports): counted by the sink, in no ledger.
const NoJob = "none"

// Call is one model call: one request as the caller sees it, its HTTP
// retries included.
type Call struct {
	Call             string        `json:"call"`    // chat or embedding
	Purpose          string        `json:"purpose"` // what it was for: the schema name of a chat, "embedding"
	Model            string        `json:"model"`
	Endpoint         string        `json:"endpoint"` // the endpoint's host, no path, query or credentials
	PromptTokens     int64         `json:"prompt_tokens"`
	CompletionTokens int64         `json:"completion_tokens"`
	Usage            string        `json:"usage"`
	Latency          time.Duration `json:"-"`
	LatencyMS        float64       `json:"latency_ms"`
	Outcome          string        `json:"outcome"`
	Retries          int           `json:"retries"`
	At               time.Time     `json:"at"`

	// Set by the Recorder from the context's ledger (not stored: the
	// database takes them from the job).
	JobKind string `json:"-"`
	Tenant  string `json:"-"`
}

// Tokens are what the endpoint reported for a call (ok false: it reported
// no usage at all) and what the request and answer hold, for the estimate.
type Tokens struct {
	Prompt, Completion int64
	Reported           bool
	PromptChars        int // characters sent
	CompletionChars    int // characters received
}

// Settle fills c's token counts and Usage from t: the reported numbers when
// they are sane, else an estimate (a token per 4 characters, the usual rule
// of thumb for English with OpenAI's tokenizers) marked missing or invalid.
func (c *Call) Settle(t Tokens) {
	switch {
	case !t.Reported:
		c.Usage = UsageMissing
	case t.Prompt < 0 || t.Completion < 0 || t.Prompt > MaxTokens || t.Completion > MaxTokens:
		c.Usage = UsageInvalid
	default:
		c.Usage = UsageReported
		c.PromptTokens, c.CompletionTokens = t.Prompt, t.Completion
		return
	}
	c.PromptTokens = Estimate(t.PromptChars)
	c.CompletionTokens = Estimate(t.CompletionChars)
}

// Estimate is the token estimate for n characters: ceil(n / 4).
func Estimate(chars int) int64 {
	if chars <= 0 {
		return 0
	}
	return int64((chars + 3) / 4)
}

// Outcome classifies a call's final error (nil: ok). timeout and canceled
// are told apart by the caller, which knows its context; invalid marks
// errors about what the model returned.
func Outcome(err error, timedOut, canceled, invalid bool) string {
	switch {
	case err == nil:
		return OutcomeOK
	case canceled:
		return OutcomeCanceled
	case timedOut || errors.Is(err, context.DeadlineExceeded):
		return OutcomeTimeout
	case invalid:
		return OutcomeInvalidOutput
	default:
		return OutcomeError
	}
}

// Endpoint is the name of an endpoint as the ledger keeps it: the host
// (and port) of its base URL, nothing that could hold a secret.
func Endpoint(baseURL string) string {
	u, err := url.Parse(baseURL)
	if err != nil || u.Host == "" {
		return ""
	}
	return u.Host
}

// Sink is told about every call (metrics). It must be fast and safe for
// concurrent use.
type Sink func(context.Context, Call)

// Recorder is the one place calls are recorded. A nil Recorder still
// hands calls to the context's ledger.
type Recorder struct {
	sink Sink
}

// NewRecorder returns a recorder that tells sink (nil: nothing) about every
// call.
func NewRecorder(sink Sink) *Recorder { return &Recorder{sink: sink} }

// Record records one call: its job scope from ctx, then the sink and the
// ledger of ctx, if any.
func (r *Recorder) Record(ctx context.Context, c Call) {
	if c.At.IsZero() {
		c.At = time.Now()
	}
	c.LatencyMS = float64(c.Latency) / float64(time.Millisecond)
	// What the ledger's checks refuse never reaches them: the row is
	// written, marked, rather than lost.
	if !purposeRE.MatchString(c.Purpose) {
		c.Purpose = "other"
	}
	c.Model = clip(c.Model, 200)
	if c.Model == "" {
		c.Model = "unknown"
	}
	c.Endpoint = clip(c.Endpoint, 200)
	if c.Retries < 0 {
		c.Retries = 0
	}
	l := FromContext(ctx)
	c.JobKind = NoJob
	if l != nil {
		c.JobKind, c.Tenant = l.Kind, l.Tenant
	}
	// The call's span, made after the fact from its start and end (a
	// child of the job's span): a no-op one when tracing is off.
	sctx, span := tracing.Tracer().Start(ctx, c.Call+" "+c.Purpose, trace.WithTimestamp(c.At.Add(-c.Latency)),
		trace.WithSpanKind(trace.SpanKindClient))
	if span.IsRecording() {
		span.SetAttributes(
			attribute.String("gen_ai.request.model", c.Model),
			attribute.String("gen_ai.operation.name", map[string]string{CallChat: "chat", CallEmbedding: "embeddings"}[c.Call]),
			attribute.Int64("gen_ai.usage.input_tokens", c.PromptTokens),
			attribute.Int64("gen_ai.usage.output_tokens", c.CompletionTokens),
			attribute.String("mneme.llm.usage", c.Usage),
			attribute.String("mneme.llm.outcome", c.Outcome),
			attribute.Int("mneme.llm.retries", c.Retries),
			attribute.String("mneme.llm.endpoint", c.Endpoint),
			attribute.String("mneme.job.kind", c.JobKind),
			attribute.String("mneme.tenant", c.Tenant))
		if c.Outcome != OutcomeOK {
			span.SetStatus(codes.Error, c.Outcome)
		}
	}
	span.End(trace.WithTimestamp(c.At))
	if r != nil && r.sink != nil {
		r.sink(sctx, c)
	}
	if l != nil {
		l.add(c)
	}
}

var purposeRE = regexp.MustCompile(`^[a-z][a-z0-9_]{0,62}$`)

// clip cuts s to at most n characters (runes).
func clip(s string, n int) string {
	s = strings.ToValidUTF8(strings.ReplaceAll(s, "\x00", ""), "")
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	return string([]rune(s)[:n])
}

// Ledger collects the calls made for one attempt of one job.
type Ledger struct {
	Kind   string // the job's kind
	Tenant string // the job's tenant ("" when unknown)

	mu    sync.Mutex
	calls []Call
	total Totals
}

// Totals are a ledger's calls and tokens so far, written or not.
type Totals struct {
	Calls, PromptTokens, CompletionTokens int64
}

type ledgerKey struct{}

// WithLedger returns ctx carrying a new ledger for a job of kind and tenant.
func WithLedger(ctx context.Context, kind, tenant string) (context.Context, *Ledger) {
	l := &Ledger{Kind: kind, Tenant: tenant}
	return context.WithValue(ctx, ledgerKey{}, l), l
}

// FromContext is ctx's ledger, or nil.
func FromContext(ctx context.Context) *Ledger {
	l, _ := ctx.Value(ledgerKey{}).(*Ledger)
	return l
}

func (l *Ledger) add(c Call) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.calls = append(l.calls, c)
	l.total.Calls++
	l.total.PromptTokens += c.PromptTokens
	l.total.CompletionTokens += c.CompletionTokens
}

// Totals are the calls recorded for the job so far.
func (l *Ledger) Totals() Totals {
	if l == nil {
		return Totals{}
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.total
}

// Pending is a copy of the calls not yet written.
func (l *Ledger) Pending() []Call {
	if l == nil {
		return nil
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]Call(nil), l.calls...)
}

// Written drops the first n calls, which a committed transaction wrote.
func (l *Ledger) Written(n int) {
	if l == nil {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.calls = l.calls[min(n, len(l.calls)):]
}
