package tests

import (
	"context"
	"fmt"
	"math/rand"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/mneme-memory/mneme/sidecar/dbtest"
)

// markerWord is a word no text of the test holds by chance: letters past
// 'f' (no uuid or hex digest contains it) and long enough that its first
// seven letters survive any stemmer.
func markerWord(rng *rand.Rand) string {
	const letters = "ghjkmnpqrstvwxz"
	b := []byte("zq")
	for range 9 {
		b = append(b, letters[rng.Intn(len(letters))])
	}
	return string(b)
}

// markerHits returns "table: marker" for each marker whose first seven
// letters a row of a table in schema mneme holds (schemaRows).
func markerHits(t *testing.T, db *dbtest.DB, markers []string) []string {
	t.Helper()
	var hits []string
	for tbl, texts := range schemaRows(t, db) {
		for _, row := range texts {
			for _, m := range markers {
				if strings.Contains(row, m[:7]) {
					hits = append(hits, tbl+": "+m)
				}
			}
		}
	}
	return hits
}

// Erase leaves no trace: unique marker words planted through every path
// that stores text (messages, episodes, extracted facts, remember, merged
// duplicates, supersessions, forget reasons, the queries of retrieve and
// context in the same conversation and in another one of the tenant with
// scope tenant, review jobs done and pending, the review log, events;
// a fact extracted from an episode erased alone, which takes the episode;
// a query typed in a conversation erased whole that retrieved only another
// conversation's memory, whose review log quoted it),
// the pipelines run, every memory holding a marker is erased (and one
// conversation erased whole), in a random order, and no column of any
// table in schema mneme holds a marker afterwards. What holds no marker
// stays.
func TestEraseLeavesNoTrace(t *testing.T) {
	t.Parallel()
	for _, variant := range variants(t) {
		t.Run(variant, func(t *testing.T) {
			seed := time.Now().UnixNano()
			if s := os.Getenv("MNEME_ERASE_SEED"); s != "" { // a failed run's seed (its log's), to run it again
				var err error
				seed, err = strconv.ParseInt(s, 10, 64)
				require.NoError(t, err)
			}
			t.Logf("seed %d (MNEME_ERASE_SEED=%d reproduces this run's words and order)", seed, seed)
			rng := rand.New(rand.NewSource(seed))
			ctx := context.Background()
			// Facts remembered as stated before the sessions, so the reviews
			// the sessions trigger are newer than every memory's last review.
			t0 := time.Now().UTC().Truncate(time.Minute).Add(-10 * 24 * time.Hour)
			day1, day3, day4 := t0, t0.Add(48*time.Hour), t0.Add(72*time.Hour)
			stated, later := t0.Add(-2*time.Hour), t0.Add(-time.Hour)
			e1 := newPipelineEnv(t, false, dbtest.WithVector(variant))
			_, err := e1.db.Pool.Exec(ctx, `SELECT mneme.set_setting('segment_shift_similarity', '-1')`)
			require.NoError(t, err)
			e2, f, e3, g := *e1, *e1, *e1, *e1
			e2.conv, f.conv, e3.conv, g.conv = uuid.New(), uuid.New(), uuid.New(), uuid.New()
			var markers []string
			mark := func() string {
				m := markerWord(rng)
				markers = append(markers, m)
				return m
			}
			exec := execer(t, e1.db.Pool)
			retrieve := func(c uuid.UUID, query, scope string) []uuid.UUID {
				t.Helper()
				rows, err := e1.db.Pool.Query(ctx, `SELECT memory_id FROM mneme.retrieve($1, $2, 5, scope => $3)`, c, query, scope)
				require.NoError(t, err)
				ids, err := pgx.CollectRows(rows, pgx.RowTo[uuid.UUID])
				require.NoError(t, err)
				require.NotEmpty(t, ids, query)
				return ids
			}

			// E1: an episode with an extracted fact, remembered facts
			// (a duplicate that merges, a move that supersedes).
			town, pet, code, oldCity, newCity := mark(), mark(), mark(), mark(), mark()
			e1.session(day1, [][2]string{
				{"user", fmt.Sprintf("I live in the town of %s near the river.", town)},
				{"assistant", fmt.Sprintf("%s sounds like a quiet place by the water.", town)},
				{"user", fmt.Sprintf("My dog is called %s and he loves the riverbank.", pet)},
				{"assistant", fmt.Sprintf("%s is a fine name for a river dog.", pet)},
				{"user", "We walk there every morning before work."},
				{"assistant", "Morning walks by the river are a good habit."},
			})
			exec(`SELECT mneme.remember($1, $2, at => $3)`, e1.conv, fmt.Sprintf("My codeword is %s.", code), stated)
			exec(`SELECT mneme.remember($1, $2, at => $3)`, e1.conv, fmt.Sprintf("My codeword is %s.", code), stated)
			exec(`SELECT mneme.remember($1, $2, at => $3)`, e1.conv, fmt.Sprintf("I live in %s.", oldCity), stated)
			exec(`SELECT mneme.remember($1, $2, at => $3)`, e1.conv, fmt.Sprintf("I live in %s.", newCity), later)
			// F: the tenant's other conversation, with a memory of its own.
			exec(`SELECT mneme.remember($1, 'My codeword for the bank is plainly banana.', at => $2)`, f.conv, stated)
			exec(`SELECT mneme.segment_now($1)`, e1.conv)
			// E2: erased whole later.
			e2Word := mark()
			e2.session(day1, [][2]string{
				{"user", fmt.Sprintf("The %s project starts on Monday.", e2Word)},
				{"assistant", fmt.Sprintf("Good luck with %s on Monday.", e2Word)},
				{"user", "It is a big step for the team."},
				{"assistant", "Big steps need good planning."},
				{"user", "We planned for weeks."},
			})
			exec(`SELECT mneme.remember($1, $2, at => $3)`, e2.conv, fmt.Sprintf("The %s budget is secret.", e2Word), stated)
			exec(`SELECT mneme.segment_now($1)`, e2.conv)
			// E3: the derived-fact path. Only the fact extracted from the
			// first message is erased below; its marker is in the
			// message and the episode too.
			village := mark()
			e3.session(day1, [][2]string{
				{"user", fmt.Sprintf("I live in the %s village by the sea.", village)},
				{"assistant", "A village by the sea sounds lovely."},
				{"user", "The harbour is full of small boats."},
				{"assistant", "Do you sail yourself?"},
				{"user", "Only in the summer months."},
			})
			exec(`SELECT mneme.segment_now($1)`, e3.conv)
			e1.drain()
			require.Positive(t, e1.count(`SELECT count(*) FROM mneme.memories WHERE status = 'merged'`), "a duplicate merged")
			require.Positive(t, e1.count(`SELECT count(*) FROM mneme.memories WHERE status = 'superseded'`), "a move superseded")

			// Queries naming the markers: recorded in the same
			// conversation, in another one with scope tenant (alongside
			// F's own memory), through retrieve and context; some get
			// reviewed (segmentation takes them), some stay pending.
			q1, q2, q3, q4, q5 := mark(), mark(), mark(), mark(), mark()
			retrieve(e1.conv, fmt.Sprintf("%s what is my codeword %s", q1, code), "conversation")
			var md string
			require.NoError(t, e1.db.Pool.QueryRow(ctx, `SELECT mneme.context($1, $2, 300)`, e1.conv,
				fmt.Sprintf("%s where do I live %s", q2, town)).Scan(&md))
			require.Contains(t, md, town)
			ids := retrieve(f.conv, fmt.Sprintf("%s codeword bank %s", q3, code), "tenant")
			require.GreaterOrEqual(t, len(ids), 2, "the tenant-scope retrieval returns E1's memory and F's")
			retrieve(e2.conv, fmt.Sprintf("%s project %s", q4, e2Word), "conversation")
			// Segmentation in E1 and F takes the pending reviews: review
			// jobs run, the review log quotes the queries.
			e1.session(day3, [][2]string{
				{"user", "Back again: the weather turned cold."}, {"assistant", "Wrap up warm then."},
				{"user", "I bought a new coat yesterday."}, {"assistant", "A good coat makes winter easier."},
				{"user", "It is a green one."},
			})
			f.session(day1, [][2]string{
				{"user", "The bank opens at nine tomorrow."}, {"assistant", "Nine it is."},
				{"user", "I need to bring my passport."}, {"assistant", "And a proof of address."},
				{"user", "Got it, thanks."},
			})
			f.session(day3, [][2]string{
				{"user", "The bank visit went well."}, {"assistant", "Glad to hear it."},
				{"user", "The account is open now."}, {"assistant", "Congratulations on the account."},
				{"user", "Thanks a lot."},
			})
			// G: the cross-conversation query path. A query typed in G
			// (erased whole below) returns only F's memory, which holds no
			// marker; G's segmentation reviews it with that query.
			qg := mark()
			// (after F's own sessions: a review older than F's last one is stale)
			g.say(day4.Add(time.Hour-time.Minute).Format(time.RFC3339), "user", "A question about the bank.")
			var fMemory uuid.UUID
			require.NoError(t, e1.db.Pool.QueryRow(ctx, `SELECT id FROM mneme.memories WHERE conversation_id = $1 AND content LIKE '%banana%'`, f.conv).Scan(&fMemory))
			var gGot uuid.UUID
			require.NoError(t, e1.db.Pool.QueryRow(ctx, `SELECT memory_id FROM mneme.retrieve($1, $2, 1, scope => 'tenant')`, g.conv,
				fmt.Sprintf("%s my codeword for the bank is plainly banana", qg)).Scan(&gGot))
			require.Equal(t, fMemory, gGot, "G's query returned F's memory only")
			g.session(day4.Add(time.Hour), [][2]string{
				{"user", "The bank codeword is banana, plainly."}, {"assistant", "Banana it is."},
				{"user", "Plainly banana for the bank."}, {"assistant", "Noted, banana."},
				{"user", "The codeword banana works at the bank."},
			})
			exec(`SELECT mneme.segment_now($1)`, g.conv)
			e1.session(day4, [][2]string{{"user", "Another day, another walk."}})
			f.session(day4, [][2]string{{"user", "Another day at the bank."}})
			e1.drain()
			require.Positive(t, e1.count(`SELECT count(*) FROM mneme.review_log l WHERE array_to_string(`+reviewQueries+`, ' ') LIKE '%' || $1 || '%'`, q3),
				"a review in F quotes the tenant-scope query")
			require.Positive(t, e1.count(`SELECT count(*) FROM mneme.review_log l WHERE memory_id = $1 AND array_to_string(`+reviewQueries+`, ' ') LIKE '%' || $2 || '%'`,
				fMemory, qg), "F's memory was reviewed with G's query")
			// Pending again: a tenant-scope retrieval and a context, and a
			// review job not run yet.
			retrieve(f.conv, fmt.Sprintf("%s my codeword %s", q5, code), "tenant")
			q6 := mark()
			exec(`SELECT mneme.context($1, $2, 300, scope => 'tenant')`, f.conv, fmt.Sprintf("%s my dog %s", q6, pet))
			q7 := mark()
			retrieve(e1.conv, fmt.Sprintf("%s the town %s", q7, town), "conversation")
			exec(`SELECT mneme.enqueue_job('review', $1, jsonb_build_object('reviews', (SELECT pending_reviews FROM mneme.message_queue WHERE id = $1),
				'reviewed_at', now(), 'context', '[]'::jsonb), NULL, now() + interval '1 day')`, f.conv)
			// A forget whose reason quotes a marker.
			var codeID uuid.UUID
			require.NoError(t, e1.db.Pool.QueryRow(ctx, `SELECT id FROM mneme.memories WHERE conversation_id = $1 AND status = 'active' AND content LIKE '%' || $2 || '%'`,
				e1.conv, code).Scan(&codeID))
			exec(`SELECT mneme.forget($1, $2)`, codeID, fmt.Sprintf("the user regrets saying %s", code))

			before := markerHits(t, e1.db, markers)
			// (a review row's queries are rows of review_queries, goose 00310)
			for _, tbl := range []string{"memories", "messages", "jobs", "memory_events", "review_queries", "message_queue"} {
				require.True(t, strings.Contains(strings.Join(before, "\n"), tbl+": "), "before erase a marker is in %s (the scan finds it)", tbl)
			}
			fReviews := e1.count(`SELECT count(*) FROM mneme.review_log WHERE memory_id = $1`, fMemory)
			require.Positive(t, fReviews)

			// Erase every memory of E1 that holds a marker (not the merged
			// duplicate: erase takes it along), and E2 whole, in a random
			// order.
			rows, err := e1.db.Pool.Query(ctx, `SELECT id FROM mneme.memories WHERE conversation_id = $1 AND status <> 'merged'
				AND lower(content) ~ $2 ORDER BY id`, e1.conv, strings.Join(markers, "|"))
			require.NoError(t, err)
			toErase, err := pgx.CollectRows(rows, pgx.RowTo[uuid.UUID])
			require.NoError(t, err)
			require.GreaterOrEqual(t, len(toErase), 5)
			steps := make([]func(), 0, len(toErase)+1)
			for _, id := range toErase {
				steps = append(steps, func() {
					_, err := e1.db.Pool.Exec(ctx, `SELECT mneme.erase($1, 'user request')`, id)
					if err != nil && sqlState(t, err) == "P0002" { // taken along by an earlier erase (an extracted fact)
						return
					}
					require.NoError(t, err)
				})
			}
			steps = append(steps, func() { exec(`SELECT mneme.erase_conversation($1, 'account closed')`, e2.conv) })
			steps = append(steps, func() { exec(`SELECT mneme.erase_conversation($1, 'account closed')`, g.conv) })
			var e3Fact uuid.UUID
			require.NoError(t, e1.db.Pool.QueryRow(ctx, `SELECT id FROM mneme.memories WHERE conversation_id = $1 AND source_type = 'extracted'
				AND content LIKE '%' || $2 || '%'`, e3.conv, village).Scan(&e3Fact))
			require.Positive(t, e1.count(`SELECT count(*) FROM mneme.memories WHERE conversation_id = $1 AND kind = 'episodic' AND content LIKE '%' || $2 || '%'`,
				e3.conv, village), "E3's episode holds the fact's marker")
			steps = append(steps, func() { exec(`SELECT mneme.erase($1, 'user request')`, e3Fact) })
			rng.Shuffle(len(steps), func(i, j int) { steps[i], steps[j] = steps[j], steps[i] })
			for _, s := range steps {
				s()
			}
			require.Empty(t, markerHits(t, e1.db, markers), "no table holds a marker after erase")
			bm25Equal(t, e1.db)

			// What held no marker stays: F's memory and its reviews, E1's
			// later episode; the jobs still run.
			require.Equal(t, fReviews, e1.count(`SELECT count(*) FROM mneme.review_log WHERE memory_id = $1`, fMemory))
			require.Positive(t, e1.count(`SELECT count(*) FROM mneme.memories WHERE conversation_id = $1 AND content LIKE '%green one%'`, e1.conv))
			exec(`UPDATE mneme.jobs SET run_at = now() WHERE state = 'pending'`)
			e1.drain()
			require.Zero(t, e1.count(`SELECT count(*) FROM mneme.jobs WHERE state = 'failed'`))
			require.Empty(t, markerHits(t, e1.db, markers), "the jobs that ran after erase wrote no marker back")
		})
	}
}
