package embed

import (
	"context"
	"errors"
	"fmt"
	"time"

	openai "github.com/sashabaranov/go-openai"

	"github.com/mneme-memory/mneme/sidecar/backoff"
	"github.com/mneme-memory/mneme/sidecar/config"
	"github.com/mneme-memory/mneme/sidecar/llm"
	"github.com/mneme-memory/mneme/sidecar/usage"
)

// ErrDimension is wrapped when the endpoint returns vectors of another
// dimension than the schema's embedding column.
var ErrDimension = errors.New("embedding dimension mismatch")

// OpenAI embeds through an OpenAI-compatible /embeddings endpoint, in
// batches, with the same retry rules as the LLM client.
type OpenAI struct {
	api      *openai.Client
	model    string
	dim      int
	batch    int
	timeout  time.Duration
	attempts int
	policy   backoff.Policy
	observe  llm.Observer
	record   *usage.Recorder
	endpoint string
}

// OpenAIOption tunes NewOpenAI.
type OpenAIOption func(*OpenAI)

// WithBatch sets how many texts go into one request (default 64).
func WithBatch(n int) OpenAIOption {
	return func(o *OpenAI) {
		if n > 0 {
			o.batch = n
		}
	}
}

// WithBackoff sets the retry schedule.
func WithBackoff(p backoff.Policy) OpenAIOption { return func(o *OpenAI) { o.policy = p } }

// WithObserver reports each attempt's latency and error (metrics).
func WithObserver(f llm.Observer) OpenAIOption { return func(o *OpenAI) { o.observe = f } }

// WithRecorder records every embeddings request (the usage ledger and its
// metrics).
func WithRecorder(r *usage.Recorder) OpenAIOption { return func(o *OpenAI) { o.record = r } }

// NewOpenAI returns an embedder for ep whose vectors must have dim
// dimensions (the embedding column's, fixed at migrate time).
func NewOpenAI(ep config.Endpoint, dim int, opts ...OpenAIOption) *OpenAI {
	o := &OpenAI{
		api:      llm.NewAPI(ep, nil),
		model:    ep.Model,
		endpoint: usage.Endpoint(ep.BaseURL),
		dim:      dim,
		batch:    64,
		timeout:  30 * time.Second,
		attempts: 4,
		policy:   backoff.Policy{Base: 500 * time.Millisecond, Max: 10 * time.Second},
	}
	for _, f := range opts {
		if f != nil {
			f(o)
		}
	}
	return o
}

// Dim is the dimension every returned vector has.
func (o *OpenAI) Dim() int { return o.dim }

// Embed returns one vector per text, in order.
func (o *OpenAI) Embed(ctx context.Context, texts []string) ([][]float32, error) {
	out := make([][]float32, 0, len(texts))
	for start := 0; start < len(texts); start += o.batch {
		end := min(start+o.batch, len(texts))
		vecs, err := o.embedBatch(ctx, texts[start:end])
		if err != nil {
			return nil, fmt.Errorf("embed texts %d-%d of %d (model %s): %w", start, end-1, len(texts), o.model, err)
		}
		out = append(out, vecs...)
	}
	return out, nil
}

func (o *OpenAI) embedBatch(ctx context.Context, texts []string) (vecs [][]float32, err error) {
	var (
		resp     openai.EmbeddingResponse
		attempts int
		tokens   usage.Tokens
		invalid  bool // the endpoint answered, with vectors that do not fit
	)
	for _, t := range texts {
		tokens.PromptChars += len(t)
	}
	start := time.Now()
	defer func() {
		call := usage.Call{Call: usage.CallEmbedding, Purpose: "embedding", Model: o.model, Endpoint: o.endpoint,
			Latency: time.Since(start), Retries: max(0, attempts-1),
			Outcome: usage.Outcome(err, llm.TimedOut(err), ctx.Err() != nil, invalid)}
		call.Settle(tokens)
		o.record.Record(ctx, call)
	}()
	err = llm.Retry(ctx, "embed", o.attempts, o.timeout, o.policy, o.observe, func(ctx context.Context) error {
		attempts++
		var err error
		resp, err = o.api.CreateEmbeddings(ctx, openai.EmbeddingRequestStrings{
			Input: texts,
			Model: openai.EmbeddingModel(o.model),
		})
		if err == nil {
			tokens.Reported = resp.Usage.PromptTokens != 0 || resp.Usage.TotalTokens != 0
			tokens.Prompt = int64(resp.Usage.PromptTokens)
		}
		return err
	})
	if err != nil {
		return nil, err
	}
	vecs, err = o.vectors(resp, len(texts))
	invalid = err != nil
	return vecs, err
}

// vectors checks and orders the response's vectors.
func (o *OpenAI) vectors(resp openai.EmbeddingResponse, n int) ([][]float32, error) {
	if len(resp.Data) != n {
		return nil, fmt.Errorf("endpoint returned %d embeddings for %d texts", len(resp.Data), n)
	}
	vecs := make([][]float32, n)
	for _, d := range resp.Data {
		if d.Index < 0 || d.Index >= n || vecs[d.Index] != nil {
			return nil, fmt.Errorf("endpoint returned a bad or repeated embedding index %d", d.Index)
		}
		if len(d.Embedding) != o.dim {
			return nil, fmt.Errorf("%w: model %s returns %d dimensions but the embedding column has %d; "+
				"set MNEME_EMBED_DIM=%d and re-embed (mneme reembed), or choose a model with %d dimensions",
				ErrDimension, o.model, len(d.Embedding), o.dim, len(d.Embedding), o.dim)
		}
		vecs[d.Index] = d.Embedding
	}
	return vecs, nil
}
