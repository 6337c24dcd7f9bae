package main

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/mneme-memory/mneme/sidecar/config"
	"github.com/mneme-memory/mneme/sidecar/events"
)

func init() {
	commands["slot"] = command{"show|drop the replication slot ($MNEME_SLOT) the replication transport uses", cmdSlot}
}

func cmdSlot(ctx context.Context, log *slog.Logger, args []string) error {
	if len(args) != 1 || (args[0] != "drop" && args[0] != "show") {
		return fmt.Errorf("%w: mneme slot show|drop", errUsage)
	}
	cfg, err := config.Load(true)
	if err != nil {
		return err
	}
	pool, err := openPool(ctx, cfg)
	if err != nil {
		return err
	}
	defer pool.Close()
	if args[0] == "show" {
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
