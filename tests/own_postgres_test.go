package tests

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/require"

	"github.com/mneme-memory/mneme/sidecar/cluster"
	"github.com/mneme-memory/mneme/sidecar/dbtest"
)

// readmeBlock is a fenced code block of README.md.
type readmeBlock struct{ lang, text string }

// readmeSection is the code blocks of the README section with heading h, in order.
func readmeSection(t *testing.T, h string) []readmeBlock {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "README.md"))
	require.NoError(t, err)
	s := string(b)
	i := strings.Index(s, "\n"+h+"\n")
	require.GreaterOrEqual(t, i, 0, "README.md has the section %q", h)
	s = s[i+len(h)+2:]
	if j := strings.Index(s, "\n## "); j >= 0 {
		s = s[:j]
	}
	var out []readmeBlock
	for _, m := range regexp.MustCompile("(?s)\n```([a-z]+)\n(.*?)\n```").FindAllStringSubmatch(s, -1) {
		out = append(out, readmeBlock{m[1], m[2]})
	}
	return out
}

// buildMneme builds this checkout's mneme into a temporary directory.
func buildMneme(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "mneme")
	out, err := exec.Command("go", "build", "-o", bin, "../sidecar").CombinedOutput()
	require.NoError(t, err, string(out))
	return bin
}

