package bench

import (
	"context"
	"fmt"
	"math"
	mrand "math/rand/v2"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
)

// scaleRecallQueries: queries per scope for the recall rows.
const scaleRecallQueries = 20

// scaleRecall is issue 53's recall row: the vector leg as search runs it
// for the top 10 (10 * vector_candidates_per_k rows, at most
// retrieve_candidates; through the scope's own HNSW index where it has
// one), its top 10 against the exact top 10 of the same scope (every
// distance of the scope computed), averaged over queries of three words of
// the huge conversation, on the huge conversation and on its tenant. (The
// BM25 leg is exact by construction: TestBM25TopKSkipsAndIsExact.) The
// vectors are the hash embedder's, not a model's: docs/performance.md has
// the clustered vectors' figures.
func scaleRecall(ctx context.Context, conn *pgx.Conn, o ScaleOptions) (map[string]float64, error) {
	conv := bulkConv(0)
	tenant := tenantOf(0, o.Tenants)
	var ws []string
	if err := conn.QueryRow(ctx, `SELECT array_agg(w) FROM (SELECT unnest(string_to_array(content, ' ')) AS w
		FROM (SELECT content FROM mneme.memories WHERE conversation_id = $1 ORDER BY id LIMIT 200) s) x
		WHERE w ~ '^[a-z]+$'`, conv).Scan(&ws); err != nil || len(ws) == 0 {
		return nil, fmt.Errorf("words of the huge conversation: %v", err)
	}
	var convs []uuid.UUID
	if err := conn.QueryRow(ctx, `SELECT array_agg(id ORDER BY id) FROM mneme.message_queue WHERE tenant_id = $1`, tenant).Scan(&convs); err != nil {
		return nil, err
	}
	var cand int
	if err := conn.QueryRow(ctx, `SELECT least(mneme.setting('retrieve_candidates')::int, 10 * mneme.setting('vector_candidates_per_k')::int)`).Scan(&cand); err != nil {
		return nil, err
	}
	r := mrand.New(mrand.NewPCG(53, 53))
	out := map[string]float64{}
	for _, sc := range []struct {
		name, exact string
		convs       []uuid.UUID
		arg         any
	}{
		{"huge", `SELECT array_agg(x.id) FROM (SELECT m.id FROM mneme.memories m WHERE m.conversation_id = $1 AND m.status = 'active'
			ORDER BY m.embedding <=> $2::real[]::mneme.embedding, m.id LIMIT 10) x`, []uuid.UUID{conv}, conv},
		{"tenant", `SELECT array_agg(x.id) FROM (SELECT m.id FROM mneme.memories m WHERE m.tenant_id = $1 AND m.status = 'active'
			ORDER BY m.embedding <=> $2::real[]::mneme.embedding, m.id LIMIT 10) x`, convs, tenant},
	} {
		var sum float64
		for i := 0; i < scaleRecallQueries; i++ {
			q := ws[r.IntN(len(ws))] + " " + ws[r.IntN(len(ws))] + " " + ws[r.IntN(len(ws))]
			var emb []float32
			if err := conn.QueryRow(ctx, `SELECT mneme.hash_embed($1)`, q).Scan(&emb); err != nil {
				return nil, err
			}
			var exact, leg []uuid.UUID
			// Exact: no index scan (sequential and bitmap reads of the scope).
			err := pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
				if _, err := tx.Exec(ctx, `SET LOCAL enable_indexscan = off`); err != nil {
					return err
				}
				return tx.QueryRow(ctx, sc.exact, sc.arg, emb).Scan(&exact)
			})
			if err != nil {
				return nil, fmt.Errorf("exact top 10 of %s: %w", sc.name, err)
			}
			if err := conn.QueryRow(ctx, `SELECT array_agg(x.memory_id) FROM (SELECT memory_id FROM mneme._vector_search_scope($1, $2, $3, NULL, NULL)
				ORDER BY rank, memory_id LIMIT 10) x`, sc.convs, emb, cand).Scan(&leg); err != nil {
				return nil, fmt.Errorf("vector leg of %s: %w", sc.name, err)
			}
			hit := 0
			for _, id := range leg {
				for _, e := range exact {
					if id == e {
						hit++
						break
					}
				}
			}
			sum += float64(hit) / math.Max(float64(len(exact)), 1)
		}
		out[sc.name] = sum / scaleRecallQueries
	}
	return out, nil
}
