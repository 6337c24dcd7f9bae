package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"

	"github.com/mneme-memory/mneme/sidecar/cli"
	"github.com/mneme-memory/mneme/sidecar/daemon"
	"github.com/mneme-memory/mneme/sidecar/embed"
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
	pool, cfg, err := daemon.OpenFromEnv(ctx)
	if err != nil {
		return err
	}
	defer pool.Close()
	o := mcpserver.Options{Pool: pool, Tenant: f.Tenant, Version: version, Log: log}
	if cfg.Embed.Configured() {
		// The external embedder embeds the queries as the sidecar embeds
		// the memories, at the database's dimension.
		var dim int
		if err := pool.QueryRow(ctx, `SELECT (mneme.setting('embedding_dim') #>> '{}')::int`).Scan(&dim); err != nil {
			return fmt.Errorf("read the embedding dimension (has `mneme migrate` run?): %w", err)
		}
		o.Embedder = embed.NewOpenAI(cfg.Embed, dim)
		log.Info("mcp: queries embedded by the external embedder", "base_url", cfg.Embed.BaseURL, "model", cfg.Embed.Model)
	}
	return mcpserver.Serve(ctx, o, t)
}
