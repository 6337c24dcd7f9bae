// Package localpg is what the daemon knows of the private PostgreSQL that
// `mneme-lab cluster` (and so make demo, make run, make psql) keeps in
// .mneme/pg: where it is and, when it is running, its URL; and where the
// psql binary is. It starts, creates and installs nothing: that is package
// cluster's, which only the lab command (sidecar/cmd/mneme-lab) links, so
// the daemon binary cannot apt-get install PostgreSQL or useradd.
package localpg

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
)

// DemoDir is where `make demo` keeps the private PostgreSQL (the same as
// cluster.DemoDir, which sidecar/cmd/mneme-lab's tests check); with
// DATABASE_URL unset, every mneme command uses it when it exists.
const DemoDir = ".mneme/pg"

// ErrStopped means the directory holds a cluster that is not running.
var ErrStopped = errors.New("the private PostgreSQL is stopped")

// dataDirs are where a cluster made for dir may live: dir itself, or the
// directory under the system temp dir package cluster uses when the server
// user cannot reach dir (cluster.altDataDir).
func dataDirs(dir string) ([]string, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, err
	}
	sum := sha256.Sum256([]byte(abs))
	return []string{abs, filepath.Join(os.TempDir(), "mneme-pg-"+hex.EncodeToString(sum[:6]))}, nil
}

// DataDir is the data directory of the cluster made for dir, or "" when
// there is none.
func DataDir(dir string) string {
	dirs, err := dataDirs(dir)
	if err != nil {
		return ""
	}
	for _, d := range dirs {
		if _, err := os.Stat(filepath.Join(d, "PG_VERSION")); err == nil {
			return d
		}
	}
	return ""
}

// URL is the URL of database db of the running cluster made for dir; ""
// when dir holds no cluster; ErrStopped (wrapped, with what to run) when it
// holds one that is not running.
func URL(dir, db string) (string, error) {
	data := DataDir(dir)
	if data == "" {
		return "", nil
	}
	port, ok := runningPort(data)
	if !ok {
		return "", fmt.Errorf("%w in %s: start it with bin/mneme-lab cluster start --dir %s (make run and make psql do), or set DATABASE_URL",
			ErrStopped, data, dir)
	}
	return fmt.Sprintf("postgres://postgres@127.0.0.1:%d/%s?sslmode=disable", port, db), nil
}

// runningPort reads postmaster.pid (line 1 the pid, line 4 the port) and
// reports the port when that process is alive.
func runningPort(data string) (int, bool) {
	f, err := os.Open(filepath.Join(data, "postmaster.pid"))
	if err != nil {
		return 0, false
	}
	defer f.Close()
	var pid, port int
	s := bufio.NewScanner(f)
	for i := 1; s.Scan() && i <= 4; i++ {
		switch i {
		case 1:
			pid, _ = strconv.Atoi(strings.TrimSpace(s.Text()))
		case 4:
			port, _ = strconv.Atoi(strings.TrimSpace(s.Text()))
		}
	}
	if pid <= 0 || port <= 0 {
		return 0, false
	}
	// Signal 0 checks existence; EPERM is a live process of another user
	// (the server runs as postgres when started by root).
	if err := syscall.Kill(pid, 0); err != nil && !errors.Is(err, syscall.EPERM) {
		return 0, false
	}
	return port, true
}

// PsqlPath finds psql: $PG_BINDIR, pg_config --bindir, the newest
// /usr/lib/postgresql/*/bin (Debian keeps the server's client there), then
// PATH.
func PsqlPath() (string, error) {
	has := func(d string) bool {
		st, err := os.Stat(filepath.Join(d, "psql"))
		return err == nil && !st.IsDir()
	}
	if d := os.Getenv("PG_BINDIR"); d != "" && has(d) {
		return filepath.Join(d, "psql"), nil
	}
	if out, err := exec.Command("pg_config", "--bindir").Output(); err == nil {
		if d := strings.TrimSpace(string(out)); has(d) {
			return filepath.Join(d, "psql"), nil
		}
	}
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	major := func(d string) int { n, _ := strconv.Atoi(filepath.Base(filepath.Dir(d))); return n }
	sort.Slice(dirs, func(i, j int) bool { return major(dirs[i]) > major(dirs[j]) })
	for _, d := range dirs {
		if has(d) {
			return filepath.Join(d, "psql"), nil
		}
	}
	if p, err := exec.LookPath("psql"); err == nil {
		return p, nil
	}
	return "", errors.New("psql not found (looked at $PG_BINDIR, pg_config --bindir, /usr/lib/postgresql/*/bin and PATH): install postgresql-client")
}

// Psql runs psql on url with further arguments, on this terminal.
func Psql(ctx context.Context, url string, args []string) error {
	path, err := PsqlPath()
	if err != nil {
		return err
	}
	cmd := exec.CommandContext(ctx, path, append([]string{url}, args...)...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	return cmd.Run() // psql has said what went wrong
}
