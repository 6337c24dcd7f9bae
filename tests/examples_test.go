package tests

import (
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/mneme-memory/mneme/sidecar/cluster"
	"github.com/mneme-memory/mneme/sidecar/dbtest"
)

// update rewrites the golden files instead of comparing with them:
// go test ./tests -run TestExamples -update.
var update = flag.Bool("update", false, "rewrite the golden files (testdata/examples.*.out, the generated parts of docs/) from this run")

// TestExamples runs docs/examples.sql with psql against a migrated
// database, stopping at the first error, and compares everything psql
// prints (each statement echoed, then its result) with the golden file of
// the vector variant, testdata/examples.<variant>.out, once what differs
// from run to run is normalised (examplesNormal). It also checks that
// README.md shows the same statements: every SQL example in the README
// runs as pasted. From `\set conv` on, the file is README.md's SQL API
// block, then one part per further README block, each after a line
// `-- README.md, "<section>"...`.
func TestExamples(t *testing.T) {
	t.Parallel()
	for _, variant := range variants(t) {
		t.Run(variant, func(t *testing.T) {
			db := dbtest.New(t, dbtest.WithVector(variant))
			bin, err := cluster.FindBinDir()
			require.NoError(t, err)
			cmd := exec.Command(filepath.Join(bin, "psql"), "-X", "-a", "-A", "-v", "ON_ERROR_STOP=1", "-f", "../docs/examples.sql", db.URL)
			cmd.Env = append(os.Environ(), "PGTZ=UTC", "PGDATESTYLE=ISO")
			out, err := cmd.CombinedOutput()
			require.NoError(t, err, "%s", out)
			got := examplesNormal(string(out))
			golden := filepath.Join("testdata", "examples."+variant+".out")
			if *update {
				require.NoError(t, os.WriteFile(golden, []byte(got), 0o644))
				return
			}
			want, err := os.ReadFile(golden)
			require.NoError(t, err, "no golden file: go test ./tests -run TestExamples -update writes it")
			require.Equal(t, string(want), got,
				"docs/examples.sql printed otherwise than %s; if the change is meant, rewrite it: go test ./tests -run TestExamples -update", golden)
		})
	}
	examples, err := os.ReadFile("../docs/examples.sql")
	require.NoError(t, err)
	readme, err := os.ReadFile("../README.md")
	require.NoError(t, err)
	body := string(examples)
	body = body[strings.Index(body, `\set conv`):]
	parts := regexp.MustCompile(`(?m)^-- README\.md, "[^"]+".*\n`).Split(body, -1)
	require.GreaterOrEqual(t, len(parts), 2, "the SQL API block, Tenants and roles")
	for _, part := range parts {
		block := "```sql\n" + strings.TrimSpace(part) + "\n```\n"
		require.Contains(t, string(readme), block, "README.md shows docs/examples.sql's part as one block")
	}
}

var (
	examplesUUIDRE  = regexp.MustCompile(`[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}`)
	examplesTimeRE  = regexp.MustCompile(`\d{4}-\d\d-\d\d[ T]\d\d:\d\d(?::\d\d(?:\.\d+)?(?:[+-]\d\d(?::\d\d)?|Z)?| UTC)`)
	examplesFloatRE = regexp.MustCompile(`\b\d+\.\d{7,}(?:e-?\d+)?\b|\b(score|retrievability) \d+\.\d+`)
)

// examplesNormal replaces what differs from run to run in psql's
// (unaligned) output: each uuid by <uuid-N>, N numbering the distinct
// uuids in order of first appearance (a uuid met again keeps its number);
// times of day by <time>; and scores and retrievabilities (numbers of more
// than six decimals, and those retrieve_markdown prints), which depend on
// the time between a write and the search, and for the memory written
// "at => '2026-02-01'" on today's date, by <num>. Ids, order, texts, ranks,
// words, states and settings are compared as printed.
func examplesNormal(out string) string {
	seen := map[string]int{}
	out = examplesUUIDRE.ReplaceAllStringFunc(out, func(u string) string {
		if _, ok := seen[u]; !ok {
			seen[u] = len(seen) + 1
		}
		return fmt.Sprintf("<uuid-%d>", seen[u])
	})
	out = examplesTimeRE.ReplaceAllString(out, "<time>")
	return examplesFloatRE.ReplaceAllStringFunc(out, func(f string) string {
		if name, _, ok := strings.Cut(f, " "); ok {
			return name + " <num>"
		}
		return "<num>"
	})
}
