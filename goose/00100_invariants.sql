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
DROP TABLE mneme.call_marks;
DROP TABLE mneme.instance_key;
