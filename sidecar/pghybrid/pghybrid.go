// Package pghybrid is the hybrid search people write in PostgreSQL today,
// as a baseline for mneme's evaluations (mneme eval locomo, beam) and its
// retrieval benchmark (mneme bench retrieve): the widely copied
// hybrid_search function of the Supabase docs over raw conversation turns.
// Full-text search ranked by ts_rank_cd over a generated tsvector with a
// GIN index (websearch_to_tsquery), and cosine distance between
// embeddings, each leg's top match_count x 2, fused by reciprocal rank
// (k 50). The vector leg is pgvector's <=> on a vector column where the
// database has the vector extension, and exact cosine on real[] (written
// out in SQL) where it has not; either way with the caller's embedder
// (nil: mneme's hash embedder in SQL, mneme.hash_embed, as offline).
package pghybrid

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// name prefixes the errors.
const name = "pg_hybrid"

// Embedder embeds turns and questions (the sidecar's embed package).
type Embedder interface {
	Embed(ctx context.Context, texts []string) ([][]float32, error)
}

// DB is what the baseline needs of a database: a pool (the
// evaluations) or a connection (the benchmark).
type DB interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
	SendBatch(ctx context.Context, b *pgx.Batch) pgx.BatchResults
}

// Turn is one row of the baseline's table: a raw turn.
type Turn struct {
	DiaID, Speaker, Content string
}

// Baseline is the baseline's table and query in one database (migrated by
// mneme, whose hash embedder and embedding dimension it uses).
type Baseline struct {
	db    DB
	embed Embedder // nil: mneme.hash_embed in SQL
	// Vector is the form of the vector leg: "pgvector" (a vector(dim)
	// column, pgvector's cosine distance) or "array" (real[], exact cosine).
	Vector string
	typ    string // the embedding column's type
	query  string
	insert string
}

// pgHybridTable is the baseline's table; %[1]s is the embedding's type.
// There is no vector index: an HNSW index over every conversation's turns
// returns its ef_search nearest rows before the conversation filter, so a
// conversation would get fewer than match_count x 2 (pgvector filters
// after the index scan); the exact scan over one conversation's few
// hundred turns is what its users get without an index.
const pgHybridTable = `
CREATE SCHEMA IF NOT EXISTS eval_baseline;
CREATE TABLE IF NOT EXISTS eval_baseline.turns (
    id        bigserial PRIMARY KEY,
    conv      text NOT NULL,
    dia_id    text NOT NULL,
    speaker   text NOT NULL,
    content   text NOT NULL,
    fts       tsvector GENERATED ALWAYS AS (to_tsvector('english', content)) STORED,
    embedding %[1]s
);
CREATE INDEX IF NOT EXISTS turns_fts_idx ON eval_baseline.turns USING gin (fts);
CREATE INDEX IF NOT EXISTS turns_conv_idx ON eval_baseline.turns (conv);`

// pgHybridQuery is hybrid_search with the conversation as a filter:
// $1 conversation, $2 question, $3 match_count, $4 the question's
// embedding (NULL: mneme.hash_embed of the question). %[1]s is the
// embedding's type and %[2]s the cosine distance of t.embedding and
// q.embedding. Each leg's
// ties are broken by id (the function as published leaves them to the
// plan), so runs rank alike.
const pgHybridQuery = `
WITH q AS MATERIALIZED (  -- the question's embedding once, not once per row
    SELECT coalesce($4::real[], mneme.hash_embed($2))::%[1]s AS embedding
), full_text AS (
    SELECT id, row_number() OVER (ORDER BY ts_rank_cd(fts, websearch_to_tsquery('english', $2)) DESC, id) AS rank_ix
    FROM eval_baseline.turns
    WHERE conv = $1 AND fts @@ websearch_to_tsquery('english', $2)
    ORDER BY rank_ix
    LIMIT $3 * 2
), semantic AS (
    SELECT t.id, row_number() OVER (ORDER BY %[2]s, t.id) AS rank_ix
    FROM eval_baseline.turns t, q
    WHERE t.conv = $1
    ORDER BY rank_ix
    LIMIT $3 * 2
)
SELECT t.dia_id, t.speaker, t.content
FROM full_text
FULL OUTER JOIN semantic ON full_text.id = semantic.id
JOIN eval_baseline.turns t ON t.id = coalesce(full_text.id, semantic.id)
ORDER BY coalesce(1.0 / (50 + full_text.rank_ix), 0.0) + coalesce(1.0 / (50 + semantic.rank_ix), 0.0) DESC, t.id
LIMIT $3`

// arrayCosine is cosine distance on real[] written out, as a user without
// pgvector writes it: the same value as mneme.<=> (mneme.cosine_distance),
// which as a function with its own search_path is called, not inlined,
// and costs about 2 ms a row here (a question took over a second).
const arrayCosine = `(SELECT 1 - sum(x::float8 * y) / nullif(sqrt(sum(x::float8 * x) * sum(y::float8 * y)), 0)
     FROM unnest(t.embedding, q.embedding) AS u(x, y))`

