// Package cluster runs a private PostgreSQL server for the demo and the
// tests: it finds (or installs) the server binaries, initdb's a data
// directory the project owns, starts it on a free loopback port with logical
// replication enabled, and stops it. PostgreSQL refuses to run as root, so
// when invoked as root the server runs as the postgres user (created by the
// Debian package) or, failing that, a system user the harness creates.
package cluster

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// Cluster is a private PostgreSQL server.
type Cluster struct {
	Dir    string // the data directory
	Port   int
	BinDir string
	cred   *syscall.Credential // nil: run as the current user
	logf   func(format string, args ...any)
}

// Options tune Start.
type Options struct {
	// Logf receives progress lines (installing, initdb, starting). Nil: quiet.
	Logf func(format string, args ...any)
	// Settings are extra postgresql.conf lines written at initdb time.
	Settings []string
	// Disposable clusters (tests, evaluations) are stopped and their data
	// removed by a detached watchdog once the calling process exits, however
	// it exits (a test binary killed by its timeout runs no deferred code).
	Disposable bool
}

// ErrNoServer means no PostgreSQL server binaries were found and none could
// be installed.
var ErrNoServer = errors.New("no PostgreSQL server binaries found")

// baseSettings make a fast, disposable, replication-capable server.
var baseSettings = []string{
	"listen_addresses = '127.0.0.1'",
	"unix_socket_directories = ''",
	"wal_level = logical",
	"max_replication_slots = 32",
	"max_wal_senders = 32",
	// A standby made by pg_basebackup (StartStandby) streams from where its
	// backup ended: keep that much WAL, or a run that writes a lot between
	// the backup and the standby's start recycles it and the standby never
	// catches up.
	"wal_keep_size = 1GB",
	"max_connections = 300",
	"shared_buffers = 256MB",
	"fsync = off",
	"synchronous_commit = off",
	"full_page_writes = off",
	"log_min_messages = warning",
	"log_line_prefix = '%m [%p] '",
}

// Start starts (or reuses, if it is already running) the cluster whose data
// lives in dir, creating it first if needed.
func Start(ctx context.Context, dir string, opts Options) (*Cluster, error) {
	logf := opts.Logf
	if logf == nil {
		logf = func(string, ...any) {}
	}
	bin, err := FindBinDir()
	if errors.Is(err, ErrNoServer) {
		if err = install(ctx, logf); err == nil {
			bin, err = FindBinDir()
		}
	}
	if err != nil {
		return nil, err
	}
	c := &Cluster{BinDir: bin, logf: logf}
	if os.Geteuid() == 0 {
		if c.cred, err = serverUser(ctx, logf); err != nil {
			return nil, err
		}
	}
	if c.Dir, err = c.dataDir(dir); err != nil {
		return nil, err
	}
	if _, err := os.Stat(filepath.Join(c.Dir, "PG_VERSION")); errors.Is(err, os.ErrNotExist) {
		if err := c.initdb(ctx, opts.Settings); err != nil {
			return nil, err
		}
	}
	if port, ok := c.runningPort(ctx); ok {
		c.Port = port
		logf("PostgreSQL already running in %s on port %d", c.Dir, port)
		return c, nil
	}
	if c.Port, err = c.port(); err != nil {
		return nil, err
	}
	if err := c.start(ctx); err != nil {
		return nil, err
	}
	if opts.Disposable {
		if err := c.watch(os.Getpid()); err != nil {
			_ = c.Stop(ctx)
			return nil, err
		}
	}
	return c, nil
}

// watch starts a detached shell, as the server user, that waits for process
// pid to go away and then stops the server and removes its data directory.
func (c *Cluster) watch(pid int) error {
	script := fmt.Sprintf(`while [ -d /proc/%d ]; do sleep 1; done; `+
		`"$0" stop -D "$1" -m immediate >/dev/null 2>&1; rm -rf "$1"`, pid)
	cmd := exec.Command("/bin/sh", "-c", script, filepath.Join(c.BinDir, "pg_ctl"), c.Dir)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Credential: c.cred}
	cmd.Dir = "/"
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start cluster watchdog: %w", err)
	}
	return cmd.Process.Release()
}

