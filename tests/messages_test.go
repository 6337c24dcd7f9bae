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
	"github.com/stretchr/testify/require"

	"github.com/mneme-memory/mneme/sidecar/dbtest"
	"github.com/mneme-memory/mneme/sidecar/embed"
)

// One definition of "empty": SQL's mneme._is_blank and the Go embedder's
// embed.IsBlank agree on every character of the Basic Multilingual Plane
// alone and after a letter, so a message add_message accepts never fails
// the embedder as empty.
func TestBlankIsOneDefinition(t *testing.T) {
	t.Parallel()
	db := dbtest.New(t)
	ctx := context.Background()
	var texts []string
	for r := rune(1); r < 0x10000; r++ {
		if r >= 0xD800 && r <= 0xDFFF {
			continue // surrogates are not text
		}
		texts = append(texts, string(r))
	}
	var blanks []bool
	require.NoError(t, db.Pool.QueryRow(ctx, `SELECT array_agg(mneme._is_blank(x) ORDER BY o) FROM unnest($1::text[]) WITH ORDINALITY AS t(x, o)`,
		texts).Scan(&blanks))
	require.Len(t, blanks, len(texts))
	n := 0
	for i, s := range texts {
		require.Equal(t, embed.IsBlank(s), blanks[i], "U+%04X", []rune(s)[0])
		_, err := embed.NewHash(8).EmbedOne(s + " " + s)
		require.Equal(t, blanks[i], err != nil, "U+%04X: the embedder fails exactly on blank text", []rune(s)[0])
		if blanks[i] {
			n++
		}
	}
	require.Greater(t, n, 60, "whitespace, zero-width and control characters")
}

// Long messages (under message_max_chars) make an episode larger than a
// tsvector can hold: the episode is still stored and found.
func TestLongMessagesSegment(t *testing.T) {
	t.Parallel()
	e := newPipelineEnv(t, false)
	ctx := context.Background()
	_, err := e.db.Pool.Exec(ctx, `SELECT mneme.set_setting('segment_max_messages', '8')`)
	require.NoError(t, err)
	words := strings.Fields("alpha bravo charlie delta echo foxtrot golf hotel india juliet kilo lima mike november")
	for i := 0; i < 8; i++ {
		var b strings.Builder
		for b.Len() < 99_000 {
			fmt.Fprintf(&b, "%s%d ", words[b.Len()%len(words)], b.Len())
		}
		e.say(day1.Add(time.Duration(i)*time.Minute).Format(time.RFC3339), "user", b.String())
	}
	e.drain()
	require.Zero(t, e.count(`SELECT count(*) FROM mneme.jobs WHERE state = 'failed'`))
	require.Len(t, e.memories(), 1)
	require.NotEmpty(t, e.search("alpha0", 3))
}

// Writers racing on one conversation (a user message and the agent's reply,
// many times over) all succeed without a time, in arrival order, none lost.
func TestConcurrentAddMessage(t *testing.T) {
	t.Parallel()
	db := dbtest.New(t)
	ctx := context.Background()
	conv := uuid.New()
	const writers, each = 20, 15
	var wg sync.WaitGroup
	errs := make(chan error, writers*each)
	for w := 0; w < writers; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			for i := 0; i < each; i++ {
				// A transaction that starts before it gets the conversation's
				// lock: the case where a default of now() would be earlier.
				tx, err := db.Pool.Begin(ctx)
				if err == nil {
					_, err = tx.Exec(ctx, `SELECT pg_sleep(0.001)`)
				}
				if err == nil {
					_, err = tx.Exec(ctx, `SELECT mneme.add_message($1, 'user', $2)`, conv, fmt.Sprintf("writer %d message %d", w, i))
				}
				if err == nil {
					err = tx.Commit(ctx)
				} else {
					_ = tx.Rollback(ctx)
				}
				if err != nil {
					errs <- err
				}
			}
		}(w)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	var n, ordered int
	require.NoError(t, db.Pool.QueryRow(ctx, `SELECT count(*), count(*) FILTER (WHERE created_at >= prev)
		FROM (SELECT created_at, lag(created_at, 1, '-infinity') OVER (ORDER BY id) AS prev
		      FROM mneme.messages WHERE conversation_id = $1) x`, conv).Scan(&n, &ordered))
	require.Equal(t, writers*each, n, "no message lost")
	require.Equal(t, n, ordered, "times follow arrival (id) order")
}

