-- =============================================================================
-- mneme tenants: whose rows these are. Every row of the conversation tables
-- has a tenant_id; row-level security (goose 00045) shows a session the rows
-- of the transaction's tenant (mneme.set_tenant), the sidecar's (mneme_worker)
-- every row. A conversation belongs to one tenant, fixed by its first write.
-- A single-tenant install never sets a tenant: everything is 'default'.
-- Idempotent: re-applied on every `mneme migrate`.
-- =============================================================================

-- On Citus (docs/scale.md) one tenant only, for now: the workers do not
-- see the transaction's tenant (a session setting of the coordinator) nor
-- the caller's login (Citus connects as the functions' owner), so the row
-- policies there would see every row as the default tenant's.
CREATE OR REPLACE FUNCTION mneme._check_single_tenant_citus(what text)
RETURNS void
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF mneme._distributed('mneme.memories') THEN
        RAISE EXCEPTION '%: tenants are not supported on Citus yet (the workers cannot tell them apart)', _check_single_tenant_citus.what
            USING ERRCODE = '0A000', HINT = 'a distributed mneme serves the default tenant only (docs/scale.md)';
    END IF;
END
$$;
COMMENT ON FUNCTION mneme._check_single_tenant_citus(text) IS
    'Internal: refuses tenant operations when the tables are distributed by Citus (docs/scale.md).';

CREATE OR REPLACE FUNCTION mneme.set_tenant(tenant text)
RETURNS text
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF set_tenant.tenant IS NULL THEN
        RAISE EXCEPTION 'tenant must not be NULL' USING ERRCODE = '22004';
    END IF;
    IF NOT EXISTS (SELECT 1 FROM mneme.tenants t WHERE t.id = set_tenant.tenant) THEN
        RAISE EXCEPTION 'unknown tenant %', mneme._quote_prefix(set_tenant.tenant)
            USING ERRCODE = '22023', HINT = 'an admin creates tenants: SELECT mneme.create_tenant(''acme'')';
    END IF;
    IF set_tenant.tenant <> 'default' THEN
        PERFORM mneme._check_single_tenant_citus('set_tenant');
    END IF;
    PERFORM set_config('mneme.tenant', set_tenant.tenant, true);
    PERFORM mneme._tenant();  -- a login bound to another tenant: 42501 here, not at its next call
    RETURN set_tenant.tenant;
END
$$;
COMMENT ON FUNCTION mneme.set_tenant(text) IS
    'Sets the tenant of the current transaction (transaction-local: call it after BEGIN, or in the same '
    'statement''s transaction). Every mneme function then sees and writes only that tenant''s rows. A login an '
    'admin bound to a tenant (mneme.bind_login) may set only that one (42501 otherwise).';

CREATE OR REPLACE FUNCTION mneme.bind_login(login text, tenant text)
RETURNS void
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
#variable_conflict use_column
BEGIN
    IF bind_login.login IS NULL OR bind_login.tenant IS NULL THEN
        RAISE EXCEPTION 'login and tenant must not be NULL' USING ERRCODE = '22004';
    END IF;
    IF NOT EXISTS (SELECT 1 FROM pg_catalog.pg_roles r WHERE r.rolname = bind_login.login AND r.rolcanlogin) THEN
        RAISE EXCEPTION 'no login role %', mneme._quote_prefix(bind_login.login) USING ERRCODE = '22023',
            HINT = 'CREATE ROLE ... LOGIN IN ROLE mneme_app first';
    END IF;
    IF NOT EXISTS (SELECT 1 FROM mneme.tenants t WHERE t.id = bind_login.tenant) THEN
        RAISE EXCEPTION 'unknown tenant %', mneme._quote_prefix(bind_login.tenant) USING ERRCODE = '22023',
            HINT = 'SELECT mneme.create_tenant(...) first';
    END IF;
    IF pg_catalog.pg_has_role(bind_login.login, 'mneme_worker', 'MEMBER') THEN
        RAISE EXCEPTION 'login % is a sidecar login (mneme_worker): it serves every tenant', bind_login.login
            USING ERRCODE = '22023';
    END IF;
    PERFORM mneme._check_single_tenant_citus('bind_login');
    INSERT INTO mneme.tenant_logins (login, tenant_id) VALUES (bind_login.login, bind_login.tenant)
    ON CONFLICT (login) DO UPDATE SET tenant_id = EXCLUDED.tenant_id, bound_at = now(), bound_by = session_user;
END
$$;
COMMENT ON FUNCTION mneme.bind_login(text, text) IS
    'Binds a database login to a tenant (admin): every session of that login acts for that tenant only, '
    'whatever it sets (setting another tenant is 42501). For one login per customer. Rebinding moves it.';

