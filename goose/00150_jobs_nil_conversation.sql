-- A job of no conversation (cleanup) has the nil conversation, as it always
-- had on Citus (jobs are distributed by conversation): the functions that
-- finish a job then name its conversation with = beside its id on every
-- deployment (sql/200-jobs.sql). mneme.enqueue_job gives new jobs the nil
-- conversation; this moves the jobs written before.
-- Numbered goose migration: applied once, never edited after release.

-- +goose Up
-- Every tenant's rows: the owner (who migrates) is not held by row
-- security while it is not forced.
ALTER TABLE mneme.jobs NO FORCE ROW LEVEL SECURITY;
-- (on Citus, where the conversation is the distribution column, no job
-- lacks one, and an UPDATE of it would be refused even of no row)
-- +goose StatementBegin
DO $nil$
BEGIN
    IF EXISTS (SELECT 1 FROM mneme.jobs WHERE conversation_id IS NULL) THEN
        UPDATE mneme.jobs SET conversation_id = '00000000-0000-0000-0000-000000000000' WHERE conversation_id IS NULL;
    END IF;
END
$nil$;
-- +goose StatementEnd
ALTER TABLE mneme.jobs FORCE ROW LEVEL SECURITY;

-- +goose Down
-- (the nil conversation stays: the previous release reads it as any
-- conversation, and on Citus it had it already)
SELECT 1;
