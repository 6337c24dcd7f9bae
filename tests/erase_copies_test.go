package tests

import (
	"context"
	"encoding/json"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/sashabaranov/go-openai"
	"github.com/stretchr/testify/require"

	"github.com/mneme-memory/mneme/sidecar/dbtest"
	"github.com/mneme-memory/mneme/sidecar/llm/llmtest"
)

// rowsHolding lists "table: row" for every row of schema mneme whose whole
// text holds word (lower case).
func rowsHolding(t *testing.T, db *dbtest.DB, word string) []string {
	t.Helper()
	var out []string
	for tbl, rows := range schemaRows(t, db) {
		for _, r := range rows {
			if strings.Contains(r, word) {
				out = append(out, tbl+": "+r)
			}
		}
	}
	return out
}

// Erasing a fact extracted from an episode erases the episode it was
// extracted from (its messages and the other facts made of them): the
// fact's words are in the episode, and a paraphrase cannot be cut out of
// it reliably (docs/forgetting.md). Afterwards a search for the words finds
// nothing and no row of any table holds them; the conversation's other
// episode stays.
func TestEraseDerivedFactTakesItsSources(t *testing.T) {
	t.Parallel()
	for _, variant := range variants(t) {
		t.Run(variant, func(t *testing.T) {
			ctx := context.Background()
			e := newPipelineEnv(t, false, dbtest.WithVector(variant))
			e.session(day1, [][2]string{
				{"user", "I live in Zqvillage village by the sea."},
				{"assistant", "A village by the sea sounds lovely."},
				{"user", "The harbour is full of small boats."},
				{"assistant", "Do you sail yourself?"},
				{"user", "Only in the summer months."},
				{"assistant", "Summer sailing is the best kind."},
			})
			_, err := e.db.Pool.Exec(ctx, `SELECT mneme.segment_now($1)`, e.conv)
			require.NoError(t, err)
			e.drain()
			e.session(day3, weatherSession)
			_, err = e.db.Pool.Exec(ctx, `SELECT mneme.segment_now($1)`, e.conv)
			require.NoError(t, err)
			e.drain()

			var fact uuid.UUID
			for _, f := range e.extractedFacts() {
				if strings.Contains(f.Content, "Zqvillage") {
					fact = f.ID
				}
			}
			require.NotEqual(t, uuid.Nil, fact, "a fact names Zqvillage: %v", e.extractedFacts())
			search := func() int {
				return e.count(`SELECT count(*) FROM mneme.search($1, 'Zqvillage village') WHERE content ILIKE '%zqvillage%'`, e.conv)
			}
			require.GreaterOrEqual(t, search(), 2, "the fact and its episode before erase")
			require.NotEmpty(t, rowsHolding(t, e.db, "zqvillage"))
			weather := e.count(`SELECT count(*) FROM mneme.memories WHERE conversation_id = $1 AND content LIKE '%Wannsee%'`, e.conv)
			require.Positive(t, weather)

			_, err = e.db.Pool.Exec(ctx, `SELECT mneme.erase($1, 'user request')`, fact)
			require.NoError(t, err)
			require.Zero(t, search(), "a search for the fact's words finds nothing that holds them")
			require.Empty(t, rowsHolding(t, e.db, "zqvillage"), "no row of any table holds the word")
			require.Empty(t, rowsHolding(t, e.db, "harbour is full"), "the episode it came from went whole")
			require.Equal(t, weather, e.count(`SELECT count(*) FROM mneme.memories WHERE conversation_id = $1 AND content LIKE '%Wannsee%'`, e.conv),
				"the other episode stays")
			require.Positive(t, e.count(`SELECT count(*) FROM mneme.memory_events WHERE event = 'erased' AND memory_id = $1`, fact))
			require.GreaterOrEqual(t, e.count(`SELECT count(*) FROM mneme.memory_events WHERE event = 'erased'`), 2,
				"the episode has a tombstone of its own")
			bm25Equal(t, e.db)
		})
	}
}

