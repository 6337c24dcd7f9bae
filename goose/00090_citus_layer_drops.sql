-- The Citus layer is written out in sql/citus/ (issue 41): the helpers of
-- the old migrate-time rewriting are dropped here, once.
-- mneme._functions_reaching listed the functions to rewrite; nothing uses
-- it now. mneme._shard_local_trg dispatched a shard's row trigger to the
-- shard's copy of its function: dropped here where no trigger calls it (one
-- server); on Citus sql/citus/300-triggers.sql re-creates the triggers and
-- drops it then.
-- Numbered goose migration: applied once, never edited after release.

-- +goose Up
DROP FUNCTION IF EXISTS mneme._functions_reaching(text);
-- +goose StatementBegin
DO $gone$
BEGIN
    IF to_regprocedure('mneme._shard_local_trg()') IS NOT NULL
       AND NOT EXISTS (SELECT 1 FROM pg_catalog.pg_trigger t
                       WHERE t.tgfoid = to_regprocedure('mneme._shard_local_trg()')) THEN
        DROP FUNCTION mneme._shard_local_trg();
    END IF;
END
$gone$;
-- +goose StatementEnd

-- +goose Down
SELECT 1;
