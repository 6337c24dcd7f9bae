package tests

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/mneme-memory/mneme/sidecar/dbtest"
)

type conv struct {
	t    *testing.T
	pool *pgxpool.Pool
	id   uuid.UUID
	at   time.Time
}

func newConv(t *testing.T, db *dbtest.DB) *conv {
	return &conv{t: t, pool: db.Pool, id: uuid.New(), at: time.Date(2026, 1, 2, 10, 0, 0, 0, time.UTC)}
}

// add appends a message `after` the previous one.
func (c *conv) add(after time.Duration, content string) int64 {
	c.t.Helper()
	c.at = c.at.Add(after)
	var id int64
	require.NoError(c.t, c.pool.QueryRow(context.Background(),
		`SELECT mneme.add_message($1, 'user', $2, $3)`, c.id, content, c.at).Scan(&id))
	return id
}

type segJob struct {
	Count   int
	Reason  string
	Check   bool
	Through int64
	Trigger int64
}

func (c *conv) segmentJobs() segJob {
	c.t.Helper()
	var j segJob
	var reason *string
	var check *bool
	var through, trigger *int64
	require.NoError(c.t, c.pool.QueryRow(context.Background(), `
		SELECT count(*), max(payload->>'reason'), bool_or((payload->>'check')::boolean),
		       max((payload->>'through_message_id')::bigint), max((payload->>'trigger_message_id')::bigint)
		FROM mneme.jobs WHERE kind = 'segment' AND conversation_id = $1 AND state = 'pending'`, c.id).
		Scan(&j.Count, &reason, &check, &through, &trigger))
	if reason != nil {
		j.Reason, j.Check, j.Through, j.Trigger = *reason, *check, *through, *trigger
	}
	return j
}

func TestSegmentationRuleFewerThanMinMessages(t *testing.T) {
	t.Parallel()
	c := newConv(t, dbtest.New(t))
	for i := 0; i < 4; i++ {
		c.add(time.Minute, fmt.Sprintf("a perfectly long message number %d", i))
	}
	require.Equal(t, 0, c.segmentJobs().Count, "4 queued messages never segment")
	// A long gap closes the session before it however few its messages
	// (issue 37: a gap while fewer than segment_min_messages were queued
	// made no cut, and a later cut read through it).
	c = newConv(t, dbtest.New(t))
	first := c.add(0, "first message here")
	late := c.add(2*time.Hour, "second message after a long gap")
	j := c.segmentJobs()
	require.Equal(t, 1, j.Count)
	require.Equal(t, "gap", j.Reason)
	require.Equal(t, first, j.Through)
	require.Equal(t, late, j.Trigger)
}

func TestSegmentationRuleCheckAtMinMessages(t *testing.T) {
	t.Parallel()
	c := newConv(t, dbtest.New(t))
	var last int64
	for i := 0; i < 5; i++ {
		last = c.add(time.Minute, fmt.Sprintf("a perfectly long message number %d", i))
	}
	j := c.segmentJobs()
	require.Equal(t, 1, j.Count)
	require.Equal(t, "check", j.Reason)
	require.True(t, j.Check)
	require.Equal(t, last, j.Through)
	// Another message keeps the one pending job and leaves it alone (a check
	// segments what is queued when it runs; a writer never locks it).
	c.add(time.Minute, "and one more long message")
	j = c.segmentJobs()
	require.Equal(t, 1, j.Count)
	require.Equal(t, last, j.Through)
}