// erase_conversation(F) takes every query typed in F, also where it
// returned only other conversations' memories (scope tenant) and their
// review log quotes it; the ratings stay (they hold no text of F).
func TestEraseConversationTakesItsQueriesEverywhere(t *testing.T) {
	t.Parallel()
	for _, variant := range variants(t) {
		t.Run(variant, func(t *testing.T) {
			ctx := context.Background()
			e := newPipelineEnv(t, false, dbtest.WithVector(variant))
			f := *e
			f.conv = uuid.New()
			var goats uuid.UUID
			require.NoError(t, e.db.Pool.QueryRow(ctx, `SELECT mneme.remember($1, 'Pip keeps goats on the farm by the hill.', at => $2)`,
				e.conv, day1.Add(-time.Hour)).Scan(&goats))
			e.drain()
			// F asks about E's memory with scope tenant, then talks on:
			// its segmentation hands the retrieval to a review job.
			f.say(day1.Add(-time.Minute).Format(time.RFC3339), "user", "A question about the farm.")
			rows, err := e.db.Pool.Query(ctx, `SELECT memory_id FROM mneme.retrieve($1, 'Qmark goats farm Pip', 5, scope => 'tenant')`, f.conv)
			require.NoError(t, err)
			ids, err := pgx.CollectRows(rows, pgx.RowTo[uuid.UUID])
			require.NoError(t, err)
			require.Equal(t, []uuid.UUID{goats}, ids)
			f.session(day1, [][2]string{
				{"user", "The goats at Pip's farm escaped again."}, {"assistant", "Goats are good at escaping."},
				{"user", "They climbed the hill fence."}, {"assistant", "A taller fence then."},
				{"user", "Pip is building one on the farm."},
			})
			_, err = e.db.Pool.Exec(ctx, `SELECT mneme.segment_now($1)`, f.conv)
			require.NoError(t, err)
			f.drain()
			require.Positive(t, e.count(`SELECT count(*) FROM mneme.review_log l WHERE memory_id = $1 AND 'Qmark goats farm Pip' = ANY (`+reviewQueries+`)`, goats),
				"E's memory was reviewed with F's query")
			reviews := e.count(`SELECT count(*) FROM mneme.review_log WHERE memory_id = $1`, goats)
			// A pending one too, and one in a review job not run yet.
			_, err = e.db.Pool.Exec(ctx, `SELECT * FROM mneme.retrieve($1, 'Qmark where are the goats', 5, scope => 'tenant')`, f.conv)
			require.NoError(t, err)

			_, err = e.db.Pool.Exec(ctx, `SELECT mneme.erase_conversation($1, 'account closed')`, f.conv)
			require.NoError(t, err)
			require.Empty(t, rowsHolding(t, e.db, "qmark"), "no copy of a query typed in F is left")
			require.Equal(t, reviews, e.count(`SELECT count(*) FROM mneme.review_log WHERE memory_id = $1`, goats), "the ratings stay")
			require.Equal(t, 1, e.count(`SELECT count(*) FROM mneme.memories WHERE id = $1`, goats), "E's memory stays")
		})
	}
}

// A review job with a slow LLM reviewer: while the model call runs, one of
// the memories it reviews is erased. The review's write re-checks what was
// erased in its own transaction: the erased query is in no row afterwards
// (not in the review log of the memory retrieved alongside), and the
// memory that was not erased is still rated.
func TestReviewRacingAnEraseLeavesNoQuery(t *testing.T) {
	t.Parallel()
	for _, variant := range variants(t) {
		t.Run(variant, func(t *testing.T) {
			ctx := context.Background()
			e := newPipelineEnv(t, true, dbtest.WithVector(variant))
			var keep, gone uuid.UUID
			require.NoError(t, e.db.Pool.QueryRow(ctx, `SELECT mneme.remember($1, 'The boat is moored at the north pier.', at => $2)`,
				e.conv, day1.Add(-2*time.Hour)).Scan(&keep))
			require.NoError(t, e.db.Pool.QueryRow(ctx, `SELECT mneme.remember($1, 'The boat key hangs in the shed.', at => $2)`,
				e.conv, day1.Add(-2*time.Hour)).Scan(&gone))
			_, err := e.db.Pool.Exec(ctx, `UPDATE mneme.jobs SET state = 'done', finished_at = now() WHERE kind = 'revise'`)
			require.NoError(t, err)
			// One retrieval returned both; its query names the erased one.
			_, err = e.db.Pool.Exec(ctx, `SELECT mneme.add_pending_review($1, $2, 'Zqvrace where is the boat key')`,
				e.conv, []uuid.UUID{keep, gone})
			require.NoError(t, err)
			msgs, _ := json.Marshal([]map[string]any{{"id": 1, "role": "user", "content": "I took the boat out to the pier today.", "at": day3}})
			_, err = e.db.Pool.Exec(ctx, `SELECT mneme.enqueue_job('review', $1, jsonb_build_object('reviews', mneme.take_pending_reviews($1),
				'reviewed_at', $2::timestamptz, 'context', $3::jsonb))`, e.conv, day3, string(msgs))
			require.NoError(t, err)

			asked := make(chan struct{})
			release := make(chan struct{})
			ids := regexp.MustCompile(`### Memory ([0-9a-f-]{36})`)
			var once sync.Once
			e.srv.Default(func(req openai.ChatCompletionRequest) llmtest.Reply {
				once.Do(func() { close(asked) })
				<-release // the model is slow: the erase happens meanwhile
				var rs []map[string]string
				for _, m := range ids.FindAllStringSubmatch(req.Messages[1].Content, -1) {
					rs = append(rs, map[string]string{"memory_id": m[1], "rating": "good", "reason": "used"})
				}
				b, _ := json.Marshal(map[string]any{"ratings": rs})
				return llmtest.Reply{Content: string(b)}
			})
			done := make(chan struct{})
			go func() {
				defer close(done)
				e.drain()
			}()
			select {
			case <-asked:
			case <-time.After(30 * time.Second):
				t.Fatal("the reviewer was never asked")
			}
			_, err = e.db.Pool.Exec(ctx, `SELECT mneme.erase($1, 'user request')`, gone)
			require.NoError(t, err)
			close(release)
			<-done

			require.Zero(t, e.count(`SELECT count(*) FROM mneme.jobs WHERE state = 'failed'`))
			require.Equal(t, 1, e.count(`SELECT count(*) FROM mneme.review_log WHERE memory_id = $1`, keep), "the other memory is rated")
			require.Empty(t, rowsHolding(t, e.db, "zqvrace"), "the erased memory's query is in no row")
		})
	}
}
