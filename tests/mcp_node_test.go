package tests

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/mneme-memory/mneme/sidecar/dbtest"
)

// TestMCPWithTypeScriptClient: a client nobody here wrote, the official
// TypeScript MCP SDK (tests/mcp-node, installed by `make test` with npm
// ci), spawns `bin/mneme mcp` over stdio, lists the tools and adds a
// conversation; then the sidecar (`mneme run`) starts beside it, and once
// it has run every job of the conversation the client recalls it. The
// sidecar starts only after the last message and the recall waits for its
// jobs, so the recalled text is always the same: it is the README's
// example exchange, checked word for word. Skipped only where node is
// absent.
func TestMCPWithTypeScriptClient(t *testing.T) {
	node, err := exec.LookPath("node")
	if err != nil {
		t.Skip("node is not installed: the TypeScript MCP client test needs it (apt install nodejs npm)")
	}
	dir, err := filepath.Abs("mcp-node")
	require.NoError(t, err)
	if _, err := os.Stat(filepath.Join(dir, "node_modules", "@modelcontextprotocol", "sdk")); err != nil {
		t.Fatalf("the TypeScript MCP SDK is not installed: run `npm ci` in tests/mcp-node (make test does)")
	}
	bin, err := filepath.Abs(filepath.Join("..", "bin", "mneme"))
	require.NoError(t, err)
	if _, err := os.Stat(bin); err != nil {
		bin = filepath.Join(t.TempDir(), "mneme")
		out, err := exec.Command("go", "build", "-o", bin, "../sidecar").CombinedOutput()
		require.NoError(t, err, string(out))
	}
	db := dbtest.New(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	env := append(os.Environ(), "DATABASE_URL="+db.URL, "MNEME_LOG_LEVEL=warn", "MNEME_EVENTS=notify", "MNEME_METRICS_ADDR=127.0.0.1:0", "MNEME_POLL_INTERVAL=200ms")

	conv := uuid.NewString()
	client := exec.CommandContext(ctx, node, "e2e.mjs", bin, conv)
	client.Dir, client.Env = dir, env
	var stderr strings.Builder
	client.Stderr = &stderr
	stdin, err := client.StdinPipe()
	require.NoError(t, err)
	stdout, err := client.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, client.Start())
	defer func() { _ = client.Process.Kill(); _ = client.Wait() }()
	lines := bufio.NewScanner(stdout)
	lines.Buffer(make([]byte, 0, 1<<16), 1<<20)
	require.True(t, lines.Scan(), "node client: %s", stderr.String())
	require.JSONEq(t, `{"phase":"added"}`, lines.Text())

	sidecar := exec.CommandContext(ctx, bin, "run")
	sidecar.Env = env
	var sidecarLog strings.Builder
	sidecar.Stderr = &sidecarLog
	require.NoError(t, sidecar.Start())
	defer func() {
		_ = sidecar.Process.Signal(os.Interrupt)
		_ = sidecar.Wait()
		t.Log("sidecar:", sidecarLog.String())
	}()
	// Done when the conversation has its episode and no job of it is
	// pending or running (the segment job, then the revise jobs of the
	// facts it extracted).
	for {
		var open, failed, memories int
		require.NoError(t, db.Pool.QueryRow(ctx, `SELECT count(*) FILTER (WHERE state IN ('pending', 'running')),
			count(*) FILTER (WHERE state = 'failed'), (SELECT count(*) FROM mneme.memories WHERE conversation_id = $1)
			FROM mneme.jobs WHERE conversation_id = $1`, conv).Scan(&open, &failed, &memories))
		require.Zero(t, failed, "a job of the conversation failed")
		if memories > 0 && open == 0 {
			break
		}
		select {
		case <-ctx.Done():
			t.Fatalf("the sidecar did not segment the conversation: %d jobs open", open)
		case <-time.After(200 * time.Millisecond):
		}
	}
	_, err = io.WriteString(stdin, "go\n")
	require.NoError(t, err)
	require.True(t, lines.Scan(), "node client: %s", stderr.String())
	out := []byte(lines.Text())
	require.NoError(t, client.Wait(), "node client: %s", stderr.String())

	var got struct {
		Tools           []string `json:"tools"`
		Context         string   `json:"context"`
		BadInputIsError bool     `json:"bad_input_is_error"`
		BadInput        string   `json:"bad_input"`
		SearchKinds     []string `json:"search_kinds"`
	}
	require.NoError(t, json.Unmarshal(out, &got), string(out))
	t.Logf("recall:\n%s", got.Context)
	require.Equal(t, []string{"add_message", "erase", "forget", "history", "inspect", "pin", "recall", "remember", "search", "unpin"}, got.Tools)
	require.Equal(t, readmeRecall, got.Context, "the README's MCP example exchange")
	require.LessOrEqual(t, len(strings.Fields(got.Context)), 80)
	require.True(t, got.BadInputIsError, "a bad budget is a tool error")
	require.Contains(t, got.BadInput, "budget must be 1 to")
	require.Contains(t, got.BadInput, "hint: the budget is the most words", "the SQL hint reaches the client")
	require.Contains(t, got.SearchKinds, "episodic")
}

// readmeRecall is the recall in the README's section "Agents over MCP":
// keep the two in step.
const readmeRecall = `### 2026-03-01
user: I started learning the violin last month
assistant: How are the lessons going?
user: My teacher Anna says my bowing is too stiff
assistant: Loose wrists help; try slow open strings
user: The recital is planned for the spring

- User: My teacher Anna says my bowing is too stiff.

- User: I started learning the violin last month.`
