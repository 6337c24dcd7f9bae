package tests

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/stretchr/testify/require"

	"github.com/mneme-memory/mneme/sidecar/dbtest"
)

// TestSettingPairsRefused: a minimum above its maximum is refused (22023,
// naming both keys) whichever side is set, against the other's current
// value; the value stays; equal bounds are accepted.
func TestSettingPairsRefused(t *testing.T) {
	t.Parallel()
	db := dbtest.New(t)
	ctx := context.Background()
	get := func(k string) string {
		var v string
		require.NoError(t, db.Pool.QueryRow(ctx, `SELECT value::text FROM mneme.settings WHERE key = $1`, k).Scan(&v))
		return v
	}
	set := func(k, v string) error {
		_, err := db.Pool.Exec(ctx, `SELECT mneme.set_setting($1, $2::jsonb)`, k, v)
		return err
	}
	for _, p := range [][2]string{{"segment_min_messages", "segment_max_messages"}, {"segment_episode_min", "segment_episode_max"}} {
		lo, hi := p[0], p[1]
		loV, hiV := get(lo), get(hi)
		// The minimum above the current maximum, and the maximum below the
		// current minimum.
		for _, c := range []struct{ key, value string }{{lo, "100"}, {hi, "1"}} {
			err := set(c.key, c.value)
			require.Error(t, err, "%s = %s with %s = %s, %s = %s", c.key, c.value, lo, loV, hi, hiV)
			var pgErr *pgconn.PgError
			require.True(t, errors.As(err, &pgErr))
			require.Equal(t, "22023", pgErr.Code)
			require.Contains(t, pgErr.Message, lo, "the error names both keys")
			require.Contains(t, pgErr.Message, hi, "the error names both keys")
			require.Equal(t, loV, get(lo))
			require.Equal(t, hiV, get(hi))
		}
		// Equal bounds are consistent; then each side may move away again.
		require.NoError(t, set(lo, hiV), "%s = %s (its maximum)", lo, hiV)
		require.Error(t, set(hi, fmt.Sprint(mustAtoi(t, hiV)-1)), "%s below %s again", hi, lo)
		require.NoError(t, set(lo, loV))
		require.NoError(t, set(hi, loV), "%s = %s (its minimum)", hi, loV)
		require.Error(t, set(lo, fmt.Sprint(mustAtoi(t, loV)+1)), "%s above %s again", lo, hi)
		require.NoError(t, set(hi, hiV))
	}
}

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

// TestFactsPerEpisodeCapped: one message stating hundreds of facts stores
// at most extract_facts_max of them (and as many revise jobs), and
// mneme.add_fact itself refuses more (54000), with or without an episode.
func TestFactsPerEpisodeCapped(t *testing.T) {
	t.Parallel()
	e := newPipelineEnv(t, false)
	ctx := context.Background()
	var b strings.Builder
	for i := range 300 {
		fmt.Fprintf(&b, "I own red car number %d. ", i)
	}
	e.say("2026-01-05 10:00:00+00", "user", b.String())
	_, err := e.db.Pool.Exec(ctx, `SELECT mneme.segment_now($1)`, e.conv)
	require.NoError(t, err)
	e.drain()
	require.Zero(t, e.count(`SELECT count(*) FROM mneme.jobs WHERE state = 'failed'`))
	require.Equal(t, 1, e.count(`SELECT count(*) FROM mneme.memories WHERE kind = 'episodic'`), "the episode keeps the whole message")
	require.Equal(t, 20, e.count(`SELECT count(*) FROM mneme.memories WHERE source_type = 'extracted'`), "extract_facts_max (20) facts")
	require.Equal(t, 20, e.count(`SELECT count(*) FROM mneme.jobs WHERE kind = 'revise'`))
	require.Equal(t, 1, e.count(`SELECT count(*) FROM mneme.memories WHERE source_type = 'extracted' AND content LIKE '%I own red car number 0.'`),
		"the first facts are the ones kept")

	// The cap in SQL: no caller of add_fact gets past it.
	_, err = e.db.Pool.Exec(ctx, `SELECT mneme.set_setting('extract_facts_max', '2')`)
	require.NoError(t, err)
	conv := uuid.New()
	var msg int64
	require.NoError(t, e.db.Pool.QueryRow(ctx, `SELECT mneme.add_message($1, 'user', 'I like tea. I like jam. I like scones.')`, conv).Scan(&msg))
	for _, episode := range []bool{false, true} {
		err := pgx.BeginFunc(ctx, e.db.Pool, func(tx pgx.Tx) error {
			var ep *uuid.UUID
			if episode {
				var id uuid.UUID
				if err := tx.QueryRow(ctx, `SELECT mneme.create_episode($1, $2, 'user: I like tea', 'tea', NULL, 0.5, NULL, false, NULL, NULL)`,
					conv, []int64{msg}).Scan(&id); err != nil {
					return err
				}
				ep = &id
			}
			for i, f := range []string{"I like tea.", "I like jam.", "I like scones."} {
				_, err := tx.Exec(ctx, `SELECT mneme.add_fact($1, $2, $3, $4)`, conv, f, []int64{msg}, ep)
				if i < 2 {
					require.NoError(t, err, "fact %d of 2", i+1)
				} else {
					require.Error(t, err, "the third fact of one episode (episode given: %v)", episode)
					require.Equal(t, "54000", sqlState(t, err))
					require.Contains(t, err.Error(), "extract_facts_max")
				}
			}
			return errors.New("roll back")
		})
		require.EqualError(t, err, "roll back")
	}
}

