-- Per conversation and lexeme, what bounds a posting's BM25 contribution:
-- its largest term frequency and its smallest length per occurrence
-- (doclen / tf). With them the BM25 leg skips the postings of terms that
-- cannot lift a memory into the top k (MaxScore, sql/110-bm25.sql). The
-- bounds only widen as memories are removed (sql/110-bm25.sql keeps them
-- valid, not tight); bm25_reindex makes them tight again.
-- Numbered goose migration: applied once, never edited after release.

-- +goose Up
ALTER TABLE mneme.bm25_terms ADD COLUMN max_tf int, ADD COLUMN min_len_per_tf float8;
UPDATE mneme.bm25_terms t SET max_tf = s.max_tf, min_len_per_tf = s.min_len_per_tf
FROM (SELECT p.conversation_id, p.term, max(p.tf) AS max_tf, min(p.doclen::float8 / p.tf) AS min_len_per_tf
      FROM mneme.bm25_postings p GROUP BY p.conversation_id, p.term) s
WHERE s.conversation_id = t.conversation_id AND s.term = t.term;
-- A term row without postings (none is expected) bounds nothing tighter than 1.
UPDATE mneme.bm25_terms SET max_tf = 2147483647, min_len_per_tf = 0 WHERE max_tf IS NULL;
ALTER TABLE mneme.bm25_terms ALTER COLUMN max_tf SET NOT NULL, ALTER COLUMN min_len_per_tf SET NOT NULL;
COMMENT ON COLUMN mneme.bm25_terms.max_tf IS
    'At least the largest term frequency of the lexeme in the conversation''s counted memories (an upper bound: '
    'removals do not lower it).';
COMMENT ON COLUMN mneme.bm25_terms.min_len_per_tf IS
    'At most the smallest doclen / tf of the lexeme''s postings in the conversation (a lower bound: removals do '
    'not raise it).';

-- +goose Down
ALTER TABLE mneme.bm25_terms DROP COLUMN max_tf, DROP COLUMN min_len_per_tf;
