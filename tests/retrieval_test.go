package tests

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	fsrs "github.com/open-spaced-repetition/go-fsrs/v3"
	"github.com/stretchr/testify/require"

	"github.com/mneme-memory/mneme/sidecar/dbtest"
)

// ---------------------------------------------------------------------------
// BM25 against a Go reference implementation
// ---------------------------------------------------------------------------

var bm25Vocab = strings.Fields(`alice bob carol dave tea coffee jasmine green morning meeting monday
	project deadline rust lifetimes borrow checker compile travel lisbon paris flight hotel booking
	birthday cake party gift doctor appointment running marathon training garden tomatoes basil
	guitar lessons piano concert movie ticket budget invoice salary bank the a of and to in is`)

func randomText(r *rand.Rand, words int) string {
	w := make([]string, words)
	for i := range w {
		// Zipf-ish: earlier words are more frequent.
		w[i] = bm25Vocab[int(float64(len(bm25Vocab))*math.Pow(r.Float64(), 2))]
	}
	return strings.Join(w, " ")
}

type bm25Hit struct {
	ID    string
	Score float64
}

// bm25Reference scores the conversation's active, unexpired memories for
// query with Okapi BM25, from term frequencies read straight from the
// memories (PostgreSQL tokenises; everything else is computed here).
func bm25Reference(t *testing.T, pool *pgxpool.Pool, conv uuid.UUID, query string) []bm25Hit {
	t.Helper()
	ctx := context.Background()
	const k1, b = 1.2, 0.75
	rows, err := pool.Query(ctx, `
		SELECT m.id::text, u.lexeme, cardinality(u.positions)
		FROM mneme.memories m
		LEFT JOIN LATERAL unnest(mneme.bm25_tsvector(mneme.memory_text(m.title, m.summary, m.content))) u ON true
		WHERE m.conversation_id = $1 AND m.status = 'active' AND (m.valid_until IS NULL OR m.valid_until > now())`, conv)
	require.NoError(t, err)
	tf := map[string]map[string]int{}
	for rows.Next() {
		var id string
		var lex *string
		var n *int
		require.NoError(t, rows.Scan(&id, &lex, &n))
		if tf[id] == nil {
			tf[id] = map[string]int{}
		}
		if lex != nil {
			tf[id][*lex] = *n
		}
	}
	require.NoError(t, rows.Err())
	var qterms []string
	require.NoError(t, pool.QueryRow(ctx, `SELECT coalesce(array_agg(DISTINCT lexeme), '{}') FROM unnest(mneme.bm25_tsvector($1))`, query).Scan(&qterms))

	n := float64(len(tf))
	var total float64
	dl := map[string]float64{}
	df := map[string]float64{}
	for id, terms := range tf {
		for term, c := range terms {
			dl[id] += float64(c)
			df[term]++
		}
		total += dl[id]
	}
	if n == 0 || total == 0 {
		return nil
	}
	avgdl := total / n
	var hits []bm25Hit
	for id, terms := range tf {
		var s float64
		matched := false
		for _, q := range qterms {
			c, ok := terms[q]
			if !ok {
				continue
			}
			matched = true
			idf := math.Log(1 + (n-df[q]+0.5)/(df[q]+0.5))
			f := float64(c)
			s += idf * f * (k1 + 1) / (f + k1*(1-b+b*dl[id]/avgdl))
		}
		if matched {
			hits = append(hits, bm25Hit{id, s})
		}
	}
	sort.Slice(hits, func(i, j int) bool {
		if hits[i].Score != hits[j].Score {
			return hits[i].Score > hits[j].Score
		}
		return hits[i].ID < hits[j].ID
	})
	return hits
}

func bm25SQL(t *testing.T, pool *pgxpool.Pool, conv uuid.UUID, query string) []bm25Hit {
	t.Helper()
	rows, err := pool.Query(context.Background(),
		`SELECT memory_id::text, score FROM mneme.bm25_search($1, $2, 100000) ORDER BY rank`, conv, query)
	require.NoError(t, err)
	hits, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (bm25Hit, error) {
		var h bm25Hit
		return h, r.Scan(&h.ID, &h.Score)
	})
	require.NoError(t, err)
	return hits
}

