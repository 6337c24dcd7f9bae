-- =============================================================================
-- mneme on Citus: the functions Citus needs in another form, written whole.
-- Applied only on a distributed mneme (mneme migrate --citus;
-- docs/scale.md), after sql/*.sql and sql/citus/100-generated.sql; each
-- replaces the one-server function of the same name (CREATE OR REPLACE keeps
-- its owner and grants).
-- =============================================================================

-- The row policies' functions (mneme._enter, sql/005-tenants.sql, says
-- why): inside the API the tenant is the one the call resolved (none, if it
-- was not forwarded: no tenant's rows); the sidecar's calls are the
-- sidecar's on the owner's connections.
CREATE OR REPLACE FUNCTION mneme._tenant()
RETURNS text
LANGUAGE sql STABLE PARALLEL SAFE
AS $f$ SELECT CASE WHEN current_user = 'mneme_owner'::name
                   THEN coalesce(pg_catalog.current_setting('mneme.call_tenant', true), '')
                   ELSE mneme._resolve_tenant() END $f$;

CREATE OR REPLACE FUNCTION mneme._is_worker()
RETURNS boolean
LANGUAGE sql STABLE PARALLEL SAFE
AS $f$ SELECT pg_catalog.pg_has_role(session_user, 'mneme_worker', 'MEMBER')
           OR (session_user = 'mneme_owner'::name
               AND pg_catalog.current_setting('mneme.caller_worker', true) = 'on') $f$;

-- An operator (sql/470-usage.sql): on the owner's connections to the
-- workers, the caller's, as mneme._enter forwarded it.
CREATE OR REPLACE FUNCTION mneme._is_operator()
RETURNS boolean
LANGUAGE sql STABLE PARALLEL SAFE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $f$ SELECT CASE WHEN session_user = 'mneme_owner'::name
                   THEN coalesce(pg_catalog.current_setting('mneme.caller_operator', true), '') = 'on'
                   ELSE pg_catalog.pg_has_role(session_user, 'mneme_admin', 'MEMBER')
                        AND coalesce(pg_catalog.current_setting('mneme.tenant', true), '') = ''
                        AND NOT EXISTS (SELECT 1 FROM mneme.tenant_logins b WHERE b.login = session_user) END $f$;
-- (the row policies call it inside the queries on the shards)
ALTER FUNCTION mneme._is_operator() SET citus.allow_nested_distributed_execution = on;

-- The turns' distances (sql/140-context.sql) as PL/pgSQL, whose read Citus
-- plans with its parameters (see sql/citus/100-generated.sql), naming the
-- conversations so that it goes to their shards only. Written here, not
-- generated: its distance is the vector variant's.
DO $do$
BEGIN
    EXECUTE replace($fn$
CREATE OR REPLACE FUNCTION mneme._turn_distances(message_ids bigint[], embedding real[], conversation_ids uuid[])
RETURNS TABLE (message_id bigint, distance float8)
LANGUAGE plpgsql STABLE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
SET citus.allow_nested_distributed_execution = on
AS $$
#variable_conflict use_column
BEGIN
    RETURN QUERY
    SELECT m.id, @@distance@@
    FROM mneme.messages m
    WHERE m.id = ANY (_turn_distances.message_ids) AND m.conversation_id = ANY (_turn_distances.conversation_ids)
      AND m.embedding IS NOT NULL;
END
$$
$fn$, '@@distance@@', CASE WHEN mneme.setting('vector_variant') #>> '{}' = 'pgvector'
        THEN '(m.embedding OPERATOR(@extschema@.<=>) _turn_distances.embedding::mneme.embedding)::float8'
        ELSE 'mneme.cosine_distance(m.embedding::real[], _turn_distances.embedding)' END);
END
$do$;

-- mneme.vector_index_plan (sql/120-retrieve.sql) reads the tables in the
-- pgvector variant and only raises in the array variant: nested
-- distributed execution allowed in both (sql/citus/100-generated.sql, the
-- end, says why), here because the generated file is the same for both.
ALTER FUNCTION mneme.vector_index_plan() SET citus.allow_nested_distributed_execution = on;
