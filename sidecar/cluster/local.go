package cluster

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
)

// DemoDir is where `make demo`, `make run`, `mneme psql` and `mneme ui`
// keep the private PostgreSQL.
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

// URLOrDemo is $DATABASE_URL, or the demo cluster's database mneme
// (started if needed).
func URLOrDemo(ctx context.Context, logf func(string, ...any)) (string, error) {
	if url := os.Getenv("DATABASE_URL"); url != "" {
		return url, nil
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
