-- =============================================================================
-- mneme lifecycle, erase: what a job payload and a review row name, keyed by
-- equality (goose 00180), so that an erase finds them by index under row
-- security (mneme._remove_memories, sql/430-cleanup.sql; issue 47). A
-- review row's queries live in mneme.review_queries only, text and key
-- (goose 00310): erasing one deletes its rows there.
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

-- A review row's queries (goose 00310: their texts, keys and places are
-- rows of mneme.review_queries, which the writers insert with the review
-- row: mneme.apply_review, import) go with it, and move with it if its
-- conversation, id or tenant change.
CREATE OR REPLACE FUNCTION mneme.review_log_queries_trg()
RETURNS trigger
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF TG_OP = 'DELETE' THEN
        DELETE FROM mneme.review_queries r WHERE r.conversation_id = OLD.conversation_id AND r.review_log_id = OLD.id;
    ELSIF TG_OP = 'UPDATE' THEN
        UPDATE mneme.review_queries r
        SET conversation_id = NEW.conversation_id, review_log_id = NEW.id, tenant_id = NEW.tenant_id
        WHERE r.conversation_id = OLD.conversation_id AND r.review_log_id = OLD.id;
    END IF;
    RETURN NULL;
END
$$;
COMMENT ON FUNCTION mneme.review_log_queries_trg() IS
    'Row-level AFTER trigger on mneme.review_log: a deleted review row''s mneme.review_queries rows (its queries) go '
    'with it; a review row moved to another conversation, id or tenant takes them along.';

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
    DELETE FROM mneme.review_queries r
    USING old_rows o
    WHERE r.conversation_id = o.conversation_id AND r.review_log_id = o.id;
    RETURN NULL;
END
$$;
COMMENT ON FUNCTION mneme.review_log_queries_stmt_trg() IS
    'Statement-level AFTER DELETE trigger on mneme.review_log where it is not distributed: the deleted rows'' '
    'mneme.review_queries rows go, all at once.';

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
        CREATE TRIGGER review_log_queries AFTER DELETE ON mneme.review_log
            FOR EACH ROW EXECUTE FUNCTION mneme.review_log_queries_trg();
    ELSE
        CREATE TRIGGER jobs_refs_insert AFTER INSERT ON mneme.jobs
            REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION mneme.jobs_refs_stmt_trg();
        CREATE TRIGGER jobs_refs_delete AFTER DELETE ON mneme.jobs
            REFERENCING OLD TABLE AS old_rows FOR EACH STATEMENT EXECUTE FUNCTION mneme.jobs_refs_stmt_trg();
        CREATE TRIGGER review_log_queries_delete AFTER DELETE ON mneme.review_log
            REFERENCING OLD TABLE AS old_rows FOR EACH STATEMENT EXECUTE FUNCTION mneme.review_log_queries_stmt_trg();
    END IF;
END
$trg$;
-- (an update moving a row or changing its payload is rare: a row trigger
-- on both; a review row's queries are not in the row, goose 00310)
CREATE TRIGGER jobs_refs_update AFTER UPDATE OF payload, conversation_id, tenant_id ON mneme.jobs
    FOR EACH ROW WHEN (NEW.payload IS DISTINCT FROM OLD.payload OR NEW.conversation_id IS DISTINCT FROM OLD.conversation_id
                       OR NEW.tenant_id IS DISTINCT FROM OLD.tenant_id)
    EXECUTE FUNCTION mneme.jobs_refs_trg();
CREATE TRIGGER review_log_queries_update AFTER UPDATE OF id, conversation_id, tenant_id ON mneme.review_log
    FOR EACH ROW WHEN (NEW.id IS DISTINCT FROM OLD.id OR NEW.conversation_id IS DISTINCT FROM OLD.conversation_id
                       OR NEW.tenant_id IS DISTINCT FROM OLD.tenant_id)
    EXECUTE FUNCTION mneme.review_log_queries_trg();

-- Erases queries from the review rows of the given tenants: deletes their
-- rows in mneme.review_queries, found by key. Returns the number of query
-- rows deleted.
-- No review row is rewritten (goose 00310, issue 47): when the texts were
-- in review_log.matched_queries, erase_conversation of 10,000 memories,
-- whose 21,000 queries 180,000 review rows of other memories quote,
-- spent 2.1 s of its 4.0 to 4.5 s rewriting those rows.
CREATE OR REPLACE FUNCTION mneme._strip_review_queries(tenants text[], queries text[])
RETURNS bigint
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_keys uuid[];
    v_n    bigint;
BEGIN
    v_keys := ARRAY(SELECT DISTINCT md5(q)::uuid FROM unnest(_strip_review_queries.queries) q WHERE q IS NOT NULL);
    IF cardinality(v_keys) = 0 THEN
        RETURN 0;
    END IF;
    DELETE FROM mneme.review_queries r
    WHERE r.query_key = ANY (v_keys) AND r.tenant_id = ANY (_strip_review_queries.tenants);
    GET DIAGNOSTICS v_n = ROW_COUNT;
    RETURN v_n;
END
$$;
COMMENT ON FUNCTION mneme._strip_review_queries(text[], text[]) IS
    'Internal (erase): erases the given queries from the review rows of the given tenants by deleting their rows in '
    'mneme.review_queries (found by key); no review row is rewritten. Returns the number of query rows deleted.';
