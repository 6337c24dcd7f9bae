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

// ScaleRecall is one large scope's recall@10 against exact, averaged over
// Queries queries: the vector leg's (the goal) and, beside it, the bare
// HNSW lookup's of the same queries (pgvector's own recall there).
type ScaleRecall struct {
	Scope    string  `json:"scope"`
	Leg      float64 `json:"vector_leg"`
	BareHNSW float64 `json:"bare_hnsw"`
	Queries  int     `json:"queries"`
}

// scaleRecall is issue 53's recall row: the vector leg as search runs it
// for the top 10 (10 * vector_candidates_per_k rows, at most
// retrieve_candidates; through the scope's own HNSW index where it has
// one), its top 10 against the exact top 10 of the same scope (every
// distance of the scope computed), averaged over queries of three words of
// the huge conversation, on the huge conversation and on its tenant; and
// the bare HNSW top 10 of the timed calls (iterative scan, pgvector's
// defaults) against the same exact top 10. (The BM25 leg is exact by
// construction: TestBM25TopKSkipsAndIsExact.) The queries' vectors are the
// run's (scaleVectors): with hash vectors, which HNSW finds poorly and a
// model would not make, the figures say little; clustered vectors are
// shaped like a model's (docs/experiments/ann-recall.sql).
func scaleRecall(ctx context.Context, conn *pgx.Conn, o ScaleOptions, vec scaleVectors) ([]ScaleRecall, error) {
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
	var out []ScaleRecall
	for _, sc := range []struct {
		name, filter string
		convs        []uuid.UUID
		arg          any
	}{
		{"huge conversation", "m.conversation_id = $1", []uuid.UUID{conv}, conv},
		{"the huge conversation's tenant", "m.tenant_id = $1", convs, tenant},
	} {
		exactSQL := `SELECT array_agg(x.id) FROM (SELECT m.id FROM mneme.memories m WHERE ` + sc.filter + ` AND m.status = 'active'
			ORDER BY m.embedding <=> $2::real[]::mneme.embedding, m.id LIMIT 10) x`
		// The bare lookup's ORDER BY as timed (distance alone, so the
		// scope's HNSW index can answer it).
		bareSQL := `SELECT array_agg(x.id) FROM (SELECT m.id FROM mneme.memories m WHERE ` + sc.filter + ` AND m.status = 'active'
			ORDER BY m.embedding <=> $2::real[]::mneme.embedding LIMIT 10) x`
		var legSum, bareSum float64
		for i := 0; i < scaleRecallQueries; i++ {
			q := ws[r.IntN(len(ws))] + " " + ws[r.IntN(len(ws))] + " " + ws[r.IntN(len(ws))]
			emb, err := vec.queryVector(ctx, conn, q)
			if err != nil {
				return nil, err
			}
			var exact, leg, bare []uuid.UUID
			// Exact: no index scan (sequential and bitmap reads of the scope).
			err = pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
				if _, err := tx.Exec(ctx, `SET LOCAL enable_indexscan = off`); err != nil {
					return err
				}
				return tx.QueryRow(ctx, exactSQL, sc.arg, emb).Scan(&exact)
			})
			if err != nil {
				return nil, fmt.Errorf("exact top 10 of %s: %w", sc.name, err)
			}
			if err := conn.QueryRow(ctx, `SELECT array_agg(x.memory_id) FROM (SELECT memory_id FROM mneme._vector_search_scope($1, $2, $3, NULL, NULL)
				ORDER BY rank, memory_id LIMIT 10) x`, sc.convs, emb, cand).Scan(&leg); err != nil {
				return nil, fmt.Errorf("vector leg of %s: %w", sc.name, err)
			}
			err = pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
				if _, err := tx.Exec(ctx, bareIterative); err != nil {
					return err
				}
				return tx.QueryRow(ctx, bareSQL, sc.arg, emb).Scan(&bare)
			})
			if err != nil {
				return nil, fmt.Errorf("bare HNSW top 10 of %s: %w", sc.name, err)
			}
			legSum += recallOf(leg, exact)
			bareSum += recallOf(bare, exact)
		}
		out = append(out, ScaleRecall{Scope: sc.name, Queries: scaleRecallQueries,
			Leg: math.Round(legSum/scaleRecallQueries*1000) / 1000, BareHNSW: math.Round(bareSum/scaleRecallQueries*1000) / 1000})
	}
	return out, nil
}

// recallOf is the share of exact found in got.
func recallOf(got, exact []uuid.UUID) float64 {
	hit := 0
	for _, id := range got {
		for _, e := range exact {
			if id == e {
				hit++
				break
			}
		}
	}
	return float64(hit) / math.Max(float64(len(exact)), 1)
}
