-- =============================================================================
-- mneme access: the roles, the schema's and tables' privileges, row
-- security's functions, and the two rules every function follows. Applied
-- last on every `mneme migrate`.
--
-- Group roles (NOLOGIN, created by goose 00045; grant them to login roles):
--   mneme_app     the application: EXECUTE on the public API only, no table
--                 privileges; sees the rows of its transaction's tenant
--   mneme_worker  the sidecar: the API and the worker functions, SELECT on
--                 the tables; sees every tenant (it works for all of them)
--   mneme_admin   operators: the API, settings, erase, tenants, maintenance
--   mneme_owner   owns the functions, most of which are SECURITY DEFINER:
--                 they run with its table privileges, and row-level security
--                 applies to it (it is not a superuser and owns no table), so
--                 every query inside them sees only the caller's tenant.
--
-- Each function says its own access where it is made: SECURITY DEFINER and
-- SET jit = off in its CREATE FUNCTION, GRANT EXECUTE to the group roles
-- right after its COMMENT. A function without SECURITY DEFINER runs as its
-- caller: plain SQL helpers the planner inlines (a SECURITY DEFINER or SET
-- function it cannot inline), the trigger functions, and the few that must
-- act as their caller (DDL: change_embedding_dim, vector_index_plan; what
-- the caller may see or do: vector_index_status, erase_vacuum_targets).
-- Nothing in schema mneme is executable by PUBLIC but the row policies'
-- functions (below).
-- =============================================================================
DO $access$
DECLARE
    f record;
BEGIN
    IF NOT pg_catalog.pg_has_role(current_user, 'mneme_owner', 'MEMBER') THEN
        BEGIN
            EXECUTE format('GRANT mneme_owner TO %I', current_user);
        EXCEPTION WHEN insufficient_privilege THEN
            RAISE EXCEPTION 'mneme migrate: role % must be a member of mneme_owner to hand it the API functions', current_user
                USING ERRCODE = '42501', HINT = format('an admin runs once: GRANT mneme_owner TO %I', current_user);
        END;
    END IF;
    GRANT USAGE, CREATE ON SCHEMA mneme TO mneme_owner;
    GRANT SELECT, INSERT, UPDATE, DELETE, TRUNCATE ON ALL TABLES IN SCHEMA mneme TO mneme_owner;
    GRANT USAGE, SELECT, UPDATE ON ALL SEQUENCES IN SCHEMA mneme TO mneme_owner;
    GRANT USAGE ON SCHEMA mneme TO mneme_app, mneme_worker, mneme_admin;
    REVOKE ALL ON ALL TABLES IN SCHEMA mneme FROM PUBLIC, mneme_app;
    GRANT SELECT ON ALL TABLES IN SCHEMA mneme TO mneme_worker, mneme_admin;
    -- The BM25 statistics carry no tenant: every tenant's words with their
    -- document frequencies. Only the functions (as mneme_owner, checking
    -- the conversation's tenant) read them.
    REVOKE ALL ON mneme.bm25_postings, mneme.bm25_docs, mneme.bm25_terms, mneme.bm25_stats
        FROM mneme_worker, mneme_admin;
    -- The installation's key and the functions' marks (goose 00100): only the
    -- functions read them.
    REVOKE ALL ON mneme.instance_key, mneme.call_marks FROM mneme_worker, mneme_admin;

    -- Every function: not PUBLIC's (a new function is, by default), and
    -- mneme_owner's unless it runs as its caller (a trigger function or
    -- another function that is not SECURITY DEFINER, but the inlined plain
    -- SQL helpers, which are called inside the API as mneme_owner).
    FOR f IN SELECT p.oid::regprocedure AS sig, p.proname AS name, p.prosecdef AS secdef,
                    p.prorettype = 'pg_catalog.trigger'::regtype AS trg,
                    p.prolang = (SELECT l.oid FROM pg_catalog.pg_language l WHERE l.lanname = 'sql')
                        AND p.proconfig IS NULL
                        AND (p.provolatile = 'i' OR (p.provolatile = 's' AND p.proname LIKE '\_%')) AS inlined
             FROM pg_catalog.pg_proc p WHERE p.pronamespace = 'mneme'::regnamespace AND p.prokind = 'f' LOOP
        EXECUTE format('REVOKE ALL ON FUNCTION %s FROM PUBLIC', f.sig);
        IF f.name IN ('_tenant', '_resolve_tenant', '_is_worker', '_is_operator') THEN
            CONTINUE;  -- row security's (below)
        END IF;
        IF f.secdef OR (f.inlined AND NOT f.trg) THEN
            EXECUTE format('ALTER FUNCTION %s OWNER TO mneme_owner', f.sig);
        END IF;
    END LOOP;
END
$access$;

-- Row security: the row policies call these as whoever queries. _tenant and
-- _is_operator read the login bindings (as mneme_owner: _is_operator is
-- SECURITY DEFINER, _tenant through _resolve_tenant; on Citus
-- sql/citus/200-functions.sql); _is_worker reads the caller's role.
ALTER FUNCTION mneme._tenant() OWNER TO mneme_owner;
ALTER FUNCTION mneme._resolve_tenant() OWNER TO mneme_owner;
ALTER FUNCTION mneme._is_operator() OWNER TO mneme_owner;
GRANT EXECUTE ON FUNCTION mneme._tenant(), mneme._resolve_tenant(), mneme._is_worker(), mneme._is_operator() TO PUBLIC;
