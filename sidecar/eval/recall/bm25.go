package recall

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"sort"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
)

// BM25 parameters of the baselines: the same as mneme's ranking (DESIGN.md).
const (
	bm25K1 = 1.2
	bm25B  = 0.75
)

// TextSearchConfig is the PostgreSQL text search configuration the
// baselines tokenise with, so they see the same terms as mneme's BM25.
const TextSearchConfig = "english"

// bm25Index is plain BM25 over a fixed set of documents, scored in Go. The
// terms come from PostgreSQL's to_tsvector, so stemming and stop words are
// the same as in mneme's own BM25 leg; the index itself is not stored.
type bm25Index struct {
	docs  []bm25Doc
	df    map[string]int
	avgdl float64
	pool  *pgxpool.Pool
}

type bm25Doc struct {
	doc Doc
	tf  map[string]int
	len int
}

// tokenize returns the term frequencies of each text.
func tokenize(ctx context.Context, pool *pgxpool.Pool, texts []string) ([]map[string]int, error) {
	rows, err := pool.Query(ctx, `
		SELECT (SELECT coalesce(jsonb_object_agg(v.lexeme, cardinality(v.positions)), '{}')
		        FROM unnest(to_tsvector($2::regconfig, t.txt)) v)
		FROM unnest($1::text[]) WITH ORDINALITY AS t(txt, n)
		ORDER BY t.n`, texts, TextSearchConfig)
	if err != nil {
		return nil, fmt.Errorf("tokenize: %w", err)
	}
	defer rows.Close()
	out := make([]map[string]int, 0, len(texts))
	for rows.Next() {
		var b []byte
		if err := rows.Scan(&b); err != nil {
			return nil, fmt.Errorf("tokenize: %w", err)
		}
		tf := map[string]int{}
		if err := json.Unmarshal(b, &tf); err != nil {
			return nil, fmt.Errorf("tokenize: %w", err)
		}
		out = append(out, tf)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("tokenize: %w", err)
	}
	return out, nil
}

func newBM25Index(ctx context.Context, pool *pgxpool.Pool, texts []string, docs []Doc) (*bm25Index, error) {
	tfs, err := tokenize(ctx, pool, texts)
	if err != nil {
		return nil, err
	}
	ix := &bm25Index{df: map[string]int{}, pool: pool}
	total := 0
	for i, tf := range tfs {
		n := 0
		for term, c := range tf {
			n += c
			ix.df[term]++
		}
		total += n
		ix.docs = append(ix.docs, bm25Doc{doc: docs[i], tf: tf, len: n})
	}
	if len(ix.docs) > 0 {
		ix.avgdl = float64(total) / float64(len(ix.docs))
	}
	return ix, nil
}

// rank returns the documents that share a term with the query, best
// first; ties keep document order.
func (ix *bm25Index) rank(ctx context.Context, query string) ([]Doc, error) {
	qs, err := tokenize(ctx, ix.pool, []string{query})
	if err != nil {
		return nil, err
	}
	terms := make([]string, 0, len(qs[0]))
	for t := range qs[0] {
		terms = append(terms, t)
	}
	sort.Strings(terms) // a fixed summation order: bit-identical scores
	n := float64(len(ix.docs))
	type scored struct {
		i     int
		score float64
	}
	var hits []scored
	for i, d := range ix.docs {
		s := 0.0
		for _, t := range terms {
			tf := float64(d.tf[t])
			if tf == 0 {
				continue
			}
			df := float64(ix.df[t])
			idf := math.Log(1 + (n-df+0.5)/(df+0.5))
			s += idf * tf * (bm25K1 + 1) / (tf + bm25K1*(1-bm25B+bm25B*float64(d.len)/ix.avgdl))
		}
		if s > 0 {
			hits = append(hits, scored{i, s})
		}
	}
	sort.SliceStable(hits, func(a, b int) bool { return hits[a].score > hits[b].score })
	out := make([]Doc, len(hits))
	for k, h := range hits {
		out[k] = ix.docs[h.i].doc
	}
	return out, nil
}

// TurnLine renders a turn the way it is counted and indexed by the raw-turn
// baselines: the speaker's name, a colon, the text.
func TurnLine(speaker, text string) string { return speaker + ": " + text }

// bm25Source serves one baseline: BM25 over windows of `window` turns of
// one session (window 1: each turn a document).
type bm25Source struct {
	name string
	ix   *bm25Index
}

func newBM25Source(ctx context.Context, pool *pgxpool.Pool, name string, c *Conversation, window int) (*bm25Source, error) {
	var texts []string
	var docs []Doc
	for _, s := range c.Sessions {
		for i := 0; i < len(s.Turns); i += window {
			j := min(i+window, len(s.Turns))
			var lines, ids, parts []string
			for _, t := range s.Turns[i:j] {
				lines = append(lines, TurnLine(t.Speaker, t.Text))
				ids = append(ids, t.ID)
				parts = append(parts, t.Text)
			}
			text := strings.Join(lines, "\n")
			texts = append(texts, text)
			docs = append(docs, PlaceTurns(text, ids, parts))
		}
	}
	ix, err := newBM25Index(ctx, pool, texts, docs)
	if err != nil {
		return nil, fmt.Errorf("%s index of %s: %w", name, c.ID, err)
	}
	return &bm25Source{name: name, ix: ix}, nil
}

func (b *bm25Source) methods() []string { return []string{b.name} }

func (b *bm25Source) rank(ctx context.Context, q string) ([][]Doc, []time.Duration, error) {
	start := time.Now()
	docs, err := b.ix.rank(ctx, q)
	return [][]Doc{docs}, []time.Duration{time.Since(start)}, err
}
