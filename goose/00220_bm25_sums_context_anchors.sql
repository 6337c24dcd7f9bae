-- Issues 51 and 53: mneme._bm25_sums returns each memory's conversation
-- too (the BM25 leg looks up the set-aside terms of its candidates by the
-- whole key), and mneme._context_anchors takes the memories it anchors
-- (mneme.context_candidates ranks them once for the context and for the
-- person reading it). Their forms of before are dropped here, once
-- (sql/110-bm25.sql and sql/140-context.sql create the new ones).
-- Numbered goose migration: applied once, never edited after release.

-- +goose Up
DROP FUNCTION IF EXISTS mneme._bm25_sums(uuid[], text[], float8[], float8, float8, float8, uuid[], timestamptz, timestamptz);
DROP FUNCTION IF EXISTS mneme._context_anchors(uuid, text, real[], timestamptz, timestamptz, timestamptz, text, uuid[]);

-- +goose Down
SELECT 1;