func requireSameBM25(t *testing.T, pool *pgxpool.Pool, conv uuid.UUID, queries []string, stage string) {
	t.Helper()
	hasHits := 0
	defer func() { require.Greater(t, hasHits, len(queries)/2, "%s: most queries should match", stage) }()
	for _, q := range queries {
		want := bm25Reference(t, pool, conv, q)
		got := bm25SQL(t, pool, conv, q)
		require.Equal(t, len(want), len(got), "%s: query %q: number of hits", stage, q)
		// Scores within 1e-6, and the same order. Documents with the same
		// score in exact arithmetic may differ in the last bits (summation
		// order), so the order is compared between groups of scores equal
		// to 1e-9, and the ids within a group as sets.
		for i := 0; i < len(want); {
			j := i + 1
			for j < len(want) && want[j-1].Score-want[j].Score <= 1e-9 {
				j++
			}
			var w, g []string
			for x := i; x < j; x++ {
				require.InDelta(t, want[x].Score, got[x].Score, 1e-6, "%s: query %q hit %d", stage, q, x)
				w = append(w, want[x].ID)
				g = append(g, got[x].ID)
			}
			require.ElementsMatch(t, w, g, "%s: query %q hits %d..%d", stage, q, i, j-1)
			i = j
		}
		if len(want) > 0 {
			hasHits++
		}
	}
}

func TestBM25MatchesGoReference(t *testing.T) {
	t.Parallel()
	db := dbtest.New(t, dbtest.WithVector("array"))
	ctx := context.Background()
	r := rand.New(rand.NewPCG(7, 7))
	convA, convB := uuid.New(), uuid.New()
	queries := []string{"tea", "green tea morning", "rust borrow checker", "the party", "lisbon flight hotel booking",
		"Running a marathon", "nothing-matches-this", "alice bob carol dave"}

	insert := func(conv uuid.UUID, n int) []uuid.UUID {
		var ids []uuid.UUID
		for i := 0; i < n; i++ {
			var id uuid.UUID
			var title *string
			if r.IntN(3) == 0 {
				s := randomText(r, 2)
				title = &s
			}
			require.NoError(t, db.Pool.QueryRow(ctx, `INSERT INTO mneme.memories (conversation_id, title, summary, content)
				VALUES ($1, $2, $3, $4) RETURNING id`, conv, title, randomText(r, 3+r.IntN(5)), randomText(r, 5+r.IntN(40))).Scan(&id))
			ids = append(ids, id)
		}
		return ids
	}
	idsA := insert(convA, 120)
	idsB := insert(convB, 60)
	// A bulk insert in one statement too.
	_, err := db.Pool.Exec(ctx, `INSERT INTO mneme.memories (conversation_id, content)
		SELECT $1, $2 || ' ' || g FROM generate_series(1, 30) g`, convA, randomText(r, 12))
	require.NoError(t, err)
	requireSameBM25(t, db.Pool, convA, queries, "after inserts")
	requireSameBM25(t, db.Pool, convB, queries, "after inserts")

	exec := func(sql string, args ...any) {
		t.Helper()
		_, err := db.Pool.Exec(ctx, sql, args...)
		require.NoError(t, err)
	}
	// Updates of text, of FSRS state only, status changes, deletes, expiry,
	// a move between conversations, and a multi-row update.
	for i := 0; i < 20; i++ {
		exec(`UPDATE mneme.memories SET content = $2 WHERE id = $1`, idsA[i], randomText(r, 4+r.IntN(30)))
	}
	exec(`UPDATE mneme.memories SET stability = stability * 2, last_reviewed_at = now() WHERE id = ANY($1)`, idsA[20:40])
	exec(`UPDATE mneme.memories SET status = 'inactive' WHERE id = ANY($1)`, idsA[40:50])
	exec(`UPDATE mneme.memories SET status = 'invalidated', status_reason = 'test' WHERE id = ANY($1)`, idsA[50:55])
	exec(`UPDATE mneme.memories SET status = 'active' WHERE id = ANY($1)`, idsA[40:45]) // back again
	exec(`DELETE FROM mneme.memories WHERE id = ANY($1)`, idsA[55:65])
	exec(`UPDATE mneme.memories SET valid_until = now() - interval '1 second' WHERE id = ANY($1)`, idsA[65:75])
	exec(`UPDATE mneme.memories SET valid_until = now() + interval '1 day' WHERE id = ANY($1)`, idsA[75:80])
	if !dbtest.OnCitus() { // Citus refuses to change a row's distribution column
		exec(`UPDATE mneme.memories SET conversation_id = $2 WHERE id = ANY($1)`, idsA[80:90], convB)
	}
	exec(`UPDATE mneme.memories SET summary = content, title = NULL WHERE id = ANY($1)`, idsB[:10])
	exec(`DELETE FROM mneme.memories WHERE id = ANY($1)`, idsB[10:20])
	requireSameBM25(t, db.Pool, convA, queries, "after updates and deletes")
	requireSameBM25(t, db.Pool, convB, queries, "after updates and deletes")

	// The incrementally kept statistics equal a rebuild from scratch.
	snapshot := func() string {
		var s string
		require.NoError(t, db.Pool.QueryRow(ctx, `SELECT md5(string_agg(x, ',' ORDER BY x)) FROM (
			SELECT format('t %s %s %s', conversation_id, term, df) x FROM mneme.bm25_terms
			UNION ALL SELECT format('s %s %s %s', conversation_id, n, total_len) FROM mneme.bm25_stats
			UNION ALL SELECT format('d %s %s', memory_id, doclen) FROM mneme.bm25_docs
			UNION ALL SELECT format('p %s %s %s %s', memory_id, term, tf, doclen) FROM mneme.bm25_postings) q`).Scan(&s))
		return s
	}
	before := snapshot()
	exec(`SELECT mneme.bm25_reindex()`)
	require.Equal(t, before, snapshot(), "incremental statistics differ from a rebuild")

	// Deleting everything leaves no statistics behind.
	exec(`DELETE FROM mneme.memories`)
	var left int
	require.NoError(t, db.Pool.QueryRow(ctx, `SELECT (SELECT count(*) FROM mneme.bm25_terms) + (SELECT count(*) FROM mneme.bm25_stats)
		+ (SELECT count(*) FROM mneme.bm25_postings) + (SELECT count(*) FROM mneme.bm25_docs)`).Scan(&left))
	require.Zero(t, left)
}

