-- mneme.import_memories takes two more arguments, normalized (whether the
-- importer sent the embeddings L2-normalised as the array variant stores
-- them) and embeddings (the batch's embeddings as one binary array;
-- sql/460-export.sql), and its internal insert likewise: the older forms
-- are dropped here, once, and the SQL layer creates the current ones after
-- this runs (as goose 00053 does for older signatures).
-- Numbered goose migration: applied once, never edited after release.

-- +goose Up
DROP FUNCTION IF EXISTS mneme.import_memories(uuid, jsonb);
DROP FUNCTION IF EXISTS mneme._import_memory_rows(uuid, jsonb);
DROP FUNCTION IF EXISTS mneme.import_memories(uuid, jsonb, boolean);
DROP FUNCTION IF EXISTS mneme._import_memory_rows(uuid, jsonb, boolean);

-- +goose Down
DROP FUNCTION IF EXISTS mneme.import_memories(uuid, jsonb, boolean, real[]);
DROP FUNCTION IF EXISTS mneme._import_memory_rows(uuid, jsonb, boolean, real[]);
