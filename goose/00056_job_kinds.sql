-- The job kinds the sidecar handles and the payload each handler reads: one
-- table that mneme.enqueue_job checks every job against and the sidecar
-- compares its handlers with at start. The rows are mneme's own
-- definitions, written by sql/000-core.sql on every migrate.
-- Numbered goose migration: applied once, never edited after release.

-- +goose Up
CREATE TABLE mneme.job_kinds (
    kind               text PRIMARY KEY CHECK (kind ~ '^[a-z][a-z0-9_]{0,63}$'),
    needs_conversation boolean NOT NULL,
    payload_rule       jsonpath NOT NULL,
    payload_hint       text NOT NULL,
    description        text NOT NULL
);
COMMENT ON TABLE mneme.job_kinds IS
    'The job kinds the sidecar handles: whether a job needs a conversation, the predicate (jsonpath, for '
    'jsonb_path_match) its payload must satisfy, what the payload holds, and what the job does.';

-- +goose Down
DROP TABLE mneme.job_kinds;
