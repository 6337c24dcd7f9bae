package tests

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/mneme-memory/mneme/sidecar/cluster"
	"github.com/mneme-memory/mneme/sidecar/dbtest"
)

// TestExamples runs docs/examples.sql with psql against a migrated
// database, stopping at the first error, and checks that README.md shows
// the same statements: every SQL example in the README runs as pasted.
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
		})
	}
	examples, err := os.ReadFile("../docs/examples.sql")
	require.NoError(t, err)
	readme, err := os.ReadFile("../README.md")
	require.NoError(t, err)
	body := string(examples)
	body = body[strings.Index(body, `\set conv`):]
	require.Contains(t, string(readme), body, "README.md's SQL API block is docs/examples.sql from \\set on")
}
