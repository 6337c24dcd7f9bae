package recall_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/mneme-memory/mneme/sidecar/dbtest"
	"github.com/mneme-memory/mneme/sidecar/eval/recall"
)

// The harness ranks exactly as mneme's SQL: on a conversation where many
// memories tie (the same text, the same FSRS state), its rankings equal
// the order of mneme.search, mneme.bm25_search and mneme.vector_search,
// ties included, in both vector variants.
func TestRankLikeSQL(t *testing.T) {
	t.Parallel()
	variants := []string{"array"}
	if dbtest.HasPgvector(t) {
		variants = append(variants, "pgvector")
	}
	for _, variant := range variants {
		t.Run(variant, func(t *testing.T) {
			t.Parallel()
			db := dbtest.New(t, dbtest.WithVector(variant))
			ctx := context.Background()
			conv := uuid.New()
			at := time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)
			texts := []string{"the zebra crossing on elm street", "a zebra at the zoo", "elm street in the rain", "nothing to see here"}
			mems := map[uuid.UUID]*recall.Memory{}
			for i := range 16 {
				// Four copies of each text: ties in every ranking.
				var id uuid.UUID
				require.NoError(t, db.Pool.QueryRow(ctx, `INSERT INTO mneme.memories (conversation_id, content, created_at, last_reviewed_at)
					VALUES ($1, $2, $3, $3) RETURNING id`, conv, texts[i%len(texts)], at.Add(-24*time.Hour)).Scan(&id))
				mems[id] = &recall.Memory{ID: id, Doc: recall.Doc{Words: 1, Turns: []recall.DocTurn{{ID: id.String(), End: 1}}}}
			}
			const q = "zebra on elm street"
			got, err := recall.RankMneme(ctx, db.Pool, conv, at, mems, q)
			require.NoError(t, err)
			require.Len(t, got, 4)

			sqlOrder := func(query string, args ...any) ([]uuid.UUID, []recall.Scored) {
				rows, err := db.Pool.Query(ctx, `SELECT memory_id, s FROM (`+query+`) x(memory_id, s)`, args...)
				require.NoError(t, err)
				hits, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (recall.Scored, error) {
					var h recall.Scored
					return h, r.Scan(&h.ID, &h.Score)
				})
				require.NoError(t, err)
				ids := make([]uuid.UUID, len(hits))
				for i, h := range hits {
					ids[i] = h.ID
				}
				return ids, hits
			}
			search, searchHits := sqlOrder(`SELECT memory_id, score FROM mneme.search($1, $2, 100, at => $3)`, conv, q, at)
			bm25, bm25Hits := sqlOrder(`SELECT memory_id, score FROM mneme.bm25_search($1, $2, 100)`, conv, q)
			vec, vecHits := sqlOrder(`SELECT memory_id, -distance FROM mneme.vector_search($1, mneme.hash_embed($2), 100)`, conv, q)
			require.Len(t, search, 16)
			require.Len(t, bm25, 12) // the text without a query term is not a BM25 hit
			require.Len(t, vec, 16)
			for i, want := range [][]uuid.UUID{search, search, bm25, vec} {
				require.Equal(t, want, docIDs(t, got[i]), "ranking %d", i)
			}
			// The ties are there, and RankLikeSQL restores the SQL's order
			// from any order of its input.
			for name, hits := range map[string][]recall.Scored{"search": searchHits, "bm25": bm25Hits, "vector": vecHits} {
				ties := 0
				for i := 1; i < len(hits); i++ {
					if hits[i].Score == hits[i-1].Score {
						ties++
					}
				}
				require.GreaterOrEqual(t, ties, 8, "%s: the test needs ties", name)
				want := recall.RankLikeSQL(hits)
				reversed := slices.Clone(hits)
				slices.Reverse(reversed)
				require.Equal(t, want, recall.RankLikeSQL(reversed), name)
				ids := make([]uuid.UUID, len(hits))
				for i, h := range hits {
					ids[i] = h.ID
				}
				require.Equal(t, ids, want, name)
			}
		})
	}
}

func docIDs(t *testing.T, docs []recall.Doc) []uuid.UUID {
	t.Helper()
	out := make([]uuid.UUID, len(docs))
	for i, d := range docs {
		require.Len(t, d.Turns, 1)
		id, err := uuid.Parse(d.Turns[0].ID)
		require.NoError(t, err, fmt.Sprint(d))
		out[i] = id
	}
	return out
}
