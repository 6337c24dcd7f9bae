package tests

import (
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

// TestExamples runs docs/examples.sql with psql against a migrated
// database, stopping at the first error, and checks that README.md shows
// the same statements: every SQL example in the README runs as pasted.
// From `\set conv` on, the file is README.md's SQL API block, then one part
// per further README block, each after a line `-- README.md, "<section>"...`.
func TestExamples(t *testing.T) {
	t.Parallel()
	for _, variant := range variants(t) {
		t.Run(variant, func(t *testing.T) {
			db := dbtest.New(t, dbtest.WithVector(variant))
			bin, err := cluster.FindBinDir()
			require.NoError(t, err)
			out, err := exec.Command(filepath.Join(bin, "psql"), "-X", "-q", "-v", "ON_ERROR_STOP=1",
				"-f", "../docs/examples.sql", db.URL).CombinedOutput()
			require.NoError(t, err, "%s", out)
			require.Contains(t, string(out), "Alice moved to Berlin")
			require.Contains(t, string(out), "user request 42")
			require.Contains(t, string(out), "Alice lives in Lisbon", "the tenant's search finds its memory")
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
