package main

import (
	"context"
	"log/slog"
	"os"

	"github.com/mneme-memory/mneme/sidecar/cli"
	"github.com/mneme-memory/mneme/sidecar/config"
	"github.com/mneme-memory/mneme/sidecar/localpg"
)

// useDemoCluster is how every command that talks to PostgreSQL finds it,
// the same way: $DATABASE_URL; when that is unset and this directory has
// the demo cluster (.mneme/pg, made by make demo), the demo cluster's
// database, said on stderr (a stopped one is an error that says how to
// start it: bin/mneme-lab cluster start; the daemon starts no server).
// With neither, the command's configuration error says what to set.
func useDemoCluster(_ context.Context, log *slog.Logger) error {
	if os.Getenv("DATABASE_URL") != "" {
		return nil
	}
	url, err := localpg.URL(localpg.DemoDir, "mneme")
	if err != nil || url == "" {
		return err
	}
	log.Info("DATABASE_URL is not set: using the demo cluster; eval $(bin/mneme-lab cluster env) sets it in your shell",
		"dir", localpg.DemoDir, "url", url)
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
	return localpg.Psql(ctx, cfg.DatabaseURL, args)
}