// Attach finds the cluster in dir without creating or starting it. It
// returns ErrNotCreated when dir holds no cluster.
func Attach(ctx context.Context, dir string) (*Cluster, error) {
	bin, err := FindBinDir()
	if err != nil {
		return nil, err
	}
	c := &Cluster{BinDir: bin, logf: func(string, ...any) {}}
	if os.Geteuid() == 0 {
		if c.cred, err = serverUser(ctx, c.logf); err != nil {
			return nil, err
		}
	}
	if c.Dir, err = c.dataDir(dir); err != nil {
		return nil, err
	}
	if _, err := os.Stat(filepath.Join(c.Dir, "PG_VERSION")); err != nil {
		return nil, fmt.Errorf("%w in %s", ErrNotCreated, c.Dir)
	}
	c.Port, _ = c.runningPort(ctx)
	return c, nil
}

// ErrNotCreated means a directory holds no cluster.
var ErrNotCreated = errors.New("no PostgreSQL cluster")

// URL is a connection URL for database db as the superuser.
func (c *Cluster) URL(db string) string {
	return fmt.Sprintf("postgres://postgres@127.0.0.1:%d/%s?sslmode=disable", c.Port, db)
}

// Stop shuts the server down (fast mode). Safe to call twice.
func (c *Cluster) Stop(ctx context.Context) error {
	if _, ok := c.runningPort(ctx); !ok {
		return nil
	}
	return c.run(ctx, "pg_ctl", "stop", "-D", c.Dir, "-m", "fast", "-w", "-t", "60")
}

// Restart stops the server and starts it again on the same port.
func (c *Cluster) Restart(ctx context.Context) error {
	if err := c.Stop(ctx); err != nil {
		return err
	}
	return c.start(ctx)
}

// Remove deletes the data directory (the server must be stopped).
func (c *Cluster) Remove() error { return os.RemoveAll(c.Dir) }

func (c *Cluster) start(ctx context.Context) error {
	c.logf("starting PostgreSQL (%s) on 127.0.0.1:%d, data in %s", c.BinDir, c.Port, c.Dir)
	err := c.run(ctx, "pg_ctl", "start", "-D", c.Dir, "-w", "-t", "60",
		"-l", filepath.Join(c.Dir, "server.log"), "-o", "-p "+strconv.Itoa(c.Port))
	if err != nil {
		tail, _ := os.ReadFile(filepath.Join(c.Dir, "server.log"))
		if len(tail) > 2000 {
			tail = tail[len(tail)-2000:]
		}
		return fmt.Errorf("start PostgreSQL in %s: %w\n%s", c.Dir, err, tail)
	}
	return nil
}

func (c *Cluster) initdb(ctx context.Context, extra []string) error {
	c.logf("initdb %s", c.Dir)
	if err := os.MkdirAll(c.Dir, 0o700); err != nil {
		return fmt.Errorf("create data directory: %w", err)
	}
	if err := c.chown(c.Dir); err != nil {
		return err
	}
	if err := c.run(ctx, "initdb", "-D", c.Dir, "-U", "postgres", "-A", "trust",
		"-E", "UTF8", "--locale=C", "--no-sync"); err != nil {
		return fmt.Errorf("initdb %s: %w", c.Dir, err)
	}
	conf := strings.Join(append(append([]string{"", "# mneme private cluster"}, baseSettings...), extra...), "\n") + "\n"
	f, err := os.OpenFile(filepath.Join(c.Dir, "postgresql.conf"), os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		return fmt.Errorf("configure cluster: %w", err)
	}
	defer f.Close()
	if _, err := f.WriteString(conf); err != nil {
		return fmt.Errorf("configure cluster: %w", err)
	}
	return nil
}

// runningPort reports the port of a server running in c.Dir.
func (c *Cluster) runningPort(ctx context.Context) (int, bool) {
	if c.run(ctx, "pg_ctl", "status", "-D", c.Dir) != nil {
		return 0, false
	}
	f, err := os.Open(filepath.Join(c.Dir, "postmaster.pid"))
	if err != nil {
		return 0, false
	}
	defer f.Close()
	s := bufio.NewScanner(f)
	for i := 1; s.Scan(); i++ {
		if i == 4 { // postmaster.pid line 4 is the port
			p, err := strconv.Atoi(strings.TrimSpace(s.Text()))
			return p, err == nil
		}
	}
	return 0, false
}

