-- Tenants and roles: every row of the conversation tables belongs
-- to a tenant; row-level security, enabled and forced, keys every table on
-- the transaction-local setting mneme.tenant (mneme.set_tenant); group roles
-- mneme_app, mneme_worker, mneme_admin, and mneme_owner, which owns the
-- SECURITY DEFINER functions of the API (sql/900-access.sql) so that row
-- security applies inside them too. A single-tenant install needs nothing:
-- everything is in the tenant 'default'.
-- Numbered goose migration: applied once, never edited after release.

-- +goose Up
-- +goose StatementBegin
DO $$
DECLARE
    r text;
BEGIN
    FOREACH r IN ARRAY ARRAY['mneme_owner', 'mneme_app', 'mneme_worker', 'mneme_admin'] LOOP
        IF NOT EXISTS (SELECT 1 FROM pg_catalog.pg_roles WHERE rolname = r) THEN
            BEGIN
                EXECUTE format('CREATE ROLE %I NOLOGIN', r);
            EXCEPTION
                WHEN duplicate_object OR unique_violation THEN
                    NULL;  -- another database's migration created it meanwhile
                WHEN insufficient_privilege THEN
                    RAISE EXCEPTION 'mneme migrate: role % cannot create the group role %', current_user, r
                        USING ERRCODE = '42501',
                              HINT = format('an admin runs once: CREATE ROLE mneme_owner NOLOGIN; CREATE ROLE mneme_app NOLOGIN; '
                                            'CREATE ROLE mneme_worker NOLOGIN; CREATE ROLE mneme_admin NOLOGIN; GRANT mneme_owner TO %I;',
                                            current_user);
            END;
        END IF;
    END LOOP;
END
$$;
-- +goose StatementEnd

CREATE TABLE mneme.tenants (
    id         text PRIMARY KEY CHECK (id ~ '^[a-z0-9][a-z0-9_-]{0,62}$'),
    created_at timestamptz NOT NULL DEFAULT now()
);
INSERT INTO mneme.tenants (id) VALUES ('default');

-- The tenant of the current transaction: mneme.set_tenant's setting, else
-- 'default'. Defined here, not in sql/, because the row policies below
-- depend on it.
CREATE FUNCTION mneme._tenant()
RETURNS text
LANGUAGE sql STABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$ SELECT coalesce(nullif(pg_catalog.current_setting('mneme.tenant', true), ''), 'default') $$;

-- Whether the session is the sidecar's (a member of mneme_worker): it works
-- for every tenant. session_user, not current_user: a SECURITY DEFINER
-- function does not change it.
CREATE FUNCTION mneme._is_worker()
RETURNS boolean
LANGUAGE sql STABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$ SELECT pg_catalog.pg_has_role(session_user, 'mneme_worker', 'MEMBER') $$;

ALTER TABLE mneme.message_queue ADD COLUMN tenant_id text NOT NULL DEFAULT 'default' REFERENCES mneme.tenants (id);
-- Every conversation with memories has its queue row (remember did not make
-- one): the conversation is what a tenant owns.
INSERT INTO mneme.message_queue (id) SELECT DISTINCT m.conversation_id FROM mneme.memories m ON CONFLICT (id) DO NOTHING;
ALTER TABLE mneme.messages      ADD COLUMN tenant_id text NOT NULL DEFAULT 'default';
ALTER TABLE mneme.memories      ADD COLUMN tenant_id text NOT NULL DEFAULT 'default';
ALTER TABLE mneme.jobs          ADD COLUMN tenant_id text NOT NULL DEFAULT 'default';
ALTER TABLE mneme.review_log    ADD COLUMN tenant_id text NOT NULL DEFAULT 'default';
ALTER TABLE mneme.memory_events ADD COLUMN tenant_id text NOT NULL DEFAULT 'default';
-- From now on a row's tenant is the transaction's (or its conversation's,
-- sql/005-tenants.sql's trigger).
ALTER TABLE mneme.message_queue ALTER COLUMN tenant_id SET DEFAULT mneme._tenant();
ALTER TABLE mneme.messages      ALTER COLUMN tenant_id DROP DEFAULT;
ALTER TABLE mneme.memories      ALTER COLUMN tenant_id DROP DEFAULT;
ALTER TABLE mneme.jobs          ALTER COLUMN tenant_id DROP DEFAULT;
ALTER TABLE mneme.review_log    ALTER COLUMN tenant_id DROP DEFAULT;
ALTER TABLE mneme.memory_events ALTER COLUMN tenant_id DROP DEFAULT;

CREATE INDEX message_queue_tenant_idx ON mneme.message_queue (tenant_id, id);
CREATE INDEX memories_tenant_idx ON mneme.memories (tenant_id, conversation_id, created_at);

-- +goose StatementBegin
DO $$
DECLARE
    t text;
BEGIN
    FOREACH t IN ARRAY ARRAY['message_queue', 'messages', 'memories', 'jobs', 'review_log', 'memory_events'] LOOP
        EXECUTE format('ALTER TABLE mneme.%I ENABLE ROW LEVEL SECURITY', t);
        EXECUTE format('ALTER TABLE mneme.%I FORCE ROW LEVEL SECURITY', t);
        EXECUTE format('CREATE POLICY tenant_rows ON mneme.%I '
                       'USING (tenant_id = (SELECT mneme._tenant()) OR (SELECT mneme._is_worker())) '
                       'WITH CHECK (tenant_id = (SELECT mneme._tenant()) OR (SELECT mneme._is_worker()))', t);
    END LOOP;
END
$$;
-- +goose StatementEnd

-- +goose Down
-- +goose StatementBegin
DO $$
DECLARE
    t text;
BEGIN
    FOREACH t IN ARRAY ARRAY['message_queue', 'messages', 'memories', 'jobs', 'review_log', 'memory_events'] LOOP
        EXECUTE format('DROP POLICY tenant_rows ON mneme.%I', t);
        EXECUTE format('ALTER TABLE mneme.%I NO FORCE ROW LEVEL SECURITY', t);
        EXECUTE format('ALTER TABLE mneme.%I DISABLE ROW LEVEL SECURITY', t);
        EXECUTE format('ALTER TABLE mneme.%I DROP COLUMN tenant_id', t);
    END LOOP;
END
$$;
-- +goose StatementEnd
DROP FUNCTION mneme._is_worker();
DROP FUNCTION mneme._tenant();
DROP TABLE mneme.tenants;