CREATE OR REPLACE FUNCTION mneme.unbind_login(login text)
RETURNS boolean
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF unbind_login.login IS NULL THEN
        RAISE EXCEPTION 'login must not be NULL' USING ERRCODE = '22004';
    END IF;
    DELETE FROM mneme.tenant_logins b WHERE b.login = unbind_login.login;
    RETURN FOUND;
END
$$;
COMMENT ON FUNCTION mneme.unbind_login(text) IS
    'Removes a login''s tenant binding (admin); it then acts for the tenant its sessions set. Returns whether '
    'there was one.';

CREATE OR REPLACE FUNCTION mneme.create_tenant(tenant text)
RETURNS text
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF create_tenant.tenant IS NULL OR create_tenant.tenant !~ '^[a-z0-9][a-z0-9_-]{0,62}$' THEN
        RAISE EXCEPTION 'tenant id %: want 1 to 63 lower-case letters, digits, _ or -, starting with a letter or digit',
            mneme._quote_prefix(create_tenant.tenant) USING ERRCODE = '22023';
    END IF;
    IF create_tenant.tenant <> 'default' THEN
        PERFORM mneme._check_single_tenant_citus('create_tenant');
    END IF;
    INSERT INTO mneme.tenants (id) VALUES (create_tenant.tenant) ON CONFLICT (id) DO NOTHING;
    RETURN create_tenant.tenant;
END
$$;
COMMENT ON FUNCTION mneme.create_tenant(text) IS
    'Creates a tenant (admin); an existing one is left as it is. Returns its id.';

-- A row's tenant, when its insert leaves it out: its conversation's, else
-- the transaction's.
CREATE OR REPLACE FUNCTION mneme.tenant_fill_trg()
RETURNS trigger
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF NEW.tenant_id IS NULL THEN
        IF NEW.conversation_id IS NOT NULL THEN
            SELECT q.tenant_id INTO NEW.tenant_id FROM mneme.message_queue q WHERE q.id = NEW.conversation_id;
        END IF;
        NEW.tenant_id := coalesce(NEW.tenant_id, mneme._tenant());
    END IF;
    RETURN NEW;
END
$$;
DO $$
DECLARE
    t text;
BEGIN
    FOREACH t IN ARRAY ARRAY['messages', 'memories', 'jobs', 'review_log', 'memory_events'] LOOP
        EXECUTE format('DROP TRIGGER IF EXISTS %I ON mneme.%I', t || '_tenant', t);
        EXECUTE format('CREATE TRIGGER %I BEFORE INSERT ON mneme.%I FOR EACH ROW EXECUTE FUNCTION mneme.tenant_fill_trg()',
                       t || '_tenant', t);
    END LOOP;
END
$$;

-- The conversation for a write: created for the transaction's tenant on
-- first use; a conversation of another tenant is not there to write to.
CREATE OR REPLACE FUNCTION mneme._claim_conversation(conversation_id uuid)
RETURNS void
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
#variable_conflict use_column
BEGIN
    -- The common case first: the conversation exists and is the caller's
    -- (one read; the insert below would also run the row's BEFORE trigger
    -- and policy checks at every message).
    IF EXISTS (SELECT 1 FROM mneme.message_queue q WHERE q.id = _claim_conversation.conversation_id
               AND (q.tenant_id = mneme._tenant() OR mneme._is_worker())) THEN
        RETURN;
    END IF;
    INSERT INTO mneme.message_queue (id) VALUES (_claim_conversation.conversation_id) ON CONFLICT (id) DO NOTHING;
    IF NOT EXISTS (SELECT 1 FROM mneme.message_queue q WHERE q.id = _claim_conversation.conversation_id
                   AND (q.tenant_id = mneme._tenant() OR mneme._is_worker())) THEN
        RAISE EXCEPTION 'conversation % belongs to another tenant', _claim_conversation.conversation_id
            USING ERRCODE = '42501', HINT = 'SELECT mneme.set_tenant(...) in the transaction, or use another conversation id';
    END IF;
END
$$;
COMMENT ON FUNCTION mneme._claim_conversation(uuid) IS
    'Internal: makes sure the conversation exists and belongs to the transaction''s tenant (42501 otherwise).';

-- Whether the session may read the conversation's derived rows (BM25
-- statistics have no tenant column: they are reached through it).
-- PL/pgSQL: Citus cannot plan a distributed query that takes a SQL
-- function's parameter ("could not create distributed plan"; docs/scale.md).
CREATE OR REPLACE FUNCTION mneme._readable_conversation(conversation_id uuid)
RETURNS boolean
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    RETURN mneme._is_worker()
        OR EXISTS (SELECT 1 FROM mneme.message_queue q WHERE q.id = _readable_conversation.conversation_id
                   AND q.tenant_id = mneme._tenant());
END
$$;
COMMENT ON FUNCTION mneme._readable_conversation(uuid) IS
    'Internal: whether the conversation belongs to the transaction''s tenant (or the session is the sidecar''s).';
