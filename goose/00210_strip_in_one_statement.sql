-- mneme._without_queries, the per-row helper that stripped erased queries
-- from a review row's matched_queries, is replaced by one statement in
-- mneme._strip_review_queries (sql/435-erase-refs.sql; issue 47: it built
-- the hash of the erased queries again for every row): dropped here, once
-- (the SQL layer drops no function).
-- Numbered goose migration: applied once, never edited after release.

-- +goose Up
DROP FUNCTION IF EXISTS mneme._without_queries(text[], text[]);

-- +goose Down
-- (the SQL layer of the release rolled back to creates it again)
SELECT 1;
