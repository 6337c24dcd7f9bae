package tests

import (
	"context"
	"fmt"
	"math"
	mrand "math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/mneme-memory/mneme/sidecar/dbtest"
)

type rankedHit struct {
	id    uuid.UUID
	score float64
	rank  int
}

func rankedHits(t *testing.T, rows pgx.Rows, err error) []rankedHit {
	t.Helper()
	require.NoError(t, err)
	hits, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (rankedHit, error) {
		var h rankedHit
		return h, r.Scan(&h.id, &h.score, &h.rank)
	})
	require.NoError(t, err)
	return hits
}

// sameTopK says whether two top-k lists agree: the same scores, position
// by position (to 1e-9), and the same memories except among those tied at
// the k-th score, where either list may hold any of them.
func sameTopK(a, b []rankedHit) error {
	if len(a) != len(b) {
		return fmt.Errorf("%d results against %d", len(a), len(b))
	}
	if len(a) == 0 {
		return nil
	}
	last := a[len(a)-1].score
	ids := map[uuid.UUID]bool{}
	for i := range a {
		if math.Abs(a[i].score-b[i].score) > 1e-9 {
			return fmt.Errorf("result %d scores %.12f against %.12f", i+1, a[i].score, b[i].score)
		}
		if a[i].score > last+1e-9 {
			ids[a[i].id] = true
		}
	}
	for i := range b {
		if b[i].score > last+1e-9 && !ids[b[i].id] {
			return fmt.Errorf("%s (score %.12f) is in one top k only", b[i].id, b[i].score)
		}
	}
	return nil
}

