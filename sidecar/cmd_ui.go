package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/mneme-memory/mneme/sidecar/cli"
	"github.com/mneme-memory/mneme/sidecar/config"
	"github.com/mneme-memory/mneme/sidecar/ui"
)

// cmdUI serves the web pages for looking into the memory, as the login of
// $DATABASE_URL (or the demo cluster's, as every command).
func cmdUI(ctx context.Context, log *slog.Logger, args []string) error {
	fs := flags("ui")
	addr := fs.String("addr", ui.DefaultAddr, "address to listen on; other than loopback only with MNEME_UI_TOKEN set")
	if err := cli.Parse(fs, args, false); err != nil {
		return err
	}
	token := os.Getenv("MNEME_UI_TOKEN")
	if err := ui.CheckAddr(*addr, token); err != nil {
		return fmt.Errorf("%w: %v", cli.ErrUsage, err)
	}
	if err := useDemoCluster(ctx, log); err != nil {
		return err
	}
	stopTracing, err := startTracing(ctx, log, "mneme ui")
	if err != nil {
		return err
	}
	defer stopTracing()
	c, err := config.Load(true)
	if err != nil {
		return err
	}
	cfg, err := pgxpool.ParseConfig(c.DatabaseURL)
	if err != nil {
		return fmt.Errorf("DATABASE_URL: %w", err)
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return fmt.Errorf("connect: %w", err)
	}
	defer pool.Close()
	return ui.Serve(ctx, *addr, ui.Options{Pool: pool, Token: token, Log: log})
}