func (c *Cluster) run(ctx context.Context, name string, args ...string) error {
	cmd := exec.CommandContext(ctx, filepath.Join(c.BinDir, name), args...)
	cmd.Env = append(os.Environ(), "LC_ALL=C")
	if c.cred != nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: c.cred}
		cmd.Dir = "/"
	}
	out, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Errorf("%s %s: %w: %s", name, strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return nil
}

func (c *Cluster) chown(path string) error {
	if c.cred == nil {
		return nil
	}
	return filepath.Walk(path, func(p string, _ os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		return os.Lchown(p, int(c.cred.Uid), int(c.cred.Gid))
	})
}

// dataDir resolves dir. When the server runs as another user who cannot
// reach dir (a checkout under /root, say), the data lives in a directory
// under the system temp dir keyed by dir's path instead.
func (c *Cluster) dataDir(dir string) (string, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return "", err
	}
	if c.cred == nil || reachable(filepath.Dir(abs)) {
		if err := os.MkdirAll(filepath.Dir(abs), 0o755); err != nil {
			return "", err
		}
		return abs, nil
	}
	alt := altDataDir(abs)
	c.logf("%s is not reachable by the server user; using %s", abs, alt)
	return alt, nil
}

// altDataDir is where dataDir keeps the data of abs that the server user
// cannot reach.
func altDataDir(abs string) string {
	sum := sha256.Sum256([]byte(abs))
	return filepath.Join(os.TempDir(), "mneme-pg-"+hex.EncodeToString(sum[:6]))
}

// Exists reports whether dir holds a cluster (in dir itself or where
// dataDir moved it), without creating or starting anything.
func Exists(dir string) bool {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return false
	}
	for _, d := range []string{abs, altDataDir(abs)} {
		if _, err := os.Stat(filepath.Join(d, "PG_VERSION")); err == nil {
			return true
		}
	}
	return false
}

// reachable reports whether every directory on the way to dir may be
// traversed by others (o+x), which the server user needs.
func reachable(dir string) bool {
	for d := dir; ; d = filepath.Dir(d) {
		st, err := os.Stat(d)
		if err == nil && st.Mode().Perm()&0o001 == 0 {
			return false
		}
		if d == filepath.Dir(d) {
			return true
		}
	}
}

// portFile, in the data directory, keeps the port a cluster last ran on, so
// a restarted demo cluster keeps its URL.
const portFile = "mneme.port"

// port is the port the cluster last ran on if it is free again, else a free
// one, remembered for next time.
func (c *Cluster) port() (int, error) {
	path := filepath.Join(c.Dir, portFile)
	if b, err := os.ReadFile(path); err == nil {
		if p, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil && p > 0 {
			if l, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", p)); err == nil {
				l.Close()
				return p, nil
			}
			c.logf("port %d, used last time, is taken: choosing another", p)
		}
	}
	p, err := freePort()
	if err != nil {
		return 0, err
	}
	if err := os.WriteFile(path, []byte(strconv.Itoa(p)+"\n"), 0o644); err != nil {
		return 0, fmt.Errorf("remember the port: %w", err)
	}
	return p, nil
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("find a free port: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// CreateDatabase creates database name if it does not exist.
func (c *Cluster) CreateDatabase(ctx context.Context, name string) error {
	if name == "postgres" {
		return nil
	}
	psql := filepath.Join(c.BinDir, "psql")
	q := fmt.Sprintf(`SELECT 1 FROM pg_database WHERE datname = '%s'`, strings.ReplaceAll(name, "'", "''"))
	out, err := exec.CommandContext(ctx, psql, c.URL("postgres"), "-XAtc", q).CombinedOutput()
	if err != nil {
		return fmt.Errorf("check database %s: %w: %s", name, err, out)
	}
	if strings.TrimSpace(string(out)) == "1" {
		return nil
	}
	ident := `"` + strings.ReplaceAll(name, `"`, `""`) + `"`
	if out, err := exec.CommandContext(ctx, psql, c.URL("postgres"), "-XAtc", "CREATE DATABASE "+ident).CombinedOutput(); err != nil {
		return fmt.Errorf("create database %s: %w: %s", name, err, out)
	}
	return nil
}
