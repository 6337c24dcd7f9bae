-- The failed jobs of a tenant, by conversation: mneme.conversations (the
-- queue state of each conversation, mneme ui's first page) and the failed
-- jobs of mneme ui's /jobs read them; without it both read the whole jobs
-- table, every tenant's done jobs included. Partial: only failed jobs, so
-- the queue's hot path (pending, running, done) never writes to it.
-- Numbered goose migration: applied once, never edited after release.

-- +goose Up
CREATE INDEX jobs_failed_tenant_idx ON mneme.jobs (tenant_id, conversation_id) WHERE state = 'failed';

-- +goose Down
DROP INDEX mneme.jobs_failed_tenant_idx;
