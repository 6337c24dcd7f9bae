package main

import (
	"compress/gzip"
	"context"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/mneme-memory/mneme/sidecar/dbtest"
	"github.com/mneme-memory/mneme/sidecar/version"
)

// mneme export -o x.jsonl.gz writes a gzipped file (renamed into place
// only when complete), mneme import reads it into another database as an
// admin, and their usage errors exit 2 before touching anything.
func TestExportImportCommands(t *testing.T) {
	ctx := context.Background()
	src := dbtest.New(t, dbtest.WithVector("array"))
	conv := uuid.New()
	_, err := src.Pool.Exec(ctx, `SELECT mneme.remember($1, 'The user prefers green tea.')`, conv)
	require.NoError(t, err)
	dir := t.TempDir()
	file := filepath.Join(dir, "acme.jsonl.gz")
	_, stderr, code := mneme(t, dir, []string{"DATABASE_URL=" + src.URL}, "export", "--quiet", "-o", file)
	require.Equal(t, 0, code, stderr)
	f, err := os.Open(file)
	require.NoError(t, err)
	gz, err := gzip.NewReader(f)
	require.NoError(t, err)
	body, err := io.ReadAll(gz)
	require.NoError(t, err)
	f.Close()
	require.Contains(t, string(body), "green tea")
	require.True(t, strings.HasPrefix(string(body), `{"type": "header"`))
	var header struct {
		MnemeVersion  string `json:"mneme_version"`
		SQLAPIVersion string `json:"sql_api_version"`
	}
	first, _, _ := strings.Cut(string(body), "\n")
	require.NoError(t, json.Unmarshal([]byte(first), &header))
	require.Equal(t, version.Binary(), header.MnemeVersion, "the header carries the binary's version")
	require.Equal(t, version.SQLAPI(), header.SQLAPIVersion, "and the database's SQL API version")

	// A failed export leaves no file.
	bad := filepath.Join(dir, "missing.jsonl")
	_, stderr, code = mneme(t, dir, []string{"DATABASE_URL=" + src.URL}, "export", "--quiet", "--conversation", uuid.NewString(), "-o", bad)
	require.Equal(t, 1, code)
	require.Contains(t, stderr, "does not exist")
	_, err = os.Stat(bad)
	require.True(t, os.IsNotExist(err))
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	require.Len(t, entries, 1, "no temporary file left behind")

	dst := dbtest.New(t, dbtest.WithVector("array"))
	_, stderr, code = mneme(t, dir, []string{"DATABASE_URL=" + dst.As(t, "mneme_admin")}, "import", "--quiet", "--jobs", "2", "--tenant", "acme", file)
	require.Equal(t, 0, code, stderr)
	var n int
	require.NoError(t, dst.Pool.QueryRow(ctx, `SELECT count(*) FROM mneme.memories WHERE tenant_id = 'acme' AND content LIKE '%green tea%'`).Scan(&n))
	require.Equal(t, 1, n)
	require.Contains(t, stderr, "conversations_written=1 conversations_already_there=0 file_messages=0 file_memories=1")

	// Again (a resumed import): nothing written, and the log says so.
	_, stderr, code = mneme(t, dir, []string{"DATABASE_URL=" + dst.As(t, "mneme_admin")}, "import", "--quiet", "--tenant", "acme", file)
	require.Equal(t, 0, code, stderr)
	require.Contains(t, stderr, "conversations_written=0 conversations_already_there=1 file_messages=0 file_memories=1")

	// An application login may not import: the error names the role it needs.
	_, stderr, code = mneme(t, dir, []string{"DATABASE_URL=" + dst.As(t, "mneme_app")}, "import", "--quiet", "--tenant", "acme", file)
	require.Equal(t, 1, code)
	require.Contains(t, stderr, "permission denied")
	require.Contains(t, stderr, "mneme import needs a login that is a member of mneme_admin")

	for _, argv := range [][]string{{"import"}, {"import", "a", "b"}, {"import", "--conversations", "bogus", file},
		{"import", "--seed", "x", file}, {"import", "--from", "zep", file}, {"import", "--jobs", "0", file}} {
		_, stderr, code := mneme(t, dir, []string{"DATABASE_URL=" + dst.URL}, argv...)
		require.Equal(t, 2, code, "%v: %s", argv, stderr)
	}
}
