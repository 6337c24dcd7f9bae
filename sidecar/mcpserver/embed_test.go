package mcpserver

import (
	"context"
	"slices"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/mneme-memory/mneme/sidecar/config"
	"github.com/mneme-memory/mneme/sidecar/dbtest"
	"github.com/mneme-memory/mneme/sidecar/embed"
	"github.com/mneme-memory/mneme/sidecar/llm/llmtest"
)

// TestToolsEmbedQueries: with an external embedder, recall and search send
// the query to it (the real go-openai client against a fake server) and
// pass its vector to SQL, so a memory that shares no word with the query
// is found by the vector leg; without one SQL refuses the search.
func TestToolsEmbedQueries(t *testing.T) {
	ctx := context.Background()
	db := dbtest.New(t)
	_, err := db.Pool.Exec(ctx, `SELECT mneme.set_setting('embedder', '"external"')`)
	require.NoError(t, err)
	srv := llmtest.New(t)
	// Every text lies on one direction: the memory is the query's nearest.
	srv.Vectors(func(_ string, dim int) []float32 { return llmtest.Vector("pets", dim) })
	conv := uuid.NewString()
	var id string
	require.NoError(t, db.Pool.QueryRow(ctx, `SELECT mneme.remember($1::uuid, 'We adopted a beagle last spring')::text`, conv).Scan(&id))
	_, err = db.Pool.Exec(ctx, `SELECT mneme.set_embedding($1::uuid, $2)`, id, llmtest.Vector("pets", config.DefaultEmbedDim))
	require.NoError(t, err)
	const query = "which animal lives with us"

	emb := embed.NewOpenAI(config.Endpoint{BaseURL: srv.URL(), Model: "fake-embed", APIKey: "k"}, config.DefaultEmbedDim)
	cs := connect(t, Options{Pool: appPool(t, db), Embedder: emb})
	var found SearchOut
	require.Empty(t, call(t, cs, "search", map[string]any{"conversation_id": conv, "query": query}, &found))
	require.Len(t, found.Memories, 1)
	require.Equal(t, id, found.Memories[0].MemoryID)
	var recalled RecallOut
	require.Empty(t, call(t, cs, "recall", map[string]any{"conversation_id": conv, "query": query}, &recalled))
	require.Contains(t, recalled.Context, "beagle")
	queries := 0
	for _, r := range srv.EmbedRequests() {
		if slices.Contains(r.Input, query) {
			queries++
		}
	}
	require.Equal(t, 2, queries, "search and recall embedded the query")

	offline := connect(t, Options{Pool: appPool(t, db)})
	require.Contains(t, call(t, offline, "search", map[string]any{"conversation_id": conv, "query": query}, nil),
		"query_embedding must not be NULL", "no embedder here: SQL refuses to lose the vector leg quietly (mneme mcp refuses to start so)")

	// The embedder failing is a tool error, not a protocol failure.
	srv.ScriptEmbed(llmtest.Reply{Status: 400, Content: "bad request"})
	failing := connect(t, Options{Pool: appPool(t, db), Embedder: embed.NewOpenAI(
		config.Endpoint{BaseURL: srv.URL(), Model: "fake-embed", APIKey: "k"}, config.DefaultEmbedDim)})
	require.Contains(t, call(t, failing, "search", map[string]any{"conversation_id": conv, "query": query}, nil), "embed the query")
}
