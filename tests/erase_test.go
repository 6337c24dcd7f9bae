package tests

import (
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/mneme-memory/mneme/sidecar/dbtest"
)

var secretSession = [][2]string{
	{"user", "Our vault combination is seven three nine, hidden beneath the crooked linden tree."},
	{"assistant", "Understood: seven three nine, beneath the crooked linden tree."},
	{"user", "Grandmother Ottilie buried the silver teapot there in nineteen fifty."},
	{"assistant", "A silver teapot buried by Ottilie, quite a family legend."},
	{"user", "Nobody else knows about the teapot or the vault."},
	{"assistant", "Your secret about the teapot and vault stays with me."},
}

var gardenSession = [][2]string{
	{"user", "Back after two days: the garden needs water."},
	{"assistant", "Water early in the morning so the roots drink before the heat."},
	{"user", "Should I mulch the tomato beds as well?"},
	{"assistant", "Yes, straw mulch keeps the soil moist and cool."},
	{"user", "Straw it is, thanks."},
}

var nonWord = regexp.MustCompile(`[^a-z0-9]+`)

func normalize(s string) string {
	return " " + strings.TrimSpace(nonWord.ReplaceAllString(strings.ToLower(s), " ")) + " "
}

// shingles are the 3-word sequences of the texts.
func shingles(texts ...string) []string {
	seen := map[string]bool{}
	var out []string
	for _, s := range texts {
		w := strings.Fields(normalize(s))
		for i := 0; i+3 <= len(w); i++ {
			sh := " " + strings.Join(w[i:i+3], " ") + " "
			if !seen[sh] {
				seen[sh] = true
				out = append(out, sh)
			}
		}
	}
	return out
}

// schemaRows is every row of every table in schema mneme, found through
// the catalog (so tables added later are covered), each whole row as
// lower-cased text (every column: text, jsonb, arrays, ...), by table.
func schemaRows(t *testing.T, db *dbtest.DB) map[string][]string {
	t.Helper()
	ctx := context.Background()
	rows, err := db.Pool.Query(ctx, `SELECT c.relname FROM pg_catalog.pg_class c JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
		WHERE n.nspname = 'mneme' AND c.relkind IN ('r', 'p') ORDER BY 1`)
	require.NoError(t, err)
	tables, err := pgx.CollectRows(rows, pgx.RowTo[string])
	require.NoError(t, err)
	require.Contains(t, tables, "memories")
	out := map[string][]string{}
	for _, tbl := range tables {
		rows, err := db.Pool.Query(ctx, fmt.Sprintf(`SELECT lower(t::text) FROM mneme.%s t`, pgx.Identifier{tbl}.Sanitize()))
		require.NoError(t, err)
		out[tbl], err = pgx.CollectRows(rows, pgx.RowTo[string])
		require.NoError(t, err)
	}
	return out
}

// leaks reports, per table, the shingles its rows hold.
func leaks(t *testing.T, db *dbtest.DB, sh []string) map[string][]string {
	t.Helper()
	out := map[string][]string{}
	for tbl, texts := range schemaRows(t, db) {
		for _, row := range texts {
			n := normalize(row)
			for _, s := range sh {
				if strings.Contains(n, s) {
					out[tbl] = append(out[tbl], strings.TrimSpace(s))
				}
			}
		}
	}
	return out
}

// bm25Equal checks that the BM25 statistics equal a full reindex. The
// reindex is committed (it changes nothing when they are equal): on Citus a
// transaction that reads the statistics as the test's login after the
// reindex (mneme's owner) rewrote them is refused.
func bm25Equal(t *testing.T, db *dbtest.DB) {
	t.Helper()
	ctx := context.Background()
	snap := func() string {
		var s string
		require.NoError(t, db.Pool.QueryRow(ctx, `SELECT concat_ws('|',
			(SELECT md5(coalesce(string_agg(format('%s %s %s %s %s', conversation_id, term, memory_id, tf, doclen), ',' ORDER BY conversation_id, term, memory_id), '')) FROM mneme.bm25_postings),
			(SELECT md5(coalesce(string_agg(format('%s %s %s', memory_id, conversation_id, doclen), ',' ORDER BY memory_id), '')) FROM mneme.bm25_docs),
			(SELECT md5(coalesce(string_agg(format('%s %s %s', conversation_id, term, df), ',' ORDER BY conversation_id, term), '')) FROM mneme.bm25_terms),
			(SELECT md5(coalesce(string_agg(format('%s %s %s', conversation_id, n, total_len), ',' ORDER BY conversation_id), '')) FROM mneme.bm25_stats))`).Scan(&s))
		return s
	}
	before := snap()
	_, err := db.Pool.Exec(ctx, `SELECT mneme.bm25_reindex()`)
	require.NoError(t, err)
	require.Equal(t, snap(), before, "BM25 statistics equal a full reindex")
}

