package tests

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/mneme-memory/mneme/sidecar/dbtest"
	"github.com/mneme-memory/mneme/sidecar/migrate"
)

// schemaFingerprint describes everything migrate creates, so a second run
// can be shown to change nothing.
func schemaFingerprint(t *testing.T, url string) string {
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, url)
	require.NoError(t, err)
	defer conn.Close(ctx)
	var fp string
	err = conn.QueryRow(ctx, `
		SELECT string_agg(x, E'\n' ORDER BY x) FROM (
		  SELECT 'col ' || table_name || '.' || column_name || ' ' || data_type || ' ' || coalesce(column_default, '') AS x
		    FROM information_schema.columns WHERE table_schema = 'mneme'
		  UNION ALL
		  SELECT 'fn ' || p.oid::regprocedure::text || ' ' || md5(pg_get_functiondef(p.oid)) || ' ' || coalesce(obj_description(p.oid, 'pg_proc'), '')
		    FROM pg_proc p WHERE p.pronamespace = 'mneme'::regnamespace AND p.prokind IN ('f', 'p')
		  UNION ALL
		  SELECT 'idx ' || indexname || ' ' || indexdef FROM pg_indexes WHERE schemaname = 'mneme'
		  UNION ALL
		  SELECT 'view ' || viewname || ' ' || md5(definition) FROM pg_views WHERE schemaname = 'mneme'
		  UNION ALL
		  SELECT 'setting ' || key || '=' || value::text FROM mneme.settings
		  UNION ALL
		  SELECT 'goose ' || version_id FROM public.mneme_goose_version
		) s`).Scan(&fp)
	require.NoError(t, err)
	return fp
}

func TestMigrateFromEmptyThenRerunChangesNothing(t *testing.T) {
	t.Parallel()
	for _, variant := range variants(t) {
		t.Run(variant, func(t *testing.T) {
			ctx := context.Background()
			_, url := dbtest.NewEmpty(t)
			res, err := migrate.Run(ctx, url, migrate.Options{Vector: variant})
			require.NoError(t, err)
			require.NotEmpty(t, res.Applied)
			require.Equal(t, variant, res.Variant)
			require.Equal(t, 256, res.Dim)
			require.Empty(t, res.Citus, "no citus extension here")
			before := schemaFingerprint(t, url)

			res2, err := migrate.Run(ctx, url, migrate.Options{Vector: variant})
			require.NoError(t, err)
			require.Empty(t, res2.Applied, "second migrate applies no goose migration")
			require.Equal(t, before, schemaFingerprint(t, url), "second migrate changes nothing")

			conn, err := pgx.Connect(ctx, url)
			require.NoError(t, err)
			defer conn.Close(ctx)
			var typ string
			require.NoError(t, conn.QueryRow(ctx, `SELECT format_type(atttypid, atttypmod) FROM pg_attribute
				WHERE attrelid = 'mneme.memories'::regclass AND attname = 'embedding'`).Scan(&typ))
			if variant == "pgvector" {
				require.Equal(t, "vector(256)", typ)
			} else {
				require.Equal(t, "mneme.embedding", typ)
			}
		})
	}
}

func TestMigrateConcurrentIsSafe(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	_, url := dbtest.NewEmpty(t)
	var wg sync.WaitGroup
	errs := make([]error, 4)
	for i := range errs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, errs[i] = migrate.Run(ctx, url, migrate.Options{})
		}()
	}
	wg.Wait()
	for _, err := range errs {
		require.NoError(t, err)
	}
}

func TestMigrateRejectsDifferentDimension(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	_, url := dbtest.NewEmpty(t)
	_, err := migrate.Run(ctx, url, migrate.Options{Vector: "array", EmbedDim: 64})
	require.NoError(t, err)
	_, err = migrate.Run(ctx, url, migrate.Options{Vector: "array", EmbedDim: 128})
	require.ErrorIs(t, err, migrate.ErrLayoutMismatch)
	_, err = migrate.Run(ctx, url, migrate.Options{Vector: "bogus"})
	require.Error(t, err)
}

