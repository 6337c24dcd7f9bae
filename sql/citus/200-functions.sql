-- =============================================================================
-- mneme on Citus: the functions that are truly different on Citus, written
-- whole. Applied only on a distributed mneme (mneme migrate --citus;
-- docs/scale.md), after sql/*.sql; each replaces the one-server function of
-- the same name (CREATE OR REPLACE keeps its owner and grants). Everything
-- else is one source, sql/*.sql, written in the form Citus needs wherever
-- one server pays nothing for it (docs/scale.md, "What --citus does").
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
-- plans with its parameters, naming the conversations so that it goes to
-- their shards only. One server keeps a SQL function that its caller
-- inlines; here the distance is the vector variant's.
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

-- The BM25 sums (sql/110-bm25.sql) in the form Citus plans: one read of
-- the scope's postings of the terms, and the memory read by id with its
-- conversation (its shard only). One server keeps a SQL function with one
-- lookup of the whole key per conversation and term, inlined into
-- _bm25_search: this form there lets the planner scan a conversation's
-- postings filtered by term (TestSmallConversationCostIgnoresTheRest: 20
-- times the buffers). PL/pgSQL: Citus plans an inlined SQL function's
-- query against the coordinator's empty tables.
CREATE OR REPLACE FUNCTION mneme._bm25_sums(
    conversation_ids uuid[], terms text[], weights float8[], k1 float8, b float8, avgdl float8,
    expired uuid[], since timestamptz, until timestamptz)
RETURNS TABLE (conversation_id uuid, memory_id uuid, score float8)
LANGUAGE plpgsql STABLE
AS $$
#variable_conflict use_column
BEGIN
    RETURN QUERY
    SELECT p.conversation_id, p.memory_id, sum(t.wt * mneme._bm25_tf(p.tf, p.doclen, $4, $5, $6))
    FROM unnest($2, $3) AS t(term, wt), (
        SELECT p.conversation_id, p.memory_id, p.term, p.tf, p.doclen FROM mneme.bm25_postings p
        WHERE p.conversation_id = ANY ($1) AND p.term = ANY ($2)) p
    WHERE p.term = t.term AND ($7 IS NULL OR p.memory_id <> ALL ($7))
      AND (($8 IS NULL AND $9 IS NULL)
           OR EXISTS (SELECT 1 FROM mneme.memories m WHERE m.id = p.memory_id AND m.conversation_id = p.conversation_id
                      AND ($8 IS NULL OR m.created_at >= $8) AND ($9 IS NULL OR m.created_at < $9)))
    GROUP BY p.conversation_id, p.memory_id;
END
$$;

-- The terms' statistics (sql/110-bm25.sql) in the form Citus plans: one
-- grouped read of the scope's terms, and the expired memories' postings
-- counted per term in one read (Citus pushes down neither the lateral
-- lookups by the whole key nor subqueries correlated with the term). One
-- server keeps its lookups: this form there let the planner scan a
-- conversation's terms (TestSmallConversationCostIgnoresTheRest failed).
CREATE OR REPLACE FUNCTION mneme._bm25_term_stats(conversation_ids uuid[], terms text[], expired uuid[])
RETURNS TABLE (term text, df float8, max_tf int, min_len float8)
LANGUAGE plpgsql STABLE
AS $$
#variable_conflict use_column
BEGIN
    RETURN QUERY
    SELECT d.term, d.df - coalesce(ex.n, 0), d.max_tf, d.min_len
    FROM (SELECT t.term, sum(t.df)::float8 AS df, max(t.max_tf) AS max_tf, min(t.min_len_per_tf) AS min_len
          FROM mneme.bm25_terms t WHERE t.conversation_id = ANY ($1) AND t.term = ANY ($2)
          GROUP BY t.term) d
    LEFT JOIN (SELECT p.term, count(*) AS n FROM mneme.bm25_postings p
               WHERE $3 IS NOT NULL AND p.conversation_id = ANY ($1) AND p.term = ANY ($2) AND p.memory_id = ANY ($3)
               GROUP BY p.term) ex ON ex.term = d.term;
END
$$;
