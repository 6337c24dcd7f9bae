package main

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/mneme-memory/mneme/sidecar/cli"
	"github.com/mneme-memory/mneme/sidecar/config"
	"github.com/mneme-memory/mneme/sidecar/migrate"
)

func cmdMigrate(ctx context.Context, log *slog.Logger, args []string) error {
	fs := flags("migrate")
	citus := fs.Bool("citus", false, "on a Citus coordinator: distribute the tables by conversation (once; docs/scale.md)")
	if err := cli.Parse(fs, args, false); err != nil {
		return err
	}
	if err := useDemoCluster(ctx, log); err != nil {
		return err
	}
	cfg, err := config.Load(true)
	if err != nil {
		return err
	}
	res, err := migrate.Run(ctx, cfg.DatabaseURL, migrate.Options{Vector: cfg.Vector, EmbedDim: cfg.MigrateEmbedDim(), Citus: *citus, Logger: log})
	if err != nil {
		return err
	}
	fmt.Printf("migrated: %d migrations applied now, %d SQL files re-applied, vectors: %s(%d)\n",
		len(res.Applied), len(res.SQLFiles), res.Variant, res.Dim)
	if res.Distributed {
		fmt.Printf("distributed by conversation on Citus %s\n", res.Citus)
	}
	return nil
}