// --- add_message and the segmentation check -----------------------------------

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

func TestAddMessageNotifies(t *testing.T) {
	t.Parallel()
	db := dbtest.New(t)
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, db.URL)
	require.NoError(t, err)
	defer conn.Close(ctx)
	_, err = conn.Exec(ctx, "LISTEN mneme_jobs")
	require.NoError(t, err)
	c := newConv(t, db)
	for i := 0; i < 5; i++ {
		c.add(time.Minute, "a perfectly long message")
	}
	wctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	n, err := conn.WaitForNotification(wctx)
	require.NoError(t, err)
	require.Empty(t, n.Payload, "a wake-up only: any role may LISTEN, so no job id or kind")
}

// --- pending reviews ----------------------------------------------------------

func TestPendingReviewsAppendAndTake(t *testing.T) {
	t.Parallel()
	db := dbtest.New(t)
	ctx := context.Background()
	cid := uuid.New()
	var got *string
	require.NoError(t, db.Pool.QueryRow(ctx, `SELECT mneme.take_pending_reviews($1)::text`, cid).Scan(&got))
	require.Nil(t, got, "unknown conversation: NULL")
	m1, m2 := uuid.New(), uuid.New()
	_, err := db.Pool.Exec(ctx, `SELECT mneme.add_pending_review($1, $2, 'rust lifetimes')`, cid, []uuid.UUID{m1, m2})
	require.NoError(t, err)
	_, err = db.Pool.Exec(ctx, `SELECT mneme.add_pending_review($1, $2, 'weather')`, cid, []uuid.UUID{m2})
	require.NoError(t, err)
	var entries []struct {
		Query     string      `json:"query"`
		MemoryIDs []uuid.UUID `json:"memory_ids"`
	}
	require.NoError(t, db.Pool.QueryRow(ctx, `SELECT mneme.take_pending_reviews($1)`, cid).Scan(&entries))
	require.Len(t, entries, 2)
	require.Equal(t, "rust lifetimes", entries[0].Query)
	require.Equal(t, []uuid.UUID{m1, m2}, entries[0].MemoryIDs)
	require.Equal(t, []uuid.UUID{m2}, entries[1].MemoryIDs)
	var isNull bool
	require.NoError(t, db.Pool.QueryRow(ctx, `SELECT pending_reviews IS NULL FROM mneme.message_queue WHERE id = $1`, cid).Scan(&isNull))
	require.True(t, isNull, "take leaves NULL")
}

// TestPendingReviewsConcurrentTakeLosesNothing: 50 connections append while
// another takes in a loop; every entry is returned by exactly one take.
// Run it with -count=20 to shake out interleavings.
func TestPendingReviewsConcurrentTakeLosesNothing(t *testing.T) {
	t.Parallel()
	db := dbtest.New(t)
	ctx := context.Background()
	cfg, err := pgxpool.ParseConfig(db.URL)
	require.NoError(t, err)
	cfg.MaxConns = 60
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	require.NoError(t, err)
	defer pool.Close()
	cid := uuid.New()
	const writers, perWriter = 50, 20

	seen := map[string]int{}
	var mu sync.Mutex
	take := func() {
		var entries []struct {
			Query string `json:"query"`
		}
		require.NoError(t, pool.QueryRow(ctx, `SELECT coalesce(mneme.take_pending_reviews($1), '[]')`, cid).Scan(&entries))
		mu.Lock()
		for _, e := range entries {
			seen[e.Query]++
		}
		mu.Unlock()
	}
	done := make(chan struct{})
	takerDone := make(chan struct{})
	go func() {
		defer close(takerDone)
		for {
			select {
			case <-done:
				return
			default:
				take()
			}
		}
	}()
	var wg sync.WaitGroup
	for w := 0; w < writers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < perWriter; i++ {
				_, err := pool.Exec(ctx, `SELECT mneme.add_pending_review($1, $2, $3)`,
					cid, []uuid.UUID{uuid.New()}, fmt.Sprintf("w%d-%d", w, i))
				require.NoError(t, err)
			}
		}()
	}
	wg.Wait()
	close(done)
	<-takerDone
	take()
	require.Len(t, seen, writers*perWriter, "every appended entry was taken")
	for q, n := range seen {
		require.Equal(t, 1, n, "entry %s taken %d times", q, n)
	}
}

