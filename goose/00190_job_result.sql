-- What a job did, written by its handler in the transaction that completes
-- it (issue 52): a consolidate job's counts and its model calls and tokens.
-- NULL for the kinds that write none and for the jobs done before.
-- Numbered goose migration: applied once, never edited after release.

-- +goose Up
-- (on Citus: one connection a shard; the column, then its check: Citus
-- adds no column with a constraint to a distributed table)
SET LOCAL citus.multi_shard_modify_mode TO 'sequential';
ALTER TABLE mneme.jobs ADD COLUMN result jsonb;
ALTER TABLE mneme.jobs ADD CONSTRAINT jobs_result_check
    CHECK (result IS NULL OR (jsonb_typeof(result) = 'object' AND pg_column_size(result) <= 8192));
COMMENT ON COLUMN mneme.jobs.result IS
    'What the job did, as its handler reports it (a consolidate job: facts read, superseded, merged, invalidated, model calls and tokens); NULL otherwise.';

-- +goose Down
ALTER TABLE mneme.jobs DROP COLUMN result;
