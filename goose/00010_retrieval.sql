-- BM25 statistics for retrieval, maintained by triggers (sql/110-bm25.sql)
-- as memories are inserted, updated, deleted and change status. Only active
-- memories are counted; expiry (valid_until) is applied at query time.

-- +goose Up
-- One row per counted (active) memory: its length in lexemes.
CREATE TABLE mneme.bm25_docs (
    memory_id       uuid PRIMARY KEY,
    conversation_id uuid NOT NULL,
    doclen          int NOT NULL CHECK (doclen >= 0)
);

-- Postings: term frequency of each lexeme in each counted memory, with the
-- memory's length and creation time copied in so a BM25 top-k reads only
-- this table (an index-only scan of the primary key for the common case).
CREATE TABLE mneme.bm25_postings (
    conversation_id uuid NOT NULL,
    term            text NOT NULL,
    memory_id       uuid NOT NULL,
    tf              int NOT NULL CHECK (tf > 0),
    doclen          int NOT NULL CHECK (doclen > 0),
    PRIMARY KEY (conversation_id, term, memory_id)
);
CREATE INDEX bm25_postings_memory_idx ON mneme.bm25_postings (memory_id);

-- Document frequency per conversation and lexeme.
CREATE TABLE mneme.bm25_terms (
    conversation_id uuid NOT NULL,
    term            text NOT NULL,
    df              int NOT NULL,
    PRIMARY KEY (conversation_id, term)
);

-- Number of counted memories and their total length per conversation.
CREATE TABLE mneme.bm25_stats (
    conversation_id uuid PRIMARY KEY,
    n               int NOT NULL,
    total_len       bigint NOT NULL
);

-- Active memories that can expire: retrieval subtracts the expired ones.
CREATE INDEX memories_expiring_idx ON mneme.memories (conversation_id, valid_until)
    WHERE valid_until IS NOT NULL AND status = 'active';

INSERT INTO mneme.settings (key, value, description) VALUES
  ('bm25_k1', '1.2', 'BM25 term frequency saturation k1'),
  ('bm25_b', '0.75', 'BM25 length normalisation b'),
  ('vector_exact_max', '10000',
   'pgvector: conversations with at most this many active memories are searched exactly (btree on conversation_id); larger ones through the HNSW index with iterative scans')
ON CONFLICT (key) DO NOTHING;

-- One retrieval result row: what mneme.search and mneme.retrieve return.
CREATE TYPE mneme.retrieval AS (
    memory_id       uuid,
    kind            text,
    summary         text,
    content         text,
    created_at      timestamptz,
    score           float8,   -- rrf * retrievability * label weight
    rrf             float8,   -- sum over the legs of 1 / (rrf_k + rank)
    bm25_rank       int,      -- 1-based rank in the BM25 leg, NULL if not a candidate there
    vector_rank     int,      -- 1-based rank in the vector leg, NULL if not a candidate or the leg was skipped
    retrievability  float8,   -- FSRS-5 forgetting curve now (1 for pinned memories)
    title           text,
    label           text,
    pinned          boolean,
    bm25_score      float8,
    vector_distance float8    -- cosine distance
);

-- +goose Down
DROP TYPE mneme.retrieval;
DELETE FROM mneme.settings WHERE key IN ('bm25_k1', 'bm25_b', 'vector_exact_max');
DROP INDEX mneme.memories_expiring_idx;
DROP TABLE mneme.bm25_stats;
DROP TABLE mneme.bm25_terms;
DROP TABLE mneme.bm25_postings;
DROP TABLE mneme.bm25_docs;
