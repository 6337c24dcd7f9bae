-- mneme._context_item and mneme._turn_distances take the scope's
-- conversations (sql/140-context.sql): every read of a turn or memory by id
-- in the context names its conversation too, so on Citus it goes to that
-- conversation's shard instead of to every shard. The old signatures go
-- here; the SQL layer creates the new ones. Nothing depends on them
-- (context_items and _context_anchors call them from PL/pgSQL).
-- Numbered goose migration: applied once, never edited after release.

-- +goose Up
DROP FUNCTION IF EXISTS mneme._context_item(int, uuid, text, text, float8, timestamptz, bigint[], int);
DROP FUNCTION IF EXISTS mneme._turn_distances(bigint[], real[]);

-- +goose Down
DROP FUNCTION IF EXISTS mneme._context_item(int, uuid, text, text, float8, timestamptz, bigint[], int, uuid[]);
DROP FUNCTION IF EXISTS mneme._turn_distances(bigint[], real[], uuid[]);
