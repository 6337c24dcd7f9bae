package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"

	"github.com/mneme-memory/mneme/sidecar/cli"
	"github.com/mneme-memory/mneme/sidecar/daemon"
	"github.com/mneme-memory/mneme/sidecar/mcpserver"
)

func cmdMCP(ctx context.Context, log *slog.Logger, args []string) error {
	fs := flags("mcp")
	f := mcpserver.BindFlags(fs)
	if err := cli.Parse(fs, args, false); err != nil {
		return err
	}
	if f.NewToken != "" {
		if err := mcpserver.PrintNewToken(os.Stdout, f.NewToken); err != nil {
			return fmt.Errorf("%w: %v", cli.ErrUsage, err)
		}
		return nil
	}
	t, err := f.Transport()
	if err != nil {
		return fmt.Errorf("%w: %v", cli.ErrUsage, err)
	}
	stopTracing, err := startTracing(ctx, log, "mneme mcp")
	if err != nil {
		return err
	}
	defer stopTracing()
	pool, cfg, err := daemon.OpenFromEnv(ctx)
	if err != nil {
		return err
	}
	defer pool.Close()
	o := mcpserver.Options{Pool: pool, Tenant: f.Tenant, Version: version, Log: log}
	if o.Embedder, err = mcpserver.ExternalEmbedder(ctx, pool, cfg.Embed, log); err != nil {
		return err
	}
	return mcpserver.Serve(ctx, o, t)
}
