package soak

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/mneme-memory/mneme/sidecar/config"
	"github.com/mneme-memory/mneme/sidecar/daemon"
	"github.com/mneme-memory/mneme/sidecar/jobs"
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
	// The array variant whatever the run's: the segmenter embeds in Go (the
	// built-in embedder) and reads no vector index, so where an episode is
	// cut does not depend on it, and a pgvector reference spent its drain
	// inserting each episode into the HNSW graph.
	if _, err := migrate.Run(ctx, db.URL, migrate.Options{Vector: "array", Logger: log}); err != nil {
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
	// Only the episodes are compared: no facts (their add_fact and revise
	// jobs were most of the drain's time), and the drain runs segment jobs
	// alone. Neither changes where an episode is cut: facts are extracted
	// from an episode after it is cut.
	if _, err := pool.Exec(ctx, `SELECT mneme.set_setting('extract_facts', 'false')`); err != nil {
		return nil, fmt.Errorf("set extract_facts: %w", err)
	}
	index := map[int64]int{} // reference message id -> position in its conversation
	replayStart := time.Now()
	if err := replayAll(ctx, pool, convs, index); err != nil {
		return nil, err
	}
	log.Info("soak: the offline reference replayed", "messages", len(index), "seconds", time.Since(replayStart).Seconds())
	cfg := config.Config{DatabaseURL: db.URL, Events: config.EventsNotify, Concurrency: o.Concurrency,
		PollEvery: time.Second, MaxAttempts: 5, JobLease: 30 * time.Second, ShutdownTimeout: 30 * time.Second,
		EmbedDim: config.DefaultEmbedDim}
	d, err := daemon.New(ctx, cfg, pool, slog.New(slog.DiscardHandler))
	if err != nil {
		return nil, err
	}
	for _, k := range jobs.Kinds {
		if k.Name() != jobs.KindSegment {
			d.Runner.Leave(k.Name())
		}
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

// replayAll replays the conversations into pool, each in one batch (no
// sidecar runs until the drain, so nothing could come between its steps
// anyway), several conversations at once: the server's cores are free then
// and the replay of a 30-minute run is minutes. index gets each reference
// message id's position in its conversation.
func replayAll(ctx context.Context, pool *pgxpool.Pool, convs []*conversation, index map[int64]int) error {
	var mu sync.Mutex
	todo := make(chan *conversation)
	errs := make(chan error, replayConnections)
	for range replayConnections {
		go func() {
			var first error
			for c := range todo {
				if first == nil {
					first = replayOne(ctx, pool, c, index, &mu)
				}
			}
			errs <- first
		}()
	}
	for _, c := range convs {
		todo <- c
	}
	close(todo)
	var first error
	for range replayConnections {
		if err := <-errs; err != nil && first == nil {
			first = err
		}
	}
	return first
}

// replayConnections is how many conversations replayAll replays at once.
const replayConnections = 4

func replayOne(ctx context.Context, pool *pgxpool.Pool, c *conversation, index map[int64]int, mu *sync.Mutex) error {
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
				mu.Lock()
				index[id] = pos
				mu.Unlock()
				return nil
			})
		n++
	}
	if err := pool.SendBatch(ctx, b).Close(); err != nil {
		return fmt.Errorf("replay conversation %s: %w", c.ID, err)
	}
	return nil
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
