package tests

import (
	"context"
	"encoding/json"
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
// ci), spawns `bin/mneme mcp` over stdio beside a running sidecar (`mneme
// run`), lists the tools, adds a conversation, waits for the sidecar to
// segment it and recalls it. Skipped only where node is absent.
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

	conv := uuid.NewString()
	client := exec.CommandContext(ctx, node, "e2e.mjs", bin, conv)
	client.Dir, client.Env = dir, env
	var stderr strings.Builder
	client.Stderr = &stderr
	out, err := client.Output()
	require.NoError(t, err, "node client: %s", stderr.String())

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
	require.Contains(t, got.Context, "My teacher Anna says my bowing is too stiff", "recall after the sidecar segmented the conversation")
	require.LessOrEqual(t, len(strings.Fields(got.Context)), 80)
	require.True(t, got.BadInputIsError, "a bad budget is a tool error")
	require.Contains(t, got.BadInput, "budget must be 1 to")
	require.Contains(t, got.SearchKinds, "episodic")
}
