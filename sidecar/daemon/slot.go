package daemon

import (
	"context"
	"errors"
	"log/slog"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/mneme-memory/mneme/sidecar/events"
	"github.com/mneme-memory/mneme/sidecar/metrics"
)

// warnAbandonedSlot says so at start when mneme's replication slot exists
// but this sidecar will not stream from it (another transport, or nothing
// else is streaming): the slot keeps WAL until the disk fills.
func warnAbandonedSlot(ctx context.Context, pool *pgxpool.Pool, slot, transport string, log *slog.Logger) {
	l, err := events.Lag(ctx, pool, slot)
	if errors.Is(err, pgx.ErrNoRows) {
		return // no slot: nothing kept
	}
	if err != nil {
		log.Warn("replication slot check", "slot", slot, "err", err)
		return
	}
	if transport == events.Replication || l.Active {
		return
	}
	log.Warn("an inactive replication slot keeps WAL until it is dropped: nothing streams from it with this transport",
		"slot", slot, "retained_wal_bytes", l.RetainedWALBytes, "transport", transport,
		"fix", "mneme slot drop (or SELECT pg_drop_replication_slot('"+slot+"'))")
}

// slotSamples is the slot gauge: one sample when the slot exists.
func slotSamples(pool *pgxpool.Pool, slot string) ([]metrics.Sample, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	l, err := events.Lag(ctx, pool, slot)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return []metrics.Sample{{Labels: []string{slot, strconv.FormatBool(l.Active)}, Value: float64(l.RetainedWALBytes)}}, nil
}
