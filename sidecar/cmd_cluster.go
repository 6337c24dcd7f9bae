package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"

	"github.com/mneme-memory/mneme/sidecar/cli"
	"github.com/mneme-memory/mneme/sidecar/cluster"
	"github.com/mneme-memory/mneme/sidecar/config"
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

// useDemoCluster is how every command that talks to PostgreSQL finds it,
// the same way: $DATABASE_URL; when that is unset and this directory has
// the demo cluster (.mneme/pg, made by make demo), the demo cluster's
// database (started if stopped), said on stderr. With neither, the
// command's configuration error says what to set.
func useDemoCluster(ctx context.Context, log *slog.Logger) error {
	if os.Getenv("DATABASE_URL") != "" {
		return nil
	}
	url, err := cluster.DemoURL(ctx, logf(log))
	if err != nil || url == "" {
		return err
	}
	log.Info("DATABASE_URL is not set: using the demo cluster; eval $(bin/mneme cluster env) sets it in your shell",
		"dir", cluster.DemoDir, "url", url)
	return os.Setenv("DATABASE_URL", url)
}

// cmdPsql opens psql on $DATABASE_URL (or the demo cluster, as every
// command); further arguments go to psql.
func cmdPsql(ctx context.Context, log *slog.Logger, args []string) error {
	if len(args) > 0 && (args[0] == "--help" || args[0] == "-help") {
		flags("psql").Usage()
		return cli.ErrHelp
	}
	if err := useDemoCluster(ctx, log); err != nil {
		return err
	}
	cfg, err := config.Load(true)
	if err != nil {
		return err
	}
	return cluster.Psql(ctx, cfg.DatabaseURL, args)
}
