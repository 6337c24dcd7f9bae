-- mneme.erasures: when erases happened, in any tenant. The events say it
-- too, but row security shows a caller only its tenant's events, so
-- mneme.erase_vacuum_targets() (which runs as its caller, an unbound admin
-- or the sidecar) could not see an erase in another tenant. No tenant, no
-- content: one row per erasing transaction (a row per call, not one row
-- updated by all: concurrent erases never wait on each other here). Only
-- the functions (as mneme_owner) write it.
-- Numbered goose migration: applied once, never edited after release.

-- +goose Up
CREATE TABLE mneme.erasures (
    erased_at timestamptz NOT NULL
);
CREATE INDEX erasures_erased_at_idx ON mneme.erasures (erased_at);
-- Every tenant's erases: the owner (who migrates) is not held by row
-- security while it is not forced.
ALTER TABLE mneme.memory_events NO FORCE ROW LEVEL SECURITY;
INSERT INTO mneme.erasures (erased_at)
SELECT max(e.at) FROM mneme.memory_events e WHERE e.event = 'erased' HAVING max(e.at) IS NOT NULL;
ALTER TABLE mneme.memory_events FORCE ROW LEVEL SECURITY;

-- +goose Down
DROP TABLE mneme.erasures;
