-- Each setting remembers its default (written by the registry in
-- sql/010-setting-rules.sql on every migrate), so a release that changes a
-- default changes the value only where nobody set it, and an operator can
-- see what they changed: SELECT key, value, default_value FROM
-- mneme.settings WHERE value IS DISTINCT FROM default_value.
-- Numbered goose migration: applied once, never edited after release.

-- +goose Up
ALTER TABLE mneme.settings ADD COLUMN default_value jsonb;
COMMENT ON COLUMN mneme.settings.default_value IS
    'The default of this release (NULL for vector_variant and embedding_dim, written by migrate); the registry '
    'replaces value on migrate only where it still equals the previous default.';

-- +goose Down
ALTER TABLE mneme.settings DROP COLUMN default_value;