// --- bad input ----------------------------------------------------------------

func counts(t *testing.T, db *dbtest.DB) string {
	var s string
	require.NoError(t, db.Pool.QueryRow(context.Background(), `SELECT format('%s/%s/%s/%s',
		(SELECT count(*) FROM mneme.messages), (SELECT count(*) FROM mneme.message_queue),
		(SELECT count(*) FROM mneme.jobs), (SELECT string_agg(coalesce(pending_reviews::text, 'null'), ',' ORDER BY id) FROM mneme.message_queue))`).Scan(&s))
	return s
}

func TestAddMessageBadInput(t *testing.T) {
	t.Parallel()
	db := dbtest.New(t)
	ctx := context.Background()
	c := newConv(t, db)
	for i := 0; i < 5; i++ {
		c.add(time.Minute, "a perfectly long message")
	}
	_, err := db.Pool.Exec(ctx, `SELECT mneme.add_pending_review($1, $2, 'q')`, c.id, []uuid.UUID{uuid.New()})
	require.NoError(t, err)
	before := counts(t, db)
	later := c.at.Add(time.Minute)
	cases := []struct {
		name    string
		sql     string
		args    []any
		state   string
		message string
	}{
		{"null conversation", `SELECT mneme.add_message(NULL, 'user', 'hello there', $1)`, []any{later}, "22004", "conversation_id"},
		{"null content", `SELECT mneme.add_message($1, 'user', NULL, $2)`, []any{c.id, later}, "22004", "content"},
		{"empty content", `SELECT mneme.add_message($1, 'user', '', $2)`, []any{c.id, later}, "22023", "content"},
		{"blank content", `SELECT mneme.add_message($1, 'user', E' \n\t', $2)`, []any{c.id, later}, "22023", "content"},
		{"unknown role", `SELECT mneme.add_message($1, 'robot', 'hello there', $2)`, []any{c.id, later}, "22023", "unknown role"},
		{"null role", `SELECT mneme.add_message($1, NULL, 'hello there', $2)`, []any{c.id, later}, "22004", "role"},
		{"too long", `SELECT mneme.add_message($1, 'user', $2, $3)`, []any{c.id, strings.Repeat("x", 100001), later}, "22001", "over the limit"},
		{"earlier than previous", `SELECT mneme.add_message($1, 'user', 'hello there', $2)`, []any{c.id, c.at.Add(-time.Second)}, "22008", "earlier than the previous"},
		{"zero-width content", `SELECT mneme.add_message($1, 'user', E'\u200b\ufeff\u200d', $2)`, []any{c.id, later}, "22023", "content"},
		{"control characters", `SELECT mneme.add_message($1, 'user', E'\x01\x02 \x7f', $2)`, []any{c.id, later}, "22023", "content"},
		{"infinite time", `SELECT mneme.add_message($1, 'user', 'hello there', 'infinity')`, []any{c.id}, "22008", "finite"},
		{"beyond year 9999", `SELECT mneme.add_message($1, 'user', 'hello there', '294000-01-01')`, []any{c.id}, "22008", "from year 1 to 9999"},
		{"before year 1", `SELECT mneme.add_message($1, 'user', 'hello there', '0100-01-01 BC')`, []any{c.id}, "22008", "from year 1 to 9999"},
		{"future beyond the skew", `SELECT mneme.add_message($1, 'user', 'hello there', now() + interval '2 hours')`, []any{c.id}, "22008", "in the future"},
		{"review null conversation", `SELECT mneme.add_pending_review(NULL, $1, 'q')`, []any{[]uuid.UUID{uuid.New()}}, "22004", "conversation_id"},
		{"review null ids", `SELECT mneme.add_pending_review($1, NULL, 'q')`, []any{c.id}, "22004", "memory_ids"},
		{"review null id inside", `SELECT mneme.add_pending_review($1, ARRAY[NULL]::uuid[], 'q')`, []any{c.id}, "22004", "memory_ids"},
		{"review null query", `SELECT mneme.add_pending_review($1, $2, NULL)`, []any{c.id, []uuid.UUID{uuid.New()}}, "22004", "query"},
		{"take null conversation", `SELECT mneme.take_pending_reviews(NULL)`, nil, "22004", "conversation_id"},
		{"bad speaker", `SELECT mneme.set_speakers($1, ARRAY['1bad'])`, []any{c.id}, "22023", "speaker"},
		{"unknown setting", `SELECT mneme.set_setting('nope', '1')`, nil, "22023", "unknown mneme setting"},
		{"fixed setting", `SELECT mneme.set_setting('embedding_dim', '3')`, nil, "55000", "fixed at migrate time"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := db.Pool.Exec(ctx, tc.sql, tc.args...)
			require.Error(t, err)
			require.Equal(t, tc.state, sqlState(t, err), err.Error())
			require.Contains(t, err.Error(), tc.message)
			require.Equal(t, before, counts(t, db), "nothing changed")
		})
	}
}

