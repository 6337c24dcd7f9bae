package main

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/mneme-memory/mneme/sidecar/cli"
	"github.com/mneme-memory/mneme/sidecar/config"
	"github.com/mneme-memory/mneme/sidecar/daemon"
	"github.com/mneme-memory/mneme/sidecar/events"
)

func cmdSlot(ctx context.Context, log *slog.Logger, args []string) error {
	act, err := cli.Action(flags("slot"), args, "show", "drop")
	if err != nil {
		return err
	}
	if err := useDemoCluster(ctx, log); err != nil {
		return err
	}
	cfg, err := config.Load(true)
	if err != nil {
		return err
	}
	pool, err := daemon.OpenPool(ctx, cfg)
	if err != nil {
		return err
	}
	defer pool.Close()
	if act == "show" {
		l, err := events.Lag(ctx, pool, cfg.SlotName)
		if err != nil {
			return err
		}
		fmt.Printf("slot %s: active=%t confirmed_flush_lsn=%s retained_wal_bytes=%d unconfirmed_bytes=%d\n",
			cfg.SlotName, l.Active, l.ConfirmedFlushLSN, l.RetainedWALBytes, l.UnconfirmedBytes)
		return nil
	}
	dropped, err := events.DropSlot(ctx, pool, cfg.SlotName)
	if err != nil {
		return err
	}
	if dropped {
		fmt.Printf("dropped replication slot %s\n", cfg.SlotName)
	} else {
		fmt.Printf("no replication slot named %s\n", cfg.SlotName)
	}
	return nil
}
