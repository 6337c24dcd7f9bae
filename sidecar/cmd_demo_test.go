package main

import (
	"context"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/mneme-memory/mneme/sidecar/cluster"
	"github.com/mneme-memory/mneme/sidecar/localpg"
)

// TestEveryCommandUsesTheDemoCluster: with DATABASE_URL unset, every
// command that talks to PostgreSQL does the same. Without a demo cluster
// in the directory, it says what to set and creates nothing; with one
// (what make demo leaves), it uses it and says so, so the README's
// commands work after make demo as written.
func TestEveryCommandUsesTheDemoCluster(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "x.jsonl")
	dbCommands := [][]string{{"migrate"}, {"run", "--drain"}, {"export", "-o", file}, {"import", file}, {"slot", "show"},
		{"vector-indexes"}, {"reembed", "--dim", "64"}, {"psql", "-c", "SELECT 1"}, {"ui"}, {"mcp"}}
	for _, argv := range dbCommands {
		_, stderr, code := mnemeIn(t, dir, argv...)
		require.Equal(t, 1, code, "%v: %s", argv, stderr)
		require.Contains(t, stderr, "DATABASE_URL is not set", argv)
		require.Contains(t, stderr, "make demo", argv)
	}
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	require.Empty(t, entries, "no cluster made, nothing written")

	// What mneme-lab cluster start (make demo) leaves in the directory.
	require.NoError(t, os.Chmod(dir, 0o755))
	demo := filepath.Join(dir, localpg.DemoDir)
	url, err := cluster.StartDatabase(context.Background(), demo, "mneme", nil)
	require.NoError(t, err)
	t.Cleanup(func() { _, _ = cluster.StopDir(context.Background(), demo) })
	for _, argv := range [][]string{{"migrate"}, {"version"}, {"run", "--drain"}, {"export", "--quiet", "-o", file},
		{"import", "--quiet", file}, {"slot", "show"}, {"psql", "-Atc", "SELECT mneme.version()"}} {
		out, stderr, code := mneme(t, dir, []string{"MNEME_METRICS_ADDR=off"}, argv...)
		if argv[0] == "slot" {
			require.Contains(t, stderr, `no replication slot named "mneme"`, "it asked the demo cluster")
		} else {
			require.Equal(t, 0, code, "%v: %s", argv, stderr)
		}
		require.Contains(t, stderr, "DATABASE_URL is not set: using the demo cluster", argv)
		require.Contains(t, stderr, "eval $(bin/mneme-lab cluster env)", argv)
		if argv[0] == "psql" {
			require.Equal(t, "1.0.0\n", out)
		}
	}
	out, _, code := mneme(t, dir, []string{"DATABASE_URL=" + url}, "version")
	require.Equal(t, 0, code)
	require.Contains(t, out, "database SQL API", "DATABASE_URL set names the same database")

	// Stopped, the demo cluster is not started by the daemon (it links no
	// cluster code): the command says how to start it.
	_, err = cluster.StopDir(context.Background(), demo)
	require.NoError(t, err)
	_, stderr, code := mnemeIn(t, dir, "version")
	require.Equal(t, 1, code, stderr)
	require.Contains(t, stderr, "bin/mneme-lab cluster start")

	// Every command that reads the configuration finds the demo cluster
	// first: the same way, whatever the command.
	files, err := filepath.Glob("cmd_*.go")
	require.NoError(t, err)
	loads := regexp.MustCompile(`config\.Load\(true\)|daemon\.OpenFromEnv\(`)
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		b, err := os.ReadFile(f)
		require.NoError(t, err)
		require.Equal(t, len(loads.FindAll(b, -1)), strings.Count(string(b), "useDemoCluster(ctx, log)"),
			"%s: every config.Load(true) and daemon.OpenFromEnv is preceded by useDemoCluster", f)
	}
}
