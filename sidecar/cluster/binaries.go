package cluster

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
)

// FindBinDir finds the directory with initdb, pg_ctl and postgres:
// PG_BINDIR, then pg_config --bindir, then the newest /usr/lib/postgresql/*/bin.
func FindBinDir() (string, error) {
	has := func(d string) bool {
		for _, b := range []string{"initdb", "pg_ctl", "postgres"} {
			if _, err := os.Stat(filepath.Join(d, b)); err != nil {
				return false
			}
		}
		return true
	}
	if d := os.Getenv("PG_BINDIR"); d != "" && has(d) {
		return d, nil
	}
	if out, err := exec.Command("pg_config", "--bindir").Output(); err == nil {
		if d := strings.TrimSpace(string(out)); has(d) {
			return d, nil
		}
	}
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	sort.Slice(dirs, func(i, j int) bool { return pgMajor(dirs[i]) > pgMajor(dirs[j]) })
	for _, d := range dirs {
		if has(d) {
			return d, nil
		}
	}
	return "", fmt.Errorf("%w (looked at $PG_BINDIR, pg_config --bindir and /usr/lib/postgresql/*/bin); install the postgresql package", ErrNoServer)
}

func pgMajor(binDir string) int {
	n, _ := strconv.Atoi(filepath.Base(filepath.Dir(binDir)))
	return n
}

// install installs PostgreSQL through apt-get when running as root.
func install(ctx context.Context, logf func(string, ...any)) error {
	if os.Geteuid() != 0 {
		return fmt.Errorf("%w; run as root once, or: sudo apt-get install -y postgresql", ErrNoServer)
	}
	if _, err := exec.LookPath("apt-get"); err != nil {
		return fmt.Errorf("%w and apt-get is not available; install PostgreSQL 14 or newer and put pg_config on PATH", ErrNoServer)
	}
	logf("installing PostgreSQL with apt-get (once)")
	env := append(os.Environ(), "DEBIAN_FRONTEND=noninteractive")
	for _, args := range [][]string{
		{"update"},
		{"install", "-y", "--no-install-recommends", "postgresql", "postgresql-client"},
	} {
		cmd := exec.CommandContext(ctx, "apt-get", args...)
		cmd.Env = env
		if out, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("apt-get %s: %w: %s", strings.Join(args, " "), err, lastLines(string(out), 10))
		}
	}
	return nil
}

// serverUser is the unprivileged account the server runs as under root.
func serverUser(ctx context.Context, logf func(string, ...any)) (*syscall.Credential, error) {
	u, err := user.Lookup("postgres")
	if err != nil {
		logf("no postgres user; creating system user mneme-pg")
		if out, err := exec.CommandContext(ctx, "useradd", "--system", "--no-create-home",
			"--shell", "/usr/sbin/nologin", "mneme-pg").CombinedOutput(); err != nil && !strings.Contains(string(out), "exists") {
			return nil, fmt.Errorf("create server user: %w: %s", err, out)
		}
		if u, err = user.Lookup("mneme-pg"); err != nil {
			return nil, fmt.Errorf("look up server user: %w", err)
		}
	}
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	return &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}, nil
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
