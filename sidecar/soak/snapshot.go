package soak

import (
	"context"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// snapshot is the live database after the run, read once by its owner
// (every tenant, no row security) for the checks.
type snapshot struct {
	now        time.Time
	messages   map[int64]msgRow
	episodes   []episodeRow
	tombstones map[uuid.UUID]bool // memory_events "erased"
	jobs       []jobRow
	// pending reviews by query: in the queues' pending_reviews, and in
	// review jobs' payloads (any state)
	pendingQueries map[string]int
	jobQueries     map[string]int
	reviewTwice    []string            // (job, memory) pairs of review_log with more than one row
	reviewsApplied int                 // rows of review_log
	markersFound   map[string][]string // marker (its first 7 letters) -> tables holding it
	erasedLeft     []string            // rows left of conversations erased whole
}

type msgRow struct {
	Conversation uuid.UUID
	Consumed     bool
	MemoryID     *uuid.UUID
}

type episodeRow struct {
	ID           uuid.UUID
	Conversation uuid.UUID
	MessageIDs   []int64
}

type jobRow struct {
	ID          int64
	Kind, State string
	Attempts    int
	LastError   *string
	RunAt       time.Time
	LockedUntil *time.Time
}

func readSnapshot(ctx context.Context, pool *pgxpool.Pool, erasedConvs []uuid.UUID) (*snapshot, error) {
	s := &snapshot{messages: map[int64]msgRow{}, tombstones: map[uuid.UUID]bool{}, pendingQueries: map[string]int{},
		jobQueries: map[string]int{}, markersFound: map[string][]string{}}
	if err := pool.QueryRow(ctx, `SELECT now()`).Scan(&s.now); err != nil {
		return nil, err
	}
	rows, err := pool.Query(ctx, `SELECT id, conversation_id, consumed_at IS NOT NULL, memory_id FROM mneme.messages`)
	if err != nil {
		return nil, fmt.Errorf("read messages: %w", err)
	}
	for rows.Next() {
		var id int64
		var r msgRow
		if err := rows.Scan(&id, &r.Conversation, &r.Consumed, &r.MemoryID); err != nil {
			rows.Close()
			return nil, err
		}
		s.messages[id] = r
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	rows, err = pool.Query(ctx, `SELECT id, conversation_id, coalesce(source_message_ids, '{}') FROM mneme.memories WHERE kind = 'episodic'`)
	if err != nil {
		return nil, fmt.Errorf("read episodes: %w", err)
	}
	if s.episodes, err = pgx.CollectRows(rows, pgx.RowToStructByPos[episodeRow]); err != nil {
		return nil, fmt.Errorf("read episodes: %w", err)
	}
	rows, err = pool.Query(ctx, `SELECT DISTINCT memory_id FROM mneme.memory_events WHERE event = 'erased' AND memory_id IS NOT NULL`)
	if err != nil {
		return nil, fmt.Errorf("read tombstones: %w", err)
	}
	ids, err := pgx.CollectRows(rows, pgx.RowTo[uuid.UUID])
	if err != nil {
		return nil, fmt.Errorf("read tombstones: %w", err)
	}
	for _, id := range ids {
		s.tombstones[id] = true
	}
	rows, err = pool.Query(ctx, `SELECT id, kind, state, attempts, last_error, run_at, locked_until FROM mneme.jobs ORDER BY id`)
	if err != nil {
		return nil, fmt.Errorf("read jobs: %w", err)
	}
	if s.jobs, err = pgx.CollectRows(rows, pgx.RowToStructByPos[jobRow]); err != nil {
		return nil, fmt.Errorf("read jobs: %w", err)
	}
	count := func(q string, into map[string]int) error {
		rows, err := pool.Query(ctx, q)
		if err != nil {
			return fmt.Errorf("read pending reviews: %w", err)
		}
		qs, err := pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil {
			return fmt.Errorf("read pending reviews: %w", err)
		}
		for _, q := range qs {
			into[q]++
		}
		return nil
	}
	if err := count(`SELECT coalesce(e ->> 'query', '') FROM mneme.message_queue q, jsonb_array_elements(q.pending_reviews) e
		WHERE jsonb_typeof(q.pending_reviews) = 'array'`, s.pendingQueries); err != nil {
		return nil, err
	}
	if err := count(`SELECT coalesce(e ->> 'query', '') FROM mneme.jobs j, jsonb_array_elements(j.payload -> 'reviews') e
		WHERE j.kind = 'review' AND jsonb_typeof(j.payload -> 'reviews') = 'array'`, s.jobQueries); err != nil {
		return nil, err
	}
	rows, err = pool.Query(ctx, `SELECT format('job %s memory %s: %s rows', job_id, memory_id, count(*)) FROM mneme.review_log
		WHERE job_id IS NOT NULL GROUP BY job_id, memory_id HAVING count(*) > 1 ORDER BY 1 LIMIT 20`)
	if err != nil {
		return nil, fmt.Errorf("read review_log: %w", err)
	}
	if s.reviewTwice, err = pgx.CollectRows(rows, pgx.RowTo[string]); err != nil {
		return nil, fmt.Errorf("read review_log: %w", err)
	}
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM mneme.review_log`).Scan(&s.reviewsApplied); err != nil {
		return nil, fmt.Errorf("read review_log: %w", err)
	}
	if err := s.scanMarkers(ctx, pool); err != nil {
		return nil, err
	}
	for _, tbl := range []string{"messages", "message_queue", "jobs", "memories", "review_log", "review_queries"} {
		col := "conversation_id"
		if tbl == "message_queue" {
			col = "id"
		}
		var n int
		if err := pool.QueryRow(ctx, fmt.Sprintf(`SELECT count(*) FROM mneme.%s WHERE %s = ANY ($1)`, tbl, col), erasedConvs).Scan(&n); err != nil {
			return nil, fmt.Errorf("rows of erased conversations in %s: %w", tbl, err)
		}
		if n > 0 {
			s.erasedLeft = append(s.erasedLeft, fmt.Sprintf("%s: %d rows", tbl, n))
		}
	}
	return s, nil
}

// scanMarkers finds every marker in every row of every table of schema
// mneme, each row cast to text whole (its first seven letters: the BM25
// terms are stems).
func (s *snapshot) scanMarkers(ctx context.Context, pool *pgxpool.Pool) error {
	rows, err := pool.Query(ctx, `SELECT c.relname FROM pg_catalog.pg_class c JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
		WHERE n.nspname = 'mneme' AND c.relkind IN ('r', 'p') ORDER BY 1`)
	if err != nil {
		return fmt.Errorf("list tables: %w", err)
	}
	tables, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return fmt.Errorf("list tables: %w", err)
	}
	for _, tbl := range tables {
		rows, err := pool.Query(ctx, fmt.Sprintf(`SELECT DISTINCT left(m[1], 7) FROM mneme.%s t,
			regexp_matches(lower(t::text), 'zq[ghjkmnpqrstvwxz]{5,}', 'g') m`, pgx.Identifier{tbl}.Sanitize()))
		if err != nil {
			return fmt.Errorf("scan %s: %w", tbl, err)
		}
		found, err := pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil {
			return fmt.Errorf("scan %s: %w", tbl, err)
		}
		for _, m := range found {
			s.markersFound[m] = append(s.markersFound[m], tbl)
		}
	}
	return nil
}
