package events

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// ErrSlotActive means another process (another sidecar) is streaming from
// the slot; only one can at a time.
var ErrSlotActive = errors.New("replication slot is in use by another process")

// ensureSlot checks the publication (created by mneme migrate), creates the
// persistent slot if absent and checks that an existing slot is usable
// (same database, pgoutput).
func ensureSlot(ctx context.Context, pool *pgxpool.Pool, slot string) (created bool, err error) {
	var pub bool
	if err := pool.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_publication WHERE pubname = $1)`, Publication).Scan(&pub); err != nil {
		return false, fmt.Errorf("look up publication %s: %w", Publication, err)
	}
	if !pub {
		return false, fmt.Errorf("publication %s is missing: run mneme migrate (it re-creates it)", Publication)
	}
	var plugin, db string
	var active bool
	err = pool.QueryRow(ctx, `
		SELECT coalesce(plugin, ''), coalesce(database, ''), active
		  FROM pg_replication_slots WHERE slot_name = $1`, slot).Scan(&plugin, &db, &active)
	switch {
	case err == nil:
		var cur string
		if err := pool.QueryRow(ctx, `SELECT current_database()`).Scan(&cur); err != nil {
			return false, fmt.Errorf("current database: %w", err)
		}
		if plugin != "pgoutput" || db != cur {
			return false, fmt.Errorf("replication slot %q exists for database %q with plugin %q, not %q with pgoutput; "+
				"set MNEME_SLOT to another name, or drop it (mneme slot drop)", slot, db, plugin, cur)
		}
		if active {
			return false, fmt.Errorf("%w: slot %q", ErrSlotActive, slot)
		}
		return false, nil
	case isNoRows(err):
		_, err := pool.Exec(ctx, `SELECT pg_create_logical_replication_slot($1, 'pgoutput')`, slot)
		if err != nil && !isCode(err, "42710") {
			return false, fmt.Errorf("create replication slot %q: %w", slot, err)
		}
		return err == nil, nil
	default:
		return false, fmt.Errorf("look up replication slot %q: %w", slot, err)
	}
}

// DropSlot removes the replication slot (mneme slot drop). It reports
// whether there was one.
func DropSlot(ctx context.Context, pool *pgxpool.Pool, slot string) (bool, error) {
	var active bool
	err := pool.QueryRow(ctx, `SELECT active FROM pg_replication_slots WHERE slot_name = $1`, slot).Scan(&active)
	if isNoRows(err) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("look up replication slot %q: %w", slot, err)
	}
	if active {
		return false, fmt.Errorf("%w: slot %q; stop the sidecar that uses it first", ErrSlotActive, slot)
	}
	if _, err := pool.Exec(ctx, `SELECT pg_drop_replication_slot($1)`, slot); err != nil {
		return false, fmt.Errorf("drop replication slot %q: %w", slot, err)
	}
	return true, nil
}

// SlotLag is what pg_replication_slots says about a slot.
type SlotLag struct {
	Active            bool
	ConfirmedFlushLSN string
	RetainedWALBytes  int64 // pg_current_wal_lsn() - restart_lsn
	UnconfirmedBytes  int64 // pg_current_wal_lsn() - confirmed_flush_lsn
}

// Lag reads the slot's position and how much WAL it holds back.
func Lag(ctx context.Context, pool *pgxpool.Pool, slot string) (SlotLag, error) {
	var l SlotLag
	err := pool.QueryRow(ctx, `
		SELECT active, coalesce(confirmed_flush_lsn::text, ''),
		       coalesce(pg_wal_lsn_diff(pg_current_wal_lsn(), restart_lsn), 0)::bigint,
		       coalesce(pg_wal_lsn_diff(pg_current_wal_lsn(), confirmed_flush_lsn), 0)::bigint
		  FROM pg_replication_slots WHERE slot_name = $1`, slot).
		Scan(&l.Active, &l.ConfirmedFlushLSN, &l.RetainedWALBytes, &l.UnconfirmedBytes)
	if isNoRows(err) {
		return l, fmt.Errorf("no replication slot named %q (the replication transport creates it when it starts): %w", slot, err)
	}
	if err != nil {
		return l, fmt.Errorf("replication slot %q: %w", slot, err)
	}
	return l, nil
}

func isCode(err error, code string) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && pgErr.Code == code
}

func isNoRows(err error) bool { return errors.Is(err, pgx.ErrNoRows) }