// The BM25 leg's top k with skipping (MaxScore) is the top k of scoring
// every posting: on random conversations where two words (the speakers'
// names) are each in most memories, with repeated words, expired memories and time
// ranges, for random queries and k, the skipping path returns exactly what
// the exhaustive path returns (memories, scores, ranks), both agree with
// BM25 computed here from the postings by a query of its own, and the
// skipping path reads far fewer postings, also for queries that name both
// speakers (both their terms set aside).
func TestBM25TopKSkipsAndIsExact(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := dbtest.New(t, dbtest.WithVector("array"))
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	r := mrand.New(mrand.NewPCG(seed, 1))

	vocab := make([]string, 300)
	for i := range vocab {
		vocab[i] = fmt.Sprintf("w%dx", i)
	}
	word := func() string { return vocab[int(float64(len(vocab))*math.Pow(r.Float64(), 2.5))] }
	conv := uuid.New()
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	var texts []string
	var created []time.Time
	var until []*time.Time
	for i := 0; i < 3000; i++ {
		var w []string
		if r.Float64() < 0.9 {
			for n := 1 + r.IntN(2); n > 0; n-- {
				w = append(w, "caroline")
			}
		}
		if r.Float64() < 0.8 {
			w = append(w, "melanie")
		}
		for n := 3 + r.IntN(40); n > 0; n-- {
			w = append(w, word())
		}
		texts = append(texts, strings.Join(w, " "))
		created = append(created, start.Add(time.Duration(r.IntN(30*24))*time.Hour))
		var u *time.Time
		if r.Float64() < 0.05 {
			past := time.Now().Add(-time.Hour)
			u = &past
		}
		until = append(until, u)
	}
	_, err := db.Pool.Exec(ctx, `INSERT INTO mneme.memories (conversation_id, content, created_at, last_reviewed_at, valid_until)
		SELECT $1, c, t, t, u FROM unnest($2::text[], $3::timestamptz[], $4::timestamptz[]) AS x(c, t, u)`,
		conv, texts, created, until)
	require.NoError(t, err)
	_, err = db.Pool.Exec(ctx, `ANALYZE mneme.memories, mneme.bm25_docs, mneme.bm25_postings, mneme.bm25_terms`)
	require.NoError(t, err)

	// One connection: its statistics counters are its own.
	conn, err := db.Pool.Acquire(ctx)
	require.NoError(t, err)
	defer conn.Release()
	setSkip := func(min int) {
		_, err := conn.Exec(ctx, `UPDATE mneme.settings SET value = to_jsonb($1::int) WHERE key = 'bm25_skip_min_postings'`, min)
		require.NoError(t, err)
	}
	const call = `SELECT memory_id, score, rank FROM mneme._bm25_search(ARRAY[$1::uuid], $2, $3, $4, $5)`
	// internal runs a call of the internal function. On Citus it runs as
	// mneme's owner on the workers, whose row security shows the rows of
	// the tenant an API call forwards (mneme._enter): entered as the API
	// is, in a transaction.
	internal := func(sql string, args ...any) []rankedHit {
		t.Helper()
		if !dbtest.OnCitus() {
			rows, err := conn.Query(ctx, sql, args...)
			return rankedHits(t, rows, err)
		}
		tx, err := conn.Begin(ctx)
		require.NoError(t, err)
		defer tx.Rollback(ctx) //nolint:errcheck
		_, err = tx.Exec(ctx, `SELECT mneme._enter(NULL)`)
		require.NoError(t, err)
		rows, err := tx.Query(ctx, sql, args...)
		return rankedHits(t, rows, err)
	}
	// BM25 from the postings of the live (unexpired) memories, by a query
	// of its own: it shares with _bm25_search the tokeniser and the
	// postings, not the statistics (N, df, lengths are counted here) nor the
	// scoring.
	const reference = `
		WITH live AS MATERIALIZED (
			SELECT d.memory_id, d.doclen, m.created_at FROM mneme.bm25_docs d
			JOIN mneme.memories m ON m.conversation_id = d.conversation_id AND m.id = d.memory_id
			WHERE d.conversation_id = $1 AND (m.valid_until IS NULL OR m.valid_until > now())
		), st AS (SELECT count(*)::float8 AS n, avg(doclen)::float8 AS avgdl FROM live
		), q AS (SELECT DISTINCT unnest(tsvector_to_array(to_tsvector('english', $2))) AS term
		), df AS (
			SELECT q.term, count(*)::float8 AS df FROM q
			JOIN mneme.bm25_postings p ON p.conversation_id = $1 AND p.term = q.term JOIN live l ON l.memory_id = p.memory_id
			GROUP BY q.term
		), s AS (
			SELECT p.memory_id, sum(ln(1 + (st.n - df.df + 0.5) / (df.df + 0.5)) * 2.2 * p.tf
			                       / (p.tf + 1.2 * (1 - 0.75 + 0.75 * l.doclen / st.avgdl))) AS score
			FROM st, df JOIN mneme.bm25_postings p ON p.conversation_id = $1 AND p.term = df.term
			JOIN live l ON l.memory_id = p.memory_id
			WHERE ($4::timestamptz IS NULL OR l.created_at >= $4) AND ($5::timestamptz IS NULL OR l.created_at < $5)
			GROUP BY p.memory_id
		)
		SELECT memory_id, score, (rank() OVER (ORDER BY round(score * 1e9) / 1e9 DESC))::int FROM s
		ORDER BY round(score * 1e9) / 1e9 DESC, memory_id LIMIT $3`

	postingsRead := func() int64 {
		// A backend's counters reach the statistics views when its
		// transaction ends; forced, at once.
		_, err := conn.Exec(ctx, `SELECT pg_stat_force_next_flush()`)
		require.NoError(t, err)
		var n int64
		require.NoError(t, conn.QueryRow(ctx, `SELECT idx_tup_read FROM pg_stat_user_indexes
			WHERE schemaname = 'mneme' AND indexrelname = 'bm25_postings_pkey'`).Scan(&n))
		return n
	}
	type query struct {
		text         string
		k            int
		since, until *time.Time
	}
	var queries []query
	for i := 0; i < 100; i++ {
		var w []string
		if r.Float64() < 0.85 {
			w = append(w, "Caroline")
			if r.Float64() < 0.4 {
				w = append(w, "Melanie")
			}
		}
		for n := 1 + r.IntN(3); n > 0; n-- {
			w = append(w, vocab[r.IntN(len(vocab))])
		}
		q := query{text: "what did " + strings.Join(w, " ") + " say", k: []int{1, 3, 10, 50, 100}[r.IntN(5)]}
		if r.Float64() < 0.25 {
			a := start.Add(time.Duration(r.IntN(15*24)) * time.Hour)
			b := a.Add(time.Duration(1+r.IntN(15*24)) * time.Hour)
			q.since, q.until = &a, &b
			if r.Float64() < 0.5 {
				q.until = nil
			}
		}
		queries = append(queries, q)
	}

	// Postings read by the queries that name the speaker (whose postings
	// are most of the conversation's) and ask for at most 10 (more than
	// hold their other words, and the rest of the top k must be chosen
	// among the speaker's postings, all of them): scoring every posting,
	// skipping.
	var readSkip, readAll, readSkipBoth, readAllBoth int64
	found := 0
	for _, q := range queries {
		named := strings.Contains(q.text, "Caroline") && q.k <= 10
		both := named && strings.Contains(q.text, "Melanie")
		setSkip(1 << 30)
		before := postingsRead()
		all := internal(call, conv, q.text, q.k, q.since, q.until)
		if named {
			readAll += postingsRead() - before
		}
		if both {
			readAllBoth += postingsRead() - before
		}

		setSkip(0)
		before = postingsRead()
		skip := internal(call, conv, q.text, q.k, q.since, q.until)
		if named {
			readSkip += postingsRead() - before
		}
		if both {
			readSkipBoth += postingsRead() - before
		}

		rows, err := conn.Query(ctx, reference, pgx.QueryExecModeExec, conv, q.text, q.k, q.since, q.until)
		ref := rankedHits(t, rows, err)

		// The two paths of _bm25_search: the very same list.
		require.Equal(t, all, skip, "query %q, k %d, since %v, until %v", q.text, q.k, q.since, q.until)
		require.NoError(t, sameTopK(ref, skip), "query %q, k %d, since %v, until %v", q.text, q.k, q.since, q.until)
		if len(skip) > 0 {
			found++
		}
	}
	// Not vacuous: most queries find something (a query of rare words over
	// a short time range may rightly find nothing).
	require.Greater(t, found, len(queries)*9/10, "queries that found something")
	t.Logf("postings read by the queries naming the speaker, k at most 10: %d scoring every posting, %d skipping", readAll, readSkip)
	t.Logf("of those, by the queries naming both speakers: %d scoring every posting, %d skipping", readAllBoth, readSkipBoth)
	if dbtest.OnCitus() {
		// The postings are read on the workers; the coordinator's counters
		// do not see them.
		t.Log("on Citus: the postings read are not counted (the coordinator's statistics do not see the workers' reads)")
	} else {
		require.Less(t, readSkip, readAll/3, "skipping read %d postings, scoring every posting %d", readSkip, readAll)
		require.Less(t, readSkipBoth, readAllBoth/3, "naming both speakers: skipping read %d postings, scoring every posting %d",
			readSkipBoth, readAllBoth)
	}

	// The bounds follow the memories: texts rewritten with more of a word
	// (a larger tf, a shorter memory: each raises what a posting can add),
	// memories deleted and made inactive; the paths still agree.
	for _, q := range []string{
		`UPDATE mneme.memories SET content = 'caroline caroline caroline ' || split_part(content, ' ', 3)
		  WHERE conversation_id = $1 AND id IN (SELECT id FROM mneme.memories WHERE conversation_id = $1 ORDER BY id LIMIT 40)`,
		`UPDATE mneme.memories SET content = repeat(coalesce(nullif(split_part(content, ' ', 4), ''), 'w1x') || ' ', 6)
		  WHERE conversation_id = $1 AND id IN (SELECT id FROM mneme.memories WHERE conversation_id = $1 ORDER BY id DESC LIMIT 40)`,
		`DELETE FROM mneme.memories WHERE conversation_id = $1 AND id IN (SELECT id FROM mneme.memories WHERE conversation_id = $1 ORDER BY id OFFSET 100 LIMIT 300)`,
		`UPDATE mneme.memories SET status = 'inactive' WHERE conversation_id = $1 AND id IN (SELECT id FROM mneme.memories WHERE conversation_id = $1 ORDER BY id OFFSET 500 LIMIT 200)`,
	} {
		_, err := conn.Exec(ctx, q, conv)
		require.NoError(t, err, q)
	}
	// Over several conversations at once (a tenant's search): a second
	// conversation of the same kind of text, the statistics and bounds of
	// both together.
	conv2 := uuid.New()
	_, err = conn.Exec(ctx, `INSERT INTO mneme.memories (conversation_id, content, created_at, last_reviewed_at)
		SELECT $1, c, t, t FROM unnest($2::text[], $3::timestamptz[]) AS x(c, t)`, conv2, texts[:1500], created[:1500])
	require.NoError(t, err)
	const callBoth = `SELECT memory_id, score, rank FROM mneme._bm25_search(ARRAY[$1::uuid, $2::uuid], $3, $4, $5, $6)`
	for _, q := range queries[:40] {
		setSkip(1 << 30)
		all := internal(callBoth, conv, conv2, q.text, q.k, q.since, q.until)
		setSkip(0)
		skip := internal(callBoth, conv, conv2, q.text, q.k, q.since, q.until)
		require.Equal(t, all, skip, "two conversations, query %q, k %d", q.text, q.k)
	}

	// What the skipping rests on: every term's bounds hold for each of its
	// postings.
	var broken int
	require.NoError(t, conn.QueryRow(ctx, `SELECT count(*) FROM mneme.bm25_terms t
		JOIN (SELECT conversation_id, term, max(tf) AS tf, min(doclen::float8 / tf) AS len_per_tf
		      FROM mneme.bm25_postings GROUP BY 1, 2) p USING (conversation_id, term)
		WHERE t.max_tf < p.tf OR t.min_len_per_tf > p.len_per_tf`).Scan(&broken))
	require.Zero(t, broken, "terms whose bounds a posting exceeds")
	for _, q := range queries[:40] {
		setSkip(1 << 30)
		all := internal(call, conv, q.text, q.k, q.since, q.until)
		setSkip(0)
		skip := internal(call, conv, q.text, q.k, q.since, q.until)
		rows, err := conn.Query(ctx, reference, pgx.QueryExecModeExec, conv, q.text, q.k, q.since, q.until)
		ref := rankedHits(t, rows, err)
		require.Equal(t, all, skip, "after the rewrites, query %q, k %d", q.text, q.k)
		require.NoError(t, sameTopK(ref, skip), "after the rewrites, query %q, k %d", q.text, q.k)
	}
}
