-- Issue 49/53: a conversation's pending reviews (mneme.message_queue.
-- pending_reviews, up to pending_reviews_max entries) are rewritten whole
-- by every retrieve that appends to them. With the default TOAST
-- compression (pglz) compressing the list again took most of a retrieve's
-- CPU once it held a few hundred entries: 8.4 ms against 6.0 to 6.2 ms
-- with lz4 (100 retrieves of k 10 on a 20,000-memory conversation whose
-- list held 220 to 320 entries; docs/performance.md). Only values written
-- from now on use it. Where the change is refused (a PostgreSQL built
-- without lz4; a distributed table that refuses it) pglz stays and a
-- NOTICE says why: nothing depends on it, so it never stops a migration.
-- Numbered goose migration: applied once, never edited after release.

-- +goose Up
-- +goose StatementBegin
DO $$
BEGIN
    ALTER TABLE mneme.message_queue ALTER COLUMN pending_reviews SET COMPRESSION lz4;
EXCEPTION WHEN OTHERS THEN
    RAISE NOTICE 'pending_reviews keeps the default compression: %', SQLERRM;
END
$$;
-- +goose StatementEnd

-- +goose Down
ALTER TABLE mneme.message_queue ALTER COLUMN pending_reviews SET COMPRESSION default;