func secretTexts() []string {
	var out []string
	for _, m := range secretSession {
		out = append(out, m[1])
	}
	return out
}

// erase removes a memory's content everywhere it was copied (the row, its
// source messages, the payload of the review job its segmentation queued,
// pending reviews, review log, event reasons), keeps a tombstone, and
// leaves BM25 as a reindex would build it. Bad input changes nothing.
func TestErase(t *testing.T) {
	t.Parallel()
	for _, variant := range variants(t) {
		t.Run(variant, func(t *testing.T) {
			e := newPipelineEnv(t, false, dbtest.WithVector(variant))
			ctx := context.Background()
			// Sessions are episodes here: no topic cut inside one.
			_, err := e.db.Pool.Exec(ctx, `SELECT mneme.set_setting('segment_shift_similarity', '-1')`)
			require.NoError(t, err)

			e.session(day1, weatherSession)
			e.session(day1.Add(2*time.Hour), secretSession) // the gap cuts the weather episode
			e.drain()
			require.Len(t, e.memories(), 1)
			weather := e.memories()[0]
			require.NotEmpty(t, e.search("weather Berlin bike ride Wannsee", 3)) // pending: the weather memory
			e.session(day3, gardenSession)                                       // cuts the secret episode
			e.drain()
			var secret memRow
			for _, m := range e.memories() {
				if strings.Contains(m.Content, "linden") {
					secret = m
				}
			}
			require.NotEqual(t, uuid.Nil, secret.ID)
			require.Equal(t, 1, e.count(`SELECT count(*) FROM mneme.jobs j, mneme.memories m WHERE j.kind = 'review'
				AND m.id = $1 AND j.conversation_id = m.conversation_id AND j.payload -> 'context_message_ids' @> to_jsonb(m.source_message_ids[1])`, secret.ID),
				"the review job queued at the secret's segmentation names its messages")
			require.Contains(t, e.search("vault combination linden teapot", 3), secret.ID)
			e.say(day4.Format(time.RFC3339), "user", "The tomatoes are ripening nicely now.") // cuts the garden episode: reviews
			e.drain()
			require.Equal(t, 1, e.count(`SELECT count(*) FROM mneme.review_log WHERE memory_id = $1`, secret.ID))
			require.Contains(t, e.search("teapot vault silver", 3), secret.ID) // a pending review names it again
			// A review job not yet run, quoting a secret message.
			var msgID int64
			require.NoError(t, e.db.Pool.QueryRow(ctx, `SELECT source_message_ids[1] FROM mneme.memories WHERE id = $1`, secret.ID).Scan(&msgID))
			reviews, _ := json.Marshal([]map[string]any{{"query": "garden", "memory_ids": []uuid.UUID{weather.ID}}, {"query": "vault", "memory_ids": []uuid.UUID{secret.ID}}})
			payload, _ := json.Marshal(map[string]any{"reviews": json.RawMessage(reviews), "reviewed_at": day4, "context": []map[string]any{
				{"id": msgID, "role": "user", "content": secretSession[0][1], "at": day1}, {"id": msgID + 1000, "role": "user", "content": "kept words", "at": day1}}})
			_, err = e.db.Pool.Exec(ctx, `SELECT mneme.enqueue_job('review', $1, $2, NULL, now() + interval '1 day')`, e.conv, payload)
			require.NoError(t, err)
			_, err = e.db.Pool.Exec(ctx, `SELECT mneme.forget($1, 'the user regrets: our vault combination is seven three nine')`, secret.ID)
			require.NoError(t, err)

			sh := shingles(secretTexts()...)
			before := leaks(t, e.db, sh)
			for _, tbl := range []string{"memories", "messages", "jobs", "memory_events"} {
				require.NotEmpty(t, before[tbl], "before erase the secret is in %s (the scan finds it)", tbl)
			}

			// Bad input: clear errors, nothing changed.
			state := func() string {
				var s string
				require.NoError(t, e.db.Pool.QueryRow(ctx, `SELECT format('%s/%s/%s/%s/%s/%s', (SELECT count(*) FROM mneme.memories),
					(SELECT count(*) FROM mneme.messages), (SELECT md5(string_agg(payload::text, ',' ORDER BY id)) FROM mneme.jobs),
					(SELECT count(*) FROM mneme.memory_events), (SELECT md5(string_agg(coalesce(reason, ''), ',' ORDER BY id)) FROM mneme.memory_events),
					(SELECT md5(string_agg(coalesce(pending_reviews::text, ''), ',')) FROM mneme.message_queue))`).Scan(&s))
				return s
			}
			st := state()
			for _, c := range []struct {
				q    string
				arg  any
				code string
			}{
				{`SELECT mneme.erase(NULL, 'x')`, nil, "22004"},
				{`SELECT mneme.erase($1, NULL)`, secret.ID, "22004"},
				{`SELECT mneme.erase($1, '  ')`, secret.ID, "22023"},
				{`SELECT mneme.erase($1, 'x')`, uuid.New(), "P0002"},
				{`SELECT mneme.erase_conversation(NULL, 'x')`, nil, "22004"},
				{`SELECT mneme.erase_conversation($1, '')`, e.conv, "22023"},
				{`SELECT mneme.erase_conversation($1, 'x')`, uuid.New(), "P0002"},
			} {
				var args []any
				if c.arg != nil {
					args = append(args, c.arg)
				}
				_, err := e.db.Pool.Exec(ctx, c.q, args...)
				require.Equal(t, c.code, sqlState(t, err), c.q)
			}
			require.Equal(t, st, state(), "a rejected erase changes nothing")

			weatherReviews := e.count(`SELECT count(*) FROM mneme.review_log WHERE memory_id = $1`, weather.ID)
			require.Positive(t, weatherReviews)
			var secretMsgs []int64
			require.NoError(t, e.db.Pool.QueryRow(ctx, `SELECT source_message_ids FROM mneme.memories WHERE id = $1`, secret.ID).Scan(&secretMsgs))
			_, err = e.db.Pool.Exec(ctx, `SELECT mneme.erase($1, 'user request 42')`, secret.ID)
			require.NoError(t, err)
			require.Zero(t, e.count(`SELECT count(*) FROM mneme.jobs j, unnest($1::bigint[]) AS x(id)
				WHERE j.payload -> 'context_message_ids' @> to_jsonb(x.id)`, secretMsgs), "no job names an erased message")
			require.Empty(t, leaks(t, e.db, sh), "no table holds a 3-word sequence of the erased memory")
			bm25Equal(t, e.db)

			// The tombstone: ids, time, reason; the earlier events keep no reason.
			var evs []string
			var reasons []*string
			require.NoError(t, e.db.Pool.QueryRow(ctx, `SELECT array_agg(event ORDER BY id), array_agg(reason ORDER BY id)
				FROM mneme.memory_events WHERE memory_id = $1`, secret.ID).Scan(&evs, &reasons))
			require.Equal(t, "erased", evs[len(evs)-1])
			require.Equal(t, "user request 42", *reasons[len(reasons)-1])
			for _, r := range reasons[:len(reasons)-1] {
				require.Nil(t, r)
			}
			require.Contains(t, evs, "created")
			require.Contains(t, evs, "forgotten")
			// What does not quote it stays: the weather memory, its review,
			// the pending job's other review and other context message.
			require.Equal(t, weather.Content, e.memory(weather.ID).Content)
			require.Equal(t, weatherReviews, e.count(`SELECT count(*) FROM mneme.review_log WHERE memory_id = $1`, weather.ID))
			require.Equal(t, 1, e.count(`SELECT count(*) FROM mneme.jobs WHERE state = 'pending' AND payload::text LIKE '%kept words%'
				AND payload::text LIKE '%' || $1 || '%'`, weather.ID.String()))
			require.Zero(t, e.count(`SELECT count(*) FROM mneme.jobs WHERE payload::text LIKE '%' || $1 || '%'`, secret.ID.String()))
			_, err = e.db.Pool.Exec(ctx, `SELECT mneme.erase($1, 'again')`, secret.ID)
			require.Equal(t, "P0002", sqlState(t, err), "erased is gone")

			// The retrieval still works, and the runner still runs the jobs.
			require.NotContains(t, e.search("vault combination linden teapot", 5), secret.ID)
			_, err = e.db.Pool.Exec(ctx, `UPDATE mneme.jobs SET run_at = now() WHERE state = 'pending'`)
			require.NoError(t, err)
			e.drain()
			require.Zero(t, e.count(`SELECT count(*) FROM mneme.jobs WHERE state <> 'done'`))
		})
	}
}

