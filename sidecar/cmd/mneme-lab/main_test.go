package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/mneme-memory/mneme/sidecar/cli"
	"github.com/mneme-memory/mneme/sidecar/cli/clitest"
	"github.com/mneme-memory/mneme/sidecar/cluster"
	"github.com/mneme-memory/mneme/sidecar/dbtest"
	"github.com/mneme-memory/mneme/sidecar/localpg"
)

func TestMain(m *testing.M) {
	// The command-line tests re-execute this binary as the real mneme-lab.
	if os.Getenv("MNEME_TEST_AS_MAIN") == "1" {
		main()
		os.Exit(0)
	}
	dbtest.Main(m)
}

// lab runs this test binary as the real command (clitest.Run).
func lab(t *testing.T, dir string, env []string, args ...string) (string, string, int) {
	t.Helper()
	return clitest.Run(t, dir, env, args...)
}

// leaves lists the paths of every runnable command (clitest.Leaves).
var leaves = clitest.Leaves

// TestLabCommandLine: every command's --help and `mneme-lab help
// <command>` print its usage on stdout, once, and exit 0; an unknown flag
// or action exits 2 with the reason on stderr; none of these touches
// anything (no cluster directory is created, no database is needed).
func TestLabCommandLine(t *testing.T) {
	dir := t.TempDir()
	paths := leaves("", commands())
	for _, want := range []string{"cluster", "bench retrieve", "bench soak", "eval locomo"} {
		require.Contains(t, paths, want)
	}
	for _, path := range paths {
		args := strings.Fields(path)
		for _, argv := range [][]string{append(append([]string{}, args...), "--help"), append([]string{"help"}, args...)} {
			out, stderr, code := lab(t, dir, nil, argv...)
			require.Equal(t, 0, code, "%v: %s", argv, stderr)
			require.Contains(t, out, "usage: mneme-lab "+path, argv)
			require.Equal(t, 1, strings.Count(out, "\nusage:")+boolInt(strings.HasPrefix(out, "usage:")), "%v prints its usage once:\n%s", argv, out)
			require.Contains(t, out, cli.Find(commands(), path).Summary, argv)
		}
		out, stderr, code := lab(t, dir, nil, append(append([]string{}, args...), "--no-such-flag")...)
		require.Equal(t, 2, code, "%s --no-such-flag: %s", path, stderr)
		require.Contains(t, stderr, "no-such-flag", path)
		require.Empty(t, out, "%s --no-such-flag: the reason goes to stderr, nothing to stdout", path)
	}
	for _, argv := range [][]string{{"--help"}, {"help"}, {"bench", "--help"}, {"help", "eval"}} {
		out, _, code := lab(t, dir, nil, argv...)
		require.Equal(t, 0, code, argv)
		require.Contains(t, out, "commands:", argv)
	}
	for _, argv := range [][]string{{}, {"nope"}, {"bench", "nope"}, {"cluster"}, {"cluster", "bogus"},
		{"cluster", "start", "--bogus"}, {"eval", "locomo", "--budget", "0"}, {"run"}, {"migrate"}} {
		_, stderr, code := lab(t, dir, nil, argv...)
		require.Equal(t, 2, code, "%v: %s", argv, stderr)
		require.NotEmpty(t, stderr, argv)
	}
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	require.Empty(t, entries, "help and usage errors have no side effect")
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

// TestLabClusterIsTheDaemonsDemoCluster: the cluster mneme-lab starts in
// .mneme/pg is the one the daemon (package localpg) finds there, at the
// URL `cluster url` prints; stopped, the daemon says how to start it.
func TestLabClusterIsTheDaemonsDemoCluster(t *testing.T) {
	require.Equal(t, cluster.DemoDir, localpg.DemoDir)
	dir := t.TempDir()
	require.NoError(t, os.Chmod(dir, 0o755))
	url, err := localpg.URL(filepath.Join(dir, localpg.DemoDir), "mneme")
	require.NoError(t, err)
	require.Empty(t, url, "no cluster yet")

	out, stderr, code := lab(t, dir, nil, "cluster", "url")
	require.Equal(t, 0, code, stderr)
	t.Cleanup(func() { lab(t, dir, nil, "cluster", "stop") })
	url, err = localpg.URL(filepath.Join(dir, localpg.DemoDir), "mneme")
	require.NoError(t, err)
	require.Equal(t, strings.TrimSpace(out), url)
	env, _, code := lab(t, dir, nil, "cluster", "env")
	require.Equal(t, 0, code)
	require.Equal(t, "export DATABASE_URL="+url+"\n", env, "the line make demo tells the user to eval")

	_, stderr, code = lab(t, dir, nil, "cluster", "stop")
	require.Equal(t, 0, code, stderr)
	_, err = localpg.URL(filepath.Join(dir, localpg.DemoDir), "mneme")
	require.ErrorIs(t, err, localpg.ErrStopped)
	require.ErrorContains(t, err, "bin/mneme-lab cluster start")
}
