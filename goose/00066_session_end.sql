-- mneme.segment_now marks where the caller ended a session: the message it
-- was called after ends an episode, whenever the sidecar gets to it (a
-- mark on the message, not a boundary in a job's payload that a pending
-- job could absorb). The segment job splits the queue at these marks as it
-- does at gaps (mneme.queued_sessions).
-- Numbered goose migration: applied once, never edited after release.

-- +goose Up
ALTER TABLE mneme.messages ADD COLUMN ends_session boolean NOT NULL DEFAULT false;
COMMENT ON COLUMN mneme.messages.ends_session IS
    'mneme.segment_now was called with this message the last queued one: an episode ends here.';

-- +goose Down
ALTER TABLE mneme.messages DROP COLUMN ends_session;