// ---------------------------------------------------------------------------
// Forgetting curve
// ---------------------------------------------------------------------------

func TestRetrievabilityMatchesGoFSRS(t *testing.T) {
	t.Parallel()
	db := dbtest.New(t, dbtest.WithVector("array"))
	ctx := context.Background()
	f := fsrs.NewFSRS(fsrs.DefaultParam())
	now := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
	stabilities := []float64{0.1, 0.5, 1, 2.3065, 3.173, 10, 42.5, 100, 365, 1000, 10000, 36500}
	elapsed := []time.Duration{0, time.Second, time.Minute, time.Hour, 6 * time.Hour, 24 * time.Hour,
		36*time.Hour + 17*time.Minute, 7 * 24 * time.Hour, 30 * 24 * time.Hour, 365 * 24 * time.Hour,
		10 * 365 * 24 * time.Hour, 100 * 365 * 24 * time.Hour}
	batch := &pgx.Batch{}
	var want []float64
	for _, s := range stabilities {
		for _, e := range elapsed {
			last := now.Add(-e)
			card := fsrs.Card{State: fsrs.Review, Stability: s, LastReview: last}
			want = append(want, f.GetRetrievability(card, now))
			batch.Queue(`SELECT mneme.retrievability($1, $2, $3)`, s, last, now)
		}
	}
	res := db.Pool.SendBatch(ctx, batch)
	defer res.Close()
	for i, w := range want {
		var got float64
		require.NoError(t, res.QueryRow().Scan(&got))
		require.InDelta(t, w, got, 1e-9, "grid point %d (stability %v, elapsed %v)", i,
			stabilities[i/len(elapsed)], elapsed[i%len(elapsed)])
	}
	require.NoError(t, res.Close())

	// Default at = now(), a future review counts as elapsed 0, bad input.
	var r float64
	require.NoError(t, db.Pool.QueryRow(ctx, `SELECT mneme.retrievability(5, now() + interval '1 day')`).Scan(&r))
	require.Equal(t, 1.0, r)
	_, err := db.Pool.Exec(ctx, `SELECT mneme.retrievability(0, now())`)
	require.Equal(t, "22023", sqlState(t, err))
	_, err = db.Pool.Exec(ctx, `SELECT mneme.retrievability(NULL, now())`)
	require.Equal(t, "22004", sqlState(t, err))
}

// ---------------------------------------------------------------------------
// retrieve, search, retrieve_markdown
// ---------------------------------------------------------------------------

type hit struct {
	ID             uuid.UUID
	Score, RRF     float64
	BM25Rank       *int
	VectorRank     *int
	Retrievability float64
	Label          string
}

