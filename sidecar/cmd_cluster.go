package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"

	"github.com/mneme-memory/mneme/sidecar/cli"
	"github.com/mneme-memory/mneme/sidecar/cluster"
)

// demoCluster is where `make demo`, `make run` and `make psql` keep the
// private PostgreSQL.
const demoCluster = ".mneme/pg"

// cmdCluster manages the private PostgreSQL of `make demo` and `make test`:
// start (and print its URL), stop, url (start if needed, print the URL), env
// (the same as `export DATABASE_URL=...`, for eval $(mneme cluster env)).
func cmdCluster(ctx context.Context, log *slog.Logger, args []string) error {
	fs := flags("cluster")
	dir := fs.String("dir", demoCluster, "data directory of the private cluster")
	db := fs.String("db", "mneme", "database to create and point DATABASE_URL at")
	act, err := cli.Action(fs, args, "start", "stop", "url", "env")
	if err != nil {
		return err
	}
	if act == "stop" {
		c, err := cluster.Attach(ctx, *dir)
		if errors.Is(err, cluster.ErrNotCreated) {
			return nil
		}
		if err != nil {
			return err
		}
		if err := c.Stop(ctx); err != nil {
			return err
		}
		fmt.Fprintln(os.Stderr, "stopped", c.Dir)
		return nil
	}
	url, err := startCluster(ctx, log, *dir, *db)
	if err != nil {
		return err
	}
	if act == "env" {
		fmt.Printf("export DATABASE_URL=%s\n", url)
	} else {
		fmt.Println(url)
	}
	return nil
}

// startCluster starts (or finds running) the private cluster in dir and
// returns the URL of database db, created if missing.
func startCluster(ctx context.Context, log *slog.Logger, dir, db string) (string, error) {
	c, err := cluster.Start(ctx, dir, cluster.Options{Logf: func(f string, a ...any) { log.Info(fmt.Sprintf(f, a...)) }})
	if err != nil {
		return "", err
	}
	if err := c.CreateDatabase(ctx, db); err != nil {
		return "", err
	}
	return c.URL(db), nil
}

// cmdPsql opens psql on $DATABASE_URL, or on the demo cluster (started if
// needed); further arguments go to psql.
func cmdPsql(ctx context.Context, log *slog.Logger, args []string) error {
	fs := flags("psql")
	if len(args) > 0 && (args[0] == "--help" || args[0] == "-help") {
		fs.Usage()
		return cli.ErrHelp
	}
	url := os.Getenv("DATABASE_URL")
	if url == "" {
		var err error
		if url, err = startCluster(ctx, log, demoCluster, "mneme"); err != nil {
			return err
		}
	}
	dir, err := cluster.FindBinDir()
	if err != nil {
		return err
	}
	cmd := exec.CommandContext(ctx, filepath.Join(dir, "psql"), append([]string{url}, args...)...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	return cmd.Run()
}
