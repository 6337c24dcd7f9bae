package tests

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/mneme-memory/mneme/sidecar/dbtest"
)

// clientPackageDBs are the databases the packages' own test suites run
// against (clients/typescript, clients/python), as environment variables:
// MNEME_APP_URL a mneme_app login, MNEME_ADMIN_URL a mneme_admin login
// (erase), MNEME_WORKER_URL a mneme_worker login (it stores an episode as
// the sidecar would: pop_message's refusal), all in a database with tenant acme, directly or through
// PgBouncer 1.18 in transaction pooling; MNEME_EMPTY_URL an unmigrated
// database and MNEME_V2_URL one whose mneme.version() says 2.0.0 (the
// version checks).
func clientPackageDBs(t *testing.T, variant string) map[string][]string {
	t.Helper()
	ctx := context.Background()
	db := dbtest.New(t, dbtest.WithVector(variant))
	_, err := db.Pool.Exec(ctx, `SELECT mneme.create_tenant('acme')`)
	require.NoError(t, err)
	appURL, adminURL, workerURL := db.As(t, "mneme_app"), db.As(t, "mneme_admin"), db.As(t, "mneme_worker")
	_, emptyURL := dbtest.NewEmpty(t)
	_, v2URL := dbtest.NewEmpty(t)
	c, err := pgx.Connect(ctx, v2URL)
	require.NoError(t, err)
	_, err = c.Exec(ctx, `CREATE SCHEMA mneme; CREATE FUNCTION mneme.version() RETURNS text LANGUAGE sql AS $$SELECT '2.0.0'$$`)
	require.NoError(t, err)
	require.NoError(t, c.Close(ctx))

	bouncer := dbtest.PgBouncer(t, loginOf(t, appURL), loginOf(t, adminURL), loginOf(t, workerURL))
	appPool, err := bouncer.URL(appURL)
	require.NoError(t, err)
	adminPool, err := bouncer.URL(adminURL)
	require.NoError(t, err)
	workerPool, err := bouncer.URL(workerURL)
	require.NoError(t, err)
	common := []string{"MNEME_EMPTY_URL=" + emptyURL, "MNEME_V2_URL=" + v2URL}
	return map[string][]string{
		"direct":    append([]string{"MNEME_APP_URL=" + appURL, "MNEME_ADMIN_URL=" + adminURL, "MNEME_WORKER_URL=" + workerURL}, common...),
		"pgbouncer": append([]string{"MNEME_APP_URL=" + appPool, "MNEME_ADMIN_URL=" + adminPool, "MNEME_WORKER_URL=" + workerPool}, common...),
	}
}

// runQuiet runs a short command and returns its combined output.
func runQuiet(argv ...string) (string, error) {
	out, err := exec.Command(argv[0], argv[1:]...).CombinedOutput()
	return string(out), err
}

// runPackageTests runs argv in dir with env added and fails with its
// output when it fails.
func runPackageTests(t *testing.T, dir string, env []string, argv ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), env...)
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "%s in %s:\n%s", strings.Join(argv, " "), dir, out)
	return string(out)
}

// The TypeScript package @mneme-memory/client (clients/typescript) with
// its own tests (node --test): every function of the SQL API, the typed
// error, the version check, tenants, and its three adapters driven by
// their frameworks from npm (a LangGraph.js graph over MnemeStore, the AI
// SDK's generateText with a mock model calling mnemeTools, an OpenAI
// Agents SDK run with a fake model on MnemeSession), each storing a fact
// and recalling it in a later turn. Both vector variants, directly and
// through PgBouncer in transaction pooling.
func TestTypeScriptClient(t *testing.T) {
	t.Parallel()
	dir, err := filepath.Abs(filepath.Join("..", "clients", "typescript"))
	require.NoError(t, err)
	if _, err := exec.LookPath("node"); err != nil {
		t.Fatalf("node is not installed: clients/typescript needs it (apt-get install nodejs npm; make test does)")
	}
	for _, pkg := range []string{"pg", "@langchain/langgraph", "ai", "@openai/agents", "zod", "typescript"} {
		if _, err := os.Stat(filepath.Join(dir, "node_modules", pkg)); err != nil {
			t.Fatalf("%s is not installed: run `npm ci` in clients/typescript (make test does, scripts/test-deps.sh)", pkg)
		}
	}
	files, err := filepath.Glob(filepath.Join(dir, "test", "*.test.mjs"))
	require.NoError(t, err)
	require.NotEmpty(t, files)
	for _, variant := range variants(t) {
		t.Run(variant, func(t *testing.T) {
			for via, env := range clientPackageDBs(t, variant) {
				t.Run(via, func(t *testing.T) {
					out := runPackageTests(t, dir, env, append([]string{"node", "--test", "--test-reporter=spec"}, files...)...)
					t.Log(out)
					require.Contains(t, out, "ℹ fail 0")
				})
			}
		})
	}
}