// TestClaimFairAcrossTenants: a burst of thousands of jobs in tenant ta,
// queued first, does not hold back tb's segmentation: one job at a time,
// tb's is the second claimed; three tenants with queues are served in
// turn; and a claim stays cheap with 10,000 jobs queued. Claims run as the
// sidecar's role, mneme_worker.
func TestClaimFairAcrossTenants(t *testing.T) {
	t.Parallel()
	db := dbtest.New(t)
	ctx := context.Background()
	for _, tn := range []string{"ta", "tb", "tc"} {
		_, err := db.Pool.Exec(ctx, `SELECT mneme.create_tenant($1)`, tn)
		require.NoError(t, err)
	}
	worker, _ := db.PoolAs(t, "mneme_worker")
	burst := func(tenant string, n int) {
		require.NoError(t, inTenant(t, db.Pool, tenant, func(tx pgx.Tx) error {
			_, err := tx.Exec(ctx, `SELECT mneme.enqueue_job('noop', NULL, jsonb_build_object('i', i)) FROM generate_series(1, $1) i`, n)
			return err
		}))
	}
	claim := func(n int) []string {
		rows, err := worker.Query(ctx, `SELECT tenant_id || ':' || kind FROM mneme.claim_jobs('w', $1, interval '1 minute')`, n)
		require.NoError(t, err)
		got, err := pgx.CollectRows(rows, pgx.RowTo[string])
		require.NoError(t, err)
		return got
	}
	burst("ta", 10000)
	time.Sleep(10 * time.Millisecond)
	conv := uuid.New()
	require.NoError(t, inTenant(t, db.Pool, "tb", func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `SELECT mneme.add_message($1, 'user', 'I moved to Lisbon last spring.')`, conv); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, `SELECT mneme.segment_now($1)`, conv)
		return err
	}))

	got := append(claim(1), claim(1)...)
	require.Equal(t, []string{"ta:noop", "tb:segment"}, got, "tb's segmentation waits for one claim of ta's burst, not 10,000")

	// Many at once: every tenant with ready jobs gets one before anyone a second.
	burst("tb", 50)
	burst("tc", 50)
	got = claim(3)
	sort.Strings(got)
	require.Equal(t, []string{"ta:noop", "tb:noop", "tc:noop"}, got)
	// One at a time: in turn, the tenant served longest ago first.
	var order []string
	for range 6 {
		order = append(order, strings.Split(claim(1)[0], ":")[0])
	}
	require.Equal(t, order[:3], order[3:], "a fixed rotation: %v", order)
	sort.Strings(order[:3])
	require.Equal(t, []string{"ta", "tb", "tc"}, order[:3])

	// Cheap with a long queue: one index probe per tenant.
	const claims = 20
	start := time.Now()
	for range claims {
		require.Len(t, claim(10), 10)
	}
	per := time.Since(start) / claims
	t.Logf("claim_jobs of 10 with about 10,000 jobs ready in 3 tenants: %v per claim", per)
	require.Less(t, per, 100*time.Millisecond, "a claim does not scan the queue")
}
