-- =============================================================================
-- mneme tenants: whose rows these are. Every row of the conversation tables
-- has a tenant_id; row-level security (goose 00045) shows a session the rows
-- of the transaction's tenant (mneme.set_tenant), the sidecar's (mneme_worker)
-- every row. A conversation belongs to one tenant, fixed by its first write.
-- A single-tenant install never sets a tenant: everything is 'default'.
-- The row policies' functions (_resolve_tenant and _tenant here,
-- _is_operator in 470-usage.sql, _is_worker made by goose 00061) are
-- PUBLIC's, granted with row security in sql/900-access.sql. A tenant's
-- end is erase's: mneme.drop_tenant in 440-erase.sql.
-- Idempotent: re-applied on every `mneme migrate`.
-- =============================================================================

-- The caller's tenant: its login's binding, else the transaction's setting,
-- else 'default'; a bound login that sets another tenant is refused. On one
-- server mneme._tenant(), which the row policies call, is this (below); on
-- Citus _tenant() inside the API is the tenant mneme._enter resolved with
-- this at the call's start and forwarded to the workers (sql/citus/200-functions.sql,
-- docs/scale.md).
CREATE OR REPLACE FUNCTION mneme._resolve_tenant()
RETURNS text
LANGUAGE plpgsql STABLE PARALLEL SAFE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_bound text;
    v_set   text := nullif(pg_catalog.current_setting('mneme.tenant', true), '');
BEGIN
    -- session_user: the login that connected; SET ROLE and SECURITY
    -- DEFINER functions do not change it.
    SELECT b.tenant_id INTO v_bound FROM mneme.tenant_logins b WHERE b.login = session_user;
    IF v_bound IS NULL THEN
        RETURN coalesce(v_set, 'default');
    END IF;
    IF v_set IS NOT NULL AND v_set <> v_bound THEN
        RAISE EXCEPTION 'login % is bound to tenant %: it cannot act for tenant %', session_user, v_bound, left(v_set, 80)
            USING ERRCODE = '42501', HINT = 'an admin binds logins to tenants (mneme.bind_login); connect as a login of that tenant';
    END IF;
    RETURN v_bound;
END
$$;
COMMENT ON FUNCTION mneme._resolve_tenant() IS
    'Internal: the caller''s tenant (login binding, else mneme.tenant, else default; 42501 for a bound login '
    'that set another).';

-- The row policies' tenant (goose 00054 made it with this body; one body
-- now). Plain SQL without SET: inlined where it is called. On Citus
-- sql/citus/200-functions.sql replaces it.
CREATE OR REPLACE FUNCTION mneme._tenant()
RETURNS text
LANGUAGE sql STABLE PARALLEL SAFE
AS $$ SELECT mneme._resolve_tenant() $$;

