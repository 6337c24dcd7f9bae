-- Issue 53: mneme._search_candidates takes the vector leg's candidate count
-- (vector_candidates) apart from the BM25 leg's; its form of before, without
-- it, is dropped here, once (sql/130-search.sql creates the new one).
-- Numbered goose migration: applied once, never edited after release.

-- +goose Up
DROP FUNCTION IF EXISTS mneme._search_candidates(uuid[], text, real[], int, timestamptz, timestamptz, timestamptz, boolean);

-- +goose Down
SELECT 1;
