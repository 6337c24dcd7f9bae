package tests

import (
	"context"
	"math"
	"math/rand/v2"
	"sort"
	"testing"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/mneme-memory/mneme/sidecar/dbtest"
	"github.com/mneme-memory/mneme/sidecar/embed"
	"github.com/mneme-memory/mneme/sidecar/migrate"
)

// bulkMemories loads memories with precomputed embeddings in one INSERT
// (COPY into a staging table first), and in the pgvector variant rebuilds
// the HNSW index afterwards, which is far faster than inserting into it.
func bulkMemories(t *testing.T, pool *pgxpool.Pool, variant string, conv []uuid.UUID, texts []string, embs [][]float32) []uuid.UUID {
	t.Helper()
	ctx := context.Background()
	c, err := pool.Acquire(ctx)
	require.NoError(t, err)
	defer c.Release()
	ids := make([]uuid.UUID, len(texts))
	for i := range ids {
		ids[i] = uuid.New()
	}
	_, err = c.Exec(ctx, `CREATE TEMP TABLE load (id uuid, conversation_id uuid, content text, embedding real[])`)
	require.NoError(t, err)
	_, err = c.CopyFrom(ctx, pgx.Identifier{"load"}, []string{"id", "conversation_id", "content", "embedding"},
		pgx.CopyFromSlice(len(texts), func(i int) ([]any, error) { return []any{ids[i], conv[i], texts[i], embs[i]}, nil }))
	require.NoError(t, err)
	steps := []string{`DROP INDEX IF EXISTS mneme.memories_embedding_hnsw`,
		`INSERT INTO mneme.memories (id, conversation_id, content, embedding)
		 SELECT id, conversation_id, content, embedding::mneme.embedding FROM load`,
		`DROP TABLE load`}
	if variant == "pgvector" {
		steps = append(steps, `SET maintenance_work_mem = '512MB'`,
			`CREATE INDEX memories_embedding_hnsw ON mneme.memories USING hnsw (embedding vector_cosine_ops)`,
			`RESET maintenance_work_mem`)
	}
	steps = append(steps, `ANALYZE mneme.memories`)
	for _, s := range steps {
		_, err = c.Exec(ctx, s)
		require.NoError(t, err, s)
	}
	return ids
}

type scored struct {
	id uuid.UUID
	d  float64
}

// exactTop is the exact cosine top n among the given memories, ties by id.
func exactTop(q []float32, ids []uuid.UUID, embs [][]float32, n int) []scored {
	var s []scored
	for i, e := range embs {
		var dot, qq, ee float64
		for j := range q {
			dot += float64(q[j]) * float64(e[j])
			qq += float64(q[j]) * float64(q[j])
			ee += float64(e[j]) * float64(e[j])
		}
		s = append(s, scored{ids[i], 1 - dot/math.Sqrt(qq*ee)})
	}
	sort.Slice(s, func(a, b int) bool {
		if s[a].d != s[b].d {
			return s[a].d < s[b].d
		}
		return s[a].id.String() < s[b].id.String()
	})
	if len(s) > n {
		s = s[:n]
	}
	return s
}

func vectorLeg(t *testing.T, pool *pgxpool.Pool, conv uuid.UUID, q []float32, n int) []scored {
	t.Helper()
	rows, err := pool.Query(context.Background(), `SELECT memory_id, distance FROM mneme.vector_search($1, $2, $3) ORDER BY rank`, conv, q, n)
	require.NoError(t, err)
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (scored, error) {
		var s scored
		return s, r.Scan(&s.id, &s.d)
	})
	require.NoError(t, err)
	return out
}

func hnswScans(t *testing.T, pool *pgxpool.Pool) int64 {
	t.Helper()
	var n int64
	require.NoError(t, pool.QueryRow(context.Background(), `SELECT pg_stat_get_xact_numscans('mneme.memories_embedding_hnsw'::regclass)
		+ pg_stat_get_numscans('mneme.memories_embedding_hnsw'::regclass)`).Scan(&n))
	return n
}

