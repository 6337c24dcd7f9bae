-- mneme._payload_probes, the jsonb documents an erase looked for with @>
-- in job payloads, is replaced by mneme.job_refs (goose 00180): dropped
-- here, once (the SQL layer drops no function).
-- Numbered goose migration: applied once, never edited after release.

-- +goose Up
DROP FUNCTION IF EXISTS mneme._payload_probes(text[], bigint[], text[]);

-- +goose Down
-- (the SQL layer of the release rolled back to creates it again)
SELECT 1;
