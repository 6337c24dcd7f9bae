package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"

	"github.com/mneme-memory/mneme/sidecar/cli"
	"github.com/mneme-memory/mneme/sidecar/daemon"
	"github.com/mneme-memory/mneme/sidecar/mcpserver"
	"github.com/mneme-memory/mneme/sidecar/version"
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
	if err := useDemoCluster(ctx, log); err != nil {
		return err
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
	tenants := []string{f.Tenant}
	if t.Kind == "http" {
		tenants = t.Tokens.Tenants()
	}
	if err := mcpserver.CheckStart(ctx, pool, tenants, cfg.Embed.Configured()); err != nil {
		return err
	}
	o := mcpserver.Options{Pool: pool, Tenant: f.Tenant, Version: version.Binary(), Log: log}
	if o.Embedder, err = mcpserver.ExternalEmbedder(ctx, pool, cfg.Embed, log); err != nil {
		return err
	}
	return mcpserver.Serve(ctx, o, t)
}