func search(t *testing.T, q interface {
	Query(context.Context, string, ...any) (pgx.Rows, error)
}, fn string, conv uuid.UUID, query string, k int, extra ...any) []hit {
	t.Helper()
	args := []any{conv, query, k}
	sql := fmt.Sprintf(`SELECT memory_id, score, rrf, bm25_rank, vector_rank, retrievability, label FROM mneme.%s($1, $2, $3`, fn)
	for i, e := range extra {
		args = append(args, e)
		sql += fmt.Sprintf(", $%d", i+4)
	}
	rows, err := q.Query(context.Background(), sql+")", args...)
	require.NoError(t, err)
	hits, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (hit, error) {
		var h hit
		return h, r.Scan(&h.ID, &h.Score, &h.RRF, &h.BM25Rank, &h.VectorRank, &h.Retrievability, &h.Label)
	})
	require.NoError(t, err)
	return hits
}

func ids(hits []hit) []uuid.UUID {
	out := make([]uuid.UUID, len(hits))
	for i, h := range hits {
		out[i] = h.ID
	}
	return out
}

func addMemory(t *testing.T, db *dbtest.DB, conv uuid.UUID, content string, cols map[string]any) uuid.UUID {
	t.Helper()
	names := []string{"conversation_id", "content"}
	vals := []any{conv, content}
	for k, v := range cols {
		names = append(names, k)
		vals = append(vals, v)
	}
	ph := make([]string, len(vals))
	for i := range ph {
		ph[i] = fmt.Sprintf("$%d", i+1)
	}
	var id uuid.UUID
	require.NoError(t, db.Pool.QueryRow(context.Background(), fmt.Sprintf(`INSERT INTO mneme.memories (%s) VALUES (%s) RETURNING id`,
		strings.Join(names, ", "), strings.Join(ph, ", ")), vals...).Scan(&id))
	return id
}

func TestRetrieveRanking(t *testing.T) {
	t.Parallel()
	for _, variant := range variants(t) {
		t.Run(variant, func(t *testing.T) {
			db := dbtest.New(t, dbtest.WithVector(variant))
			ctx := context.Background()
			conv := uuid.New()
			r := rand.New(rand.NewPCG(3, 4))
			for i := 0; i < 40; i++ {
				addMemory(t, db, conv, randomText(r, 10), nil)
			}
			old := time.Now().Add(-400 * 24 * time.Hour)

			// Pinned old memory beats an equally matching faded one.
			faded := addMemory(t, db, conv, "the zebra crossing on elm street", map[string]any{"last_reviewed_at": old, "stability": 2.0})
			pinned := addMemory(t, db, conv, "the zebra crossing on elm street", map[string]any{"last_reviewed_at": old, "stability": 2.0, "pinned": true})
			position := func(hits []hit, id uuid.UUID) int {
				for i, h := range hits {
					if h.ID == id {
						return i
					}
				}
				t.Fatalf("memory %s not retrieved", id)
				return -1
			}
			hits := search(t, db.Pool, "search", conv, "zebra crossing elm street", 100)
			require.Equal(t, pinned, hits[0].ID)
			require.Equal(t, 1.0, hits[0].Retrievability)
			require.Less(t, hits[position(hits, faded)].Retrievability, 0.2)
			_, err := db.Pool.Exec(ctx, `SELECT mneme.pin($1, false)`, pinned)
			require.NoError(t, err)
			_, err = db.Pool.Exec(ctx, `SELECT mneme.pin($1, true)`, faded)
			require.NoError(t, err)
			hits = search(t, db.Pool, "search", conv, "zebra crossing elm street", 100)
			require.Equal(t, faded, hits[0].ID)
			require.Greater(t, position(hits, pinned), 0)

			// Label weights order equal matches.
			labels := []string{"trivial", "temporary", "general", "project_apollo", "user_profile", "important"}
			byLabel := map[uuid.UUID]string{}
			for _, l := range labels {
				byLabel[addMemory(t, db, conv, "quokka island wildlife photo", map[string]any{"label": l})] = l
			}
			hits = search(t, db.Pool, "search", conv, "quokka island wildlife photo", 6)
			var got []string
			for _, h := range hits {
				got = append(got, byLabel[h.ID])
			}
			require.Equal(t, []string{"important", "user_profile", "project_apollo", "general", "temporary", "trivial"}, got)
			_, err = db.Pool.Exec(ctx, `SELECT mneme.set_setting('label_weights', '{"trivial": 9, "important": 0.1}')`)
			require.NoError(t, err)
			hits = search(t, db.Pool, "search", conv, "quokka island wildlife photo", 100)
			got = nil
			for _, h := range hits {
				if l, ok := byLabel[h.ID]; ok {
					got = append(got, l)
				}
			}
			require.Equal(t, "trivial", byLabel[hits[0].ID])
			// Unlisted labels weigh 1.0 (project_* falls back to "project", now unset).
			require.Len(t, got, 6)
			require.Equal(t, "trivial", got[0])
			require.Equal(t, "important", got[5])

			// Superseded, invalidated, inactive and expired memories never appear.
			gone := map[uuid.UUID]string{}
			var oldID, newID uuid.UUID
			require.NoError(t, db.Pool.QueryRow(ctx, `SELECT mneme.remember($1, 'the okapi lives in the forest')`, conv).Scan(&oldID))
			require.NoError(t, db.Pool.QueryRow(ctx, `SELECT mneme.remember($1, 'the okapi lives in the congo forest', supersedes => $2)`, conv, oldID).Scan(&newID))
			gone[oldID] = "superseded"
			id := addMemory(t, db, conv, "the okapi lives in the forest", nil)
			_, err = db.Pool.Exec(ctx, `SELECT mneme.forget($1, 'wrong')`, id)
			require.NoError(t, err)
			gone[id] = "invalidated"
			gone[addMemory(t, db, conv, "the okapi lives in the forest", map[string]any{"status": "inactive"})] = "inactive"
			gone[addMemory(t, db, conv, "the okapi lives in the forest", map[string]any{"valid_until": time.Now().Add(-time.Minute)})] = "expired"
			soon := addMemory(t, db, conv, "the okapi lives in the forest", map[string]any{"valid_until": time.Now().Add(time.Hour)})
			for _, fn := range []string{"search", "retrieve"} {
				hits = search(t, db.Pool, fn, conv, "okapi forest", 100)
				found := map[uuid.UUID]bool{}
				for _, h := range hits {
					require.NotContains(t, gone, h.ID, "%s returned a %s memory", fn, gone[h.ID])
					found[h.ID] = true
				}
				require.True(t, found[newID] && found[soon], "%s lost the active ones", fn)
			}
		})
	}
}

