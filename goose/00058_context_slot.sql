-- The state context_items keeps per candidate memory while it fills the
-- budget: what the memory is, the words it has been given so far and the
-- turns chosen for it (one value per memory instead of one array per field).
-- Numbered goose migration: applied once, never edited after release.

-- +goose Up
CREATE TYPE mneme.context_slot AS (
    memory_id   uuid,
    kind        text,
    label       text,
    score       float8,
    first_at    timestamptz,
    words       int,
    message_ids bigint[]
);
COMMENT ON TYPE mneme.context_slot IS
    'Internal to mneme.context_items: one candidate memory while the budget is filled (its words so far, its turns).';

-- +goose Down
DROP TYPE mneme.context_slot;
