package cluster

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
)

// DemoDir is where `make demo` keeps the private PostgreSQL; with
// DATABASE_URL unset, every mneme command uses it when it exists.
const DemoDir = ".mneme/pg"

// StartDatabase starts (or finds running) the private cluster in dir and
// returns the URL of database db, created if missing.
func StartDatabase(ctx context.Context, dir, db string, logf func(string, ...any)) (string, error) {
	c, err := Start(ctx, dir, Options{Logf: logf})
	if err != nil {
		return "", err
	}
	if err := c.CreateDatabase(ctx, db); err != nil {
		return "", err
	}
	return c.URL(db), nil
}

// DemoURL is the URL of the demo cluster's database mneme (the cluster
// started if stopped), or "" when this directory has no demo cluster.
func DemoURL(ctx context.Context, logf func(string, ...any)) (string, error) {
	if !Exists(DemoDir) {
		return "", nil
	}
	return StartDatabase(ctx, DemoDir, "mneme", logf)
}

// StopDir stops the cluster in dir, if there is one, and returns its data
// directory ("" when there is none).
func StopDir(ctx context.Context, dir string) (string, error) {
	c, err := Attach(ctx, dir)
	if errors.Is(err, ErrNotCreated) {
		return "", nil
	}
	if err != nil {
		return "", err
	}
	return c.Dir, c.Stop(ctx)
}

// Psql runs the cluster binaries' psql on url with further arguments, on
// this terminal.
func Psql(ctx context.Context, url string, args []string) error {
	dir, err := FindBinDir()
	if err != nil {
		return err
	}
	cmd := exec.CommandContext(ctx, filepath.Join(dir, "psql"), append([]string{url}, args...)...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	return cmd.Run() // psql has said what went wrong
}