// Many conversations: retrieval in one conversation returns exactly the
// top 10 of an exact search within that conversation, even though an HNSW
// index over all conversations exists (a filtered approximate scan would
// lose rows). pgvector: 1,000 conversations x 200 memories, dimension 16 to
// keep the index build short; array fallback: 100 x 50.
func TestRetrieveManyConversationsExact(t *testing.T) {
	t.Parallel()
	for _, variant := range variants(t) {
		t.Run(variant, func(t *testing.T) {
			nconv, per := 100, 50
			if variant == "pgvector" {
				nconv, per = 1000, 200
			}
			if testing.Short() {
				nconv = 50
			}
			ctx := context.Background()
			_, url := dbtest.NewEmpty(t)
			_, err := migrate.Run(ctx, url, migrate.Options{Vector: variant, EmbedDim: 16})
			require.NoError(t, err)
			pool, err := pgxpool.New(ctx, url)
			require.NoError(t, err)
			defer pool.Close()

			r := rand.New(rand.NewPCG(11, 12))
			h := embed.NewHash(16)
			convs := make([]uuid.UUID, nconv)
			for i := range convs {
				convs[i] = uuid.New()
			}
			n := nconv * per
			conv := make([]uuid.UUID, n)
			texts := make([]string, n)
			embs := make([][]float32, n)
			for i := 0; i < n; i++ {
				conv[i] = convs[i%nconv]
				texts[i] = randomText(r, 4+r.IntN(4))
				embs[i], err = h.EmbedOne(texts[i])
				require.NoError(t, err)
			}
			memIDs := bulkMemories(t, pool, variant, conv, texts, embs)

			naiveLost := 0
			for qi := 0; qi < 10; qi++ {
				c := qi * (nconv / 10)
				var cids []uuid.UUID
				var cembs [][]float32
				for i := c; i < n; i += nconv {
					cids = append(cids, memIDs[i])
					cembs = append(cembs, embs[i])
				}
				q, err := h.EmbedOne(randomText(r, 3))
				require.NoError(t, err)
				want := exactTop(q, cids, cembs, 100)
				got := vectorLeg(t, pool, convs[c], q, 100)
				require.Len(t, got, len(want))
				for i := range want {
					require.InDelta(t, want[i].d, got[i].d, 1e-6, "conversation %d rank %d", c, i)
				}
				requireSameIDsUpToTies(t, want, got)

				// retrieve with a query that matches no word (BM25 leg
				// empty) ranks by the vector leg alone: its top 10 is the
				// exact top 10 of the conversation.
				top := search(t, pool, "retrieve", convs[c], "zzqqxx", 10, q)
				require.Len(t, top, 10)
				if want[10].d-want[9].d > 1e-6 {
					var w []uuid.UUID
					for _, s := range want[:10] {
						w = append(w, s.id)
					}
					require.ElementsMatch(t, w, ids(top), "conversation %d", c)
				}

				if variant == "pgvector" {
					var naive int
					require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM (SELECT id FROM mneme.memories
						WHERE conversation_id = $1 ORDER BY embedding <=> $2::real[]::vector LIMIT 10) x`, convs[c], q).Scan(&naive))
					naiveLost += 10 - naive
				}
			}
			if variant == "pgvector" {
				t.Logf("a plain filtered HNSW query (no iterative scan) returned %d of 100 expected rows", 100-naiveLost)
			}
		})
	}
}

// requireSameIDsUpToTies: the same ids in the same order, except that ids
// at equal distances (to 1e-6: pgvector computes in float32) may come in any order among themselves.
func requireSameIDsUpToTies(t *testing.T, want, got []scored) {
	t.Helper()
	for i := 0; i < len(want); {
		j := i + 1
		for j < len(want) && want[j].d-want[j-1].d <= 1e-6 {
			j++
		}
		if j == len(want) && len(want) > 1 {
			// The last group may continue past the cut-off: only the distances matter.
			break
		}
		var w, g []uuid.UUID
		for x := i; x < j; x++ {
			w = append(w, want[x].id)
			g = append(g, got[x].id)
		}
		require.ElementsMatch(t, w, g, "ranks %d..%d", i, j-1)
		i = j
	}
}

// The pgvector path (HNSW with iterative scans, used for a large
// conversation) against exact search on the same 20,000 memories:
// recall@10 of the vector leg and of retrieve's top 10 at least 0.95.
func TestRetrievePgvectorRecall(t *testing.T) {
	t.Parallel()
	if !dbtest.HasPgvector(t) {
		t.Skip("pgvector is not installed on this server")
	}
	if testing.Short() {
		t.Skip("20,000-memory data set")
	}
	db := dbtest.New(t, dbtest.WithVector("pgvector"))
	ctx := context.Background()
	r := rand.New(rand.NewPCG(21, 22))
	h := embed.NewHash(embed.DefaultDim)
	const n = 20000
	convID := uuid.New()
	conv := make([]uuid.UUID, n)
	texts := make([]string, n)
	embs := make([][]float32, n)
	var err error
	for i := 0; i < n; i++ {
		conv[i] = convID
		texts[i] = randomText(r, 6+r.IntN(10))
		embs[i], err = h.EmbedOne(texts[i])
		require.NoError(t, err)
	}
	memIDs := bulkMemories(t, db.Pool, "pgvector", conv, texts, embs)

	const queries = 40
	var legHits, topHits, total int
	before := hnswScans(t, db.Pool)
	type result struct{ leg, top []uuid.UUID }
	ann := make([]result, queries)
	qs := make([]string, queries)
	qembs := make([][]float32, queries)
	for i := 0; i < queries; i++ {
		qs[i] = randomText(r, 3)
		qembs[i], err = h.EmbedOne(qs[i])
		require.NoError(t, err)
		for _, s := range vectorLeg(t, db.Pool, convID, qembs[i], 100)[:10] {
			ann[i].leg = append(ann[i].leg, s.id)
		}
		ann[i].top = ids(search(t, db.Pool, "search", convID, qs[i], 10, qembs[i]))
	}
	if !dbtest.OnCitus() { // (on Citus the shards' indexes count their scans, on the workers)
		require.Greater(t, hnswScans(t, db.Pool), before, "the HNSW index was not used")
	}

	// The leg sizes the HNSW candidate list to the rows it wants and leaves
	// the caller's setting as it was, even inside the caller's transaction.
	tx, err := db.Pool.Begin(ctx)
	require.NoError(t, err)
	defer func() { _ = tx.Rollback(ctx) }() // also when an assertion below fails
	_, err = tx.Exec(ctx, `SET LOCAL hnsw.ef_search = 77`)
	require.NoError(t, err)
	var got int
	require.NoError(t, tx.QueryRow(ctx, `SELECT count(*) FROM mneme.vector_search($1, $2, 300)`, convID, qembs[0]).Scan(&got))
	require.Equal(t, 300, got)
	var ef string
	require.NoError(t, tx.QueryRow(ctx, `SHOW hnsw.ef_search`).Scan(&ef))
	require.Equal(t, "77", ef, "vector_search changed the caller's hnsw.ef_search")
	require.NoError(t, tx.Rollback(ctx))

	// Exact: the same functions with the HNSW cut-over out of reach.
	_, err = db.Pool.Exec(ctx, `SELECT mneme.set_setting('vector_exact_max', '1000000000')`)
	require.NoError(t, err)
	for i := 0; i < queries; i++ {
		exact := exactTop(qembs[i], memIDs, embs, 10)
		var exactIDs []uuid.UUID
		for _, s := range exact {
			exactIDs = append(exactIDs, s.id)
		}
		legHits += overlap(ann[i].leg, exactIDs)
		topHits += overlap(ann[i].top, ids(search(t, db.Pool, "search", convID, qs[i], 10, qembs[i])))
		total += 10
	}
	legRecall := float64(legHits) / float64(total)
	topRecall := float64(topHits) / float64(total)
	t.Logf("recall@10: vector leg %.3f, retrieve top 10 %.3f", legRecall, topRecall)
	require.GreaterOrEqual(t, legRecall, 0.95)
	require.GreaterOrEqual(t, topRecall, 0.95)
}

func overlap(a, b []uuid.UUID) int {
	in := map[uuid.UUID]bool{}
	for _, x := range b {
		in[x] = true
	}
	n := 0
	for _, x := range a {
		if in[x] {
			n++
		}
	}
	return n
}
