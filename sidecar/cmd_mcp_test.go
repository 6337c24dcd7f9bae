package main

import (
	"context"
	"net/url"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/require"

	"github.com/mneme-memory/mneme/sidecar/dbtest"
)

// TestMCPStdio: `mneme mcp` as a subprocess speaking stdio to the SDK's
// client (CommandTransport): a conversation goes in through add_message,
// the sidecar (`mneme run --drain`) segments it, and recall brings the
// right turn back; usage errors exit 2 before anything is opened.
func TestMCPStdio(t *testing.T) {
	db := dbtest.New(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.Command(os.Args[0], "mcp")
	cmd.Env = append(os.Environ(), "MNEME_TEST_AS_MAIN=1", "DATABASE_URL="+db.URL, "MNEME_LOG_LEVEL=warn")
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "stdio-test", Version: "1"}, nil).Connect(ctx, &mcp.CommandTransport{Command: cmd}, nil)
	require.NoError(t, err)
	defer cs.Close()
	require.Equal(t, "mneme", cs.InitializeResult().ServerInfo.Name)

	conv := uuid.NewString()
	start := time.Date(2026, 3, 1, 9, 0, 0, 0, time.UTC)
	lines := []string{"We are planning the garden this year", "Tomatoes and basil go in the south bed",
		"The rhubarb crowns came from our neighbour", "Slugs ate the lettuce last summer", "We bought a rain barrel",
		"Let us talk about the trip tomorrow"}
	for i, l := range lines {
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "add_message", Arguments: map[string]any{
			"conversation_id": conv, "role": []string{"user", "assistant"}[i%2], "content": l,
			"at": start.Add(time.Duration(i) * time.Minute).Format(time.RFC3339)}})
		require.NoError(t, err)
		require.False(t, res.IsError, "%v", res.Content)
	}
	_, err = db.Pool.Exec(ctx, `SELECT mneme.segment_now($1)`, conv)
	require.NoError(t, err)
	_, stderr, code := mneme(t, "", []string{"DATABASE_URL=" + db.URL, "MNEME_LOG_LEVEL=warn"}, "run", "--drain")
	require.Equal(t, 0, code, stderr)

	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "recall", Arguments: map[string]any{
		"conversation_id": conv, "query": "who gave us the rhubarb?", "budget": 60}})
	require.NoError(t, err)
	require.False(t, res.IsError)
	text := res.Content[0].(*mcp.TextContent).Text
	require.Contains(t, text, "The rhubarb crowns came from our neighbour")
	require.LessOrEqual(t, len(strings.Fields(text)), 60)

	for _, args := range [][]string{{"mcp", "--transport", "pigeon"}, {"mcp", "--transport", "http"}, {"mcp", "--new-token", "Bad Tenant"}} {
		_, stderr, code := mneme(t, "", []string{"DATABASE_URL=postgres://nowhere.invalid/x"}, args...)
		require.Equal(t, 2, code, "%v: %s", args, stderr)
	}
	out, _, code := mneme(t, "", nil, "mcp", "--new-token", "acme")
	require.Equal(t, 0, code)
	require.Regexp(t, `token .*: mneme_[0-9a-f]{64}\nline for the tokens file: acme [0-9a-f]{64}\n`, out)
}

// `mneme mcp` refuses at start, not at the first tool call: an unknown
// MNEME_MCP_TENANT, a tenant the bound login may not act for, a tokens
// file naming an unknown tenant, and an external embedder with no
// MNEME_EMBED_* here to embed the queries.
func TestMCPChecksAtStart(t *testing.T) {
	db := dbtest.New(t, dbtest.WithVector("array"))
	ctx := context.Background()
	_, err := db.Pool.Exec(ctx, `SELECT mneme.create_tenant('acme'), mneme.create_tenant('globex')`)
	require.NoError(t, err)
	boundURL := db.As(t, "mneme_app")
	u, err := url.Parse(boundURL)
	require.NoError(t, err)
	_, err = db.Pool.Exec(ctx, `SELECT mneme.bind_login($1, 'acme')`, u.User.Username())
	require.NoError(t, err)

	run := func(dbURL string, env ...string) (string, int) {
		cmd := exec.Command(os.Args[0], "mcp")
		cmd.Env = append(os.Environ(), append([]string{"MNEME_TEST_AS_MAIN=1", "DATABASE_URL=" + dbURL}, env...)...)
		cmd.Stdin = strings.NewReader("")
		out, err := cmd.CombinedOutput()
		code := 0
		if exit, ok := err.(*exec.ExitError); ok {
			code = exit.ExitCode()
		}
		return string(out), code
	}
	out, code := run(db.URL, "MNEME_MCP_TENANT=nosuch")
	require.Equal(t, 1, code, out)
	require.Contains(t, out, `tenant "nosuch": set_tenant: unknown tenant`)
	require.Contains(t, out, "mneme.create_tenant")
	out, code = run(boundURL, "MNEME_MCP_TENANT=globex")
	require.Equal(t, 1, code, out)
	require.Contains(t, out, "is bound to tenant acme: it cannot act for tenant globex")

	dir := t.TempDir()
	tokens := dir + "/tokens"
	require.NoError(t, os.WriteFile(tokens, []byte("nosuch "+strings.Repeat("ab", 32)+"\n"), 0o600))
	cmd := exec.Command(os.Args[0], "mcp", "--transport", "http", "--tokens", tokens, "--addr", "127.0.0.1:0")
	cmd.Env = append(os.Environ(), "MNEME_TEST_AS_MAIN=1", "DATABASE_URL="+db.URL)
	b, err := cmd.CombinedOutput()
	require.Error(t, err)
	require.Contains(t, string(b), `tenant "nosuch": set_tenant: unknown tenant`)

	_, err = db.Pool.Exec(ctx, `SELECT mneme.set_setting('embedder', '"external"')`)
	require.NoError(t, err)
	out, code = run(db.URL)
	require.Equal(t, 1, code, out)
	require.Contains(t, out, `the database's setting embedder is "external" but MNEME_EMBED_BASE_URL is unset`)
}
