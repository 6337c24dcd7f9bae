package cluster

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// PgBouncer is a PgBouncer process in front of a PostgreSQL server: the
// connection pool most deployments run, started for the tests the way the
// private cluster is (docs/clients.md, "Behind a pool").
type PgBouncer struct {
	Port int
	Dir  string
	cmd  *exec.Cmd
	done chan struct{}
	err  error // the process's exit, once done is closed
}

// PgBouncerOptions configure StartPgBouncer.
type PgBouncerOptions struct {
	ServerHost string // the PostgreSQL server (default 127.0.0.1)
	ServerPort int
	PoolMode   string // default "transaction"
	PoolSize   int    // default_pool_size: server connections per database and login (default 1)
	// Users are the logins PgBouncer admits. auth_type is trust (the
	// private cluster trusts loopback logins), which still requires each
	// login in the auth_file.
	Users []string
}

// ErrNoPgBouncer means the pgbouncer binary was not found.
var ErrNoPgBouncer = errors.New("pgbouncer not found (looked at $PGBOUNCER, PATH and /usr/sbin/pgbouncer); install the pgbouncer package (apt-get install pgbouncer)")

// FindPgBouncer returns the pgbouncer binary: $PGBOUNCER, then PATH, then
// Debian's /usr/sbin/pgbouncer (not on a non-root PATH).
func FindPgBouncer() (string, error) {
	if p := os.Getenv("PGBOUNCER"); p != "" {
		if _, err := os.Stat(p); err != nil {
			return "", fmt.Errorf("%w: PGBOUNCER=%s: %v", ErrNoPgBouncer, p, err)
		}
		return p, nil
	}
	if p, err := exec.LookPath("pgbouncer"); err == nil {
		return p, nil
	}
	if _, err := os.Stat("/usr/sbin/pgbouncer"); err == nil {
		return "/usr/sbin/pgbouncer", nil
	}
	return "", ErrNoPgBouncer
}

// StartPgBouncer writes a configuration into a new directory under the
// system's temp dir (Stop removes it) and starts PgBouncer on a free
// loopback port, in the foreground of a child process that dies with the
// caller. PgBouncer refuses to run as root: as root it runs as the
// server's user, as the cluster does.
func StartPgBouncer(ctx context.Context, opts PgBouncerOptions) (*PgBouncer, error) {
	bin, err := FindPgBouncer()
	if err != nil {
		return nil, err
	}
	if opts.ServerHost == "" {
		opts.ServerHost = "127.0.0.1"
	}
	if opts.PoolMode == "" {
		opts.PoolMode = "transaction"
	}
	if opts.PoolSize <= 0 {
		opts.PoolSize = 1
	}
	if opts.ServerPort <= 0 {
		return nil, fmt.Errorf("pgbouncer: the server's port is required")
	}
	var cred *syscall.Credential
	if os.Geteuid() == 0 {
		if cred, err = serverUser(ctx, func(string, ...any) {}); err != nil {
			return nil, err
		}
	}
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	// Under the temp dir, not a caller's directory: the server's user must
	// reach it.
	dir, err := os.MkdirTemp("", "mneme-pgbouncer-")
	if err != nil {
		return nil, fmt.Errorf("pgbouncer directory: %w", err)
	}
	if err := os.Chmod(dir, 0o755); err != nil {
		return nil, fmt.Errorf("pgbouncer directory: %w", err)
	}
	var users strings.Builder
	for _, u := range opts.Users {
		fmt.Fprintf(&users, "%q \"\"\n", u)
	}
	ini := fmt.Sprintf(`[databases]
* = host=%s port=%d

[pgbouncer]
listen_addr = 127.0.0.1
listen_port = %d
unix_socket_dir =
auth_type = trust
auth_file = %s
pool_mode = %s
default_pool_size = %d
max_client_conn = 200
logfile = %s
ignore_startup_parameters = extra_float_digits
`, opts.ServerHost, opts.ServerPort, port, filepath.Join(dir, "users.txt"), opts.PoolMode, opts.PoolSize,
		filepath.Join(dir, "pgbouncer.log"))
	for name, body := range map[string]string{"users.txt": users.String(), "pgbouncer.ini": ini} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			_ = os.RemoveAll(dir)
			return nil, fmt.Errorf("pgbouncer %s: %w", name, err)
		}
	}
	b := &PgBouncer{Port: port, Dir: dir, done: make(chan struct{})}
	b.cmd = exec.Command(bin, filepath.Join(dir, "pgbouncer.ini"))
	// Pdeathsig: a test binary killed by its timeout leaves no PgBouncer
	// behind (Go sets it after the change of user).
	b.cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred, Pdeathsig: syscall.SIGKILL}
	if cred != nil {
		if err := os.Chown(dir, int(cred.Uid), int(cred.Gid)); err != nil {
			_ = os.RemoveAll(dir)
			return nil, fmt.Errorf("pgbouncer directory: %w", err)
		}
		b.cmd.Dir = "/"
	}
	out, err := os.Create(filepath.Join(dir, "stderr.log"))
	if err != nil {
		_ = os.RemoveAll(dir)
		return nil, fmt.Errorf("pgbouncer output: %w", err)
	}
	b.cmd.Stdout, b.cmd.Stderr = out, out
	if err := b.cmd.Start(); err != nil {
		out.Close()
		_ = os.RemoveAll(dir)
		return nil, fmt.Errorf("start pgbouncer: %w", err)
	}
	go func() {
		b.err = b.cmd.Wait()
		out.Close()
		close(b.done)
	}()
	if err := b.waitReady(ctx); err != nil {
		_ = b.Stop() // after waitReady read the log into err
		return nil, err
	}
	return b, nil
}

// waitReady waits until PgBouncer accepts connections.
func (b *PgBouncer) waitReady(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(b.Port))
	for {
		if c, err := net.DialTimeout("tcp", addr, time.Second); err == nil {
			c.Close()
			return nil
		}
		select {
		case <-b.done:
			return fmt.Errorf("pgbouncer exited at start (%v): %s", b.err, b.Log())
		case <-ctx.Done():
			return fmt.Errorf("pgbouncer did not listen on %s: %s", addr, b.Log())
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// Log is the tail of PgBouncer's log and output, for error messages.
func (b *PgBouncer) Log() string {
	var s string
	for _, name := range []string{"stderr.log", "pgbouncer.log"} {
		body, _ := os.ReadFile(filepath.Join(b.Dir, name))
		s += string(body)
	}
	return lastLines(s, 20)
}

// URL is serverURL (a postgres:// URL of the server behind PgBouncer) with
// PgBouncer's address instead: same login, database and parameters.
func (b *PgBouncer) URL(serverURL string) (string, error) {
	u, err := url.Parse(serverURL)
	if err != nil {
		return "", fmt.Errorf("parse %q: %w", serverURL, err)
	}
	u.Host = net.JoinHostPort("127.0.0.1", strconv.Itoa(b.Port))
	return u.String(), nil
}

// Stop terminates PgBouncer, waits for it and removes its directory. Safe
// to call twice.
func (b *PgBouncer) Stop() error {
	select {
	case <-b.done:
	default:
		_ = b.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-b.done:
		case <-time.After(10 * time.Second):
			_ = b.cmd.Process.Kill()
			<-b.done
		}
	}
	if err := os.RemoveAll(b.Dir); err != nil {
		return fmt.Errorf("remove %s: %w", b.Dir, err)
	}
	return nil
}
