package tests

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
	"unicode"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/mneme-memory/mneme/sidecar/dbtest"
)

// The docs pin no count or path a test does not read (STYLE.md, habit
// 19): the paths they name exist, the tables of test files and settings
// and the list of inlined helpers are checked against the repository and
// a freshly migrated database, the test harness's counts against the
// harness, and docs/settings.md's table is generated
// (go test ./tests -run TestDocsSettingsTable -update).

// docPages are README.md and docs/*.md (docs/history/ holds dated
// journals: what was true on the day, at the commit they name).
func docPages(t *testing.T) []string {
	t.Helper()
	pages, err := filepath.Glob("../docs/*.md")
	require.NoError(t, err)
	return append([]string{"../README.md"}, pages...)
}

// docPath finds repository paths in prose: sidecar/..., sql/..., etc.
var docPath = regexp.MustCompile(`(?:^|[^\w/.-])((?:sidecar|sql|goose|tests|docs|scripts|clients|client|\.ci)/[A-Za-z0-9_./*<>-]*[A-Za-z0-9_*/])`)

// docPathExists: path (relative to the repository) exists; a pattern
// (`<name>` or name, `*`, `NNN` for digits) matches a file; a prefix
// (goose/00030) starts a file name; a Go identifier
// (sidecar/version.Release) names an exported one of an existing package.
func docPathExists(path string) bool {
	if strings.Contains(path, "node_modules") {
		return true // installed by scripts/test-deps.sh, not in the repository
	}
	p := filepath.Join("..", path)
	if _, err := os.Stat(p); err == nil {
		return true
	}
	pattern := strings.ReplaceAll(regexp.MustCompile(`<[^>]*>`).ReplaceAllString(p, "*"), "name", "*")
	pattern = regexp.MustCompile(`N+`).ReplaceAllStringFunc(pattern, func(n string) string {
		return strings.Repeat("[0-9]", len(n))
	})
	if m, _ := filepath.Glob(pattern + "*"); len(m) > 0 {
		return true
	}
	if i := strings.LastIndex(p, "."); i > 0 && unicode.IsUpper(rune(p[i+1])) {
		if st, err := os.Stat(p[:i]); err == nil && st.IsDir() {
			return true
		}
	}
	return false
}

// TestDocsPathsExist: every repository path README.md and docs/*.md name
// exists (a link's target relative to its page).
func TestDocsPathsExist(t *testing.T) {
	t.Parallel()
	link := regexp.MustCompile(`\]\(([^)#\s]+)`)
	for _, page := range docPages(t) {
		b, err := os.ReadFile(page)
		require.NoError(t, err)
		prose := link.ReplaceAllString(string(b), "](")
		for _, m := range docPath.FindAllStringSubmatch(prose, -1) {
			require.True(t, docPathExists(m[1]), "%s names %s, which does not exist", page, m[1])
		}
		for _, m := range link.FindAllStringSubmatch(string(b), -1) {
			target := m[1]
			if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") ||
				!strings.ContainsAny(target, "./") {
				continue // a web link, or Go code's [T](v) in a code block
			}
			rel, err := filepath.Rel("..", filepath.Join(filepath.Dir(page), target))
			require.NoError(t, err)
			require.True(t, docPathExists(rel), "%s links to %s, which does not exist", page, target)
		}
	}
}

// TestDocsTestsTableListsEveryFile: docs/tests.md's table of tests/ lists
// every test file there, and no file that is not.
func TestDocsTestsTableListsEveryFile(t *testing.T) {
	t.Parallel()
	b, err := os.ReadFile("../docs/tests.md")
	require.NoError(t, err)
	listed := map[string]bool{}
	for _, line := range strings.Split(string(b), "\n") {
		cells := strings.Split(line, "|")
		if len(cells) < 4 || !strings.HasPrefix(line, "| ") {
			continue
		}
		for _, m := range regexp.MustCompile("`([a-z0-9_]+)`").FindAllStringSubmatch(cells[2], -1) {
			listed[m[1]] = true
		}
	}
	files, err := filepath.Glob("*_test.go")
	require.NoError(t, err)
	for _, f := range files {
		name := strings.TrimSuffix(f, "_test.go")
		if name == "main" || name == "helpers" {
			continue // the harness
		}
		require.True(t, listed[name], "tests/%s is in no row of docs/tests.md's table", f)
		delete(listed, name)
	}
	require.Empty(t, listed, "docs/tests.md lists test files tests/ does not have")
}