// With the conversation's segment job pending, add_message neither counts
// the queue nor asks enqueue_segment: every rule would end in that job,
// unchanged (issue 53's ingest: the count and the call were a third of its
// CPU). The message is queued all the same, and a rule that would fire (the
// message cap) leaves the one pending job as it was.
func TestAddMessageWithSegmentJobPendingSkipsTheRules(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c := newConv(t, dbtest.New(t))
	var last int64
	for i := 0; i < 5; i++ {
		last = c.add(time.Minute, fmt.Sprintf("a perfectly long message number %d", i))
	}
	require.Equal(t, segJob{Count: 1, Reason: "check", Check: true, Through: last, Trigger: last}, c.segmentJobs())
	// 30 more: the cap (segment_max_messages) and the gap rule would fire.
	for i := 0; i < 30; i++ {
		after := time.Minute
		if i == 10 {
			after = 3 * time.Hour
		}
		c.at = c.at.Add(after)
		require.NoError(t, pgx.BeginFunc(ctx, c.pool, func(tx pgx.Tx) error {
			if _, err := tx.Exec(ctx, `SET LOCAL track_functions = 'all'`); err != nil {
				return err
			}
			if _, err := tx.Exec(ctx, `SELECT mneme.add_message($1, 'user', $2, $3)`, c.id,
				fmt.Sprintf("another perfectly long message %d", i), c.at); err != nil {
				return err
			}
			var calls int
			if err := tx.QueryRow(ctx, `SELECT coalesce(sum(calls), 0) FROM pg_stat_xact_user_functions
				WHERE schemaname = 'mneme' AND funcname IN ('enqueue_segment', '_segment_payload', 'enqueue_job')`).Scan(&calls); err != nil {
				return err
			}
			require.Zero(t, calls, "message %d: add_message asked for a segment job while one was pending", i)
			return nil
		}))
	}
	require.Equal(t, segJob{Count: 1, Reason: "check", Check: true, Through: last, Trigger: last}, c.segmentJobs(),
		"the pending job is left as it was")
	var queued int
	require.NoError(t, c.pool.QueryRow(ctx, `SELECT count(*) FROM mneme.messages WHERE conversation_id = $1 AND consumed_at IS NULL`,
		c.id).Scan(&queued))
	require.Equal(t, 35, queued)

	// Once the job is no longer pending (claimed), the rules run again: the
	// next message counts the queue, finds it over the cap and enqueues.
	_, err := c.pool.Exec(ctx, `UPDATE mneme.jobs SET state = 'running', locked_by = 'test', locked_until = now() + interval '1 minute'
		WHERE kind = 'segment' AND conversation_id = $1`, c.id)
	require.NoError(t, err)
	next := c.add(time.Minute, "the message after the claim")
	require.Equal(t, segJob{Count: 1, Reason: "max_messages", Through: next, Trigger: next}, c.segmentJobs())
}

func TestSegmentationRuleShortLatestMessage(t *testing.T) {
	t.Parallel()
	c := newConv(t, dbtest.New(t))
	for i := 0; i < 4; i++ {
		c.add(time.Minute, fmt.Sprintf("a perfectly long message number %d", i))
	}
	c.add(time.Minute, " ok ")
	require.Equal(t, 0, c.segmentJobs().Count, "a latest message under 5 characters does not ask the segmenter")
	// Trimmed of every word separator (Unicode White_Space), not only ASCII.
	c.add(time.Minute, "\u3000\u00a0ok!\u2003\u2003\u2003")
	require.Equal(t, 0, c.segmentJobs().Count, "ideographic and no-break spaces do not count as characters")
}

func TestSegmentationRuleMaxMessagesForces(t *testing.T) {
	t.Parallel()
	db := dbtest.New(t)
	c := newConv(t, db)
	// Short messages never trigger a check, so only the count rule can fire.
	var last int64
	for i := 0; i < 29; i++ {
		c.add(time.Second, "hm")
	}
	require.Equal(t, 0, c.segmentJobs().Count)
	last = c.add(time.Second, "hm")
	j := c.segmentJobs()
	require.Equal(t, 1, j.Count)
	require.Equal(t, "max_messages", j.Reason)
	require.False(t, j.Check)
	require.Equal(t, last, j.Through, "a count-forced cut consumes through the 30th message")
}

func TestSegmentationRuleGapForces(t *testing.T) {
	t.Parallel()
	c := newConv(t, dbtest.New(t))
	var prev int64
	for i := 0; i < 5; i++ {
		prev = c.add(time.Minute, "ok")
	}
	require.Equal(t, 0, c.segmentJobs().Count)
	// Exactly 15 minutes is not over the gap.
	prev = c.add(15*time.Minute, "hm")
	require.Equal(t, 0, c.segmentJobs().Count)
	late := c.add(15*time.Minute+time.Second, "hm")
	j := c.segmentJobs()
	require.Equal(t, 1, j.Count)
	require.Equal(t, "gap", j.Reason)
	require.False(t, j.Check)
	require.Equal(t, prev, j.Through, "the late message starts the next episode")
	require.Equal(t, late, j.Trigger)
}

func TestSegmentationForcedCutIsNotWidenedByLaterChecks(t *testing.T) {
	t.Parallel()
	c := newConv(t, dbtest.New(t))
	var prev int64
	for i := 0; i < 5; i++ {
		prev = c.add(time.Minute, "ok")
	}
	c.add(time.Hour, "a long message after a gap")
	c.add(time.Minute, "another long message that would ask the segmenter")
	j := c.segmentJobs()
	require.Equal(t, 1, j.Count)
	require.Equal(t, "gap", j.Reason)
	require.Equal(t, prev, j.Through)
}
