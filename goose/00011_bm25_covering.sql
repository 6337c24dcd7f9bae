-- BM25 top-k reads postings with an index-only scan: the key carries tf and
-- the document length. Smaller conversations are searched exactly (the
-- planner's HNSW cut-over is a setting; see sql/120-retrieve.sql).

-- +goose Up
ALTER TABLE mneme.bm25_postings DROP CONSTRAINT bm25_postings_pkey;
ALTER TABLE mneme.bm25_postings ADD CONSTRAINT bm25_postings_pkey
    PRIMARY KEY (conversation_id, term, memory_id) INCLUDE (tf, doclen);
UPDATE mneme.settings SET value = '2000' WHERE key = 'vector_exact_max' AND value = '10000';

-- +goose Down
UPDATE mneme.settings SET value = '10000' WHERE key = 'vector_exact_max' AND value = '2000';
ALTER TABLE mneme.bm25_postings DROP CONSTRAINT bm25_postings_pkey;
ALTER TABLE mneme.bm25_postings ADD CONSTRAINT bm25_postings_pkey PRIMARY KEY (conversation_id, term, memory_id);
