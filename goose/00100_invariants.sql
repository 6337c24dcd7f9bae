-- Invariants that hold whatever the path (issue 47, sql/015-invariants.sql).
-- mneme.instance_key: a random key of the installation, from which, with
-- the tenant and a name, the tenants' named conversations are derived
-- (mneme.named_conversation: the mem0 import's conversation of a user):
-- another tenant cannot compute them, so it can neither take such an id
-- first nor learn that it exists. One row; only the functions (as
-- mneme_owner) read it.
-- mneme.call_marks: what a mneme function tells the triggers below it in
-- the same transaction (the reason of the event it causes, the kind of a
-- delete, an import under way), keyed by the backend and the transaction:
-- written and read only by the functions, as mneme_owner, so a caller
-- cannot plant one (a setting, which any session may SET, could be
-- planted). Unlogged: a mark lives inside one transaction.
-- A jobs_retention of zero in disguise ("0", "P0D", "1 day -24 hours"),
-- which the rule accepted before and cleanup refuses, becomes the
-- default (7 days): the rule now wants at least a second.
-- Numbered goose migration: applied once, never edited after release.

-- +goose Up
CREATE TABLE mneme.instance_key (
    one boolean PRIMARY KEY DEFAULT true CHECK (one),
    key uuid NOT NULL DEFAULT gen_random_uuid()
);
INSERT INTO mneme.instance_key DEFAULT VALUES;
CREATE UNLOGGED TABLE mneme.call_marks (
    backend_pid int NOT NULL,
    xid         xid8 NOT NULL,
    key         text NOT NULL,
    value       text NOT NULL,
    PRIMARY KEY (backend_pid, xid, key)
);
-- What an erase looks up, found by index and not by reading every row of
-- the tenant (issue 47: 0.8 to 1.2 s per erase at 27,000 memories): a
-- conversation's jobs, an episode's messages, the review jobs that name a
-- memory, message or query (jsonb containment), the review rows that quote
-- a query, the reasons that name a memory id, the queues with pending
-- reviews.
CREATE INDEX jobs_conversation_idx ON mneme.jobs (conversation_id);
CREATE INDEX messages_memory_idx ON mneme.messages (memory_id) WHERE memory_id IS NOT NULL;
CREATE INDEX jobs_review_payload_idx ON mneme.jobs USING gin (payload jsonb_path_ops) WHERE kind = 'review';
CREATE INDEX review_log_queries_idx ON mneme.review_log USING gin (matched_queries);
CREATE INDEX memory_events_naming_idx ON mneme.memory_events (tenant_id)
    WHERE reason ~ '[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}';
CREATE INDEX memories_reason_naming_idx ON mneme.memories (tenant_id)
    WHERE status_reason ~ '[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}';
CREATE INDEX message_queue_pending_idx ON mneme.message_queue (tenant_id) WHERE pending_reviews IS NOT NULL;
-- +goose StatementBegin
DO $fix$
BEGIN
    UPDATE mneme.settings SET value = '"7 days"'
    WHERE key = 'jobs_retention' AND jsonb_typeof(value) = 'string' AND (value #>> '{}')::interval < interval '1 second';
EXCEPTION WHEN others THEN
    NULL;  -- not an interval at all: cleanup names it, set_setting mends it
END
$fix$;
-- +goose StatementEnd

-- +goose Down
DROP INDEX mneme.jobs_conversation_idx, mneme.messages_memory_idx, mneme.jobs_review_payload_idx, mneme.review_log_queries_idx,
    mneme.memory_events_naming_idx, mneme.memories_reason_naming_idx, mneme.message_queue_pending_idx;
DROP TABLE mneme.call_marks;
DROP TABLE mneme.instance_key;