// settingsTableStart and settingsTableEnd mark the generated table of
// docs/settings.md.
const (
	settingsTableStart = "<!-- generated from a freshly migrated database: go test ./tests -run TestDocsSettingsTable -update -->\n"
	settingsTableEnd   = "<!-- end of the generated table -->\n"
)

// TestDocsSettingsTable: docs/settings.md's table is mneme.settings of a
// freshly migrated database (one server, the array variant: the
// read-only vector_variant says "array"), the descriptions the
// registry's (sql/010-setting-rules.sql); -update rewrites it.
func TestDocsSettingsTable(t *testing.T) {
	t.Parallel()
	if dbtest.OnCitus() {
		t.Skip("the table is one server's")
	}
	ctx := context.Background()
	db := dbtest.New(t, dbtest.WithVector("array"))
	rows, err := db.Pool.Query(ctx, `SELECT key, value::text, coalesce(description, '') FROM mneme.settings ORDER BY key`)
	require.NoError(t, err)
	type setting struct{ Key, Value, Description string }
	settings, err := pgx.CollectRows(rows, pgx.RowToStructByPos[setting])
	require.NoError(t, err)
	require.NotEmpty(t, settings)
	var table strings.Builder
	table.WriteString("| key | default | meaning |\n| --- | --- | --- |\n")
	cell := strings.NewReplacer("|", `\|`, "\n", " ")
	for _, s := range settings {
		fmt.Fprintf(&table, "| `%s` | `%s` | %s |\n", s.Key, cell.Replace(s.Value), cell.Replace(s.Description))
	}

	b, err := os.ReadFile("../docs/settings.md")
	require.NoError(t, err)
	page := string(b)
	i, j := strings.Index(page, settingsTableStart), strings.Index(page, settingsTableEnd)
	require.True(t, i >= 0 && j > i, "docs/settings.md has no generated table between %q and %q", settingsTableStart, settingsTableEnd)
	if *update {
		page = page[:i+len(settingsTableStart)] + table.String() + page[j:]
		require.NoError(t, os.WriteFile("../docs/settings.md", []byte(page), 0o644))
		j = strings.Index(page, settingsTableEnd)
	}
	require.Equal(t, strings.Split(table.String(), "\n"), strings.Split(page[i+len(settingsTableStart):j], "\n"),
		"docs/settings.md's table is stale: go test ./tests -run TestDocsSettingsTable -update")
}

// TestDocsInlinedHelpersList: docs/sql-api.md lists, by name, the
// functions of a fresh install without SET search_path (the inlined
// helpers), all of them and no other.
func TestDocsInlinedHelpersList(t *testing.T) {
	t.Parallel()
	if dbtest.OnCitus() {
		t.Skip("the list is one server's")
	}
	ctx := context.Background()
	db := dbtest.New(t, dbtest.WithVector("array"))
	rows, err := db.Pool.Query(ctx, `SELECT p.proname FROM pg_proc p
		WHERE p.pronamespace = 'mneme'::regnamespace AND p.proconfig IS NULL ORDER BY 1`)
	require.NoError(t, err)
	helpers, err := pgx.CollectRows(rows, pgx.RowTo[string])
	require.NoError(t, err)
	b, err := os.ReadFile("../docs/sql-api.md")
	require.NoError(t, err)
	page := string(b)
	start := strings.Index(page, "The exceptions are deliberate:")
	require.GreaterOrEqual(t, start, 0, "docs/sql-api.md: the paragraph on the inlined helpers")
	end := start + strings.Index(page[start:], "A `SET`")
	var listed []string
	for _, m := range regexp.MustCompile("`(_[a-z0-9_]+)`").FindAllStringSubmatch(page[start:end], -1) {
		listed = append(listed, m[1])
	}
	sort.Strings(listed)
	require.Equal(t, helpers, listed, "docs/sql-api.md's list of the inlined helpers (functions without SET search_path)")
}

