-- mneme.erasures: when the last erase happened, in any tenant. The events
-- say it too, but row security shows a caller only its tenant's events, so
-- mneme.erase_vacuum_targets() (which runs as its caller, an unbound admin
-- or the sidecar) could not see an erase in another tenant. One row, no
-- tenant, no content: only the functions (as mneme_owner) read and write it.
-- Numbered goose migration: applied once, never edited after release.

-- +goose Up
CREATE TABLE mneme.erasures (
    id            boolean PRIMARY KEY DEFAULT true CHECK (id),
    last_erase_at timestamptz NOT NULL
);
INSERT INTO mneme.erasures (last_erase_at)
SELECT max(e.at) FROM mneme.memory_events e WHERE e.event = 'erased' HAVING max(e.at) IS NOT NULL;

-- +goose Down
DROP TABLE mneme.erasures;
