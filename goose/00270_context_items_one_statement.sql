-- Issue 49: mneme._context_fill builds every item of a context, its
-- passages' newest-first order included, in one statement; the per-item
-- PL/pgSQL functions it called are dropped here, once (sql/140-context.sql
-- no longer creates them). Nothing else calls them.
-- Numbered goose migration: applied once, never edited after release.

-- +goose Up
DROP FUNCTION IF EXISTS mneme._context_item(int, uuid, text, text, float8, timestamptz, bigint[], int, uuid[]);
DROP FUNCTION IF EXISTS mneme._context_turn_order(uuid, bigint[], boolean, uuid[]);

-- +goose Down
SELECT 1;
