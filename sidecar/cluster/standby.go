package cluster

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
)

// StartStandby makes a streaming hot standby of c in dir and starts it on a
// free loopback port: pg_basebackup copies the running primary and writes
// standby.signal and primary_conninfo (-R), so the standby follows the
// primary's WAL and serves read-only queries (hot_standby is on by
// default). It uses the primary's binaries and server user; opts.Disposable
// removes it when the calling process exits, as for Start.
func (c *Cluster) StartStandby(ctx context.Context, dir string, opts Options) (*Cluster, error) {
	logf := opts.Logf
	if logf == nil {
		logf = func(string, ...any) {}
	}
	s := &Cluster{BinDir: c.BinDir, cred: c.cred, logf: logf}
	var err error
	if s.Dir, err = s.dataDir(dir); err != nil {
		return nil, err
	}
	if _, err := os.Stat(filepath.Join(s.Dir, "PG_VERSION")); err == nil {
		return nil, fmt.Errorf("standby %s: the directory holds a cluster already", s.Dir)
	}
	// pg_basebackup, run as the server user, fills an empty directory it owns.
	if err := os.MkdirAll(s.Dir, 0o700); err != nil {
		return nil, fmt.Errorf("create standby directory: %w", err)
	}
	if err := s.chown(s.Dir); err != nil {
		return nil, err
	}
	logf("pg_basebackup of 127.0.0.1:%d into %s", c.Port, s.Dir)
	if err := c.run(ctx, "pg_basebackup", "-D", s.Dir, "-h", "127.0.0.1", "-p", strconv.Itoa(c.Port),
		"-U", "postgres", "-X", "stream", "-R", "-c", "fast", "--no-sync"); err != nil {
		return nil, fmt.Errorf("standby of %s: %w", c.Dir, err)
	}
	// The primary's remembered port came along with its files.
	_ = os.Remove(filepath.Join(s.Dir, portFile))
	if s.Port, err = s.port(); err != nil {
		return nil, err
	}
	if err := s.start(ctx); err != nil {
		return nil, err
	}
	if opts.Disposable {
		if err := s.watch(os.Getpid()); err != nil {
			_ = s.Stop(ctx)
			return nil, err
		}
	}
	return s, nil
}
