-- mneme.apply_revision gained job_id (a job touches only rows of its own
-- conversation's tenant): the seven-argument form is dropped, else the SQL
-- layer's eight-argument one would be an ambiguous overload.
-- Numbered goose migration: applied once, never edited after release.

-- +goose Up
DROP FUNCTION IF EXISTS mneme.apply_revision(uuid, text, uuid, text, text, text, boolean);

-- +goose Down
SELECT 1;
