package tests

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/mneme-memory/mneme/sidecar/dbtest"
)

// clientsOutput is what each program in docs/clients prints, uuids
// replaced by <uuid> (docs/clients.md shows it).
const clientsOutput = `conversation <uuid>
messages 3
remembered <uuid>
search: Alice lives in Lisbon (score 0.0180)
context:
- Alice lives in Lisbon
bad budget: 22023 budget must be 1 to 100000 words, got -1
`

var uuidRE = regexp.MustCompile(`[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}`)

// pythonWithPsycopg finds an interpreter that can import psycopg 3:
// $MNEME_PYTHON, then Debian's own /usr/bin/python3 (python3-psycopg is
// installed for it), then the first python3 on PATH (often a version
// manager's, without Debian's packages). None: a failure saying why.
func pythonWithPsycopg(t *testing.T) string {
	t.Helper()
	p, err := findPython(os.Getenv("MNEME_PYTHON"), "/usr/bin/python3", "python3")
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// findPython returns the first of candidates that imports psycopg 3, or an
// error naming each one tried and why it did not do.
func findPython(candidates ...string) (string, error) {
	var tried []string
	for _, c := range candidates {
		if c == "" {
			continue
		}
		p, err := exec.LookPath(c)
		if err != nil {
			tried = append(tried, fmt.Sprintf("%s: %v", c, err))
			continue
		}
		out, err := exec.Command(p, "-c", "import psycopg; print(psycopg.__version__)").CombinedOutput()
		if err == nil && strings.HasPrefix(string(out), "3.") {
			return p, nil
		}
		tried = append(tried, fmt.Sprintf("%s: %v %s", p, err, lastLine(string(out))))
	}
	return "", fmt.Errorf("no Python interpreter with psycopg 3 for docs/clients/loop.py; tried:\n  %s\n"+
		"install Debian's python3-psycopg (apt-get install python3-psycopg; make test does) or set MNEME_PYTHON to an interpreter that has psycopg 3",
		strings.Join(tried, "\n  "))
}

// Without an interpreter that has psycopg the test says which it tried and
// what to install.
func TestFindPythonSaysWhy(t *testing.T) {
	t.Parallel()
	_, err := findPython("/nonexistent/python3", "false")
	require.Error(t, err)
	for _, want := range []string{"/nonexistent/python3: ", "/false: exit status 1", "apt-get install python3-psycopg", "MNEME_PYTHON"} {
		require.ErrorContains(t, err, want)
	}
}

func lastLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return lines[len(lines)-1]
}

// clientPrograms are the commands that run docs/clients' three programs
// (working directory: the repository root).
func clientPrograms(t *testing.T) map[string][]string {
	t.Helper()
	root, err := filepath.Abs("..")
	require.NoError(t, err)
	if _, err := exec.LookPath("node"); err != nil {
		t.Fatalf("node is not installed: docs/clients/loop.mjs needs it (apt-get install nodejs npm; make test does)")
	}
	for _, dir := range []string{"docs/clients/node_modules/pg", "docs/clients/node_modules/@mneme-memory/client", "clients/typescript/node_modules/pg"} {
		if _, err := os.Stat(filepath.Join(root, dir)); err != nil {
			t.Fatalf("%s is not installed: run `npm ci` in clients/typescript, then in docs/clients (make test does, scripts/test-deps.sh)", dir)
		}
	}
	return map[string][]string{
		"python": {pythonWithPsycopg(t), "docs/clients/loop.py"},
		"node":   {"node", "docs/clients/loop.mjs"},
		"go":     {"go", "run", "./docs/clients"},
	}
}

// runClient runs one program against url as tenant and returns its output.
func runClient(t *testing.T, argv []string, url, tenant string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.Dir = ".."
	// loop.py imports mneme_client from the checkout (docs/clients.md:
	// pip install ./clients/python does the same).
	cmd.Env = append(os.Environ(), "DATABASE_URL="+url, "MNEME_TENANT="+tenant, "PYTHONPATH=clients/python/src", "PYTHONDONTWRITEBYTECODE=1")
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	require.NoError(t, err, "%v: %s", argv, stderr.String())
	return string(out)
}