// New creates the baseline's table in db (if it is not there) with
// the vector column pgvector's where the database has the extension.
// embed nil: turns and questions are embedded by mneme.hash_embed in SQL.
func New(ctx context.Context, db DB, embed Embedder) (*Baseline, error) {
	var schema *string
	if err := db.QueryRow(ctx, `
		SELECT (SELECT n.nspname FROM pg_catalog.pg_extension e JOIN pg_catalog.pg_namespace n ON n.oid = e.extnamespace
		        WHERE e.extname = 'vector')`).Scan(&schema); err != nil {
		return nil, fmt.Errorf("%s: look up pgvector: %w", name, err)
	}
	h := &Baseline{db: db, embed: embed, Vector: "array"}
	typ, dist := "real[]", arrayCosine
	if schema != nil {
		var dim int
		if err := db.QueryRow(ctx, `SELECT mneme.setting('embedding_dim')::int`).Scan(&dim); err != nil {
			return nil, fmt.Errorf("%s: embedding dimension: %w", name, err)
		}
		s := pgx.Identifier{*schema}.Sanitize()
		h.Vector, typ = "pgvector", fmt.Sprintf("%s.vector(%d)", s, dim)
		dist = fmt.Sprintf("t.embedding OPERATOR(%s.<=>) q.embedding", s)
	}
	if _, err := db.Exec(ctx, fmt.Sprintf(pgHybridTable, typ)); err != nil {
		return nil, fmt.Errorf("%s table: %w", name, err)
	}
	h.typ, h.query = typ, fmt.Sprintf(pgHybridQuery, typ, dist)
	h.insert = fmt.Sprintf(`INSERT INTO eval_baseline.turns (conv, dia_id, speaker, content, embedding)
		VALUES ($1, $2, $3, $4, coalesce($5::real[], mneme.hash_embed($4))::%s)`, typ)
	return h, nil
}

// Add inserts a conversation's turns, embedded (by the embedder, or by
// mneme.hash_embed in SQL).
func (h *Baseline) Add(ctx context.Context, conv string, turns []Turn) error {
	const chunk = 64
	for lo := 0; lo < len(turns); lo += chunk {
		part := turns[lo:min(lo+chunk, len(turns))]
		var embs [][]float32
		if h.embed != nil {
			texts := make([]string, len(part))
			for i, t := range part {
				texts[i] = t.Content
			}
			var err error
			if embs, err = h.embed.Embed(ctx, texts); err != nil {
				return fmt.Errorf("%s: embed turns of %s: %w", name, conv, err)
			}
		}
		batch := &pgx.Batch{}
		for i, t := range part {
			var emb any
			if embs != nil {
				emb = embs[i]
			}
			batch.Queue(h.insert, conv, t.DiaID, t.Speaker, t.Content, emb)
		}
		if err := h.db.SendBatch(ctx, batch).Close(); err != nil {
			return fmt.Errorf("%s: turns of %s: %w", name, conv, err)
		}
	}
	return nil
}

// AddRows inserts the rows of a query in one statement: each row a turn's
// conv, dia_id, speaker and content (text) and its embedding (real[]; NULL:
// mneme.hash_embed of the content). For tables too large to send turn by
// turn (mneme bench scale copies mneme's memories). Returns the rows added.
func (h *Baseline) AddRows(ctx context.Context, query string, args ...any) (int64, error) {
	tag, err := h.db.Exec(ctx, fmt.Sprintf(`INSERT INTO eval_baseline.turns (conv, dia_id, speaker, content, embedding)
		SELECT s.conv, s.dia_id, s.speaker, s.content, coalesce(s.embedding, mneme.hash_embed(s.content))::%s
		FROM (%s) AS s(conv, dia_id, speaker, content, embedding)`, h.typ, query), args...)
	if err != nil {
		return 0, fmt.Errorf("%s: add rows: %w", name, err)
	}
	return tag.RowsAffected(), nil
}

// Search is hybrid_search(question, match_count) over one conversation's
// turns, best first.
func (h *Baseline) Search(ctx context.Context, conv, question string, matchCount int) ([]Turn, error) {
	var qemb []float32
	if h.embed != nil {
		v, err := h.embed.Embed(ctx, []string{question})
		if err != nil {
			return nil, fmt.Errorf("%s: embed question: %w", name, err)
		}
		qemb = v[0]
	}
	return h.SearchEmbedding(ctx, conv, question, qemb, matchCount)
}

// SearchEmbedding is Search with the question's embedding given (nil:
// mneme.hash_embed of the question in SQL), for a caller that embeds the
// question itself (mneme bench scale --vectors clustered passes each call
// the same vector).
func (h *Baseline) SearchEmbedding(ctx context.Context, conv, question string, embedding []float32, matchCount int) ([]Turn, error) {
	var qemb any // a nil slice would be sent as an empty array, not NULL
	if embedding != nil {
		qemb = embedding
	}
	rows, err := h.db.Query(ctx, h.query, conv, question, matchCount, qemb)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (Turn, error) {
		var t Turn
		return t, r.Scan(&t.DiaID, &t.Speaker, &t.Content)
	})
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	return out, nil
}

// Delete removes a conversation's turns.
func (h *Baseline) Delete(ctx context.Context, conv string) error {
	if _, err := h.db.Exec(ctx, `DELETE FROM eval_baseline.turns WHERE conv = $1`, conv); err != nil {
		return fmt.Errorf("%s: delete %s: %w", name, conv, err)
	}
	return nil
}