CREATE OR REPLACE FUNCTION mneme.set_tenant(tenant text)
RETURNS text
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
SET jit = off
AS $$
BEGIN
    PERFORM mneme._enter(NULL);  -- the caller forwarded first (Citus: mneme._enter)
    IF set_tenant.tenant IS NULL THEN
        RAISE EXCEPTION 'tenant must not be NULL' USING ERRCODE = '22004';
    END IF;
    IF NOT EXISTS (SELECT 1 FROM mneme.tenants t WHERE t.id = set_tenant.tenant) THEN
        RAISE EXCEPTION 'unknown tenant %', mneme._quote_prefix(set_tenant.tenant)
            USING ERRCODE = '22023', HINT = 'an admin creates tenants: SELECT mneme.create_tenant(''acme'')';
    END IF;
    -- transaction-local; on Citus forwarded to the workers too, so that
    -- reads of the tables and views outside the API (an admin's job_stats)
    -- see the tenant's rows there
    PERFORM mneme._set_local('mneme.tenant', set_tenant.tenant);
    PERFORM mneme._resolve_tenant();  -- a login bound to another tenant: 42501 here, not at its next call
    RETURN set_tenant.tenant;
END
$$;
COMMENT ON FUNCTION mneme.set_tenant(text) IS
    'Sets the tenant of the current transaction (transaction-local: call it after BEGIN, or in the same '
    'statement''s transaction). Every mneme function then sees and writes only that tenant''s rows. A login an '
    'admin bound to a tenant (mneme.bind_login) may set only that one (42501 otherwise).';
GRANT EXECUTE ON FUNCTION mneme.set_tenant(text) TO mneme_app, mneme_worker, mneme_admin;

-- Who may act on every tenant at once. A login bound to a tenant (an app
-- login or an admin: mneme.bind_login) acts for that tenant only, and so
-- may not do what reaches past it: bind or unbind logins (itself
-- included: unbinding would free it, binding another login would take a
-- login away from its tenant), create tenants, or change the settings,
-- which are global (one value for every tenant; docs/settings.md). An
-- unbound admin is the operator and may. Raises 42501 naming the action.
CREATE OR REPLACE FUNCTION mneme._require_unbound(action text)
RETURNS void
LANGUAGE plpgsql STABLE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_bound text;
BEGIN
    SELECT b.tenant_id INTO v_bound FROM mneme.tenant_logins b WHERE b.login = mneme._caller();
    IF v_bound IS NOT NULL THEN
        RAISE EXCEPTION 'login % is bound to tenant %: it may not %', mneme._caller(), v_bound, _require_unbound.action
            USING ERRCODE = '42501',
                  HINT = 'an unbound admin login (the operator) does this; a bound login acts for its own tenant only';
    END IF;
END
$$;
COMMENT ON FUNCTION mneme._require_unbound(text) IS
    'Internal: raises 42501 when the calling login is bound to a tenant (it may not act past its tenant: bind or '
    'unbind logins, create tenants, change the global settings).';

CREATE OR REPLACE FUNCTION mneme.bind_login(login text, tenant text)
RETURNS void
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
SET jit = off
AS $$
#variable_conflict use_column
DECLARE
    v__entered boolean := mneme._enter(NULL);  -- the caller forwarded first (Citus: mneme._enter)
    v_now timestamptz := now();
    v_by  name := session_user;
BEGIN
    PERFORM mneme._require_unbound('bind logins');
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
            USING ERRCODE = '22023',
                  HINT = format('bind a login of the tenant''s application instead: CREATE ROLE %s_app LOGIN IN ROLE mneme_app; '
                                'SELECT mneme.bind_login(''%s_app'', %L); the sidecar''s login stays unbound',
                                bind_login.tenant, bind_login.tenant, bind_login.tenant);
    END IF;
    -- bound_at and bound_by given as values: Citus refuses functions that
    -- are not IMMUTABLE in the DO UPDATE of a (reference) table's insert
    INSERT INTO mneme.tenant_logins (login, tenant_id, bound_at, bound_by)
    VALUES (bind_login.login, bind_login.tenant, v_now, v_by)
    ON CONFLICT (login) DO UPDATE SET tenant_id = EXCLUDED.tenant_id, bound_at = EXCLUDED.bound_at, bound_by = EXCLUDED.bound_by;
END
$$;
COMMENT ON FUNCTION mneme.bind_login(text, text) IS
    'Binds a database login to a tenant (an unbound admin; a bound login gets 42501): every session of that login '
    'acts for that tenant only, whatever it sets (setting another tenant is 42501). For one login per customer. '
    'Rebinding moves it.';
GRANT EXECUTE ON FUNCTION mneme.bind_login(text, text) TO mneme_admin;

CREATE OR REPLACE FUNCTION mneme.unbind_login(login text)
RETURNS boolean
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
SET jit = off
AS $$
BEGIN
    PERFORM mneme._require_unbound('unbind logins');
    IF unbind_login.login IS NULL THEN
        RAISE EXCEPTION 'login must not be NULL' USING ERRCODE = '22004';
    END IF;
    DELETE FROM mneme.tenant_logins b WHERE b.login = unbind_login.login;
    RETURN FOUND;
END
$$;
COMMENT ON FUNCTION mneme.unbind_login(text) IS
    'Removes a login''s tenant binding (an unbound admin; a bound login, itself included, gets 42501); it then acts '
    'for the tenant its sessions set. Returns whether there was one.';
GRANT EXECUTE ON FUNCTION mneme.unbind_login(text) TO mneme_admin;

CREATE OR REPLACE FUNCTION mneme.create_tenant(tenant text)
RETURNS text
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
SET jit = off
AS $$
BEGIN
    PERFORM mneme._enter(NULL);  -- the caller forwarded first (Citus: mneme._enter)
    PERFORM mneme._require_unbound('create tenants');
    IF create_tenant.tenant IS NULL THEN
        RAISE EXCEPTION 'tenant must not be NULL' USING ERRCODE = '22004';
    END IF;
    IF create_tenant.tenant !~ '^[a-z0-9][a-z0-9_-]{0,62}$' THEN
        RAISE EXCEPTION 'tenant id %: want 1 to 63 lower-case letters, digits, _ or -, starting with a letter or digit',
            mneme._quote_prefix(create_tenant.tenant) USING ERRCODE = '22023';
    END IF;
    PERFORM mneme._citus_sequential();
    IF NOT EXISTS (SELECT 1 FROM mneme.tenants t WHERE t.id = create_tenant.tenant)
       AND mneme._tenant_tombstones(create_tenant.tenant) THEN
        RAISE EXCEPTION 'tenant % was dropped (mneme.drop_tenant): its tombstones keep the id', create_tenant.tenant
            USING ERRCODE = '22023', HINT = 'choose another tenant id: a new tenant must not inherit a dropped one''s erase records';
    END IF;
    INSERT INTO mneme.tenants (id) VALUES (create_tenant.tenant) ON CONFLICT (id) DO NOTHING;
    RETURN create_tenant.tenant;
END
$$;
COMMENT ON FUNCTION mneme.create_tenant(text) IS
    'Creates a tenant (an unbound admin; a bound login gets 42501); an existing one is left as it is, the id of a '
    'dropped one is refused (22023). Returns its id.';
GRANT EXECUTE ON FUNCTION mneme.create_tenant(text) TO mneme_admin;

-- An unbound admin's function that acts for another tenant than the
-- caller's (tenants, drop_tenant, create_tenant's look at tombstones)
-- switches to it here, for the rest of the transaction or until switched
-- back: the transaction's tenant, which row security reads on one server,
-- and on Citus the call's tenant, which the API's functions read there
-- (mneme._enter set it at the call's start; a nested call does not set it
-- again).
CREATE OR REPLACE FUNCTION mneme._act_for_tenant(tenant text)
RETURNS void
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    PERFORM mneme._set_local('mneme.tenant', _act_for_tenant.tenant);
    IF mneme._distributed('mneme.memories') THEN
        PERFORM mneme._set_local('mneme.call_tenant', coalesce(nullif(_act_for_tenant.tenant, ''), 'default'));
    END IF;
