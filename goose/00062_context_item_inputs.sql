-- mneme._context_item's inputs are renamed i_* (sql/140-context.sql): the
-- PL/pgSQL form it gets on Citus (sql/950-citus.sql) may not give an input
-- and an output column the same name. An input's name cannot be changed in
-- place, so the old function goes here; the SQL layer creates the new one.
-- Nothing depends on it (context_items calls it from PL/pgSQL).
-- Numbered goose migration: applied once, never edited after release.

-- +goose Up
DROP FUNCTION IF EXISTS mneme._context_item(int, uuid, text, text, float8, timestamptz, bigint[], int);

-- +goose Down
DROP FUNCTION IF EXISTS mneme._context_item(int, uuid, text, text, float8, timestamptz, bigint[], int);