// The three programs of docs/clients (Python on mneme_client, Node on
// @mneme-memory/client, Go on the client package) run as a mneme_app
// login of tenant acme, directly and through PgBouncer 1.18 in
// transaction pooling (the packages prepare no named statements; pgx with
// default_query_exec_mode=exec), and print the same: the context holds the
// remembered fact, the bad budget is caught as 22023. The database then
// holds what they wrote in acme: the conversation's three messages, the
// memory they printed, one pending review (context's; search records
// none, the failed call none).
func TestClientExamples(t *testing.T) {
	t.Parallel()
	programs := clientPrograms(t)
	for _, variant := range variants(t) {
		t.Run(variant, func(t *testing.T) {
			ctx := context.Background()
			db := dbtest.New(t, dbtest.WithVector(variant))
			_, err := db.Pool.Exec(ctx, `SELECT mneme.create_tenant('acme')`)
			require.NoError(t, err)
			appURL := db.As(t, "mneme_app")
			bouncer := dbtest.PgBouncer(t, loginOf(t, appURL))
			viaPool, err := bouncer.URL(appURL)
			require.NoError(t, err)
			for _, via := range []struct{ name, url string }{
				{"direct", appURL},
				{"pgbouncer", viaPool},
			} {
				for lang, argv := range programs {
					t.Run(via.name+"/"+lang, func(t *testing.T) {
						url := via.url
						if via.name == "pgbouncer" && lang == "go" {
							url += "&default_query_exec_mode=exec" // pgx's parameter; the others refuse it
						}
						out := runClient(t, argv, url, "acme")
						t.Logf("%s:\n%s", lang, out)
						ids := uuidRE.FindAllString(out, -1)
						require.Len(t, ids, 2, out)
						require.Equal(t, clientsOutput, uuidRE.ReplaceAllString(out, "<uuid>"))
						conv, memory := uuid.MustParse(ids[0]), uuid.MustParse(ids[1])

						var tenant, content, reviews string
						var messages int
						require.NoError(t, db.Pool.QueryRow(ctx, `SELECT q.tenant_id, jsonb_array_length(q.pending_reviews)::text,
								(SELECT count(*) FROM mneme.messages m WHERE m.conversation_id = q.id),
								(SELECT content FROM mneme.memories WHERE id = $2 AND conversation_id = q.id AND tenant_id = q.tenant_id)
							FROM mneme.message_queue q WHERE q.id = $1`, conv, memory).Scan(&tenant, &reviews, &messages, &content))
						require.Equal(t, "acme", tenant)
						require.Equal(t, 3, messages)
						require.Equal(t, "Alice lives in Lisbon", content)
						require.Equal(t, "1", reviews, "context recorded a pending review, search and the failed call none")
					})
				}
			}
		})
	}
}

// Prepared statements through PgBouncer 1.18 in transaction pooling, in
// the other two drivers (pgx: TestPgBouncerPreparedStatements): once a
// second client prepares a statement of the same name on the one server
// connection, it fails with 42P05. node-postgres prepares only when a
// query is given a name; psycopg after prepare_threshold (5) executions of
// one query on a connection. Without a name, and with prepare_threshold
// None (loop.mjs, loop.py), the same calls work.
func TestDriversPreparedStatementsThroughPgBouncer(t *testing.T) {
	t.Parallel()
	programs := clientPrograms(t)
	db := dbtest.New(t)
	appURL := db.As(t, "mneme_app")
	bouncer := dbtest.PgBouncer(t, loginOf(t, appURL))
	viaPool, err := bouncer.URL(appURL)
	require.NoError(t, err)
	const nodeScript = `import pg from 'pg';
const a = new pg.Client({ connectionString: process.env.DATABASE_URL });
const b = new pg.Client({ connectionString: process.env.DATABASE_URL });
await a.connect(); await b.connect();
const q = (name) => ({ name, text: 'SELECT count(*) FROM mneme.search($1, $2, 5)', values: ['7f1c2f9e-0000-4000-8000-000000000001', 'Alice'] });
const out = {};
for (let i = 0; i < 10; i++) { await a.query(q(undefined)); await b.query(q(undefined)); }
out.fixed = 'ok';
await a.query(q('mneme_search'));
try { await b.query(q('mneme_search')); out.failing = 'ok'; } catch (e) { out.failing = e.code + ' ' + e.message; }
console.log(JSON.stringify(out));
await a.end(); await b.end();
`
	const pythonScript = `import json, os, uuid
import psycopg
def run(**kw):
    a = psycopg.connect(os.environ["DATABASE_URL"], autocommit=True, **kw)
    b = psycopg.connect(os.environ["DATABASE_URL"], autocommit=True, **kw)
    try:
        for _ in range(10):
            for c in (a, b):
                c.execute("SELECT count(*) FROM mneme.search(%s, %s, 5)", (uuid.uuid4(), "Alice")).fetchone()
        return "ok"
    except psycopg.Error as e:
        return e.sqlstate + " " + e.diag.message_primary
print(json.dumps({"fixed": run(prepare_threshold=None), "failing": run()}))
`
	for _, c := range []struct {
		lang    string
		argv    []string
		failing string
	}{
		{"node", []string{"node", "--input-type=module", "-e", nodeScript}, `42P05 prepared statement "mneme_search" already exists`},
		{"python", []string{programs["python"][0], "-c", pythonScript}, `42P05 prepared statement "_pg3_0" already exists`},
	} {
		t.Run(c.lang, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			cmd := exec.CommandContext(ctx, c.argv[0], c.argv[1:]...)
			cmd.Dir = filepath.Join("..", "docs", "clients") // node finds pg in node_modules here
			cmd.Env = append(os.Environ(), "DATABASE_URL="+viaPool)
			out, err := cmd.CombinedOutput()
			require.NoError(t, err, string(out))
			var got struct{ Fixed, Failing string }
			require.NoError(t, json.Unmarshal(out, &got), string(out))
			t.Logf("%s through PgBouncer 1.18: %s", c.lang, out)
			require.Equal(t, "ok", got.Fixed)
			require.Equal(t, c.failing, got.Failing)
		})
	}
}
