package main

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/mneme-memory/mneme/sidecar/cli"
	"github.com/mneme-memory/mneme/sidecar/daemon"
)

func cmdRun(ctx context.Context, log *slog.Logger, args []string) error {
	fs := flags("run")
	drain := fs.Bool("drain", false, "process every ready job, then exit")
	if err := cli.Parse(fs, args, false); err != nil {
		return err
	}
	if err := useDemoCluster(ctx, log); err != nil {
		return err
	}
	stopTracing, err := startTracing(ctx, log, "mneme run")
	if err != nil {
		return err
	}
	defer stopTracing()
	pool, cfg, err := daemon.OpenFromEnv(ctx)
	if err != nil {
		return err
	}
	defer pool.Close()
	d, err := daemon.New(ctx, cfg, pool, log)
	if err != nil {
		return err
	}
	if *drain {
		start := time.Now()
		if err := d.Runner.Drain(ctx); err != nil {
			return fmt.Errorf("drain: %w", err)
		}
		log.Info("drained", "took", time.Since(start).Round(time.Millisecond))
		return nil
	}
	return d.Serve(ctx)
}
