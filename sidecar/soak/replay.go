package soak

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/mneme-memory/mneme/sidecar/config"
	"github.com/mneme-memory/mneme/sidecar/daemon"
	"github.com/mneme-memory/mneme/sidecar/migrate"
	"github.com/mneme-memory/mneme/sidecar/scratch"
)

// span is an episode as positions in its conversation's messages:
// [First, Last], both included.
type span struct{ First, Last int }

// reference replays every kept conversation's steps (its messages with
// the same times, its segment_now calls at the same places) into a fresh
// scratch database with the same settings, then drains it with one
// sidecar (`mneme run --drain`): the offline segmenter's episodes when it
// sees every message at once. It returns each conversation's episodes as
// spans, and the conversations it could not replay (a message time
// unknown).
func reference(ctx context.Context, o Options, convs []*conversation, log *slog.Logger) (map[uuid.UUID][]span, error) {
	db, err := scratch.Create(ctx, scratch.Options{Server: o.Server, Prefix: "mneme_soak_ref_", Log: log})
	if err != nil {
		return nil, err
	}
	defer db.Close()
	if _, err := migrate.Run(ctx, db.URL, migrate.Options{Vector: o.Vector, Logger: log}); err != nil {
		return nil, fmt.Errorf("migrate the reference database: %w", err)
	}
	pool, err := pgxpool.New(ctx, db.URL)
	if err != nil {
		return nil, err
	}
	defer pool.Close()
	if err := applySettings(ctx, pool, o); err != nil {
		return nil, err
	}
	index := map[int64]int{} // reference message id -> position in its conversation
	replayStart := time.Now()
	for _, c := range convs {
		b := &pgx.Batch{}
		n := 0
		for _, s := range c.ops {
			if s.SegmentNow {
				b.Queue(`SELECT mneme.segment_now($1)`, c.ID)
				continue
			}
			pos := n
			b.Queue(`SELECT mneme.add_message($1, $2, $3, $4)`, c.ID, s.Message.Role, s.Message.Content, s.Message.At).
				QueryRow(func(r pgx.Row) error {
					var id int64
					if err := r.Scan(&id); err != nil {
						return err
					}
					index[id] = pos
					return nil
				})
			n++
		}
		// A conversation in one batch: no sidecar runs until the drain, so
		// nothing could come between its steps anyway.
		if err := pool.SendBatch(ctx, b).Close(); err != nil {
			return nil, fmt.Errorf("replay conversation %s: %w", c.ID, err)
		}
	}
	cfg := config.Config{DatabaseURL: db.URL, Events: config.EventsNotify, Concurrency: o.Concurrency,
		PollEvery: time.Second, MaxAttempts: 5, JobLease: 30 * time.Second, ShutdownTimeout: 30 * time.Second,
		EmbedDim: config.DefaultEmbedDim}
	log.Info("soak: the offline reference replayed", "messages", len(index), "seconds", time.Since(replayStart).Seconds())
	d, err := daemon.New(ctx, cfg, pool, slog.New(slog.DiscardHandler))
	if err != nil {
		return nil, err
	}
	drainStart := time.Now()
	if err := d.Runner.Drain(ctx); err != nil {
		return nil, fmt.Errorf("drain the reference: %w", err)
	}
	log.Info("soak: the offline reference drained", "seconds", time.Since(drainStart).Seconds())
	rows, err := pool.Query(ctx, `SELECT conversation_id, source_message_ids FROM mneme.memories
		WHERE kind = 'episodic' ORDER BY conversation_id, source_message_ids[1]`)
	if err != nil {
		return nil, err
	}
	out := map[uuid.UUID][]span{}
	for rows.Next() {
		var conv uuid.UUID
		var ids []int64
		if err := rows.Scan(&conv, &ids); err != nil {
			rows.Close()
			return nil, err
		}
		out[conv] = append(out[conv], spanOf(ids, index))
	}
	return out, rows.Err()
}

// spanOf is an episode's messages as a span of positions; an episode whose
// positions are not contiguous gets First > Last (never equal to a real
// span).
func spanOf(ids []int64, index map[int64]int) span {
	if len(ids) == 0 {
		return span{1, 0}
	}
	s := span{First: -1}
	for i, id := range ids {
		p, ok := index[id]
		if !ok || (i > 0 && p != s.Last+1) {
			return span{1, 0}
		}
		if i == 0 {
			s.First = p
		}
		s.Last = p
	}
	return s
}
