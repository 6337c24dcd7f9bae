-- The tombstone of an erased memory that was imported from another memory
-- system (source_type import, mneme.import_fact) keeps the source's id
-- (its source_ref, e.g. "mem0:<id>"): an id, no content. A later import of
-- the same source memory (mneme.import_fact, `mneme import --from mem0`)
-- finds it and skips the memory instead of bringing it back (issue 47).
-- Numbered goose migration: applied once, never edited after release.

-- +goose Up
ALTER TABLE mneme.memory_events ADD COLUMN source_ref text;
CREATE INDEX memory_events_source_idx ON mneme.memory_events (conversation_id, source_ref) WHERE source_ref IS NOT NULL;

-- +goose Down
DROP INDEX mneme.memory_events_source_idx;
ALTER TABLE mneme.memory_events DROP COLUMN source_ref;