// 1,000 retrievals change no FSRS column and add exactly 1,000 pending reviews.
func TestRetrieveNeverChangesFSRS(t *testing.T) {
	t.Parallel()
	db := dbtest.New(t)
	ctx := context.Background()
	conv := uuid.New()
	r := rand.New(rand.NewPCG(5, 6))
	_, err := db.Pool.Exec(ctx, `INSERT INTO mneme.memories (conversation_id, content, stability, difficulty, last_reviewed_at, review_count)
		SELECT $1, t, 1 + g, 1 + g % 9, now() - g * interval '1 day', g % 4
		FROM unnest($2::text[]) WITH ORDINALITY AS u(t, g)`, conv, func() []string {
		var s []string
		for i := 0; i < 60; i++ {
			s = append(s, randomText(r, 12))
		}
		return s
	}())
	require.NoError(t, err)
	fsrsState := func() string {
		var s string
		require.NoError(t, db.Pool.QueryRow(ctx, `SELECT md5(string_agg(format('%s %s %s %s %s', id, stability, difficulty,
			last_reviewed_at, review_count), ',' ORDER BY id)) FROM mneme.memories`).Scan(&s))
		return s
	}
	before := fsrsState()
	// All 1,000 entries stay pending (TestPendingReviewsBounded covers the bound).
	_, err = db.Pool.Exec(ctx, `SELECT mneme.set_setting('pending_reviews_max', '2000')`)
	require.NoError(t, err)
	var returned int
	require.NoError(t, db.Pool.QueryRow(ctx, `SELECT count(*) FROM generate_series(1, 1000) g,
		LATERAL mneme.retrieve($1, (ARRAY['tea morning', 'rust lifetimes', 'party cake gift', 'the bank'])[1 + g % 4] || ' ' || g, 3) x`,
		conv).Scan(&returned))
	require.Equal(t, 3000, returned)
	require.Equal(t, before, fsrsState())
	var entries, withIDs int
	require.NoError(t, db.Pool.QueryRow(ctx, `SELECT jsonb_array_length(pending_reviews),
		(SELECT count(*) FROM jsonb_array_elements(pending_reviews) e WHERE jsonb_array_length(e->'memory_ids') = 3)
		FROM mneme.message_queue WHERE id = $1`, conv).Scan(&entries, &withIDs))
	require.Equal(t, 1000, entries)
	require.Equal(t, 1000, withIDs)

	// The entry holds the returned ids in rank order; search adds nothing.
	var pr []byte
	require.NoError(t, db.Pool.QueryRow(ctx, `SELECT mneme.take_pending_reviews($1)`, conv).Scan(&pr))
	hits := search(t, db.Pool, "retrieve", conv, "rust lifetimes", 4)
	var last string
	require.NoError(t, db.Pool.QueryRow(ctx, `SELECT pending_reviews->-1->>'memory_ids' FROM mneme.message_queue WHERE id = $1`, conv).Scan(&last))
	want := make([]string, len(hits))
	for i, h := range hits {
		want[i] = `"` + h.ID.String() + `"`
	}
	require.Equal(t, "["+strings.Join(want, ", ")+"]", last)
	search(t, db.Pool, "search", conv, "rust lifetimes", 4)
	require.NoError(t, db.Pool.QueryRow(ctx, `SELECT jsonb_array_length(pending_reviews) FROM mneme.message_queue WHERE id = $1`, conv).Scan(&entries))
	require.Equal(t, 1, entries, "search records nothing")
	other := uuid.New()
	require.Empty(t, search(t, db.Pool, "retrieve", other, "rust lifetimes", 4))
	var queues int
	require.NoError(t, db.Pool.QueryRow(ctx, `SELECT count(*) FROM mneme.message_queue WHERE id = $1`, other).Scan(&queues))
	require.Zero(t, queues, "an empty retrieval records nothing")
}