// erase_conversation removes a whole conversation's content and leaves
// another conversation as it was.
func TestEraseConversation(t *testing.T) {
	t.Parallel()
	for _, variant := range variants(t) {
		t.Run(variant, func(t *testing.T) {
			a := newPipelineEnv(t, false, dbtest.WithVector(variant))
			ctx := context.Background()
			_, err := a.db.Pool.Exec(ctx, `SELECT mneme.set_speakers($1, ARRAY['Ottilie'])`, a.conv)
			require.NoError(t, err)
			b := *a
			b.conv = uuid.New()
			a.session(day1, weatherSession)
			b.session(day1, secretSession)
			a.say(day3.Format(time.RFC3339), "user", "Back after two days: the garden needs water.")
			b.say(day3.Format(time.RFC3339), "user", "Ottilie also hid a brass compass near the well.")
			a.drain()
			require.NotEmpty(t, b.search("vault teapot linden", 3))
			_, err = b.db.Pool.Exec(ctx, `SELECT mneme.remember($1, 'The brass compass by the well points to the teapot cache.', 'important')`, b.conv)
			require.NoError(t, err)
			b.say(day4.Format(time.RFC3339), "user", "The compass needle sticks a little in cold weather.") // queued, not segmented
			aBefore := a.memories()
			require.NotEmpty(t, aBefore)
			secret := append(secretTexts(), "Ottilie also hid a brass compass near the well.",
				"The brass compass by the well points to the teapot cache.", "The compass needle sticks a little in cold weather.")
			sh := shingles(secret...)
			require.NotEmpty(t, leaks(t, b.db, sh)["messages"])

			var n int64
			require.NoError(t, b.db.Pool.QueryRow(ctx, `SELECT mneme.erase_conversation($1, 'account deleted')`, b.conv).Scan(&n))
			require.GreaterOrEqual(t, n, int64(2))
			require.Empty(t, leaks(t, b.db, sh))
			bm25Equal(t, b.db)
			require.Zero(t, b.count(`SELECT count(*) FROM mneme.message_queue WHERE id = $1`, b.conv))
			require.Zero(t, b.count(`SELECT count(*) FROM mneme.jobs WHERE conversation_id = $1`, b.conv))
			require.Equal(t, int(n), b.count(`SELECT count(*) FROM mneme.memory_events WHERE conversation_id = $1 AND event = 'erased' AND memory_id IS NOT NULL`, b.conv))
			require.Equal(t, 1, b.count(`SELECT count(*) FROM mneme.memory_events WHERE conversation_id = $1 AND event = 'erased' AND memory_id IS NULL`, b.conv))
			require.Zero(t, b.count(`SELECT count(*) FROM mneme.memory_events WHERE conversation_id = $1 AND event <> 'erased' AND reason IS NOT NULL`, b.conv))
			// The other conversation is untouched.
			require.Equal(t, aBefore, a.memories())
			require.Equal(t, 1, a.count(`SELECT count(*) FROM mneme.message_queue WHERE id = $1 AND speakers = ARRAY['Ottilie']`, a.conv))
			_, err = b.db.Pool.Exec(ctx, `SELECT mneme.erase_conversation($1, 'again')`, b.conv)
			require.Equal(t, "P0002", sqlState(t, err))
		})
	}
}
