-- mneme.context: each message keeps its BM25 terms and its length
-- in words, so a context can score the turns of an episode against the query
-- and count its budget without tokenising at query time.
-- Numbered goose migration: applied once, never edited after release.

-- +goose Up
-- The tokeniser is mneme.bm25_tsvector's (sql/110-bm25.sql), written out:
-- a generated column may call built-in immutable functions only, and goose
-- runs before the SQL layer exists. TestContextTermsMatchTokeniser keeps the two equal.
ALTER TABLE mneme.messages
    ADD COLUMN terms tsvector GENERATED ALWAYS AS (to_tsvector('pg_catalog.english'::regconfig, left(content, 100000))) STORED,
    ADD COLUMN words int GENERATED ALWAYS AS (coalesce(array_length(regexp_split_to_array(btrim(content, E' \t\n\r\f\v'), E'\\s+'), 1), 0)) STORED;

INSERT INTO mneme.settings (key, value, description) VALUES
  ('context_candidates', '50',
   'mneme.context ranks this many memories with mneme.search (1..100) and fills the budget from them in rank order'),
  ('context_window', '2',
   'mneme.context adds this many neighbouring turns on each side of every turn that matches the query (overlapping windows merge)')
ON CONFLICT (key) DO NOTHING;

-- +goose Down
DELETE FROM mneme.settings WHERE key IN ('context_candidates', 'context_window');
ALTER TABLE mneme.messages DROP COLUMN words, DROP COLUMN terms;
