-- =============================================================================
-- mneme invariants: what holds whatever the path. A row references only
-- rows of its own tenant: a memory's conversation, source messages and
-- lineage links; a message's conversation and episode; a review's memory;
-- a review query's review row;
-- an event's memory, conversation and review; a job's conversation and the
-- memories its payload names; the memories a pending review names. One
-- trigger function per table, here and nowhere else: the API functions,
-- the importer, the sidecar's jobs and any later path inherit them
-- (docs/sql-api.md, "Which rule lives where").
--
-- How a reference is checked: the referenced row must be a row of the
-- referencing row's tenant. Inside the API (as mneme_owner, row security
-- on) a session sees only its tenant's rows, so another tenant's row and a
-- row that does not exist give the same error (23503, "... is not a ... of
-- tenant ..."): the check reveals nothing about other tenants. The
-- sidecar's sessions see every tenant and compare the tenant. The checks
-- fire before the foreign keys' (their names sort before RI_...), whose
-- error would otherwise tell "exists elsewhere" from "does not exist".
-- Two references may point forward within a transaction (mneme import
-- writes a conversation's messages, with their episode, and its pending
-- reviews before its memories): those are checked at commit (DEFERRABLE
-- INITIALLY DEFERRED), as SECURITY DEFINER (declared below), since at
-- commit the caller's own role, which has no table privileges, is current.
--
-- On Citus a row trigger runs on the shard and reads only its own
-- conversation's rows: there the triggers check within the row's
-- conversation (the functions' 'citus' argument), and the references that
-- may cross conversations (lineage links, pending reviews) are not checked
-- (docs/scale.md).
-- Idempotent: re-applied on every `mneme migrate`.
-- =============================================================================

-- The error of a reference that does not resolve in the tenant.
CREATE OR REPLACE FUNCTION mneme._foreign_reference(what text, id text, tenant text)
RETURNS void
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    RAISE EXCEPTION '% % is not a % of tenant %', split_part(_foreign_reference.what, ' ', 1), _foreign_reference.id,
        substr(_foreign_reference.what, strpos(_foreign_reference.what, ' ') + 1), _foreign_reference.tenant
        USING ERRCODE = '23503',
              HINT = 'a row references only rows of its own tenant (docs/sql-api.md, "Which rule lives where")';
END
$$;
COMMENT ON FUNCTION mneme._foreign_reference(text, text, text) IS
    'Internal (invariants): raises 23503 for a reference to a row that is not of the tenant (what: "field kind", '
    'e.g. "source_message message").';

-- The one check four tables share: a row's conversation is no
-- conversation of another tenant (a conversation not there yet passes: its
-- first message or memory creates it in the row's tenant).
CREATE OR REPLACE FUNCTION mneme._check_conversation_tenant(conversation_id uuid, tenant text)
RETURNS void
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF _check_conversation_tenant.conversation_id IS NOT NULL
       AND EXISTS (SELECT 1 FROM mneme.message_queue q
                   WHERE q.id = _check_conversation_tenant.conversation_id AND q.tenant_id <> _check_conversation_tenant.tenant) THEN
        PERFORM mneme._foreign_reference('conversation conversation', _check_conversation_tenant.conversation_id::text,
                                         _check_conversation_tenant.tenant);
    END IF;
END
$$;
COMMENT ON FUNCTION mneme._check_conversation_tenant(uuid, text) IS
    'Internal (invariants): raises 23503 when the conversation is a conversation of another tenant than the row''s '
    '(memories, review_log, memory_events, jobs).';

-- The memory ids a job payload or a pending review names: memory_id,
-- memory_ids[*], reviews[*].memory_ids[*], and each entry's memory_ids of a
-- pending-reviews array. Strings that are not UUIDs name nothing.
CREATE OR REPLACE FUNCTION mneme._named_memories(doc jsonb)
RETURNS uuid[]
LANGUAGE sql IMMUTABLE PARALLEL SAFE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
SELECT coalesce(array_agg(DISTINCT s.v::uuid), '{}')
FROM (
    SELECT j #>> '{}' AS v, jsonb_typeof(j) AS t
    FROM jsonb_path_query($1, 'lax $.memory_id') j
    UNION ALL
    SELECT j #>> '{}', jsonb_typeof(j) FROM jsonb_path_query($1, 'lax $.memory_ids[*]') j
    UNION ALL
    SELECT j #>> '{}', jsonb_typeof(j) FROM jsonb_path_query($1, 'lax $.reviews[*].memory_ids[*]') j
    UNION ALL
    SELECT j #>> '{}', jsonb_typeof(j) FROM jsonb_path_query($1, 'lax $[*].memory_ids[*]') j
) s
WHERE s.t = 'string' AND s.v ~* '^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$'
$$;
COMMENT ON FUNCTION mneme._named_memories(jsonb) IS
    'Internal (invariants): the memory ids a job payload or a pending-reviews array names (memory_id, memory_ids, '
    'reviews[*].memory_ids, [*].memory_ids); strings that are not UUIDs name nothing.';

-- A memory: its conversation, source messages and lineage links.
CREATE OR REPLACE FUNCTION mneme.memories_invariant_trg()
RETURNS trigger
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_bad  text;
    v_link text;
BEGIN
    IF TG_OP = 'INSERT' OR NEW.conversation_id IS DISTINCT FROM OLD.conversation_id OR NEW.tenant_id IS DISTINCT FROM OLD.tenant_id THEN
        PERFORM mneme._check_conversation_tenant(NEW.conversation_id, NEW.tenant_id);
    END IF;
    -- the source messages added (an erase of a message leaves its id in
    -- the memories that keep it; only new ids are checked)
    IF NEW.source_message_ids IS NOT NULL AND TG_ARGV[0] = 'citus' THEN
        -- (on Citus within the conversation, the one shard the trigger can
        -- read: a memory's sources are its conversation's messages)
        SELECT s.id::text INTO v_bad
        FROM unnest(NEW.source_message_ids) AS s(id)
        WHERE (TG_OP = 'INSERT' OR NOT s.id = ANY (coalesce(OLD.source_message_ids, '{}')))
          AND NOT s.id = ANY (ARRAY(SELECT g.id FROM mneme.messages g
                                    WHERE g.conversation_id = NEW.conversation_id AND g.tenant_id = NEW.tenant_id
                                      AND g.id = ANY (NEW.source_message_ids)))
        LIMIT 1;
    ELSIF NEW.source_message_ids IS NOT NULL THEN
        SELECT s.id::text INTO v_bad
        FROM unnest(NEW.source_message_ids) AS s(id)
        WHERE (TG_OP = 'INSERT' OR NOT s.id = ANY (coalesce(OLD.source_message_ids, '{}')))
          AND NOT EXISTS (SELECT 1 FROM mneme.messages g WHERE g.id = s.id AND g.tenant_id = NEW.tenant_id)
        LIMIT 1;
    END IF;
    IF v_bad IS NOT NULL THEN
        PERFORM mneme._foreign_reference('source_message_ids message', v_bad, NEW.tenant_id);
    END IF;
    IF TG_ARGV[0] = 'citus' THEN
        -- a lineage link may join two conversations on two workers: not
        -- readable from the shard (docs/scale.md)
        RETURN NULL;
    END IF;
    SELECT x.k, x.id::text INTO v_link, v_bad
    FROM (VALUES ('supersedes_id memory', NEW.supersedes_id, CASE WHEN TG_OP = 'UPDATE' THEN OLD.supersedes_id END),
                 ('confirms_id memory', NEW.confirms_id, CASE WHEN TG_OP = 'UPDATE' THEN OLD.confirms_id END),
                 ('invalidates_id memory', NEW.invalidates_id, CASE WHEN TG_OP = 'UPDATE' THEN OLD.invalidates_id END)) AS x(k, id, old)
    WHERE x.id IS NOT NULL AND x.id IS DISTINCT FROM x.old
      AND NOT EXISTS (SELECT 1 FROM mneme.memories m WHERE m.id = x.id AND m.tenant_id = NEW.tenant_id)
    LIMIT 1;
    IF v_link IS NOT NULL THEN
        PERFORM mneme._foreign_reference(v_link, v_bad, NEW.tenant_id);
    END IF;
    RETURN NULL;
END
$$;
COMMENT ON FUNCTION mneme.memories_invariant_trg() IS
    'Invariant (after a memory''s insert or update): its new source messages and lineage links are rows of its '
    'tenant, its conversation is no conversation of another tenant (23503 otherwise).';

-- A message: its conversation now; its episode at commit (mneme import
-- writes the messages before their episodes).
CREATE OR REPLACE FUNCTION mneme.messages_invariant_trg()
RETURNS trigger
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF TG_ARGV[0] = 'conversation' THEN
        IF NOT EXISTS (SELECT 1 FROM mneme.message_queue q WHERE q.id = NEW.conversation_id AND q.tenant_id = NEW.tenant_id) THEN
            PERFORM mneme._foreign_reference('conversation conversation', NEW.conversation_id::text, NEW.tenant_id);
        END IF;
        RETURN NEW;
    END IF;
    -- at commit: the message as it is now (deleted or re-pointed since: nothing to check)
    IF EXISTS (SELECT 1 FROM mneme.messages g WHERE g.id = NEW.id AND g.memory_id = NEW.memory_id)
       AND NOT EXISTS (SELECT 1 FROM mneme.memories m WHERE m.id = NEW.memory_id AND m.tenant_id = NEW.tenant_id) THEN
        PERFORM mneme._foreign_reference('episode memory', NEW.memory_id::text, NEW.tenant_id);
    END IF;
    RETURN NULL;
END
$$;
COMMENT ON FUNCTION mneme.messages_invariant_trg() IS
    'Invariant: a message''s conversation (before insert) and its episode (at commit) are rows of its tenant '
    '(23503 otherwise).';

-- A conversation's pending reviews name no memory of another tenant (at
-- commit: mneme import writes them before the memories). A name that is
-- no memory at all is kept (a memory removed since; the review job skips
-- it), and inside the API another tenant's memory is no memory at all.
CREATE OR REPLACE FUNCTION mneme.message_queue_invariant_trg()
RETURNS trigger
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_added uuid[];
    v_bad   uuid[];
    v_old   int;
BEGIN
    -- Only what an UPDATE added is parsed: the entries of the new list that
    -- the old one has not (retrieve appends one to a list of up to
    -- pending_reviews_max; parsing the whole list, old and new, and again
    -- as it is now, at every retrieve's commit took 80 ms of a 150 ms
    -- retrieve at 110 entries, bench retrieve). An id the old list named
    -- too is checked again: it passed then.
    -- A list that begins with the old one (retrieve's append) has its tail
    -- parsed alone: comparing each entry of both lists (below) took 0.5 ms
    -- of a 5 ms retrieve at 300 entries (issue 49). (Nested: an AND does
    -- not say which operand runs first.)
    IF TG_OP = 'UPDATE' AND jsonb_typeof(NEW.pending_reviews) = 'array' AND jsonb_typeof(OLD.pending_reviews) = 'array' THEN
        v_old := jsonb_array_length(OLD.pending_reviews);
        IF v_old > 0 AND jsonb_array_length(NEW.pending_reviews) >= v_old THEN
            IF jsonb_path_query_array(NEW.pending_reviews, format('$[0 to %s]', v_old - 1)::jsonpath) = OLD.pending_reviews THEN
                v_added := mneme._named_memories(
                    jsonb_path_query_array(NEW.pending_reviews, format('$[%s to last]', v_old)::jsonpath));
            END IF;
        END IF;
        IF v_added IS NULL THEN  -- (_named_memories never returns NULL: not an append)
            v_added := mneme._named_memories(coalesce(
                (SELECT jsonb_agg(e.v) FROM (SELECT v FROM jsonb_array_elements(NEW.pending_reviews) n(v)
                                             EXCEPT ALL SELECT v FROM jsonb_array_elements(OLD.pending_reviews) o(v)) e),
                '[]'));
        END IF;
    ELSE
        v_added := mneme._named_memories(NEW.pending_reviews);
    END IF;
    IF cardinality(v_added) = 0 THEN
        RETURN NULL;
    END IF;
    v_bad := ARRAY(SELECT m.id FROM mneme.memories m WHERE m.id = ANY (v_added) AND m.tenant_id <> NEW.tenant_id);
    IF cardinality(v_bad) = 0 THEN
        RETURN NULL;
    END IF;
    -- still named now (taken or scrubbed since: nothing to check)
    v_bad := ARRAY(SELECT unnest(v_bad)
                   INTERSECT SELECT unnest(mneme._named_memories((SELECT q.pending_reviews FROM mneme.message_queue q
                                                                  WHERE q.id = NEW.id))));
    IF cardinality(v_bad) > 0 THEN
        PERFORM mneme._foreign_reference('pending_reviews memory', v_bad[1]::text, NEW.tenant_id);
    END IF;
    RETURN NULL;
END
$$;
COMMENT ON FUNCTION mneme.message_queue_invariant_trg() IS
    'Invariant (at commit): the memories a conversation''s pending reviews name are no memories of another tenant (23503).';

-- A review's memory and conversation.
CREATE OR REPLACE FUNCTION mneme.review_log_invariant_trg()
RETURNS trigger
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF TG_ARGV[0] = 'citus' THEN
        -- (on Citus within the conversation: a review row's conversation is
        -- its memory's, the key Citus holds them by)
        IF NOT EXISTS (SELECT 1 FROM mneme.memories m
                       WHERE m.conversation_id = NEW.conversation_id AND m.id = NEW.memory_id AND m.tenant_id = NEW.tenant_id) THEN
            PERFORM mneme._foreign_reference('memory memory', NEW.memory_id::text, NEW.tenant_id);
        END IF;
    ELSIF NOT EXISTS (SELECT 1 FROM mneme.memories m WHERE m.id = NEW.memory_id AND m.tenant_id = NEW.tenant_id) THEN
        PERFORM mneme._foreign_reference('memory memory', NEW.memory_id::text, NEW.tenant_id);
    END IF;
    PERFORM mneme._check_conversation_tenant(NEW.conversation_id, NEW.tenant_id);
    RETURN NEW;
END
$$;
COMMENT ON FUNCTION mneme.review_log_invariant_trg() IS
    'Invariant (before a review log row''s insert): its memory is a memory of its tenant, its conversation no '
    'conversation of another tenant (23503 otherwise).';

-- A review's query (mneme.review_queries, goose 00310): its review row is
-- a review row of its tenant, in its conversation. The writers
-- (mneme.apply_review, import) insert it beside the review row; a moved
-- review row takes its queries along (sql/435-erase-refs.sql).
CREATE OR REPLACE FUNCTION mneme.review_queries_invariant_trg()
RETURNS trigger
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF NOT EXISTS (SELECT 1 FROM mneme.review_log l
                   WHERE l.conversation_id = NEW.conversation_id AND l.id = NEW.review_log_id AND l.tenant_id = NEW.tenant_id) THEN
        PERFORM mneme._foreign_reference('review review', NEW.review_log_id::text, NEW.tenant_id);
    END IF;
    RETURN NEW;
END
$$;
COMMENT ON FUNCTION mneme.review_queries_invariant_trg() IS
    'Invariant (before a review query''s insert or move): its review row is a review row of its tenant and '
    'conversation (23503 otherwise).';

-- The same a statement at a time, where the tables are not distributed
-- (an import or a review job writes many queries in one statement).
CREATE OR REPLACE FUNCTION mneme.review_queries_invariant_stmt_trg()
RETURNS trigger
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v record;
BEGIN
    SELECT n.review_log_id::text AS id, n.tenant_id INTO v
    FROM new_rows n
    WHERE NOT EXISTS (SELECT 1 FROM mneme.review_log l
                      WHERE l.conversation_id = n.conversation_id AND l.id = n.review_log_id AND l.tenant_id = n.tenant_id)
    LIMIT 1;
    IF FOUND THEN
        PERFORM mneme._foreign_reference('review review', v.id, v.tenant_id);
    END IF;
    RETURN NULL;
END
$$;
COMMENT ON FUNCTION mneme.review_queries_invariant_stmt_trg() IS
    'Invariant (after an insert of review queries, one statement at a time where mneme is not distributed): the '
    'check of review_queries_invariant_trg for all the statement''s rows (23503).';

-- An event: a tombstone names a memory (or conversation) that is gone, so
-- an id that is no row at all is accepted; one that is a row of another
-- tenant is not (the sidecar sees it; inside the API it is not there to
-- be seen, and the consumers of events match them by tenant and id).
CREATE OR REPLACE FUNCTION mneme.memory_events_invariant_trg()
RETURNS trigger
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF TG_ARGV[0] = 'citus' THEN
        -- (on Citus within the event's conversation, the one shard the
        -- trigger reads: an event's memory and review are its
        -- conversation's; a memory of another tenant is in a conversation
        -- of that tenant, which the conversation check refuses)
        PERFORM mneme._check_conversation_tenant(NEW.conversation_id, NEW.tenant_id);
        IF NEW.memory_id IS NOT NULL
           AND EXISTS (SELECT 1 FROM mneme.memories m
                       WHERE m.conversation_id = NEW.conversation_id AND m.id = NEW.memory_id AND m.tenant_id <> NEW.tenant_id) THEN
            PERFORM mneme._foreign_reference('memory memory', NEW.memory_id::text, NEW.tenant_id);
        END IF;
        IF NEW.review_log_id IS NOT NULL
           AND NOT EXISTS (SELECT 1 FROM mneme.review_log l
                           WHERE l.conversation_id = NEW.conversation_id AND l.id = NEW.review_log_id AND l.tenant_id = NEW.tenant_id) THEN
            PERFORM mneme._foreign_reference('review review', NEW.review_log_id::text, NEW.tenant_id);
        END IF;
        RETURN NEW;
    END IF;
    IF NEW.memory_id IS NOT NULL
       AND EXISTS (SELECT 1 FROM mneme.memories m WHERE m.id = NEW.memory_id AND m.tenant_id <> NEW.tenant_id) THEN
        PERFORM mneme._foreign_reference('memory memory', NEW.memory_id::text, NEW.tenant_id);
    END IF;
    PERFORM mneme._check_conversation_tenant(NEW.conversation_id, NEW.tenant_id);
    IF NEW.review_log_id IS NOT NULL
       AND NOT EXISTS (SELECT 1 FROM mneme.review_log l WHERE l.id = NEW.review_log_id AND l.tenant_id = NEW.tenant_id) THEN
        PERFORM mneme._foreign_reference('review review', NEW.review_log_id::text, NEW.tenant_id);
    END IF;
    RETURN NEW;
END
$$;
COMMENT ON FUNCTION mneme.memory_events_invariant_trg() IS
    'Invariant (before an event''s insert): its review is a review of its tenant, and its memory and conversation '
    'are not rows of another tenant (23503 otherwise).';

-- The same check a statement at a time, where the tables are not
-- distributed: the delete of a conversation's memories inserts an
-- "erased" event per memory (memories_events_trg), and the row form above
-- ran once per event (issue 47: 3.1 s of a 9.5 s erase_conversation of
-- 2,000 memories). An AFTER trigger: the statement's error is the same.
CREATE OR REPLACE FUNCTION mneme.memory_events_invariant_stmt_trg()
RETURNS trigger
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v record;
BEGIN
    SELECT n.memory_id::text AS id, n.tenant_id INTO v
    FROM new_rows n JOIN mneme.memories m ON m.id = n.memory_id
    WHERE m.tenant_id <> n.tenant_id LIMIT 1;
    IF FOUND THEN
        PERFORM mneme._foreign_reference('memory memory', v.id, v.tenant_id);
    END IF;
    SELECT n.conversation_id::text AS id, n.tenant_id INTO v
    FROM new_rows n JOIN mneme.message_queue q ON q.id = n.conversation_id
    WHERE q.tenant_id <> n.tenant_id LIMIT 1;
    IF FOUND THEN
        PERFORM mneme._foreign_reference('conversation conversation', v.id, v.tenant_id);
    END IF;
    SELECT n.review_log_id::text AS id, n.tenant_id INTO v
    FROM new_rows n
    WHERE n.review_log_id IS NOT NULL
      AND NOT EXISTS (SELECT 1 FROM mneme.review_log l WHERE l.id = n.review_log_id AND l.tenant_id = n.tenant_id)
    LIMIT 1;
    IF FOUND THEN
        PERFORM mneme._foreign_reference('review review', v.id, v.tenant_id);
    END IF;
    RETURN NULL;
END
$$;
COMMENT ON FUNCTION mneme.memory_events_invariant_stmt_trg() IS
    'Invariant (after an insert of events, one statement at a time where mneme is not distributed): the checks of '
    'memory_events_invariant_trg for all the statement''s rows (23503).';

-- A job: its conversation. (The memories its payload names are not
-- checked here: a review job's come from pending reviews, which may name
-- a memory removed since; the handlers act only on memories of the job's
-- tenant, and say so: TestJobsTouchOnlyTheirTenant.)
CREATE OR REPLACE FUNCTION mneme.jobs_invariant_trg()
RETURNS trigger
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    PERFORM mneme._check_conversation_tenant(NEW.conversation_id, NEW.tenant_id);
    RETURN NEW;
END
$$;
COMMENT ON FUNCTION mneme.jobs_invariant_trg() IS
    'Invariant (before a job''s insert or move): its conversation is not a conversation of another tenant (23503).';

DO $$
BEGIN
    -- The AFTER triggers' names ("Invariant: ...") sort before the foreign
    -- keys' (RI_ConstraintTrigger_...), the BEFORE triggers' (zz_invariant)
    -- after the tenant's (<table>_tenant fills tenant_id first).
    DROP TRIGGER IF EXISTS "Invariant: memories insert" ON mneme.memories;
    DROP TRIGGER IF EXISTS "Invariant: memories update" ON mneme.memories;
    DROP TRIGGER IF EXISTS zz_invariant ON mneme.messages;
    DROP TRIGGER IF EXISTS "Invariant: messages episode" ON mneme.messages;
    DROP TRIGGER IF EXISTS "Invariant: pending reviews" ON mneme.message_queue;
    DROP TRIGGER IF EXISTS zz_invariant ON mneme.review_log;
    DROP TRIGGER IF EXISTS zz_invariant ON mneme.memory_events;
    DROP TRIGGER IF EXISTS "Invariant: memory_events insert" ON mneme.memory_events;
    DROP TRIGGER IF EXISTS zz_invariant ON mneme.jobs;
    DROP TRIGGER IF EXISTS zz_invariant ON mneme.review_queries;
    DROP TRIGGER IF EXISTS "Invariant: review_queries insert" ON mneme.review_queries;
    IF mneme._distributed('mneme.memories') THEN
        -- Citus: the checks a shard can make, within the row's conversation
        -- (the functions' 'citus' forms): a memory's conversation and
        -- source messages, a message's conversation, a review's memory and
        -- conversation, an event's conversation, memory and review, a
        -- job's conversation. Not there: a memory's lineage links and the
        -- memories a pending review names (they may be in other
        -- conversations, on other workers) and a message's episode
        -- (a deferred trigger); docs/scale.md.
        CREATE TRIGGER "Invariant: memories insert" AFTER INSERT ON mneme.memories
            FOR EACH ROW EXECUTE FUNCTION mneme.memories_invariant_trg('citus');
        CREATE TRIGGER "Invariant: memories update" AFTER UPDATE ON mneme.memories
            FOR EACH ROW WHEN (NEW.conversation_id IS DISTINCT FROM OLD.conversation_id OR NEW.tenant_id IS DISTINCT FROM OLD.tenant_id
                               OR NEW.source_message_ids IS DISTINCT FROM OLD.source_message_ids)
            EXECUTE FUNCTION mneme.memories_invariant_trg('citus');
        CREATE TRIGGER zz_invariant BEFORE INSERT OR UPDATE OF conversation_id, tenant_id ON mneme.messages
            FOR EACH ROW EXECUTE FUNCTION mneme.messages_invariant_trg('conversation');
        CREATE TRIGGER zz_invariant BEFORE INSERT OR UPDATE OF memory_id, conversation_id, tenant_id ON mneme.review_log
            FOR EACH ROW EXECUTE FUNCTION mneme.review_log_invariant_trg('citus');
        CREATE TRIGGER zz_invariant BEFORE INSERT ON mneme.memory_events
            FOR EACH ROW EXECUTE FUNCTION mneme.memory_events_invariant_trg('citus');
        CREATE TRIGGER zz_invariant BEFORE INSERT OR UPDATE OF conversation_id, tenant_id ON mneme.jobs
            FOR EACH ROW WHEN (NEW.conversation_id IS NOT NULL) EXECUTE FUNCTION mneme.jobs_invariant_trg();
        CREATE TRIGGER zz_invariant BEFORE INSERT OR UPDATE OF conversation_id, review_log_id, tenant_id ON mneme.review_queries
            FOR EACH ROW EXECUTE FUNCTION mneme.review_queries_invariant_trg();
        RETURN;
    END IF;
    CREATE CONSTRAINT TRIGGER "Invariant: memories insert" AFTER INSERT ON mneme.memories
        FOR EACH ROW EXECUTE FUNCTION mneme.memories_invariant_trg();
    CREATE CONSTRAINT TRIGGER "Invariant: memories update" AFTER UPDATE ON mneme.memories
        FOR EACH ROW WHEN (NEW.conversation_id IS DISTINCT FROM OLD.conversation_id OR NEW.tenant_id IS DISTINCT FROM OLD.tenant_id
                           OR NEW.source_message_ids IS DISTINCT FROM OLD.source_message_ids
                           OR NEW.supersedes_id IS DISTINCT FROM OLD.supersedes_id OR NEW.confirms_id IS DISTINCT FROM OLD.confirms_id
                           OR NEW.invalidates_id IS DISTINCT FROM OLD.invalidates_id)
        EXECUTE FUNCTION mneme.memories_invariant_trg();
    CREATE TRIGGER zz_invariant BEFORE INSERT OR UPDATE OF conversation_id, tenant_id ON mneme.messages
        FOR EACH ROW EXECUTE FUNCTION mneme.messages_invariant_trg('conversation');
    CREATE CONSTRAINT TRIGGER "Invariant: messages episode" AFTER INSERT OR UPDATE OF memory_id, tenant_id ON mneme.messages
        DEFERRABLE INITIALLY DEFERRED
        FOR EACH ROW WHEN (NEW.memory_id IS NOT NULL) EXECUTE FUNCTION mneme.messages_invariant_trg('episode');
    CREATE CONSTRAINT TRIGGER "Invariant: pending reviews" AFTER INSERT OR UPDATE OF pending_reviews, tenant_id ON mneme.message_queue
        DEFERRABLE INITIALLY DEFERRED
        FOR EACH ROW WHEN (NEW.pending_reviews IS NOT NULL) EXECUTE FUNCTION mneme.message_queue_invariant_trg();
    CREATE TRIGGER zz_invariant BEFORE INSERT OR UPDATE OF memory_id, conversation_id, tenant_id ON mneme.review_log
        FOR EACH ROW EXECUTE FUNCTION mneme.review_log_invariant_trg();
    CREATE TRIGGER "Invariant: memory_events insert" AFTER INSERT ON mneme.memory_events
        REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION mneme.memory_events_invariant_stmt_trg();
    CREATE TRIGGER zz_invariant BEFORE INSERT OR UPDATE OF conversation_id, tenant_id ON mneme.jobs
        FOR EACH ROW WHEN (NEW.conversation_id IS NOT NULL) EXECUTE FUNCTION mneme.jobs_invariant_trg();
    CREATE TRIGGER "Invariant: review_queries insert" AFTER INSERT ON mneme.review_queries
        REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION mneme.review_queries_invariant_stmt_trg();
    CREATE TRIGGER zz_invariant BEFORE UPDATE OF conversation_id, review_log_id, tenant_id ON mneme.review_queries
        FOR EACH ROW EXECUTE FUNCTION mneme.review_queries_invariant_trg();
END
$$;

-- -----------------------------------------------------------------------------
-- Ids scoped to the tenant
-- -----------------------------------------------------------------------------
-- Conversation ids are UUIDs, one space for every tenant. An id a client
-- draws at random (gen_random_uuid) is taken by no one else; an id derived
-- from a name (a mem0 user) would be computable by every tenant, which
-- could then take it first (42501 for the tenant the name belongs to) or
-- probe whether it exists. A named conversation's id is derived from the
-- tenant, the name and a random key of the installation
-- (mneme.instance_key, which only the functions read): UUID version 8 from
-- SHA-256(key, tenant, name).
CREATE OR REPLACE FUNCTION mneme.named_conversation(name text)
RETURNS uuid
LANGUAGE plpgsql STABLE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
SET jit = off
AS $$
DECLARE
    v_tenant text := mneme._tenant();
    v_key    uuid;
    v_h      text;
BEGIN
    IF named_conversation.name IS NULL THEN
        RAISE EXCEPTION 'name must not be NULL' USING ERRCODE = '22004';
    END IF;
    IF mneme._is_blank(named_conversation.name) THEN
        RAISE EXCEPTION 'name must not be blank' USING ERRCODE = '22023';
    END IF;
    PERFORM mneme._check_length('name', named_conversation.name, 1000);
    SELECT k.key INTO STRICT v_key FROM mneme.instance_key k;
    v_h := encode(sha256(convert_to(v_key::text || ':' || v_tenant || ':' || named_conversation.name, 'UTF8')), 'hex');
    RETURN (substr(v_h, 1, 12) || '8' || substr(v_h, 14, 3)
            || to_hex((('x' || substr(v_h, 17, 1))::bit(4)::int & 3) | 8) || substr(v_h, 18, 15))::uuid;
END
$$;
COMMENT ON FUNCTION mneme.named_conversation(text) IS
    'The tenant''s conversation id for a name (an external user id: `mneme import --from mem0` uses '
    '''mem0:user:<id>''): the same id for the same name in the same tenant, derived with a random key of the '
    'installation and the tenant (UUID version 8), so another tenant can neither compute it, take it first nor probe it.';
GRANT EXECUTE ON FUNCTION mneme.named_conversation(text) TO mneme_app, mneme_worker, mneme_admin;

-- -----------------------------------------------------------------------------
-- Marks: what a function tells the triggers beneath it
-- -----------------------------------------------------------------------------
-- A mneme function that causes a trigger's work says why (the reason of a
-- reactivation or revision, the event of a delete, an import under way)
-- with a mark: a row of mneme.call_marks keyed by the backend and the
-- transaction, which only the functions (as mneme_owner) write and read.
-- A caller cannot write one (no privilege on the table, no EXECUTE on
-- these functions), and a row of an earlier transaction never matches (a
-- transaction id is never reused). A session setting, which the triggers
-- read before, could be planted by any session with SET. On Citus the
-- triggers run on the workers, which do not see the coordinator's table:
-- there the marks are transaction-local settings as before
-- (docs/forgetting.md).
CREATE OR REPLACE FUNCTION mneme._mark(key text, value text)
RETURNS void
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
#variable_conflict use_column
BEGIN
    IF mneme._distributed('mneme.memories') THEN
        PERFORM mneme._set_local('mneme.' || _mark.key, _mark.value);
    ELSIF coalesce(_mark.value, '') = '' THEN
        DELETE FROM mneme.call_marks c
        WHERE c.backend_pid = pg_catalog.pg_backend_pid() AND c.xid = pg_catalog.pg_current_xact_id() AND c.key = _mark.key;
    ELSE
        INSERT INTO mneme.call_marks (backend_pid, xid, key, value)
        VALUES (pg_catalog.pg_backend_pid(), pg_catalog.pg_current_xact_id(), _mark.key, _mark.value)
        ON CONFLICT (backend_pid, xid, key) DO UPDATE SET value = EXCLUDED.value;
    END IF;
END
$$;
COMMENT ON FUNCTION mneme._mark(text, text) IS
    'Internal: sets (value) or clears (NULL or empty) a mark of the current transaction that the triggers read '
    '(mneme._marked); only mneme''s functions can.';

CREATE OR REPLACE FUNCTION mneme._marked(key text)
RETURNS text
LANGUAGE plpgsql STABLE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
#variable_conflict use_column
DECLARE
    v text;
BEGIN
    IF mneme._distributed('mneme.memories') THEN
        RETURN nullif(pg_catalog.current_setting('mneme.' || _marked.key, true), '');
    END IF;
    SELECT c.value INTO v FROM mneme.call_marks c
    WHERE c.backend_pid = pg_catalog.pg_backend_pid() AND c.xid = pg_catalog.pg_current_xact_id_if_assigned()
      AND c.key = _marked.key;
    RETURN v;
END
$$;
COMMENT ON FUNCTION mneme._marked(text) IS
    'Internal: the value of a mark of the current transaction (mneme._mark), NULL when none.';

-- -----------------------------------------------------------------------------
-- Limits: one definition, met by every writer
-- -----------------------------------------------------------------------------
-- The API's functions check their arguments first (with a hint for the
-- caller); these triggers hold the same limits for every row, whoever
-- writes it: mneme import, a job, any later path. A limit is checked when
-- its column is written (a setting lowered later does not make older rows
-- unwritable).
CREATE OR REPLACE FUNCTION mneme._limit(name text)
RETURNS bigint
LANGUAGE plpgsql STABLE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    RETURN CASE _limit.name
        -- a message's content, a stated memory's (remember, add_fact, import)
        WHEN 'message_chars' THEN (mneme.setting('message_max_chars') #>> '{}')::bigint
        -- an episode's content: the messages it is made of
        WHEN 'episode_chars' THEN (mneme.setting('message_max_chars') #>> '{}')::bigint
                                  * greatest((mneme.setting('segment_max_messages') #>> '{}')::bigint, 1)
        WHEN 'title_chars' THEN 1000
        WHEN 'source_ref_chars' THEN 512
        WHEN 'reason_chars' THEN 2000
        WHEN 'query_chars' THEN 10000
        WHEN 'source_messages' THEN 100000   -- ids in a memory's source_message_ids
        WHEN 'metadata_chars' THEN 100000    -- a memory's metadata as JSON text
        WHEN 'metadata_depth' THEN 32        -- nesting of objects and arrays in it
    END;
END
$$;
COMMENT ON FUNCTION mneme._limit(text) IS
    'Internal: the one definition of each limit on stored text and arrays (message_chars, episode_chars, '
    'title_chars, source_ref_chars, reason_chars, query_chars, source_messages, metadata_chars, metadata_depth).';

-- A text against its limit: 22023 when it is blank (mneme._is_blank: only
-- whitespace, zero-width and control characters), 22001 when it is longer.
CREATE OR REPLACE FUNCTION mneme._check_text(name text, input text, max_chars bigint)
RETURNS void
LANGUAGE plpgsql IMMUTABLE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF _check_text.input IS NULL THEN
        RETURN;
    END IF;
    IF mneme._is_blank(_check_text.input) THEN
        RAISE EXCEPTION '% must not be empty', _check_text.name USING ERRCODE = '22023',
            HINT = 'whitespace, zero-width and control characters alone do not count as text';
    END IF;
    IF length(_check_text.input) > _check_text.max_chars THEN
        RAISE EXCEPTION '% is % characters, over the limit of %', _check_text.name, length(_check_text.input), _check_text.max_chars
            USING ERRCODE = '22001';
    END IF;
END
$$;
COMMENT ON FUNCTION mneme._check_text(text, text, bigint) IS
    'Internal: raises 22023 for a blank text and 22001 for one over max_chars, naming it (NULL passes).';

CREATE OR REPLACE FUNCTION mneme._jsonb_depth(doc jsonb)
RETURNS int
LANGUAGE sql IMMUTABLE PARALLEL SAFE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
WITH RECURSIVE d(v, n) AS (
    SELECT $1, 1
    UNION ALL
    SELECT c.v, d.n + 1
    FROM d, LATERAL (SELECT x.value AS v FROM jsonb_each(CASE WHEN jsonb_typeof(d.v) = 'object' THEN d.v END) x
                     UNION ALL
                     SELECT y.value FROM jsonb_array_elements(CASE WHEN jsonb_typeof(d.v) = 'array' THEN d.v END) y) c
    WHERE jsonb_typeof(c.v) IN ('object', 'array') AND d.n < 1000
)
SELECT max(n) FROM d
$$;
COMMENT ON FUNCTION mneme._jsonb_depth(jsonb) IS
    'Internal: how deep objects and arrays nest in a JSON value (1 for a scalar or a flat object).';

CREATE OR REPLACE FUNCTION mneme.messages_limits_trg()
RETURNS trigger
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    PERFORM mneme._check_text('message content', NEW.content, mneme._limit('message_chars'));
    RETURN NEW;
END
$$;
COMMENT ON FUNCTION mneme.messages_limits_trg() IS
    'Limits (before a message''s content is written): not blank, at most message_max_chars (22023, 22001).';

CREATE OR REPLACE FUNCTION mneme.memories_limits_trg()
RETURNS trigger
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_chars bigint := mneme._limit(CASE WHEN NEW.kind = 'episodic' THEN 'episode_chars' ELSE 'message_chars' END);
BEGIN
    IF TG_OP = 'INSERT' OR NEW.content IS DISTINCT FROM OLD.content THEN
        PERFORM mneme._check_text('memory content', NEW.content, v_chars);
    END IF;
    IF TG_OP = 'INSERT' OR NEW.summary IS DISTINCT FROM OLD.summary THEN
        IF length(NEW.summary) > v_chars THEN
            PERFORM mneme._check_text('summary', NEW.summary, v_chars);
        END IF;
    END IF;
    IF TG_OP = 'INSERT' OR NEW.title IS DISTINCT FROM OLD.title THEN
        IF length(NEW.title) > mneme._limit('title_chars') THEN
            PERFORM mneme._check_text('title', NEW.title, mneme._limit('title_chars'));
        END IF;
    END IF;
    IF TG_OP = 'INSERT' OR NEW.source_ref IS DISTINCT FROM OLD.source_ref THEN
        IF length(NEW.source_ref) > mneme._limit('source_ref_chars') THEN
            PERFORM mneme._check_text('source_ref', NEW.source_ref, mneme._limit('source_ref_chars'));
        END IF;
    END IF;
    IF cardinality(NEW.source_message_ids) > mneme._limit('source_messages')
       AND (TG_OP = 'INSERT' OR NEW.source_message_ids IS DISTINCT FROM OLD.source_message_ids) THEN
        RAISE EXCEPTION 'source_message_ids holds % ids, over the limit of %', cardinality(NEW.source_message_ids),
            mneme._limit('source_messages') USING ERRCODE = '22023';
    END IF;
    IF TG_OP = 'INSERT' OR NEW.metadata IS DISTINCT FROM OLD.metadata THEN
        IF length(NEW.metadata::text) > mneme._limit('metadata_chars') THEN
            RAISE EXCEPTION 'metadata is % characters as JSON, over the limit of %', length(NEW.metadata::text),
                mneme._limit('metadata_chars') USING ERRCODE = '22001';
        END IF;
        IF NEW.metadata::text ~ '[\[{].*[\[{]' AND mneme._jsonb_depth(NEW.metadata) > mneme._limit('metadata_depth') THEN
            RAISE EXCEPTION 'metadata nests deeper than % levels', mneme._limit('metadata_depth') USING ERRCODE = '22023';
        END IF;
    END IF;
    RETURN NEW;
END
$$;
COMMENT ON FUNCTION mneme.memories_limits_trg() IS
    'Limits (before a memory''s text, sources or metadata are written): content not blank and at most '
    'message_max_chars (an episode: times segment_max_messages), title, summary and source_ref within theirs, at most '
    '100,000 source ids, metadata at most 100,000 characters and 32 levels deep (22023, 22001).';

-- ("Limits" sorts before the other BEFORE triggers: nothing is computed
-- from a text that is refused.)
DO $$
BEGIN
    DROP TRIGGER IF EXISTS "Limits" ON mneme.messages;
    DROP TRIGGER IF EXISTS "Limits" ON mneme.memories;
    -- (on Citus too: the limits read only the settings, a reference table
    -- every worker holds)
    CREATE TRIGGER "Limits" BEFORE INSERT OR UPDATE OF content ON mneme.messages
        FOR EACH ROW EXECUTE FUNCTION mneme.messages_limits_trg();
    CREATE TRIGGER "Limits" BEFORE INSERT OR UPDATE OF content, summary, title, source_ref, source_message_ids, metadata, kind
        ON mneme.memories FOR EACH ROW EXECUTE FUNCTION mneme.memories_limits_trg();
END
$$;
