-- Issue 53: mneme._bm25_sums returns each memory's conversation too (the
-- BM25 leg looks up the set-aside terms of its candidates by the whole
-- key); its form of before, without it, is dropped here, once
-- (sql/110-bm25.sql creates the new one).
-- Numbered goose migration: applied once, never edited after release.

-- +goose Up
DROP FUNCTION IF EXISTS mneme._bm25_sums(uuid[], text[], float8[], float8, float8, float8, uuid[], timestamptz, timestamptz);

-- +goose Down
SELECT 1;