func TestRetrieveBadInput(t *testing.T) {
	t.Parallel()
	db := dbtest.New(t, dbtest.WithVector("array"))
	ctx := context.Background()
	conv := uuid.New()
	addMemory(t, db, conv, "something to find", nil)
	now := time.Now()
	for _, c := range []struct {
		name  string
		sql   string
		args  []any
		state string
	}{
		{"k 0", `SELECT * FROM mneme.retrieve($1, 'find', 0)`, []any{conv}, "22023"},
		{"k 101", `SELECT * FROM mneme.retrieve($1, 'find', 101)`, []any{conv}, "22023"},
		{"k NULL", `SELECT * FROM mneme.search($1, 'find', NULL)`, []any{conv}, "22004"},
		{"empty query", `SELECT * FROM mneme.retrieve($1, '  ')`, []any{conv}, "22023"},
		{"NULL query", `SELECT * FROM mneme.search($1, NULL)`, []any{conv}, "22004"},
		{"NULL conversation", `SELECT * FROM mneme.retrieve(NULL, 'find')`, nil, "22004"},
		{"wrong dimension", `SELECT * FROM mneme.retrieve($1, 'find', 5, '{1,2,3}')`, []any{conv}, "22023"},
		{"zero embedding", `SELECT * FROM mneme.search($1, 'find', 5, array_fill(0::real, ARRAY[256]))`, []any{conv}, "22023"},
		{"NaN embedding", `SELECT * FROM mneme.search($1, 'find', 5, array_fill('NaN'::real, ARRAY[256]))`, []any{conv}, "22023"},
		{"since after until", `SELECT * FROM mneme.retrieve($1, 'find', 5, NULL, $2, $3)`, []any{conv, now, now.Add(-time.Hour)}, "22023"},
		{"markdown k", `SELECT mneme.retrieve_markdown($1, 'find', 0)`, []any{conv}, "22023"},
	} {
		if c.args == nil && dbtest.OnCitus() {
			t.Logf("skipped on Citus: %s (a NULL distribution argument of a delegated call crashes the Citus 13.2.2 coordinator; docs/scale.md)", c.sql)
			continue
		}
		_, err := db.Pool.Exec(ctx, c.sql, c.args...)
		require.Equal(t, c.state, sqlState(t, err))
	}
	// Nothing was recorded by the failed calls.
	var n int
	require.NoError(t, db.Pool.QueryRow(ctx, `SELECT count(*) FROM mneme.message_queue WHERE pending_reviews IS NOT NULL`).Scan(&n))
	require.Zero(t, n)
	// An unknown conversation is an empty result, not an error.
	require.Empty(t, search(t, db.Pool, "retrieve", uuid.New(), "find", 5))
	var md string
	require.NoError(t, db.Pool.QueryRow(ctx, `SELECT mneme.retrieve_markdown($1, 'find')`, uuid.New()).Scan(&md))
	require.Contains(t, md, "(none found)")
}

