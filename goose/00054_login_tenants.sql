-- Login-bound tenants: an admin binds a database login to a tenant
-- (mneme.bind_login); for a bound login the tenant is that one whatever the
-- session sets, and setting another is an error (42501). Unbound logins
-- keep the session's tenant (mneme.set_tenant), as one trusted application
-- server needs. mneme._tenant(), which every row policy calls, reads the
-- binding; it is redefined here because the policies depend on it.
-- Events also keep who called (session_user) beside the actor.
-- Numbered goose migration: applied once, never edited after release.

-- +goose Up
CREATE TABLE mneme.tenant_logins (
    login     name PRIMARY KEY,
    tenant_id text NOT NULL REFERENCES mneme.tenants (id),
    bound_at  timestamptz NOT NULL DEFAULT now(),
    bound_by  name NOT NULL DEFAULT session_user
);

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION mneme._tenant()
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
-- +goose StatementEnd

ALTER TABLE mneme.memory_events ADD COLUMN caller name NOT NULL DEFAULT session_user;

-- +goose Down
ALTER TABLE mneme.memory_events DROP COLUMN caller;
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION mneme._tenant()
RETURNS text
LANGUAGE sql STABLE PARALLEL SAFE
SECURITY INVOKER
SET search_path = pg_catalog, pg_temp
AS $$ SELECT coalesce(nullif(pg_catalog.current_setting('mneme.tenant', true), ''), 'default') $$;
-- +goose StatementEnd
DROP TABLE mneme.tenant_logins;