END
$$;
COMMENT ON FUNCTION mneme._act_for_tenant(text) IS
    'Internal: an unbound admin''s function switches the tenant it acts for (the transaction''s, and on Citus the '
    'call''s); NULL or empty: back to default.';

-- On Citus a transaction that modifies mneme.tenants (a reference table)
-- after a multi-shard read or write must run those one connection per node:
-- create_tenant and drop_tenant call this before they touch a distributed
-- table. The mode holds to the end of the transaction.
CREATE OR REPLACE FUNCTION mneme._citus_sequential()
RETURNS void
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF mneme._distributed('mneme.memories') THEN
        SET LOCAL citus.multi_shard_modify_mode TO 'sequential';
    END IF;
END
$$;
COMMENT ON FUNCTION mneme._citus_sequential() IS
    'Internal, Citus: multi-shard statements of the rest of the transaction run sequentially, so that it may modify '
    'a reference table (mneme.tenants) after them.';

-- Whether a tenant id has tombstones (memory_events): a dropped tenant's
-- id, which create_tenant does not hand out again. Row security shows an
-- unbound caller the rows of the tenant it sets, so it looks as that one
-- and sets the transaction's tenant back.
CREATE OR REPLACE FUNCTION mneme._tenant_tombstones(tenant text)
RETURNS boolean
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_prev text := pg_catalog.current_setting('mneme.tenant', true);
    v_has  boolean;
