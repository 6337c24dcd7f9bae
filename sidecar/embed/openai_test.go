package embed_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/mneme-memory/mneme/sidecar/backoff"
	"github.com/mneme-memory/mneme/sidecar/config"
	"github.com/mneme-memory/mneme/sidecar/embed"
	"github.com/mneme-memory/mneme/sidecar/llm/llmtest"
)

func TestOpenAIBatches(t *testing.T) {
	srv := llmtest.New(t)
	srv.SetEmbedDim(16)
	e := embed.NewOpenAI(config.Endpoint{BaseURL: srv.URL(), Model: "emb"}, 16, embed.WithBatch(4))
	require.Equal(t, 16, e.Dim())
	texts := make([]string, 10)
	for i := range texts {
		texts[i] = fmt.Sprintf("text %d", i)
	}
	vecs, err := e.Embed(context.Background(), texts)
	require.NoError(t, err)
	require.Len(t, vecs, 10)
	for i, v := range vecs {
		require.Equal(t, llmtest.Vector(texts[i], 16), v, "vector %d is the one for its own text", i)
	}
	reqs := srv.EmbedRequests()
	require.Len(t, reqs, 3)
	require.Equal(t, texts[0:4], reqs[0].Input)
	require.Equal(t, texts[4:8], reqs[1].Input)
	require.Equal(t, texts[8:10], reqs[2].Input)
	require.Equal(t, "emb", reqs[0].Model)
}

func TestOpenAIDimensionMismatch(t *testing.T) {
	srv := llmtest.New(t)
	srv.SetEmbedDim(8)
	e := embed.NewOpenAI(config.Endpoint{BaseURL: srv.URL(), Model: "emb"}, 16)
	vecs, err := e.Embed(context.Background(), []string{"a"})
	require.ErrorIs(t, err, embed.ErrDimension)
	require.ErrorContains(t, err, "returns 8 dimensions but the embedding column has 16")
	require.Nil(t, vecs)
}

func TestOpenAIRetries(t *testing.T) {
	srv := llmtest.New(t)
	srv.SetEmbedDim(4)
	srv.ScriptEmbed(llmtest.Reply{Status: 429}, llmtest.Reply{Status: 500})
	var errs []error
	e := embed.NewOpenAI(config.Endpoint{BaseURL: srv.URL(), Model: "emb"}, 4,
		embed.WithBackoff(backoff.Policy{Base: time.Millisecond, Max: time.Millisecond}),
		embed.WithObserver(func(_ string, _ time.Duration, err error) { errs = append(errs, err) }))
	vecs, err := e.Embed(context.Background(), []string{"a", "b"})
	require.NoError(t, err)
	require.Len(t, vecs, 2)
	require.Len(t, errs, 3)
	require.Error(t, errs[0])
	require.Error(t, errs[1])
	require.NoError(t, errs[2])
}

func TestOpenAIEmpty(t *testing.T) {
	srv := llmtest.New(t)
	e := embed.NewOpenAI(config.Endpoint{BaseURL: srv.URL(), Model: "emb"}, 4)
	vecs, err := e.Embed(context.Background(), nil)
	require.NoError(t, err)
	require.Empty(t, vecs)
	require.Empty(t, srv.EmbedRequests())
}

func TestNewChoosesByConfig(t *testing.T) {
	e := embed.New(config.Endpoint{}, 32)
	_, ok := e.(embed.Hash)
	require.True(t, ok, "no endpoint: the built-in hash embedder")
	require.Equal(t, 32, e.Dim())
	srv := llmtest.New(t)
	e = embed.New(config.Endpoint{BaseURL: srv.URL(), Model: "m"}, 32)
	_, ok = e.(*embed.OpenAI)
	require.True(t, ok)
}
