package tests

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/mneme-memory/mneme/sidecar/dbtest"
)

// frameworkExamples are docs/clients.md's examples, one per framework,
// with what each prints.
var frameworkExamples = []struct {
	file, want string
}{
	{"clients/typescript/examples/langgraph.mjs", "Alice lives in Lisbon\n"},
	{"clients/typescript/examples/ai.mjs", "{\"context\":\"- Alice lives in Lisbon\"}\nYou are helpful.\n\n## What you remember\n\n- Alice lives in Lisbon\n"},
	{"clients/typescript/examples/agents.mjs", "You told me: My sister Alice lives in Lisbon.\n"},
	{"clients/python/examples/langgraph_store.py", "['Alice lives in Lisbon']\n{'content': 'Alice lives in Porto'}\n"},
	{"clients/python/examples/agents_session.py", "[{'role': 'user', 'content': 'My sister Alice lives in Lisbon.'}, {'type': 'message', 'role': 'assistant', " +
		"'status': 'completed', 'content': [{'type': 'output_text', 'text': 'Noted.', 'annotations': []}]}]\n"},
}

// Each framework example of docs/clients.md runs against a real mneme (as
// a mneme_app login of tenant acme) and prints what the test expects: the
// fact stored in one turn comes back in a later one. docs/clients.md shows
// each file whole (TestClientsDocShowsExamples).
func TestClientFrameworkExamples(t *testing.T) {
	t.Parallel()
	root, err := filepath.Abs("..")
	require.NoError(t, err)
	python := pythonWithPsycopg(t)
	db := dbtest.New(t)
	_, err = db.Pool.Exec(context.Background(), `SELECT mneme.create_tenant('acme')`)
	require.NoError(t, err)
	env := []string{"DATABASE_URL=" + db.As(t, "mneme_app"), "MNEME_TENANT=acme",
		"PYTHONPATH=" + filepath.Join(root, "clients", "python", "src"), "PYTHONDONTWRITEBYTECODE=1"}
	for _, ex := range frameworkExamples {
		t.Run(filepath.Base(ex.file), func(t *testing.T) {
			argv := []string{"node", filepath.Base(ex.file)}
			if strings.HasSuffix(ex.file, ".py") {
				argv[0] = python
			}
			out := runPackageTests(t, filepath.Join(root, filepath.Dir(ex.file)), env, argv...)
			require.Equal(t, ex.want, out)
		})
	}
}

// docs/clients.md shows every framework example and the three loops whole,
// as the files the tests run.
func TestClientsDocShowsExamples(t *testing.T) {
	t.Parallel()
	doc, err := os.ReadFile(filepath.Join("..", "docs", "clients.md"))
	require.NoError(t, err)
	files := []string{"docs/clients/loop.py", "docs/clients/loop.mjs", "docs/clients/loop.go"}
	for _, ex := range frameworkExamples {
		files = append(files, ex.file)
	}
	for _, f := range files {
		src, err := os.ReadFile(filepath.Join("..", f))
		require.NoError(t, err)
		require.Contains(t, string(doc), "\n"+string(src)+"```\n", "docs/clients.md must show %s whole, in a fenced block", f)
		if strings.HasPrefix(f, "docs/clients/loop.") {
			// The table of the loops states each one's length.
			lines := strings.Count(string(src), "\n")
			name := filepath.Base(f)
			require.Contains(t, string(doc), fmt.Sprintf("| [%s](clients/%s) | %d", name, name, lines), "docs/clients.md's line count of %s", f)
			require.LessOrEqual(t, lines, 25, "%s stays a short example", f)
		}
	}
}
