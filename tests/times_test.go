package tests

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/stretchr/testify/require"
)

func mustAtoi(t *testing.T, s string) int {
	t.Helper()
	var n int
	_, err := fmt.Sscan(s, &n)
	require.NoError(t, err)
	return n
}

// TestTimesYears1To9999: every time argument of the API takes years 1 to
// 9999 and nothing else (infinities, BC, year 10000 and later): 22008
// naming the argument, never PostgreSQL's arithmetic error from inside the
// ranking. A message at the earliest time accepted segments with the
// sidecar (its Go time survives the segment job).
func TestTimesYears1To9999(t *testing.T) {
	t.Parallel()
	e := newPipelineEnv(t, false)
	ctx := context.Background()
	conv := e.conv
	_, err := e.db.Pool.Exec(ctx, `SELECT mneme.remember($1, 'The lighthouse keeper paints the stairs blue')`, conv)
	require.NoError(t, err)
	bad := []string{"infinity", "-infinity", "0100-01-01 BC", "0001-12-31 23:59:59+00 BC", "10000-01-01 00:00:00+00"}
	calls := []struct{ name, arg, sql string }{
		{"add_message", "at", `SELECT mneme.add_message($1, 'user', 'hello there', $2::timestamptz)`},
		{"remember", "at", `SELECT mneme.remember($1, 'a fact', at => $2::timestamptz)`},
		{"search", "at", `SELECT count(*) FROM mneme.search($1, 'lighthouse stairs', 5, at => $2::timestamptz)`},
		{"retrieve", "at", `SELECT count(*) FROM mneme.retrieve($1, 'lighthouse stairs', 5, at => $2::timestamptz)`},
		{"retrieve_markdown", "at", `SELECT mneme.retrieve_markdown($1, 'lighthouse stairs', 5, at => $2::timestamptz)`},
		{"context_items", "at", `SELECT count(*) FROM mneme.context_items($1, 'lighthouse stairs', 100, at => $2::timestamptz)`},
		{"context", "at", `SELECT mneme.context($1, 'lighthouse stairs', 100, at => $2::timestamptz)`},
		{"search", "as_of", `SELECT count(*) FROM mneme.search($1, 'lighthouse stairs', 5, as_of => $2::timestamptz)`},
		{"retrieve", "as_of", `SELECT count(*) FROM mneme.retrieve($1, 'lighthouse stairs', 5, as_of => $2::timestamptz)`},
		{"retrievability", "at", `SELECT mneme.retrievability(3, now(), $2::timestamptz) WHERE $1::uuid IS NOT NULL`},
		{"enqueue_job", "run_at", `SELECT mneme.enqueue_job('noop', $1, '{}', NULL, $2::timestamptz)`},
	}
	for _, c := range calls {
		for _, at := range bad {
			_, err := e.db.Pool.Exec(ctx, c.sql, conv, at)
			require.Error(t, err, "%s %s => %s", c.name, c.arg, at)
			var pgErr *pgconn.PgError
			require.True(t, errors.As(err, &pgErr))
			require.Equal(t, "22008", pgErr.Code, "%s %s => %s: %s", c.name, c.arg, at, pgErr.Message)
			require.True(t, strings.HasPrefix(pgErr.Message, c.arg+" "), "%s %s => %s: the error names %s: %s", c.name, c.arg, at, c.arg, pgErr.Message)
		}
	}
	require.Zero(t, e.count(`SELECT count(*) FROM mneme.messages`), "nothing stored")

	// The edges are accepted, and a conversation from year 1 segments.
	old := uuid.New()
	for i, at := range []string{"0001-01-01 00:00:00+00", "0001-01-01 00:01:00+00", "0001-01-01 00:02:00+00", "0001-01-01 00:03:00+00",
		"0001-01-01 00:04:00+00", "0001-01-01 00:05:00+00"} {
		_, err := e.db.Pool.Exec(ctx, `SELECT mneme.add_message($1, 'user', $2, $3::timestamptz)`, old,
			fmt.Sprintf("In the first year I live in Rome, note %d.", i), at)
		require.NoError(t, err, at)
	}
	_, err = e.db.Pool.Exec(ctx, `SELECT mneme.segment_now($1)`, old)
	require.NoError(t, err)
	var n int
	require.NoError(t, e.db.Pool.QueryRow(ctx, `SELECT count(*) FROM mneme.search($1, 'Rome', 5, at => '9999-12-31 23:59:59+00')`, conv).Scan(&n))
	e.drain()
	require.Zero(t, e.count(`SELECT count(*) FROM mneme.jobs WHERE state = 'failed'`), "no job fails on a year-1 time")
	require.Positive(t, e.count(`SELECT count(*) FROM mneme.memories WHERE conversation_id = $1 AND kind = 'episodic'`, old))
	require.Zero(t, e.count(`SELECT count(*) FROM mneme.messages WHERE conversation_id = $1 AND consumed_at IS NULL`, old))
}