func TestRetrieveEmbedderModes(t *testing.T) {
	t.Parallel()
	for _, variant := range variants(t) {
		t.Run(variant, func(t *testing.T) {
			db := dbtest.New(t, dbtest.WithVector(variant))
			ctx := context.Background()
			conv := uuid.New()
			a := addMemory(t, db, conv, "Alice is allergic to peanuts", nil)
			b := addMemory(t, db, conv, "Bob's favourite colour is teal", nil)

			// Embedder hash, no embedding: SQL embeds the query; a fuzzy
			// query ("peanut allergy") still finds it through trigrams.
			hits := search(t, db.Pool, "search", conv, "peanut allergy", 5)
			require.NotEmpty(t, hits)
			require.Equal(t, a, hits[0].ID)
			require.NotNil(t, hits[0].VectorRank)

			// An explicit embedding is used as given.
			var emb []float32
			require.NoError(t, db.Pool.QueryRow(ctx, `SELECT embedding::real[] FROM mneme.memories WHERE id = $1`, b).Scan(&emb))
			hits = search(t, db.Pool, "search", conv, "zzz unrelated words", 5, emb)
			require.Equal(t, b, hits[0].ID)
			require.Equal(t, 1, *hits[0].VectorRank)
			require.Nil(t, hits[0].BM25Rank)

			// Embedder external and no embedding: refused (22004), saying
			// what to pass, instead of quietly losing the vector leg; an
			// empty embedding asks for BM25 alone.
			_, err := db.Pool.Exec(ctx, `SELECT mneme.set_setting('embedder', '"external"')`)
			require.NoError(t, err)
			for _, fn := range []string{"retrieve", "search"} {
				_, err = db.Pool.Exec(ctx, `SELECT * FROM mneme.`+fn+`($1, 'peanuts', 5)`, conv)
				pgErr := requirePgError(t, err, "22004")
				require.Contains(t, pgErr.Message, `query_embedding must not be NULL: setting embedder is "external"`)
				require.Contains(t, pgErr.Hint, "pass the query's embedding from the external embedder")
				require.Contains(t, pgErr.Hint, "query_embedding => '{}'")
			}
			_, err = db.Pool.Exec(ctx, `SELECT mneme.context($1, 'peanuts', 100)`, conv)
			requirePgError(t, err, "22004")
			hits = search(t, db.Pool, "retrieve", conv, "peanuts", 5, []float32{})
			require.Equal(t, []uuid.UUID{a}, ids(hits))
			require.Nil(t, hits[0].VectorRank)
			require.NotNil(t, hits[0].BM25Rank)
		})
	}
}

func TestRetrieveDateRangeAndMarkdown(t *testing.T) {
	t.Parallel()
	db := dbtest.New(t, dbtest.WithVector("array"))
	ctx := context.Background()
	conv := uuid.New()
	day := func(d int) time.Time { return time.Date(2026, 3, d, 12, 0, 0, 0, time.UTC) }
	m1 := addMemory(t, db, conv, "we planned the garden in spring", map[string]any{"created_at": day(1), "last_reviewed_at": day(1)})
	m2 := addMemory(t, db, conv, "the garden tomatoes got planted", map[string]any{"created_at": day(5), "last_reviewed_at": day(5)})
	m3 := addMemory(t, db, conv, "garden basil harvest", map[string]any{"created_at": day(9), "last_reviewed_at": day(9), "title": "Basil"})
	all := ids(search(t, db.Pool, "search", conv, "garden", 10))
	require.ElementsMatch(t, []uuid.UUID{m1, m2, m3}, all)
	require.ElementsMatch(t, []uuid.UUID{m2}, ids(search(t, db.Pool, "search", conv, "garden", 10, nil, day(5), day(9))))
	require.ElementsMatch(t, []uuid.UUID{m2, m3}, ids(search(t, db.Pool, "search", conv, "garden", 10, nil, day(2), nil)))
	require.ElementsMatch(t, []uuid.UUID{m1}, ids(search(t, db.Pool, "search", conv, "garden", 10, nil, nil, day(5))))

	var md string
	require.NoError(t, db.Pool.QueryRow(ctx, `SELECT mneme.retrieve_markdown($1, 'basil garden', 2)`, conv).Scan(&md))
	require.Contains(t, md, "1. **Basil**: garden basil harvest")
	require.Contains(t, md, "2026-03-09 12:00 UTC")
	require.Contains(t, md, "keywords (BM25 #1)")
	require.Contains(t, md, "similarity (vector #")
	require.Equal(t, 2, strings.Count(md, "\n   - why:"))
	var entries int
	require.NoError(t, db.Pool.QueryRow(ctx, `SELECT jsonb_array_length(pending_reviews) FROM mneme.message_queue WHERE id = $1`, conv).Scan(&entries))
	require.Equal(t, 1, entries, "retrieve_markdown records its retrieval")
}

