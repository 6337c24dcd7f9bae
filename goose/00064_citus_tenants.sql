-- Tenants on Citus: the check that refused every tenant but the default on
-- a distributed mneme is gone (the workers now learn the caller from the
-- coordinator: mneme._enter, sql/005-tenants.sql; docs/scale.md).
-- Numbered goose migration: applied once, never edited after release.

-- +goose Up
DROP FUNCTION IF EXISTS mneme._check_single_tenant_citus(text);

-- +goose Down
-- (the SQL layer of that version re-creates it on its next migrate)
SELECT 1;
