-- =============================================================================
-- mneme lifecycle, erase: what a job payload and a review row name, keyed by
-- equality (goose 00180), so that an erase finds them by index under row
-- security (mneme._remove_memories, sql/430-cleanup.sql; issue 47).
-- Idempotent: re-applied on every `mneme migrate` (CREATE OR REPLACE only).
-- =============================================================================

-- The keys of what a job payload names, in the places
-- mneme._scrub_payload scrubs: 'm:<memory id>' (review entries'
-- memory_ids, memory_ids), 'q:<md5 of a query>' (review entries' query),
-- 'g:<message id>' (context entries' id, message_ids,
-- context_message_ids). Anything else in the payload names nothing.
CREATE OR REPLACE FUNCTION mneme._payload_refs(payload jsonb)
RETURNS text[]
LANGUAGE plpgsql IMMUTABLE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    -- (PL/pgSQL: its plan is kept for the session; a SQL function with SET
    -- is planned again at every call, which the row triggers make per row)
    RETURN CASE WHEN jsonb_typeof(payload) IS DISTINCT FROM 'object' THEN '{}'::text[] ELSE ARRAY(
    SELECT 'm:' || (i #>> '{}')
    FROM jsonb_array_elements(CASE WHEN jsonb_typeof(payload -> 'reviews') = 'array' THEN payload -> 'reviews' ELSE '[]' END) e,
         jsonb_array_elements(CASE WHEN jsonb_typeof(e -> 'memory_ids') = 'array' THEN e -> 'memory_ids' ELSE '[]' END) i
    WHERE jsonb_typeof(i) = 'string'
    UNION
    SELECT 'q:' || md5(e ->> 'query')
    FROM jsonb_array_elements(CASE WHEN jsonb_typeof(payload -> 'reviews') = 'array' THEN payload -> 'reviews' ELSE '[]' END) e
    WHERE jsonb_typeof(e -> 'query') = 'string'
    UNION
    SELECT 'm:' || (i #>> '{}')
    FROM jsonb_array_elements(CASE WHEN jsonb_typeof(payload -> 'memory_ids') = 'array' THEN payload -> 'memory_ids' ELSE '[]' END) i
    WHERE jsonb_typeof(i) = 'string'
    UNION
    SELECT 'g:' || trim_scale((e ->> 'id')::numeric)::text
    FROM jsonb_array_elements(CASE WHEN jsonb_typeof(payload -> 'context') = 'array' THEN payload -> 'context' ELSE '[]' END) e
    WHERE jsonb_typeof(e -> 'id') = 'number'
    UNION
    SELECT 'g:' || trim_scale((i #>> '{}')::numeric)::text
    FROM jsonb_array_elements(CASE WHEN jsonb_typeof(payload -> 'message_ids') = 'array' THEN payload -> 'message_ids' ELSE '[]' END) i
    WHERE jsonb_typeof(i) = 'number'
    UNION
    SELECT 'g:' || trim_scale((i #>> '{}')::numeric)::text
    FROM jsonb_array_elements(CASE WHEN jsonb_typeof(payload -> 'context_message_ids') = 'array' THEN payload -> 'context_message_ids' ELSE '[]' END) i
    WHERE jsonb_typeof(i) = 'number') END;
END
$$;
COMMENT ON FUNCTION mneme._payload_refs(jsonb) IS
    'Internal (erase): the keys of what a job payload names, as mneme.job_refs holds them: ''m:<memory id>'', '
    '''q:<md5 of a query>'', ''g:<message id>''.';

-- The keys to look up for memories, messages and queries (the same form).
CREATE OR REPLACE FUNCTION mneme._erase_refs(memory_ids text[], message_ids bigint[], queries text[])
RETURNS text[]
LANGUAGE sql IMMUTABLE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
SELECT ARRAY(SELECT 'm:' || k FROM unnest(coalesce(memory_ids, '{}')) k
             UNION ALL
             SELECT 'g:' || g::text FROM unnest(coalesce(message_ids, '{}')) g
             UNION ALL
             SELECT 'q:' || md5(q) FROM unnest(coalesce(queries, '{}')) q WHERE q IS NOT NULL)
$$;
COMMENT ON FUNCTION mneme._erase_refs(text[], bigint[], text[]) IS
    'Internal (erase, purge): the mneme.job_refs keys of the given memories, messages and queries.';

-- A job's keys follow its payload (insert, an update of the payload or of
-- its conversation or tenant, delete). A row trigger: it runs on a Citus
-- shard as well, where job_refs is colocated with the job.
CREATE OR REPLACE FUNCTION mneme.jobs_refs_trg()
RETURNS trigger
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_old text[];
    v_new text[];
BEGIN
    -- A payload changed in place (an erase scrubbing a message out of a
    -- review job's context): only the keys that went and came. Deleting and
    -- inserting them all made an erase in the soak's tenant rewrite
    -- thousands of keys per job (issue 47: 4.0 s of a 6.5 s erase).
    IF TG_OP = 'UPDATE' AND NEW.id = OLD.id AND NEW.conversation_id IS NOT DISTINCT FROM OLD.conversation_id
       AND NEW.tenant_id = OLD.tenant_id THEN
        v_old := mneme._payload_refs(OLD.payload);
        v_new := mneme._payload_refs(NEW.payload);
        DELETE FROM mneme.job_refs r
        WHERE r.conversation_id = coalesce(OLD.conversation_id, '00000000-0000-0000-0000-000000000000') AND r.job_id = OLD.id
          AND r.ref = ANY (ARRAY(SELECT unnest(v_old) EXCEPT SELECT unnest(v_new)));
        INSERT INTO mneme.job_refs (conversation_id, job_id, tenant_id, ref)
        SELECT coalesce(NEW.conversation_id, '00000000-0000-0000-0000-000000000000'), NEW.id, NEW.tenant_id, x
        FROM (SELECT unnest(v_new) EXCEPT SELECT unnest(v_old)) AS d(x)
        ON CONFLICT DO NOTHING;
        RETURN NULL;
    END IF;
    IF TG_OP <> 'INSERT' THEN
        DELETE FROM mneme.job_refs r
        WHERE r.conversation_id = coalesce(OLD.conversation_id, '00000000-0000-0000-0000-000000000000') AND r.job_id = OLD.id;
    END IF;
    IF TG_OP <> 'DELETE' THEN
        INSERT INTO mneme.job_refs (conversation_id, job_id, tenant_id, ref)
        SELECT coalesce(NEW.conversation_id, '00000000-0000-0000-0000-000000000000'), NEW.id, NEW.tenant_id, x
        FROM unnest(mneme._payload_refs(NEW.payload)) x
        ON CONFLICT DO NOTHING;
    END IF;
    RETURN NULL;
END
$$;
COMMENT ON FUNCTION mneme.jobs_refs_trg() IS
    'Row-level AFTER trigger on mneme.jobs: keeps mneme.job_refs (the memories, messages and queries the payload '
    'names, by key) equal to the payload (on a payload change in place, only the keys that went and came).';

-- A review row's queries, by their md5.
CREATE OR REPLACE FUNCTION mneme.review_log_queries_trg()
RETURNS trigger
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF TG_OP <> 'INSERT' THEN
        DELETE FROM mneme.review_queries r WHERE r.conversation_id = OLD.conversation_id AND r.review_log_id = OLD.id;
    END IF;
    IF TG_OP <> 'DELETE' THEN
        INSERT INTO mneme.review_queries (conversation_id, review_log_id, tenant_id, query_key)
        SELECT NEW.conversation_id, NEW.id, NEW.tenant_id, md5(q)::uuid
        FROM unnest(NEW.matched_queries) q WHERE q IS NOT NULL
        ON CONFLICT DO NOTHING;
    END IF;
    RETURN NULL;
END
$$;
COMMENT ON FUNCTION mneme.review_log_queries_trg() IS
    'Row-level AFTER trigger on mneme.review_log: keeps mneme.review_queries (the md5 of each matched query) '
    'equal to matched_queries.';

-- The same keys a statement at a time, where the tables are not
-- distributed: an insert or delete of many jobs or review rows (import, a
-- segmentation's review job, erase_conversation deleting a conversation's
-- jobs and, by cascade, the review rows of its memories) writes or deletes
-- all their keys in one statement, not one per row (issue 47). On Citus
-- the row forms above run on the shards (a statement trigger with
-- transition tables does not run there, as memories_events_row_trg says).
CREATE OR REPLACE FUNCTION mneme.jobs_refs_stmt_trg()
RETURNS trigger
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF TG_OP = 'DELETE' THEN
        DELETE FROM mneme.job_refs r
        USING old_rows o
        WHERE r.conversation_id = coalesce(o.conversation_id, '00000000-0000-0000-0000-000000000000') AND r.job_id = o.id;
    ELSE
        INSERT INTO mneme.job_refs (conversation_id, job_id, tenant_id, ref)
        SELECT coalesce(n.conversation_id, '00000000-0000-0000-0000-000000000000'), n.id, n.tenant_id, x
        FROM new_rows n, unnest(mneme._payload_refs(n.payload)) x
        ON CONFLICT DO NOTHING;
    END IF;
    RETURN NULL;
END
$$;
COMMENT ON FUNCTION mneme.jobs_refs_stmt_trg() IS
    'Statement-level AFTER INSERT and AFTER DELETE trigger on mneme.jobs where it is not distributed: the keys of '
    'jobs_refs_trg for all the statement''s rows at once.';

CREATE OR REPLACE FUNCTION mneme.review_log_queries_stmt_trg()
RETURNS trigger
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF TG_OP = 'DELETE' THEN
        DELETE FROM mneme.review_queries r
        USING old_rows o
        WHERE r.conversation_id = o.conversation_id AND r.review_log_id = o.id;
    ELSE
        INSERT INTO mneme.review_queries (conversation_id, review_log_id, tenant_id, query_key)
        SELECT n.conversation_id, n.id, n.tenant_id, md5(q)::uuid
        FROM new_rows n, unnest(n.matched_queries) q WHERE q IS NOT NULL
        ON CONFLICT DO NOTHING;
    END IF;
    RETURN NULL;
END
$$;
COMMENT ON FUNCTION mneme.review_log_queries_stmt_trg() IS
    'Statement-level AFTER INSERT and AFTER DELETE trigger on mneme.review_log where it is not distributed: the keys '
    'of review_log_queries_trg for all the statement''s rows at once.';

DROP TRIGGER IF EXISTS jobs_refs ON mneme.jobs;
DROP TRIGGER IF EXISTS jobs_refs_insert ON mneme.jobs;
DROP TRIGGER IF EXISTS jobs_refs_delete ON mneme.jobs;
DROP TRIGGER IF EXISTS jobs_refs_update ON mneme.jobs;
DROP TRIGGER IF EXISTS review_log_queries ON mneme.review_log;
DROP TRIGGER IF EXISTS review_log_queries_insert ON mneme.review_log;
DROP TRIGGER IF EXISTS review_log_queries_delete ON mneme.review_log;
DROP TRIGGER IF EXISTS review_log_queries_update ON mneme.review_log;
DO $trg$
BEGIN
    IF mneme._distributed('mneme.jobs') THEN
        CREATE TRIGGER jobs_refs AFTER INSERT OR DELETE ON mneme.jobs
            FOR EACH ROW EXECUTE FUNCTION mneme.jobs_refs_trg();
        CREATE TRIGGER review_log_queries AFTER INSERT OR DELETE ON mneme.review_log
            FOR EACH ROW EXECUTE FUNCTION mneme.review_log_queries_trg();
    ELSE
        CREATE TRIGGER jobs_refs_insert AFTER INSERT ON mneme.jobs
            REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION mneme.jobs_refs_stmt_trg();
        CREATE TRIGGER jobs_refs_delete AFTER DELETE ON mneme.jobs
            REFERENCING OLD TABLE AS old_rows FOR EACH STATEMENT EXECUTE FUNCTION mneme.jobs_refs_stmt_trg();
        CREATE TRIGGER review_log_queries_insert AFTER INSERT ON mneme.review_log
            REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION mneme.review_log_queries_stmt_trg();
        CREATE TRIGGER review_log_queries_delete AFTER DELETE ON mneme.review_log
            REFERENCING OLD TABLE AS old_rows FOR EACH STATEMENT EXECUTE FUNCTION mneme.review_log_queries_stmt_trg();
    END IF;
END
$trg$;
-- (an update moving a row or changing its payload is rare: a row trigger
-- on both. A review row that only loses queries, which erase does, keeps
-- its other keys: the erase deletes the lost ones itself, in one statement)
CREATE TRIGGER jobs_refs_update AFTER UPDATE OF payload, conversation_id, tenant_id ON mneme.jobs
    FOR EACH ROW WHEN (NEW.payload IS DISTINCT FROM OLD.payload OR NEW.conversation_id IS DISTINCT FROM OLD.conversation_id
                       OR NEW.tenant_id IS DISTINCT FROM OLD.tenant_id)
    EXECUTE FUNCTION mneme.jobs_refs_trg();
CREATE TRIGGER review_log_queries_update AFTER UPDATE OF matched_queries, conversation_id, tenant_id ON mneme.review_log
    FOR EACH ROW WHEN (NOT (NEW.matched_queries <@ OLD.matched_queries) OR NEW.conversation_id IS DISTINCT FROM OLD.conversation_id
                       OR NEW.tenant_id IS DISTINCT FROM OLD.tenant_id)
    EXECUTE FUNCTION mneme.review_log_queries_trg();

-- Strips queries from the review rows of the given tenants that quote one
-- (found through mneme.review_queries), except the rows of the given
-- memories, and deletes the keys of the stripped queries. Returns the
-- number of rows changed.
-- One statement for all rows (issue 47): the kept queries of every row are
-- computed in one pass, against one hash of the queries. A per-row
-- function (mneme._without_queries) built that hash again for each row:
-- erase_conversation of 10,000 memories, whose 21,000 queries are quoted
-- by 180,000 review rows, spent most of its 103 s there.
CREATE OR REPLACE FUNCTION mneme._strip_review_queries(tenants text[], queries text[], except_memories uuid[])
RETURNS bigint
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_keys uuid[];
    v_rows bigint[];
    v_convs uuid[];
    v_n    bigint;
BEGIN
    queries := ARRAY(SELECT DISTINCT q FROM unnest(_strip_review_queries.queries) q WHERE q IS NOT NULL);
    IF cardinality(_strip_review_queries.queries) = 0 THEN
        RETURN 0;
    END IF;
    v_keys := ARRAY(SELECT DISTINCT md5(q)::uuid FROM unnest(_strip_review_queries.queries) q);
    -- The keys go first, all of them (the rows of the excepted memories are
    -- the caller's to delete, with their keys); what they name are the rows
    -- to strip. (Into arrays: the planner, estimating a few, joined them
    -- with a pass over the tenant's review log otherwise.)
    WITH gone AS (
        DELETE FROM mneme.review_queries r
        WHERE r.query_key = ANY (v_keys) AND r.tenant_id = ANY (_strip_review_queries.tenants)
        RETURNING r.conversation_id, r.review_log_id)
    SELECT array_agg(DISTINCT g.review_log_id), array_agg(DISTINCT g.conversation_id) INTO v_rows, v_convs
    FROM gone g;
    IF v_rows IS NULL THEN
        RETURN 0;
    END IF;
    -- (a subquery grouped by the distribution column and joined on it: Citus
    -- pushes the whole statement down to each shard)
    UPDATE mneme.review_log l
    SET matched_queries = s.kept
    FROM (SELECT l2.conversation_id, l2.id,
                 coalesce(array_agg(u.x ORDER BY u.o) FILTER (WHERE u.x IS NULL OR u.x NOT IN (SELECT unnest(_strip_review_queries.queries))),
                          '{}') AS kept
          FROM mneme.review_log l2, unnest(l2.matched_queries) WITH ORDINALITY AS u(x, o)
          WHERE l2.id = ANY (v_rows) AND l2.conversation_id = ANY (v_convs)
            AND l2.tenant_id = ANY (_strip_review_queries.tenants)
            AND l2.memory_id NOT IN (SELECT unnest(coalesce(except_memories, '{}')))
          GROUP BY l2.conversation_id, l2.id) s
    WHERE l.conversation_id = s.conversation_id AND l.id = s.id
      AND l.matched_queries IS DISTINCT FROM s.kept;
    GET DIAGNOSTICS v_n = ROW_COUNT;
    RETURN v_n;
END
$$;
COMMENT ON FUNCTION mneme._strip_review_queries(text[], text[], uuid[]) IS
    'Internal (erase): removes the given queries from the matched_queries of the review rows of the given tenants '
    'that quote one (found by key in mneme.review_queries, whose keys of them go), except the rows of the given '
    'memories (the caller deletes those); returns the number of rows changed.';
