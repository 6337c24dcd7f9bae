package bench

import (
	"context"
	"errors"
	"fmt"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
)

// errRollback ends a transaction of settings for one statement.
var errRollback = errors.New("rolled back")

// retrieveRecallQueries: queries of the recall rows (the first of the
// timed queries, the same every run).
const retrieveRecallQueries = 20

// RetrieveRecall is issue 53's recall of each leg of search's top 10 (k
// 10) against exact, averaged over retrieveRecallQueries queries: the
// vector leg as search runs it (10 * vector_candidates_per_k rows, at most
// retrieve_candidates, through whatever index the scope uses) and the bare
// lookup of the timing rows (ORDER BY embedding <=> q LIMIT 10 over the
// table) against the exact top 10 of the conversation (every distance
// computed, no index scan); the BM25 leg (retrieve_candidates rows, with
// MaxScore's skipping) against every posting summed (bm25_skip_min_postings
// above every query's postings, in a transaction rolled back).
type RetrieveRecall struct {
	Queries          int     `json:"queries"`
	VectorCandidates int     `json:"vector_candidates"` // the rows search's vector leg asks for, k 10
	VectorLeg        float64 `json:"vector_leg"`
	BareVector       float64 `json:"bare_vector,omitempty"` // one conversation only: the table is the conversation
	BM25Leg          float64 `json:"bm25_leg"`
}

func retrieveRecall(ctx context.Context, conn *pgx.Conn, c *benchCorpus) (*RetrieveRecall, error) {
	qs, err := makeQueries(c, retrieveRecallQueries)
	if err != nil {
		return nil, err
	}
	out := &RetrieveRecall{Queries: len(qs)}
	if err := conn.QueryRow(ctx, `SELECT least(mneme.setting('retrieve_candidates')::int, 10 * mneme.setting('vector_candidates_per_k')::int)`).
		Scan(&out.VectorCandidates); err != nil {
		return nil, err
	}
	var cand int
	if err := conn.QueryRow(ctx, `SELECT mneme.setting('retrieve_candidates')::int`).Scan(&cand); err != nil {
		return nil, err
	}
	top := func(sql string, args ...any) ([]uuid.UUID, error) {
		var ids []uuid.UUID
		err := conn.QueryRow(ctx, `SELECT coalesce(array_agg(x.id), '{}') FROM (`+sql+`) x`, args...).Scan(&ids)
		return ids, err
	}
	// In a transaction rolled back: settings only this function sees.
	inTx := func(set string, sql string, args ...any) ([]uuid.UUID, error) {
		var ids []uuid.UUID
		err := pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
			if _, err := tx.Exec(ctx, set); err != nil {
				return err
			}
			if err := tx.QueryRow(ctx, `SELECT coalesce(array_agg(x.id), '{}') FROM (`+sql+`) x`, args...).Scan(&ids); err != nil {
				return err
			}
			return errRollback
		})
		if err == errRollback {
			err = nil
		}
		return ids, err
	}
	for _, q := range qs {
		exact, err := inTx(`SET LOCAL enable_indexscan = off`, `SELECT m.id FROM mneme.memories m
			WHERE m.conversation_id = $1 AND m.status = 'active' AND m.embedding IS NOT NULL
			ORDER BY m.embedding <=> $2::real[]::mneme.embedding, m.id LIMIT 10`, q.conv, q.emb)
		if err != nil {
			return nil, fmt.Errorf("exact vector top 10: %w", err)
		}
		leg, err := top(`SELECT memory_id AS id FROM mneme._vector_search_scope(ARRAY[$1::uuid], $2, $3, NULL, NULL)
			ORDER BY rank, memory_id LIMIT 10`, q.conv, q.emb, out.VectorCandidates)
		if err != nil {
			return nil, fmt.Errorf("vector leg: %w", err)
		}
		if len(c.convs) == 1 {
			bare, err := top(`SELECT id FROM mneme.memories ORDER BY embedding <=> $1::real[]::mneme.embedding LIMIT 10`, q.emb)
			if err != nil {
				return nil, fmt.Errorf("bare vector top 10: %w", err)
			}
			out.BareVector += overlap(bare, exact) / float64(len(qs))
		}
		exactB, err := inTx(`SELECT mneme.set_setting('bm25_skip_min_postings', '2147483647')`,
			`SELECT memory_id AS id FROM mneme.bm25_search($1, $2, $3) ORDER BY rank, memory_id LIMIT 10`, q.conv, q.text, cand)
		if err != nil {
			return nil, fmt.Errorf("exact BM25 top 10: %w", err)
		}
		legB, err := top(`SELECT memory_id AS id FROM mneme.bm25_search($1, $2, $3) ORDER BY rank, memory_id LIMIT 10`, q.conv, q.text, cand)
		if err != nil {
			return nil, fmt.Errorf("BM25 leg: %w", err)
		}
		out.VectorLeg += overlap(leg, exact)
		out.BM25Leg += overlap(legB, exactB)
	}
	n := float64(len(qs))
	out.VectorLeg, out.BM25Leg = out.VectorLeg/n, out.BM25Leg/n
	return out, nil
}

// overlap is the share of want's ids that got holds (1 when want is empty).
func overlap(got, want []uuid.UUID) float64 {
	if len(want) == 0 {
		return 1
	}
	in := make(map[uuid.UUID]bool, len(want))
	for _, id := range want {
		in[id] = true
	}
	hit := 0
	for _, id := range got {
		if in[id] {
			hit++
		}
	}
	return float64(hit) / float64(len(want))
}
