-- Issue 53 (the upgrade window): mneme._claim_jobs_distributed takes the
-- kinds a claim leaves out (except_kinds: kinds newer than the sidecar);
-- its form of before, without them, is dropped here, once
-- (sql/200-jobs.sql creates the new one).
-- Numbered goose migration: applied once, never edited after release.

-- +goose Up
DROP FUNCTION IF EXISTS mneme._claim_jobs_distributed(text, int, interval, int);

-- +goose Down
SELECT 1;