// lockedBuffer collects a process's output while the test reads it.
type lockedBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// TestOwnPostgreSQL follows README.md's "Use your own PostgreSQL" as
// written, block by block, on a fresh server (no mneme roles yet): the
// superuser makes the database and the roles, a role that is neither
// superuser nor CREATEROLE migrates, the sidecar runs as a mneme_worker
// login (and does the application's job), the application writes as a
// mneme_app login, the UI serves as a mneme_admin login and MCP recalls
// as the application. A role not yet in mneme_owner is told what to run.
func TestOwnPostgreSQL(t *testing.T) {
	t.Parallel()
	if dbtest.OnCitus() {
		t.Skip("a fresh one-server cluster of its own")
	}
	ctx := context.Background()
	c, err := cluster.Start(ctx, t.TempDir(), cluster.Options{})
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Stop(context.Background()); _ = c.Remove() })
	bin := buildMneme(t)
	host := fmt.Sprintf("127.0.0.1:%d", c.Port)
	super := c.URL("postgres")
	psql := filepath.Join(c.BinDir, "psql")
	env := append(os.Environ(), "PATH="+c.BinDir+":"+os.Getenv("PATH"), "MNEME_LOG_LEVEL=info",
		"MNEME_METRICS_ADDR=off", "MNEME_POLL_INTERVAL=200ms")
	env = slicesWithout(env, "DATABASE_URL=")
	shell := func(line string) *exec.Cmd {
		cmd := exec.Command("bash", "-c", "exec env "+strings.ReplaceAll(line, "bin/mneme", bin))
		cmd.Env = env
		return cmd
	}
	query := func(sql string) string {
		out, err := exec.Command(psql, "-X", "-At", "-v", "ON_ERROR_STOP=1", "-c", sql, strings.Replace(super, "/postgres?", "/mneme?", 1)).CombinedOutput()
		require.NoError(t, err, string(out))
		return strings.TrimSpace(string(out))
	}

	blocks := readmeSection(t, "## Use your own PostgreSQL")
	require.Len(t, blocks, 5, "the section's steps")
	ran := map[string]bool{}
	for _, b := range blocks {
		text := strings.ReplaceAll(b.text, "db.example:5432", host)
		if b.lang == "sql" {
			cmd := exec.Command(psql, "-X", "-q", "-v", "ON_ERROR_STOP=1", "-f", "-", super)
			cmd.Stdin = strings.NewReader(text)
			out, err := cmd.CombinedOutput()
			require.NoError(t, err, "as the superuser:\n%s\n%s", text, out)
			continue
		}
		require.Equal(t, "sh", b.lang)
		lines := strings.Split(text, "\n")
		for i := 0; i < len(lines); i++ {
			line := lines[i]
			switch {
			case strings.HasSuffix(line, "bin/mneme migrate"):
				out, err := shell(line).CombinedOutput()
				require.NoError(t, err, "%s\n%s", line, out)
				require.Contains(t, string(out), "migrated:")
				ran["migrate"] = true
				// Least privilege: the role that migrated is neither.
				require.Equal(t, "false|false", query(`SELECT rolsuper || '|' || rolcreaterole FROM pg_roles WHERE rolname = 'mneme_migrator'`))
			case strings.HasSuffix(line, "bin/mneme run"):
				// The next line is the application's write: the sidecar,
				// running, does the job it enqueues.
				require.Less(t, i+1, len(lines))
				app := lines[i+1]
				i++
				var logged lockedBuffer
				run := shell(line)
				run.Stdout, run.Stderr = &logged, &logged
				require.NoError(t, run.Start())
				require.Eventually(t, func() bool { return strings.Contains(logged.String(), "event transport") },
					time.Minute, 50*time.Millisecond, "the sidecar starts:\n%s", logged.String())
				out, err := shell(app).CombinedOutput()
				require.NoError(t, err, "%s\n%s", app, out)
				require.Eventually(t, func() bool {
					return query(`SELECT count(*) FILTER (WHERE state = 'done') || '/' || count(*) FROM mneme.jobs WHERE kind = 'revise'`) == "1/1"
				}, time.Minute, 100*time.Millisecond, "the sidecar revised the write:\n%s", logged.String())
				require.NoError(t, run.Process.Signal(syscall.SIGTERM))
				require.NoError(t, run.Wait(), logged.String())
				require.NotContains(t, logged.String(), "level=WARN", "the worker login gets no privilege warning")
				ran["run"], ran["app"] = true, true
			case strings.HasSuffix(line, "bin/mneme ui"):
				ln, err := net.Listen("tcp", "127.0.0.1:0")
				require.NoError(t, err)
				addr := ln.Addr().String()
				ln.Close()
				ui := shell(line + " --addr " + addr)
				var logged lockedBuffer
				ui.Stdout, ui.Stderr = &logged, &logged
				require.NoError(t, ui.Start())
				var body string
				require.Eventually(t, func() bool {
					resp, err := http.Get("http://" + addr + "/")
					if err != nil {
						return false
					}
					defer resp.Body.Close()
					var b strings.Builder
					sc := bufio.NewScanner(resp.Body)
					for sc.Scan() {
						b.WriteString(sc.Text() + "\n")
					}
					body = b.String()
					return resp.StatusCode == 200
				}, time.Minute, 100*time.Millisecond, "the UI serves:\n%s", logged.String())
				require.Contains(t, body, "7f1c2f9e", "the admin login sees the application's conversation")
				require.NoError(t, ui.Process.Signal(syscall.SIGTERM))
				_ = ui.Wait()
				ran["ui"] = true
			case strings.HasSuffix(line, "bin/mneme mcp"):
				mctx, cancel := context.WithTimeout(ctx, time.Minute)
				cs, err := mcp.NewClient(&mcp.Implementation{Name: "readme", Version: "1"}, nil).
					Connect(mctx, &mcp.CommandTransport{Command: shell(line)}, nil)
				require.NoError(t, err)
				res, err := cs.CallTool(mctx, &mcp.CallToolParams{Name: "search", Arguments: map[string]any{
					"conversation_id": "7f1c2f9e-0000-4000-8000-000000000001", "query": "where does Alice live"}})
				require.NoError(t, err)
				require.False(t, res.IsError, "%v", res.Content)
				require.Contains(t, fmt.Sprint(res.StructuredContent), "Lisbon")
				cs.Close()
				cancel()
				ran["mcp"] = true
			default:
				t.Fatalf("TestOwnPostgreSQL does not know how to run the README's line %q", line)
			}
		}
	}
	require.Equal(t, map[string]bool{"migrate": true, "run": true, "app": true, "ui": true, "mcp": true}, ran)

	// Migrating again (an upgrade) needs nothing more.
	out, err := shell(fmt.Sprintf("DATABASE_URL=postgres://mneme_migrator@%s/mneme bin/mneme migrate", host)).CombinedOutput()
	require.NoError(t, err, string(out))

	// A role that owns its database but is not in mneme_owner is told what
	// an admin runs (the HINT, printed under the error).
	_, err = exec.Command(psql, "-X", "-q", "-v", "ON_ERROR_STOP=1", "-c", "CREATE ROLE lone LOGIN", "-c", "CREATE DATABASE lone OWNER lone", super).CombinedOutput()
	require.NoError(t, err)
	out, err = shell(fmt.Sprintf("DATABASE_URL=postgres://lone@%s/lone bin/mneme migrate", host)).CombinedOutput()
	require.Error(t, err)
	require.Contains(t, string(out), "role lone must be a member of mneme_owner")
	require.Contains(t, string(out), "HINT: an admin runs once: GRANT mneme_owner TO lone")
}

