-- Erase also removes the queries that retrieved an erased memory, wherever
-- they were copied (pending reviews, review job payloads, the review log of
-- memories retrieved alongside): mneme._scrub_payload takes the erased
-- queries as a fourth argument. The three-argument form is dropped here,
-- once, so the idempotent SQL layer never drops what it recreates.
-- Numbered goose migration: applied once, never edited after release.

-- +goose Up
DROP FUNCTION IF EXISTS mneme._scrub_payload(jsonb, text[], bigint[]);

-- +goose Down
SELECT 1;
