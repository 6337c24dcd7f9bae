-- mneme.queued_messages gained before_gap (a check job reads only the
-- messages before the first gap): the two-argument form is dropped, else
-- the SQL layer's three-argument one would be an ambiguous overload.
-- Numbered goose migration: applied once, never edited after release.

-- +goose Up
DROP FUNCTION IF EXISTS mneme.queued_messages(uuid, bigint);

-- +goose Down
SELECT 1;
