-- Functions whose argument list or result changed over time: the old forms
-- are dropped here, once, instead of by the idempotent SQL layer on every
-- migrate (a DROP there also dropped the current inspect and history on
-- every migrate, so a view depending on them made the next migrate fail).
-- inspect and history changed their result columns, which CREATE OR
-- REPLACE cannot do: they are dropped only where an older shape is still
-- installed, and the SQL layer creates the current one after this runs.
-- Numbered goose migration: applied once, never edited after release.

-- +goose Up
-- +goose StatementBegin
DO $$
BEGIN
    DROP FUNCTION IF EXISTS mneme.remember(uuid, text, text, boolean, timestamptz, uuid, text, text);
    DROP FUNCTION IF EXISTS mneme.search(uuid, text, int, real[], timestamptz, timestamptz);
    DROP FUNCTION IF EXISTS mneme.search(uuid, text, int, real[], timestamptz, timestamptz, timestamptz);
    DROP FUNCTION IF EXISTS mneme.search(uuid, text, int, real[], timestamptz, timestamptz, timestamptz, text);
    DROP FUNCTION IF EXISTS mneme.retrieve(uuid, text, int, real[], timestamptz, timestamptz);
    DROP FUNCTION IF EXISTS mneme.retrieve(uuid, text, int, real[], timestamptz, timestamptz, timestamptz);
    DROP FUNCTION IF EXISTS mneme.retrieve(uuid, text, int, real[], timestamptz, timestamptz, timestamptz, text);
    DROP FUNCTION IF EXISTS mneme.retrieve_markdown(uuid, text, int, real[], timestamptz, timestamptz);
    DROP FUNCTION IF EXISTS mneme.retrieve_markdown(uuid, text, int, real[], timestamptz, timestamptz, timestamptz);
    DROP FUNCTION IF EXISTS mneme.retrieve_markdown(uuid, text, int, real[], timestamptz, timestamptz, timestamptz, text);
    DROP FUNCTION IF EXISTS mneme.revision_candidates(uuid, int);
    DROP FUNCTION IF EXISTS mneme.apply_revision(uuid, text, uuid, text, text);
    DROP FUNCTION IF EXISTS mneme.claim_jobs(text, int, interval);
    DROP FUNCTION IF EXISTS mneme.fail_job(bigint, text, int, text, interval, boolean);
    DROP FUNCTION IF EXISTS mneme._segment_followup(uuid, bigint);
    IF to_regprocedure('mneme.inspect(uuid)') IS NOT NULL
       AND pg_catalog.pg_get_function_result(to_regprocedure('mneme.inspect(uuid)')) <>
           'TABLE(memory_id uuid, conversation_id uuid, kind text, status text, status_reason text, label text, '
           'pinned boolean, summary text, content text, stability double precision, difficulty double precision, '
           'last_reviewed_at timestamp with time zone, review_count integer, supersedes_id uuid, superseded_by uuid, '
           'created_at timestamp with time zone, confidence_score real, source_type text, source_ref text, '
           'source_message_ids bigint[], valid_until timestamp with time zone, last_confirmed_at timestamp with time zone, '
           'confirms_id uuid, invalidates_id uuid, slot text, revision text)' THEN
        DROP FUNCTION mneme.inspect(uuid);
    END IF;
    IF to_regprocedure('mneme.history(uuid)') IS NOT NULL
       AND pg_catalog.pg_get_function_result(to_regprocedure('mneme.history(uuid)')) <>
           'TABLE(depth integer, relation text, memory_id uuid, status text, status_reason text, content text, '
           'supersedes_id uuid, confidence_score real, source_type text, valid_until timestamp with time zone, '
           'created_at timestamp with time zone)' THEN
        DROP FUNCTION mneme.history(uuid);
    END IF;
END
$$;
-- +goose StatementEnd

-- +goose Down
SELECT 1;