// A writer's open transaction does not hide the conversation's pending
// segment job from claim_jobs (SKIP LOCKED): enqueue_segment locks the job
// only to change it.
func TestOpenWriterDoesNotHideSegmentJob(t *testing.T) {
	t.Parallel()
	db := dbtest.New(t)
	ctx := context.Background()
	conv := uuid.New()
	at := time.Date(2026, 3, 1, 9, 0, 0, 0, time.UTC)
	for i := 0; i < 5; i++ {
		_, err := db.Pool.Exec(ctx, `SELECT mneme.add_message($1, 'user', 'a message long enough to check', $2)`, conv, at.Add(time.Duration(i)*time.Minute))
		require.NoError(t, err)
	}
	tx, err := db.Pool.Begin(ctx)
	require.NoError(t, err)
	defer tx.Rollback(ctx) //nolint:errcheck
	_, err = tx.Exec(ctx, `SELECT mneme.add_message($1, 'user', 'one more message, not yet committed', $2)`, conv, at.Add(6*time.Minute))
	require.NoError(t, err)
	var claimed int
	require.NoError(t, db.Pool.QueryRow(ctx, `SELECT count(*) FROM mneme.claim_jobs('w', 10, interval '1 minute') WHERE kind = 'segment'`).Scan(&claimed))
	require.Equal(t, 1, claimed, "the pending check is claimable while a writer's transaction is open")
}

// A pending forced cut keeps its boundary; the messages that arrive while
// it waits get their own job when it runs, so a drain leaves nothing queued
// without a job.
func TestMessagesAfterAForcedCutSegment(t *testing.T) {
	t.Parallel()
	e := newPipelineEnv(t, false)
	ctx := context.Background()
	_, err := e.db.Pool.Exec(ctx, `SELECT mneme.set_setting('segment_max_messages', '10')`)
	require.NoError(t, err)
	var cutVersion string
	for i := 0; i < 25; i++ { // a forced cut at 10; 15 more arrive while it is pending
		e.say(day1.Add(time.Duration(i)*time.Minute).Format(time.RFC3339), "user", fmt.Sprintf("the garden plan, step %d: water the tomatoes", i))
		if i == 9 {
			require.NoError(t, e.db.Pool.QueryRow(ctx, `SELECT xmin::text FROM mneme.jobs WHERE kind = 'segment' AND state = 'pending'`).Scan(&cutVersion))
		}
	}
	require.Equal(t, 1, e.count(`SELECT count(*) FROM mneme.jobs WHERE kind = 'segment' AND state = 'pending'`))
	require.Equal(t, 1, e.count(`SELECT count(*) FROM mneme.jobs WHERE kind = 'segment' AND state = 'pending' AND xmin::text = $1`, cutVersion),
		"the pending cut is not rewritten at each later message (its follow-up counts them)")
	e.drain()
	queued := e.count(`SELECT count(*) FROM mneme.messages WHERE conversation_id = $1 AND consumed_at IS NULL`, e.conv)
	require.Less(t, queued, 10, "fewer than segment_max_messages stay queued (the next message checks them)")
	require.Zero(t, e.count(`SELECT count(*) FROM mneme.jobs WHERE state IN ('pending', 'failed')`))
}

// TestBatchImportCutsAtEveryGap: messages added faster than the sidecar
// segments (a batch import, a sidecar that was down) are checked against
// the one pending segment job; when that forced cut is done, the follow-up
// cuts at each later gap and then where segment_now asked, so every
// episode stays within one session and nothing stays queued.
func TestBatchImportCutsAtEveryGap(t *testing.T) {
	t.Parallel()
	e := contextConversation(t) // four sessions two days apart, then a farewell, segment_now, drained
	require.Zero(t, e.count(`SELECT count(*) FROM mneme.messages WHERE conversation_id = $1 AND consumed_at IS NULL`, e.conv))
	require.Equal(t, 5, e.count(`SELECT count(*) FROM mneme.memories WHERE conversation_id = $1 AND kind = 'episodic'`, e.conv))
	require.Zero(t, e.count(`SELECT count(*) FROM mneme.memories WHERE conversation_id = $1 AND kind = 'episodic'
		AND source_last_at - source_first_at > interval '1 hour'`, e.conv), "no episode spans a gap")
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
