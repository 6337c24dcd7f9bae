package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/mneme-memory/mneme/sidecar/cli"
	"github.com/mneme-memory/mneme/sidecar/cli/clitest"
	"github.com/mneme-memory/mneme/sidecar/localpg"
)

// mnemeIn runs this test binary as the real `mneme` in dir with no
// DATABASE_URL: what a command does before it needs a database.
func mnemeIn(t *testing.T, dir string, args ...string) (string, string, int) {
	t.Helper()
	return mneme(t, dir, nil, args...)
}

// mneme runs this test binary as the real command (clitest.Run).
func mneme(t *testing.T, dir string, env []string, args ...string) (string, string, int) {
	t.Helper()
	return clitest.Run(t, dir, env, args...)
}

// leaves lists the paths of every runnable command (clitest.Leaves).
var leaves = clitest.Leaves

// usageLines counts the lines of out that start a usage.
func usageLines(out string) int {
	n := 0
	for _, l := range strings.Split(out, "\n") {
		if strings.HasPrefix(l, "usage:") {
			n++
		}
	}
	return n
}

// TestCommandLine: every command's --help and `mneme help <command>` print
// its usage on stdout, once, and exit 0; an unknown flag or action exits 2 with
// the reason on stderr; none of these touches anything (no cluster
// directory is created, no database is needed).
func TestCommandLine(t *testing.T) {
	dir := t.TempDir()
	paths := leaves("", commands())
	for _, lab := range []string{"bench", "eval", "cluster", "soak", "demo"} {
		for _, p := range paths {
			require.False(t, p == lab || strings.HasPrefix(p, lab+" "), "%s is mneme-lab's (sidecar/cmd/mneme-lab), not the daemon's", p)
		}
	}
	for _, path := range paths {
		args := strings.Fields(path)
		for _, argv := range [][]string{append(append([]string{}, args...), "--help"), append([]string{"help"}, args...)} {
			out, stderr, code := mnemeIn(t, dir, argv...)
			require.Equal(t, 0, code, "%v: %s", argv, stderr)
			require.Contains(t, out, "usage: mneme "+path, argv)
			require.Equal(t, 1, usageLines(out), "%v prints its usage once:\n%s", argv, out)
			require.Contains(t, out, cli.Find(commands(), path).Summary, argv)
		}
		if path == "psql" {
			continue // psql passes its flags on to psql
		}
		out, stderr, code := mnemeIn(t, dir, append(append([]string{}, args...), "--no-such-flag")...)
		require.Equal(t, 2, code, "%s --no-such-flag: %s", path, stderr)
		require.Contains(t, stderr, "no-such-flag", path)
		require.Empty(t, out, "%s --no-such-flag: the reason goes to stderr, nothing to stdout", path)
	}

	for _, argv := range [][]string{{"--help"}, {"help"}, {"-h"}} {
		out, _, code := mnemeIn(t, dir, argv...)
		require.Equal(t, 0, code, argv)
		require.Contains(t, out, "commands:", argv)
		require.Equal(t, 1, usageLines(out), "%v:\n%s", argv, out)
	}
	out, _, code := mnemeIn(t, dir, "--version")
	require.Equal(t, 0, code)
	require.True(t, strings.HasPrefix(out, "mneme "), out)

	for _, argv := range [][]string{{}, {"nope"}, {"bench", "retrieve"}, {"eval", "locomo"}, {"cluster", "start"},
		{"slot", "list"}, {"run", "extra"},
		{"ui", "--addr", "0.0.0.0:8420"}} { // beyond loopback without MNEME_UI_TOKEN
		_, stderr, code := mnemeIn(t, dir, argv...)
		require.Equal(t, 2, code, "%v: %s", argv, stderr)
		require.NotEmpty(t, stderr, argv)
	}
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	require.Empty(t, entries, "help and usage errors have no side effect")
	_, err = os.Stat(filepath.Join(dir, localpg.DemoDir))
	require.True(t, os.IsNotExist(err))
}
