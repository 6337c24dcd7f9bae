-- The publication the sidecar's replication transport reads: inserts into
-- mneme.jobs only (a new job is the only event; updates are the sidecar's own).
-- The sidecar also creates it if absent (an older database, a dropped one).
-- Numbered goose migration: applied once, never edited after release.

-- +goose Up
CREATE PUBLICATION mneme_jobs FOR TABLE mneme.jobs WITH (publish = 'insert');

-- +goose Down
DROP PUBLICATION IF EXISTS mneme_jobs;
