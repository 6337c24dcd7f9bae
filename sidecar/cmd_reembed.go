package main

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/jackc/pgx/v5"

	"github.com/mneme-memory/mneme/sidecar/cli"
	"github.com/mneme-memory/mneme/sidecar/config"
	"github.com/mneme-memory/mneme/sidecar/embed"
	"github.com/mneme-memory/mneme/sidecar/migrate"
)

func cmdReembed(ctx context.Context, log *slog.Logger, args []string) error {
	fs := flags("reembed")
	dim := fs.Int("dim", 0, "the new dimension (default: MNEME_EMBED_DIM)")
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
	if *dim == 0 {
		*dim = cfg.EmbedDim
	}
	conn, err := pgx.Connect(ctx, cfg.DatabaseURL)
	if err != nil {
		return fmt.Errorf("connect: %w", err)
	}
	defer conn.Close(ctx)
	var fn migrate.EmbedFunc
	if cfg.Embed.Configured() {
		fn = embed.New(cfg.Embed, *dim).Embed
	}
	n, err := migrate.Reembed(ctx, conn, *dim, fn)
	if err != nil {
		return err
	}
	log.Info("re-embedded", "memories", n, "dim", *dim, "external", fn != nil)
	fmt.Printf("re-embedded %d memories at dimension %d\n", n, *dim)
	return nil
}