// Concurrent writers of one conversation (several statements per
// transaction, inserts, text updates, status changes, deletes) neither
// deadlock nor leave the BM25 statistics wrong.
func TestBM25ConcurrentWriters(t *testing.T) {
	t.Parallel()
	db := dbtest.New(t, dbtest.WithVector("array"))
	ctx := context.Background()
	conv := uuid.New()
	const workers, rounds = 6, 15
	errs := make(chan error, workers)
	for w := 0; w < workers; w++ {
		go func(w int) {
			r := rand.New(rand.NewPCG(uint64(w), 99))
			errs <- func() error {
				for i := 0; i < rounds; i++ {
					err := pgx.BeginFunc(ctx, db.Pool, func(tx pgx.Tx) error {
						var a, b uuid.UUID
						if err := tx.QueryRow(ctx, `INSERT INTO mneme.memories (conversation_id, content) VALUES ($1, $2) RETURNING id`,
							conv, randomText(r, 8)).Scan(&a); err != nil {
							return err
						}
						if err := tx.QueryRow(ctx, `INSERT INTO mneme.memories (conversation_id, content) VALUES ($1, $2) RETURNING id`,
							conv, randomText(r, 8)).Scan(&b); err != nil {
							return err
						}
						if _, err := tx.Exec(ctx, `UPDATE mneme.memories SET content = $2 WHERE id = $1`, a, randomText(r, 5)); err != nil {
							return err
						}
						switch i % 3 {
						case 0:
							_, err := tx.Exec(ctx, `DELETE FROM mneme.memories WHERE id = $1`, b)
							return err
						case 1:
							_, err := tx.Exec(ctx, `UPDATE mneme.memories SET status = 'inactive' WHERE id = $1`, b)
							return err
						}
						return nil
					})
					if err != nil {
						return fmt.Errorf("worker %d round %d: %w", w, i, err)
					}
				}
				return nil
			}()
		}(w)
	}
	for w := 0; w < workers; w++ {
		require.NoError(t, <-errs)
	}
	requireSameBM25(t, db.Pool, conv, []string{"tea", "green tea morning", "the party", "rust borrow checker"}, "after concurrent writers")
	var n int
	require.NoError(t, db.Pool.QueryRow(ctx, `SELECT n FROM mneme.bm25_stats WHERE conversation_id = $1`, conv).Scan(&n))
	require.Equal(t, workers*rounds*2-workers*rounds*2/3, n)
}

// TestSearchFamilySignatures: the search family takes one argument list,
// in one order, with one type each (docs/retrieval.md, "Why ten
// parameters"): conversation, query, k or budget, then the same optional
// arguments; search, retrieve and retrieve_markdown identical; context adds
// record at the end. Exactly one signature each (no overloads to make a
// call ambiguous).
func TestSearchFamilySignatures(t *testing.T) {
	t.Parallel()
	db := dbtest.New(t)
	rows, err := db.Pool.Query(context.Background(), `
		SELECT proname, pg_get_function_identity_arguments(oid) FROM pg_proc
		WHERE pronamespace = 'mneme'::regnamespace
		  AND proname IN ('search', 'retrieve', 'retrieve_markdown', 'context_items', 'context')`)
	require.NoError(t, err)
	defer rows.Close()
	got := map[string][]string{}
	for rows.Next() {
		var name, args string
		require.NoError(t, rows.Scan(&name, &args))
		got[name] = append(got[name], args)
	}
	require.NoError(t, rows.Err())
	common := "query_embedding real[], since timestamp with time zone, until timestamp with time zone, " +
		"at timestamp with time zone, scope text"
	search := "conversation_id uuid, query text, k integer, " + common +
		", as_of timestamp with time zone, include_history boolean"
	ctxArgs := "conversation_id uuid, query text, budget integer, " + common
	require.Equal(t, map[string][]string{
		"search": {search}, "retrieve": {search}, "retrieve_markdown": {search},
		"context_items": {ctxArgs}, "context": {ctxArgs + ", record boolean"},
	}, got)
}
