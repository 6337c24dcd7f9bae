-- =============================================================================
-- mneme on Citus: the key tables of erase (goose 00180, sql/435-erase-refs.sql)
-- kept on the shard itself. A row trigger that wrote mneme.job_refs or
-- mneme.review_queries by name would run that write as a distributed
-- statement inside the coordinator's transaction, which fails in two-phase
-- commits (docs/scale.md, "AFTER row triggers that write on the shard
-- itself"): as the triggers of 300-triggers.sql, these write the colocated
-- shard by name (mneme._shard). Applied after sql/*.sql on a distributed
-- mneme only; they replace the one-server functions of the same name.
-- =============================================================================

CREATE OR REPLACE FUNCTION mneme.jobs_refs_trg()
RETURNS trigger
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_old text[];
    v_new text[];
BEGIN
    -- (a payload changed in place: only the keys that went and came, as
    -- the one-server form)
    IF TG_OP = 'UPDATE' AND NEW.id = OLD.id AND NEW.conversation_id IS NOT DISTINCT FROM OLD.conversation_id
       AND NEW.tenant_id = OLD.tenant_id THEN
        v_old := mneme._payload_refs(OLD.payload);
        v_new := mneme._payload_refs(NEW.payload);
        EXECUTE format('DELETE FROM %s r WHERE r.conversation_id = $1 AND r.job_id = $2 AND r.ref = ANY ($3)',
                       mneme._shard('mneme.job_refs', OLD.conversation_id))
            USING OLD.conversation_id, OLD.id, ARRAY(SELECT unnest(v_old) EXCEPT SELECT unnest(v_new));
        EXECUTE format('INSERT INTO %s (conversation_id, job_id, tenant_id, ref) '
                       'SELECT $1, $2, $3, x FROM unnest($4::text[]) x ON CONFLICT DO NOTHING',
                       mneme._shard('mneme.job_refs', NEW.conversation_id))
            USING NEW.conversation_id, NEW.id, NEW.tenant_id, ARRAY(SELECT unnest(v_new) EXCEPT SELECT unnest(v_old));
        RETURN NULL;
    END IF;
    IF TG_OP <> 'INSERT' THEN
        EXECUTE format('DELETE FROM %s r WHERE r.conversation_id = $1 AND r.job_id = $2',
                       mneme._shard('mneme.job_refs', OLD.conversation_id))
            USING OLD.conversation_id, OLD.id;
    END IF;
    IF TG_OP <> 'DELETE' THEN
        EXECUTE format('INSERT INTO %s (conversation_id, job_id, tenant_id, ref) '
                       'SELECT $1, $2, $3, x FROM unnest($4::text[]) x ON CONFLICT DO NOTHING',
                       mneme._shard('mneme.job_refs', NEW.conversation_id))
            USING NEW.conversation_id, NEW.id, NEW.tenant_id, mneme._payload_refs(NEW.payload);
    END IF;
    RETURN NULL;
END
$$;

CREATE OR REPLACE FUNCTION mneme.review_log_queries_trg()
RETURNS trigger
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    -- (a review row's queries go with it, or move with its id or tenant:
    -- Citus refuses a change of its conversation, the distribution column)
    IF TG_OP = 'DELETE' THEN
        EXECUTE format('DELETE FROM %s r WHERE r.conversation_id = $1 AND r.review_log_id = $2',
                       mneme._shard('mneme.review_queries', OLD.conversation_id))
            USING OLD.conversation_id, OLD.id;
    ELSIF TG_OP = 'UPDATE' THEN
        EXECUTE format('UPDATE %s r SET review_log_id = $3, tenant_id = $4 WHERE r.conversation_id = $1 AND r.review_log_id = $2',
                       mneme._shard('mneme.review_queries', OLD.conversation_id))
            USING OLD.conversation_id, OLD.id, NEW.id, NEW.tenant_id;
    END IF;
    RETURN NULL;
END
$$;