BEGIN
    PERFORM mneme._act_for_tenant(_tenant_tombstones.tenant);
    v_has := EXISTS (SELECT 1 FROM mneme.memory_events e WHERE e.tenant_id = _tenant_tombstones.tenant);
    PERFORM mneme._act_for_tenant(v_prev);
    RETURN v_has;
END
$$;
COMMENT ON FUNCTION mneme._tenant_tombstones(text) IS
    'Internal: whether the tenant id has memory events (a dropped tenant''s tombstones), looked at as that tenant by '
    'an unbound caller.';

CREATE OR REPLACE FUNCTION mneme.tenants()
RETURNS TABLE (tenant text, created_at timestamptz, conversations bigint, logins text[])
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
SET jit = off
AS $$
#variable_conflict use_column
DECLARE
    v__entered boolean := mneme._enter(NULL);  -- the caller forwarded first (Citus: mneme._enter)
    v_prev  text := pg_catalog.current_setting('mneme.tenant', true);
    v_bound text;
    t       record;
BEGIN
    SELECT b.tenant_id INTO v_bound FROM mneme.tenant_logins b WHERE b.login = mneme._caller();
    FOR t IN SELECT x.id, x.created_at FROM mneme.tenants x
             WHERE v_bound IS NULL OR x.id = v_bound ORDER BY x.id LOOP
        -- row security shows a conversation to its tenant: count as it
        PERFORM mneme._act_for_tenant(t.id);
        tenant := t.id;
        created_at := t.created_at;
        conversations := (SELECT count(*) FROM mneme.message_queue q WHERE q.tenant_id = t.id);
        logins := ARRAY(SELECT b.login::text FROM mneme.tenant_logins b WHERE b.tenant_id = t.id ORDER BY b.login);
        RETURN NEXT;
    END LOOP;
    PERFORM mneme._act_for_tenant(v_prev);
END
$$;
COMMENT ON FUNCTION mneme.tenants() IS
    'The tenants (admins): id, when created, how many conversations, the logins bound to it (mneme.bind_login). '
    'An unbound admin sees every tenant, a bound login only its own. A dropped tenant (mneme.drop_tenant) is not listed.';
GRANT EXECUTE ON FUNCTION mneme.tenants() TO mneme_admin;

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
        -- (WHEN: a row whose tenant is given, as add_message and the
        -- segment job give it, does not call the function at all)
        EXECUTE format('CREATE TRIGGER %I BEFORE INSERT ON mneme.%I FOR EACH ROW WHEN (NEW.tenant_id IS NULL) '
                       'EXECUTE FUNCTION mneme.tenant_fill_trg()', t || '_tenant', t);
    END LOOP;
END
$$;

-- The conversation for a write: created for the transaction's tenant on
-- first use; a conversation of another tenant is not there to write to.
CREATE OR REPLACE FUNCTION mneme._claim_conversation(conversation_id uuid)
RETURNS void
LANGUAGE plpgsql
SECURITY DEFINER
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
        IF EXISTS (SELECT 1 FROM mneme.tenant_logins b WHERE b.login = mneme._caller()) THEN
            RAISE EXCEPTION 'conversation % belongs to another tenant', _claim_conversation.conversation_id
                USING ERRCODE = '42501',
                      HINT = format('login %s is bound to tenant %s and acts for it only: use a conversation id of that tenant '
                                    '(a new id starts one)', mneme._caller(), mneme._tenant());
        END IF;
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
SECURITY DEFINER
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

