// Package lifecycle owns the sidecar's part of mneme's memory lifecycle:
// the cleanup job (kind "cleanup"), which runs the policy in SQL
// (mneme.cleanup: inactive, expired, purge, old jobs) and schedules the
// next run, and the schedule's first entry at start. The policy itself
// lives in sql/430-cleanup.sql, callable from psql or pg_cron as well.
package lifecycle

import (
	"context"
	"fmt"
	"log/slog"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/mneme-memory/mneme/sidecar/jobs"
)

// querier runs one statement (a pool, a connection or a transaction).
type querier interface {
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// Handler is the cleanup job's handler (daemon.Handlers binds it).
func Handler(log *slog.Logger) jobs.Handler {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return func(ctx context.Context, db jobs.Store, job jobs.Job) error {
		if err := db.Commit(ctx, func(tx pgx.Tx) error { return cleanup(ctx, tx, job, log) }); err != nil {
			return err
		}
		vacuumAfterErase(ctx, db, log)
		return nil
	}
}

// vacuumAfterErase vacuums the tables an erase touched since the last
// vacuum: until then the deleted row versions keep the erased text in the
// table files. VACUUM runs outside any transaction, after the job's commit;
// it needs the tables' owner (or a superuser), so a sidecar running as a
// mneme_worker login says what the operator runs instead. Failures are
// logged, never the job's: the policy is already committed.
func vacuumAfterErase(ctx context.Context, db jobs.Querier, log *slog.Logger) {
	rows, err := db.Query(ctx, `SELECT table_name, may_vacuum FROM mneme.erase_vacuum_targets()`)
	if err != nil {
		log.Warn("cleanup: find the tables to vacuum after erase", "err", err)
		return
	}
	type target struct {
		Name string
		May  bool
	}
	targets, err := pgx.CollectRows(rows, pgx.RowToStructByPos[target])
	if err != nil {
		log.Warn("cleanup: find the tables to vacuum after erase", "err", err)
		return
	}
	var denied []string
	for _, t := range targets {
		name := pgx.Identifier{"mneme", t.Name}.Sanitize()
		if !t.May {
			denied = append(denied, name)
			continue
		}
		if _, err := db.Exec(ctx, "VACUUM "+name); err != nil {
			log.Warn("cleanup: vacuum after erase", "table", name, "err", err)
		}
	}
	if len(targets) > 0 {
		log.Info("cleanup: vacuumed after erase", "tables", len(targets)-len(denied))
	}
	if len(denied) > 0 {
		log.Warn("cleanup: erased text stays in dead row versions until VACUUM, which this role may not run",
			"run_as_table_owner", "VACUUM "+strings.Join(denied, ", "))
	}
}

// Schedule makes sure a cleanup job is pending (mneme.schedule_cleanup:
// one at a time, due cleanup_interval after the last one finished). It
// returns the job's id, 0 when the setting cleanup_interval is null.
func Schedule(ctx context.Context, db querier) (int64, error) {
	var id *int64
	if err := db.QueryRow(ctx, `SELECT mneme.schedule_cleanup()`).Scan(&id); err != nil {
		return 0, fmt.Errorf("schedule cleanup: %w", err)
	}
	if id == nil {
		return 0, nil
	}
	return *id, nil
}

// cleanup runs the policy in the job's completing transaction and enqueues the next
// run cleanup_interval from now (the running job is not pending, so the
// dedupe key lets exactly one successor in).
func cleanup(ctx context.Context, tx pgx.Tx, job jobs.Job, log *slog.Logger) error {
	rows, err := tx.Query(ctx, `SELECT action, count FROM mneme.cleanup()`)
	if err != nil {
		return fmt.Errorf("cleanup job %d: %w", job.ID, err)
	}
	counts := map[string]int64{}
	for rows.Next() {
		var a string
		var n int64
		if err := rows.Scan(&a, &n); err != nil {
			rows.Close()
			return fmt.Errorf("cleanup job %d: %w", job.ID, err)
		}
		counts[a] = n
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("cleanup job %d: %w", job.ID, err)
	}
	var next *int64
	if err := tx.QueryRow(ctx, `SELECT mneme.schedule_cleanup(mneme._interval_setting('cleanup_interval'))`).Scan(&next); err != nil {
		return fmt.Errorf("cleanup job %d: schedule the next: %w", job.ID, err)
	}
	// next is NULL when cleanup_interval is null (the operator turned the
	// schedule off): logged as "none", not as a pointer.
	nextJob := "none"
	if next != nil {
		nextJob = strconv.FormatInt(*next, 10)
	}
	log.Info("cleanup", "job", job.ID, "inactivated", counts["inactivated"], "expired", counts["expired"],
		"purged", counts["purged"], "jobs_pruned", counts["jobs_pruned"], "next_job", nextJob)
	return nil
}
