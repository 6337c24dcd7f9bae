package embed

import (
	"context"

	"github.com/mneme-memory/mneme/sidecar/config"
)

// Embedder is what every embedder here implements. Consumers declare their
// own interface; this is the return type of New.
type Embedder interface {
	Embed(ctx context.Context, texts []string) ([][]float32, error)
	Dim() int
}

// New returns the external OpenAI-compatible embedder when ep is
// configured, else the built-in hash embedder, both with dimension dim (the
// database's embedding dimension).
func New(ep config.Endpoint, dim int, opts ...OpenAIOption) Embedder {
	if ep.Configured() {
		return NewOpenAI(ep, dim, opts...)
	}
	return NewHash(dim)
}
