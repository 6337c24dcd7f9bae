// Package clitest runs a command's test binary as the command itself, for
// the command-line tests of mneme and mneme-lab: their TestMain calls main
// when MNEME_TEST_AS_MAIN is 1.
package clitest

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/mneme-memory/mneme/sidecar/cli"
)

// Run runs this test binary as the real command (its TestMain) in dir (""
// for the current one) with args, the environment without DATABASE_URL
// plus env; it returns stdout, stderr and the exit code.
func Run(t *testing.T, dir string, env []string, args ...string) (string, string, int) {
	t.Helper()
	cmd := exec.Command(os.Args[0], args...)
	cmd.Dir = dir
	for _, e := range os.Environ() {
		if !strings.HasPrefix(e, "DATABASE_URL=") {
			cmd.Env = append(cmd.Env, e)
		}
	}
	cmd.Env = append(append(cmd.Env, "MNEME_TEST_AS_MAIN=1"), env...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	code := 0
	var exit *exec.ExitError
	if errors.As(err, &exit) {
		code = exit.ExitCode()
	} else {
		require.NoError(t, err)
	}
	return stdout.String(), stderr.String(), code
}

// Leaves lists the paths of every runnable command ("run", "bench retrieve").
func Leaves(prefix string, cmds []cli.Command) []string {
	var out []string
	for _, c := range cmds {
		p := strings.TrimSpace(prefix + " " + c.Name)
		if c.Subs != nil {
			out = append(out, Leaves(p, c.Subs)...)
		} else {
			out = append(out, p)
		}
	}
	return out
}
