package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"

	"github.com/mneme-memory/mneme/sidecar/cli"
	"github.com/mneme-memory/mneme/sidecar/cluster"
)

// cmdCluster manages the private PostgreSQL of `make demo` and `make test`:
// start (and print its URL), stop, url (start if needed, print the URL), env
// (the same as `export DATABASE_URL=...`, for eval $(mneme cluster env)).
func cmdCluster(ctx context.Context, log *slog.Logger, args []string) error {
	fs := flags("cluster")
	dir := fs.String("dir", cluster.DemoDir, "data directory of the private cluster")
	db := fs.String("db", "mneme", "database to create and point DATABASE_URL at")
	act, err := cli.Action(fs, args, "start", "stop", "url", "env")
	if err != nil {
		return err
	}
	if act == "stop" {
		stopped, err := cluster.StopDir(ctx, *dir)
		if err == nil && stopped != "" {
			fmt.Fprintln(os.Stderr, "stopped", stopped)
		}
		return err
	}
	url, err := cluster.StartDatabase(ctx, *dir, *db, logf(log))
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

// logf logs a cluster's progress at info.
func logf(log *slog.Logger) func(string, ...any) {
	return func(f string, a ...any) { log.Info(fmt.Sprintf(f, a...)) }
}