// TestDocsClientLoopLines: docs/clients.md's table of the three loops
// gives each file's line count (wc -l).
func TestDocsClientLoopLines(t *testing.T) {
	t.Parallel()
	b, err := os.ReadFile("../docs/clients.md")
	require.NoError(t, err)
	rows := regexp.MustCompile(`(?m)^\| \[(loop\.[a-z]+)\]\(clients/loop\.[a-z]+\) \| (\d+)`).FindAllStringSubmatch(string(b), -1)
	require.Len(t, rows, 3, "docs/clients.md's table of docs/clients/loop.*")
	for _, r := range rows {
		f, err := os.ReadFile(filepath.Join("../docs/clients", r[1]))
		require.NoError(t, err)
		require.Equal(t, r[2], fmt.Sprint(strings.Count(string(f), "\n")), "docs/clients.md: lines of docs/clients/%s", r[1])
	}
}

// TestDocsHarnessCounts: the counts the docs give of the test harness
// are the harness's: the deployments scripts/test.sh runs (docs/tests.md
// "runs on N deployments", and a row of its table each), the Citus test
// cluster's workers (sidecar/dbtest's cluster.StartCitus call; "a
// coordinator and N workers" in README.md and docs/tests.md) and its
// shards per table (sidecar/cluster/citus.go; docs/tests.md).
func TestDocsHarnessCounts(t *testing.T) {
	t.Parallel()
	read := func(p string) string {
		b, err := os.ReadFile(p)
		require.NoError(t, err)
		return string(b)
	}
	words := map[string]int{"one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6}
	number := func(s string) int {
		if n, ok := words[strings.ToLower(s)]; ok {
			return n
		}
		var n int
		_, err := fmt.Sscanf(s, "%d", &n)
		require.NoError(t, err, "a count: %q", s)
		return n
	}
	tests := read("../docs/tests.md")

	runs := regexp.MustCompile(`(?m)^\s*run ([a-z]+) `).FindAllStringSubmatch(read("../scripts/test.sh"), -1)
	var deployments []string
	for _, r := range runs {
		deployments = append(deployments, r[1])
	}
	m := regexp.MustCompile(`runs on (\w+) deployments`).FindStringSubmatch(tests)
	require.NotNil(t, m, "docs/tests.md says how many deployments")
	require.Equal(t, len(deployments), number(m[1]), "docs/tests.md: the deployments scripts/test.sh runs: %v", deployments)
	for _, d := range deployments {
		require.Contains(t, tests, "| `"+d+"` |", "docs/tests.md's table has the deployment %s", d)
	}

	w := regexp.MustCompile(`cluster\.StartCitus\(ctx, dir, (\d+),`).FindStringSubmatch(read("../sidecar/dbtest/dbtest.go"))
	require.NotNil(t, w, "sidecar/dbtest starts the Citus cluster")
	for _, page := range []string{"../README.md", "../docs/tests.md"} {
		for _, c := range regexp.MustCompile(`coordinator and (\w+) workers`).FindAllStringSubmatch(read(page), -1) {
			require.Equal(t, number(w[1]), number(c[1]), "%s: the test cluster's workers", page)
		}
	}

	sh := regexp.MustCompile(`"citus\.shard_count = (\d+)"`).FindStringSubmatch(read("../sidecar/cluster/citus.go"))
	require.NotNil(t, sh, "sidecar/cluster/citus.go sets the shard count")
	c := regexp.MustCompile(`(\d+) shards a table`).FindStringSubmatch(tests)
	require.NotNil(t, c, "docs/tests.md gives the shards a table")
	require.Equal(t, sh[1], c[1], "docs/tests.md: the test cluster's shards a table")
}