func TestSpeakersAreAcceptedAsRoles(t *testing.T) {
	t.Parallel()
	db := dbtest.New(t)
	ctx := context.Background()
	cid := uuid.New()
	_, err := db.Pool.Exec(ctx, `SELECT mneme.set_speakers($1, ARRAY['Caroline', 'Melanie'])`, cid)
	require.NoError(t, err)
	_, err = db.Pool.Exec(ctx, `SELECT mneme.add_message($1, 'Caroline', 'Hey Mel! Good to see you!')`, cid)
	require.NoError(t, err)
	_, err = db.Pool.Exec(ctx, `SELECT mneme.add_message($1, 'Bob', 'hi there all')`, cid)
	require.Equal(t, "22023", sqlState(t, err))
}

func TestPlainMemoryInsertIsActive(t *testing.T) {
	t.Parallel()
	db := dbtest.New(t)
	ctx := context.Background()
	var status, label, kind string
	var stab float64
	require.NoError(t, db.Pool.QueryRow(ctx, `INSERT INTO mneme.memories (conversation_id, content)
		VALUES ($1, 'likes tea') RETURNING status, label, kind, stability`, uuid.New()).Scan(&status, &label, &kind, &stab))
	require.Equal(t, "active", status)
	require.Equal(t, "general", label)
	require.Equal(t, "semantic", kind)
	require.Greater(t, stab, 0.0)
	// A memory never supersedes itself.
	_, err := db.Pool.Exec(ctx, `UPDATE mneme.memories SET supersedes_id = id`)
	require.Equal(t, "23514", sqlState(t, err))
	_, err = db.Pool.Exec(ctx, `UPDATE mneme.memories SET confidence_score = 1.5`)
	require.Equal(t, "23514", sqlState(t, err))
}

// forceSetting writes a setting past set_setting's rules (as only a table
// owner can): for tests that the functions reading it still check it.
func forceSetting(t *testing.T, db *dbtest.DB, key, value string) {
	t.Helper()
	_, err := db.Pool.Exec(context.Background(), `UPDATE mneme.settings SET value = $2::jsonb WHERE key = $1`, key, value)
	require.NoError(t, err)
}