-- The caller, forwarded to the workers (Citus only: on one server it
-- returns at once). On Citus the statements of an API call
-- reach the workers on connections of mneme_owner (the functions' owner),
-- where the caller's login and the transaction's tenant (a setting of the
-- coordinator's session) are not known. Every API function that reaches a
-- distributed table calls this first (its first declaration, or its first
-- statement: `v__entered boolean := mneme._enter(conversation_id)`;
-- TestEveryAPIFunctionEnters). At the top of a call (no mneme function on the
-- stack above the one that entered) it resolves the caller on the node that runs it (the
-- coordinator, or the worker a call is delegated to, where the session is
-- the caller's): its tenant (mneme._resolve_tenant: the login's binding or
-- the transaction's tenant), whether it is the sidecar, its login; and sets
-- what changed as mneme.call_tenant, mneme.caller_worker and mneme.caller
-- with SET LOCAL, which Citus forwards to every worker of the transaction
-- (citus.propagate_set_commands = local). Inside the API (as mneme_owner)
-- _tenant() is mneme.call_tenant, and on the owner's connections
-- _is_worker() and _caller() take the forwarded ones. A read outside a
-- transaction block reaches a worker without a remote transaction block,
-- so without those settings: every call opens one with a FOR KEY SHARE
-- read that locks nothing (a queue row with no tenant: there is none) on
-- the conversation's shard (the nil conversation's when the call names
-- none), after which every statement of the transaction goes to the
-- workers inside BEGIN, with the settings.
-- Nested calls (a mneme function above on the stack, which entered; the
-- API's functions are the only mneme functions a caller may run that
-- reach tables) and calls on Citus's own connections of mneme_owner (a
-- worker running a statement of a call, where the settings came with it)
-- return at once:
-- there nothing may be read (Citus refuses a distributed query inside a
-- query on a shard). A caller that sets these settings itself gains
-- nothing: they are set again whenever they differ from the resolved
-- caller, and a worker that lacks them sees no tenant's rows.
CREATE OR REPLACE FUNCTION mneme._enter(conversation_id uuid)
RETURNS boolean
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_stack  text;
    v_tenant text;
    v_worker text;
    v_caller text;
    v_operator text;
BEGIN
    IF NOT mneme._distributed('mneme.message_queue') THEN
        RETURN true;  -- one server: nothing to forward, no shard to open
    END IF;
    IF session_user = 'mneme_owner'::name AND current_setting('application_name') LIKE 'citus\_internal%' THEN
        RETURN true;  -- a worker running a statement of a call: the settings came with it
    END IF;
    GET DIAGNOSTICS v_stack = PG_CONTEXT;
    IF (SELECT count(*) FROM regexp_matches(v_stack, '^(PL/pgSQL|SQL) function mneme\.', 'gn')) > 2 THEN
        RETURN true;
    END IF;
    v_tenant := mneme._resolve_tenant();
    v_worker := CASE WHEN pg_catalog.pg_has_role(session_user, 'mneme_worker', 'MEMBER') THEN 'on' ELSE 'off' END;
    v_caller := session_user::text;
    -- (an operator reads every tenant's LLM usage: mneme._is_operator,
    -- sql/470-usage.sql; its Citus form reads this on the workers)
    v_operator := CASE WHEN mneme._is_operator() THEN 'on' ELSE 'off' END;
    IF current_setting('mneme.caller_operator', true) IS DISTINCT FROM v_operator THEN
        PERFORM mneme._set_local('mneme.caller_operator', v_operator);
    END IF;
    IF current_setting('mneme.call_tenant', true) IS DISTINCT FROM v_tenant THEN
        PERFORM mneme._set_local('mneme.call_tenant', v_tenant);
    END IF;
    IF current_setting('mneme.caller_worker', true) IS DISTINCT FROM v_worker THEN
        PERFORM mneme._set_local('mneme.caller_worker', v_worker);
    END IF;
    IF current_setting('mneme.caller', true) IS DISTINCT FROM v_caller THEN
        PERFORM mneme._set_local('mneme.caller', v_caller);
    END IF;
    -- In a read-only transaction FOR KEY SHARE is refused: there the
    -- caller's BEGIN READ ONLY is the transaction block (docs/scale.md).
    IF current_setting('transaction_read_only') = 'off' THEN
        PERFORM 1 FROM mneme.message_queue q
         WHERE q.id = coalesce(_enter.conversation_id, '00000000-0000-0000-0000-000000000000'::uuid)
           AND q.tenant_id IS NULL
           FOR KEY SHARE;
    END IF;
    RETURN true;
END
$$;
COMMENT ON FUNCTION mneme._enter(uuid) IS
    'Internal, Citus: forwards the caller (tenant, sidecar or not, login) to the workers of the transaction and '
    'opens the distributed transaction on the conversation''s shard (docs/scale.md says why).';