// TestDemoHandsOver runs scripts/demo.sh as `make demo` does, in a copy of
// the files it needs (its own .mneme/pg): its last line is the one that
// points the user's shell at the demo cluster, and eval'ing it does.
func TestDemoHandsOver(t *testing.T) {
	t.Parallel()
	if dbtest.OnCitus() {
		t.Skip("the demo's own private cluster")
	}
	dir := t.TempDir()
	require.NoError(t, os.Chmod(dir, 0o755))
	for _, d := range []string{"scripts", "docs", "bin"} {
		require.NoError(t, os.MkdirAll(filepath.Join(dir, d), 0o755))
	}
	for _, f := range []string{"scripts/demo.sh", "docs/sample-conversation.json"} {
		b, err := os.ReadFile(filepath.Join("..", f))
		require.NoError(t, err)
		require.NoError(t, os.WriteFile(filepath.Join(dir, f), b, 0o755))
	}
	for bin, pkg := range map[string]string{"mneme": "../sidecar", "mneme-lab": "../sidecar/cmd/mneme-lab"} {
		out, err := exec.Command("go", "build", "-o", filepath.Join(dir, "bin", bin), pkg).CombinedOutput()
		require.NoError(t, err, string(out))
	}
	env := append(slicesWithout(os.Environ(), "DATABASE_URL="), "MNEME_LOG_LEVEL=warn")
	t.Cleanup(func() {
		stop := exec.Command(filepath.Join(dir, "bin", "mneme-lab"), "cluster", "stop")
		stop.Dir, stop.Env = dir, env
		_ = stop.Run()
	})
	demo := exec.Command("./scripts/demo.sh")
	demo.Dir, demo.Env = dir, env
	out, err := demo.CombinedOutput()
	require.NoError(t, err, string(out))
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	require.Equal(t, "eval $(bin/mneme-lab cluster env)", lines[len(lines)-1], "make demo ends with the hand-over line")

	sh := exec.Command("bash", "-c", lines[len(lines)-1]+` && echo "$DATABASE_URL" && bin/mneme version`)
	sh.Dir, sh.Env = dir, env
	out, err = sh.CombinedOutput()
	require.NoError(t, err, string(out))
	require.Regexp(t, `(?m)^postgres://postgres@127\.0\.0\.1:\d+/mneme`, string(out))
	require.Contains(t, string(out), "database SQL API")
	require.NotContains(t, string(out), "DATABASE_URL is not set", "the shell's DATABASE_URL, not the fallback")
}

// make help prints the targets' help as written for a reader:
// $DATABASE_URL, not the Makefile's escaped $$DATABASE_URL.
func TestMakeHelp(t *testing.T) {
	if _, err := exec.LookPath("make"); err != nil {
		t.Skip("make is not installed")
	}
	out, err := exec.Command("make", "-s", "-C", "..", "help").CombinedOutput()
	require.NoError(t, err, string(out))
	require.Contains(t, string(out), "against $DATABASE_URL")
	require.NotContains(t, string(out), "$$")
}
