-- =============================================================================
-- mneme lifecycle, erase: the right to be forgotten
-- (the lifecycle is introduced in 400-labels.sql).
-- Idempotent: re-applied on every `mneme migrate` (CREATE OR REPLACE only).
-- =============================================================================

-- That an erase happened, in any tenant (mneme.erasures: a time, no tenant,
-- no content), for mneme.erase_vacuum_targets. One row per transaction
-- (an insert, never an update of a shared row: concurrent erases, several
-- in one transaction each, never wait on each other here).
CREATE OR REPLACE FUNCTION mneme._note_erase()
RETURNS void
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    INSERT INTO mneme.erasures (erased_at)
    SELECT now() WHERE NOT EXISTS (SELECT 1 FROM mneme.erasures x WHERE x.erased_at >= now());
END
$$;
COMMENT ON FUNCTION mneme._note_erase() IS
    'Internal (erase): records in mneme.erasures that an erase happened now, which erase_vacuum_targets reads.';

-- -----------------------------------------------------------------------------
-- Erase: the right to be forgotten
-- -----------------------------------------------------------------------------
CREATE OR REPLACE FUNCTION mneme.erase(memory_id uuid, reason text)
RETURNS void
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
SET jit = off
AS $$
DECLARE
    v__entered boolean := mneme._enter(NULL);  -- the caller forwarded first (Citus: mneme._enter)
    v_conv uuid;
BEGIN
    IF erase.memory_id IS NULL THEN
        RAISE EXCEPTION 'memory_id must not be NULL' USING ERRCODE = '22004';
    END IF;
    IF erase.reason IS NULL OR mneme._is_blank(erase.reason) THEN
        RAISE EXCEPTION 'erase needs a reason' USING ERRCODE = CASE WHEN erase.reason IS NULL THEN '22004' ELSE '22023' END,
            HINT = 'the reason stays in the tombstone (mneme.memory_events); do not quote the erased content in it';
    END IF;
    PERFORM mneme._check_length('reason', erase.reason, 2000);
    v_conv := mneme._memory_conversation(erase.memory_id);
    PERFORM 1 FROM mneme.memories m WHERE m.conversation_id = v_conv AND m.id = erase.memory_id FOR UPDATE;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'memory % does not exist', erase.memory_id USING ERRCODE = 'P0002',
            HINT = 'SELECT * FROM mneme.memory_events WHERE memory_id = ... shows whether it was purged or erased';
    END IF;
    PERFORM 1 FROM mneme.message_queue q WHERE q.id = v_conv FOR UPDATE;  -- no segmentation meanwhile
    -- Earlier events keep their ids and times, not their reasons (a forget
    -- reason may quote the memory).
    PERFORM mneme._mark('erasing', 'on');
    UPDATE mneme.memory_events e SET reason = NULL WHERE e.memory_id = erase.memory_id AND e.reason IS NOT NULL;
    PERFORM mneme._mark('erasing', '');
    PERFORM mneme._remove_memories(ARRAY[erase.memory_id], 'erased', erase.reason);
    PERFORM mneme._note_erase();
END
$$;
COMMENT ON FUNCTION mneme.erase(uuid, text) IS
    'Removes a memory''s content for real (the right to be forgotten): the row with its embedding, its BM25 '
    'postings and statistics, its source messages, its review_log rows, pending reviews and job payload entries '
    'that refer to it, and the reasons of its earlier events. A tombstone remains: an "erased" event with the ids, '
    'the time and the reason. mneme.forget, by contrast, only invalidates.';
GRANT EXECUTE ON FUNCTION mneme.erase(uuid, text) TO mneme_admin;

CREATE OR REPLACE FUNCTION mneme.erase_conversation(conversation_id uuid, reason text)
RETURNS bigint
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
SET jit = off
AS $$
DECLARE
    v__entered boolean := mneme._enter(erase_conversation.conversation_id);  -- the caller forwarded first (Citus: mneme._enter)
    v_ids     uuid[];
    v_n       bigint;
    v_tenant  text;
    v_queries text[];
BEGIN
    IF erase_conversation.conversation_id IS NULL THEN
        RAISE EXCEPTION 'conversation_id must not be NULL' USING ERRCODE = '22004';
    END IF;
    IF erase_conversation.reason IS NULL OR mneme._is_blank(erase_conversation.reason) THEN
        RAISE EXCEPTION 'erase_conversation needs a reason'
            USING ERRCODE = CASE WHEN erase_conversation.reason IS NULL THEN '22004' ELSE '22023' END,
            HINT = 'the reason stays in the tombstone (mneme.memory_events); do not quote the erased content in it';
    END IF;
    PERFORM mneme._check_length('reason', erase_conversation.reason, 2000);
    -- The memories first, then the queue row: the order erase and a
    -- retrieval recording its pending review lock them in, so none of them
    -- deadlocks with another; the memories a segmentation stores meanwhile
    -- are locked below, under the queue row's lock. In id order, the one
    -- lock order (mneme._lock_memories), as a review job locks its targets.
    PERFORM 1 FROM mneme.memories m WHERE m.conversation_id = erase_conversation.conversation_id ORDER BY m.id FOR UPDATE;
    PERFORM 1 FROM mneme.message_queue q WHERE q.id = erase_conversation.conversation_id FOR UPDATE;
    IF NOT FOUND AND NOT EXISTS (SELECT 1 FROM mneme.memories m WHERE m.conversation_id = erase_conversation.conversation_id) THEN
        RAISE EXCEPTION 'conversation % does not exist', erase_conversation.conversation_id USING ERRCODE = 'P0002',
            HINT = 'SELECT * FROM mneme.memory_events WHERE conversation_id = ... shows whether it was erased';
    END IF;
    SELECT array_agg(x.id ORDER BY x.id) INTO v_ids FROM (
        SELECT m.id FROM mneme.memories m
        WHERE m.conversation_id = erase_conversation.conversation_id FOR UPDATE) x;

    PERFORM mneme._mark('erasing', 'on');
    UPDATE mneme.memory_events e SET reason = NULL
    WHERE e.conversation_id = erase_conversation.conversation_id AND e.reason IS NOT NULL;
    PERFORM mneme._mark('erasing', '');

    -- Every query typed in the conversation, wherever a copy was recorded:
    -- with scope tenant it retrieved other conversations' memories, whose
    -- review log quotes it (review_log.asked_in is the asking conversation;
    -- its review jobs and pending reviews hold the ones not reviewed yet).
    -- The ratings stay: they hold no text.
    SELECT q.tenant_id INTO v_tenant FROM mneme.message_queue q WHERE q.id = erase_conversation.conversation_id;
    -- Resolved once, into a variable: the statements below compare with a
    -- value (Citus refuses a non-IMMUTABLE function in COALESCE in an
    -- UPDATE over its shards, 0A000).
    v_tenant := coalesce(v_tenant, mneme._tenant());
    v_queries := ARRAY(
        SELECT e ->> 'query'
        FROM mneme.message_queue q,
             jsonb_array_elements(CASE WHEN jsonb_typeof(q.pending_reviews) = 'array' THEN q.pending_reviews ELSE '[]' END) e
        WHERE q.id = erase_conversation.conversation_id AND e ->> 'query' IS NOT NULL
        UNION
        SELECT e ->> 'query'
        FROM mneme.jobs j,
             jsonb_array_elements(CASE WHEN jsonb_typeof(j.payload -> 'reviews') = 'array' THEN j.payload -> 'reviews' ELSE '[]' END) e
        WHERE j.conversation_id = erase_conversation.conversation_id AND e ->> 'query' IS NOT NULL
        UNION
        -- (asked_in is indexed; goose 00070 filled it for the rows written
        -- before it whose review job was still kept)
        -- (the queries are rows of mneme.review_queries, goose 00310)
        SELECT r.query FROM mneme.review_log l
        JOIN mneme.review_queries r ON r.conversation_id = l.conversation_id AND r.review_log_id = l.id
        WHERE l.asked_in = erase_conversation.conversation_id);
    -- (by key, mneme.review_queries: their rows go; no review row is rewritten)
    PERFORM mneme._strip_review_queries(ARRAY[v_tenant], v_queries);
    UPDATE mneme.review_log l SET asked_in = NULL
    WHERE l.asked_in = erase_conversation.conversation_id AND l.tenant_id = v_tenant;

    -- Every job of the conversation: its payload may quote it. A job running
    -- now loses its lease and rolls back when it tries to complete.
    DELETE FROM mneme.jobs j WHERE j.conversation_id = erase_conversation.conversation_id;
    -- The LLM usage ledger names the conversation: its totals stay per day
    -- (mneme.llm_usage_days), its rows go.
    PERFORM mneme._fold_llm_calls(erase_conversation.conversation_id);
    v_n := coalesce(mneme._remove_memories(coalesce(v_ids, '{}'), 'erased', erase_conversation.reason), 0);
    DELETE FROM mneme.review_log l WHERE l.conversation_id = erase_conversation.conversation_id;
    -- Messages (the queued ones too), speakers and pending reviews.
    DELETE FROM mneme.message_queue q WHERE q.id = erase_conversation.conversation_id;
    DELETE FROM mneme.messages g WHERE g.conversation_id = erase_conversation.conversation_id;

    INSERT INTO mneme.memory_events (memory_id, conversation_id, tenant_id, event, reason, actor, at)
    VALUES (NULL, erase_conversation.conversation_id, v_tenant, 'erased',
            format('conversation erased (%s memories): %s', v_n, erase_conversation.reason), mneme._event_actor(), now());
    PERFORM mneme._note_erase();
    RETURN v_n;
END
$$;
COMMENT ON FUNCTION mneme.erase_conversation(uuid, text) IS
    'mneme.erase for a whole conversation: every memory, message (queued ones too), job, review log row, LLM usage '
    'ledger row (its totals stay in mneme.llm_usage_days), pending review and the speakers, and every copy of a query typed in it (also in the review log of other conversations'' '
    'memories it retrieved with scope tenant); tombstones remain (an "erased" event per memory and one for the conversation, '
    'memory_id NULL). Returns the number of memories erased.';
GRANT EXECUTE ON FUNCTION mneme.erase_conversation(uuid, text) TO mneme_admin;

-- A tenant, whole: every conversation erased by erase_conversation (so a
-- drop is an erase, with its tombstones, whatever erase comes to do), then
-- what is left of the tenant without content (its jobs that name no
-- conversation, its turn in claim_jobs) and the tenant itself. Its
-- tombstones keep the id: create_tenant does not hand it out again.
CREATE OR REPLACE FUNCTION mneme.drop_tenant(tenant text, reason text)
RETURNS bigint
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
SET jit = off
AS $$
DECLARE
    v__entered boolean := mneme._enter(NULL);  -- the caller forwarded first (Citus: mneme._enter)
    v_prev   text := pg_catalog.current_setting('mneme.tenant', true);
    v_logins text;
    v_conv   uuid;
    v_n      bigint := 0;
BEGIN
    PERFORM mneme._require_unbound('drop tenants');
    IF drop_tenant.tenant IS NULL THEN
        RAISE EXCEPTION 'tenant must not be NULL' USING ERRCODE = '22004';
    END IF;
    IF drop_tenant.reason IS NULL OR mneme._is_blank(drop_tenant.reason) THEN
        RAISE EXCEPTION 'drop_tenant needs a reason'
            USING ERRCODE = CASE WHEN drop_tenant.reason IS NULL THEN '22004' ELSE '22023' END,
            HINT = 'the reason stays in the tombstones (mneme.memory_events); do not quote the erased content in it';
    END IF;
    PERFORM mneme._check_length('reason', drop_tenant.reason, 2000);
    PERFORM mneme._citus_sequential();
    IF drop_tenant.tenant = 'default' THEN
        RAISE EXCEPTION 'tenant default cannot be dropped: it is where calls without a tenant go'
            USING ERRCODE = '22023', HINT = 'erase its conversations one by one: mneme.erase_conversation(id, reason)';
    END IF;
    PERFORM 1 FROM mneme.tenants t WHERE t.id = drop_tenant.tenant FOR UPDATE;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'unknown tenant %', mneme._quote_prefix(drop_tenant.tenant) USING ERRCODE = '22023',
            HINT = 'SELECT tenant FROM mneme.tenants() lists them';
    END IF;
    SELECT string_agg(b.login::text, ', ' ORDER BY b.login) INTO v_logins
      FROM mneme.tenant_logins b WHERE b.tenant_id = drop_tenant.tenant;
    IF v_logins IS NOT NULL THEN
        -- unbinding them would let them choose any tenant: the operator decides
        RAISE EXCEPTION 'logins % are bound to tenant %', v_logins, drop_tenant.tenant USING ERRCODE = '55000',
            HINT = 'DROP ROLE them, or SELECT mneme.unbind_login(...) each, first';
    END IF;
    IF mneme._distributed('mneme.memories') THEN
        -- erase_conversation runs on Citus delegated to the worker that
        -- owns the conversation, which a call nested in this one is not
        RAISE EXCEPTION 'drop_tenant does not run on a distributed mneme (Citus) yet'
            USING ERRCODE = '0A000',
                  HINT = 'erase the tenant''s conversations one call each: BEGIN; SELECT mneme.set_tenant(...); '
                         'SELECT mneme.erase_conversation(id, reason) ...; COMMIT (docs/scale.md)';
    END IF;
    -- As the tenant: row security shows its rows to an unbound caller that sets it.
    PERFORM mneme._act_for_tenant(drop_tenant.tenant);
    FOR v_conv IN SELECT q.id FROM mneme.message_queue q WHERE q.tenant_id = drop_tenant.tenant
                  UNION SELECT m.conversation_id FROM mneme.memories m WHERE m.tenant_id = drop_tenant.tenant
                  ORDER BY 1 LOOP
        v_n := v_n + mneme.erase_conversation(v_conv, 'tenant dropped: ' || drop_tenant.reason);
    END LOOP;
    DELETE FROM mneme.jobs j WHERE j.tenant_id = drop_tenant.tenant;
    DELETE FROM mneme.job_turns t WHERE t.tenant_id = drop_tenant.tenant;
    DELETE FROM mneme.tenants t WHERE t.id = drop_tenant.tenant;
    PERFORM mneme._act_for_tenant(v_prev);
    RETURN v_n;
END
$$;
COMMENT ON FUNCTION mneme.drop_tenant(text, text) IS
    'Drops a tenant with all its data (an unbound admin; a bound login gets 42501): every conversation erased by '
    'mneme.erase_conversation (tombstones remain, their reason "tenant dropped: " and reason), its other jobs, then the '
    'tenant. Refused for tenant default (22023), while logins are bound to it (55000) and on Citus (0A000, not yet). '
    'Its id is not handed out again. Returns the number of memories erased.';
GRANT EXECUTE ON FUNCTION mneme.drop_tenant(text, text) TO mneme_admin;

-- -----------------------------------------------------------------------------
-- After an erase: dead tuples
-- -----------------------------------------------------------------------------
-- A DELETE or UPDATE leaves the old row version on its page until VACUUM
-- prunes it, so erased text stays readable to someone with file access (not
-- to SQL) until then. VACUUM cannot run inside a function or transaction:
-- the cleanup job runs it (sidecar/lifecycle), on the tables this function
-- names.
CREATE OR REPLACE FUNCTION mneme.erase_vacuum_targets()
RETURNS TABLE (table_name text, may_vacuum boolean)
LANGUAGE sql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
SELECT c.relname::text,
       pg_catalog.pg_has_role(current_user, c.relowner, 'USAGE')
FROM pg_catalog.pg_class c
JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace AND n.nspname = 'mneme'
WHERE c.relkind = 'r'
  AND c.relname IN ('memories', 'messages', 'message_queue', 'jobs', 'review_log', 'memory_events',
                    'bm25_docs', 'bm25_postings', 'bm25_terms')
  -- an erase since the last vacuum of memories, in any tenant: from
  -- mneme.erasures, which has no tenant (the events' row security showed
  -- an unbound admin only tenant default's erases; issue 38)
  AND EXISTS (SELECT 1 FROM mneme.erasures x
              WHERE x.erased_at > (SELECT coalesce(greatest(s.last_vacuum, s.last_autovacuum), '-infinity')
                                       FROM pg_catalog.pg_stat_user_tables s
                                       WHERE s.schemaname = 'mneme' AND s.relname = 'memories'))
ORDER BY 1
$$;
COMMENT ON FUNCTION mneme.erase_vacuum_targets() IS
    'The tables an erase touched when an erase (in any tenant: mneme.erasures) happened after the last (auto)vacuum '
    'of mneme.memories (empty otherwise), and whether the calling role may VACUUM them (their owner or a superuser). The cleanup job '
    'vacuums them so erased text leaves the dead tuples; a role that may not gets the command to hand on.';
GRANT EXECUTE ON FUNCTION mneme.erase_vacuum_targets() TO mneme_worker, mneme_admin;

-- Deletes memories for real (purge and erase): their source messages,
-- references in pending reviews and job payloads, then the rows (BM25
-- statistics follow by trigger, review_log by cascade). The delete trigger
-- records one event per memory with the given event and reason.
CREATE OR REPLACE FUNCTION mneme._remove_memories(ids uuid[], event text, reason text)
RETURNS bigint
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_msgs    bigint[];
    v_own     text[];
    v_convs   uuid[];
    v_tenants text[];
    v_keys    text[];
    v_queries text[] := '{}';
    v_n       bigint;
    v_more    uuid[];
    v_jobs    bigint[];
    v_job_convs uuid[];
BEGIN
    LOOP
        SELECT array_agg(DISTINCT s.id), array_agg(DISTINCT s.c) INTO v_msgs, v_convs FROM (
            SELECT unnest(m.source_message_ids) AS id, m.conversation_id AS c FROM mneme.memories m WHERE m.id = ANY (ids)
            UNION
            SELECT g.id, g.conversation_id FROM mneme.messages g WHERE g.memory_id = ANY (ids)) s;
        EXIT WHEN _remove_memories.event <> 'erased';
        -- What copies the erased words goes with them, each with its own
        -- tombstone: every memory made of an erased message (the facts
        -- extracted from an erased episode's messages, and the episode an
        -- erased fact was extracted from, whose messages then go too: a
        -- fact's words, or an LLM's paraphrase of them, cannot be cut out
        -- of the episode reliably, so the episode is erased whole;
        -- docs/forgetting.md), and the merged duplicates of an erased
        -- memory (the same statement, kept out of retrieval but not out
        -- of the table). Repeated until nothing more is reached.
        v_more := ARRAY(SELECT m.id FROM mneme.memories m
                        WHERE m.id NOT IN (SELECT unnest(ids))
                          AND ((m.status = 'merged' AND m.confirms_id = ANY (ids))
                               OR (v_msgs IS NOT NULL AND m.conversation_id = ANY (v_convs)
                                   AND m.source_message_ids && v_msgs)));
        EXIT WHEN cardinality(v_more) = 0;
        PERFORM mneme._lock_memories(v_more);
        ids := ids || v_more;
    END LOOP;
    v_keys := ARRAY(SELECT unnest(ids)::text);
    v_convs := ARRAY(SELECT DISTINCT m.conversation_id FROM mneme.memories m WHERE m.id = ANY (ids));
    -- Retrievals are recorded in the asking conversation, which with scope
    -- tenant is any conversation of the tenant.
    v_tenants := ARRAY(SELECT DISTINCT m.tenant_id FROM mneme.memories m WHERE m.id = ANY (ids));
    IF _remove_memories.event = 'erased' THEN
        -- Reasons may quote what is erased: the events of every erased
        -- memory, and any reason or status_reason that names one (a
        -- revision's "changes from X to Y (by <id>)"), lose their text.
        PERFORM mneme._mark('erasing', 'on');
        UPDATE mneme.memory_events e SET reason = NULL WHERE e.memory_id = ANY (ids) AND e.reason IS NOT NULL;
        UPDATE mneme.memory_events e SET reason = NULL
        WHERE e.id IN (SELECT e2.id
                       FROM mneme.memory_events e2,
                            regexp_matches(e2.reason, '[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}', 'g') r
                       WHERE e2.tenant_id = ANY (v_tenants)
                         -- (the partial index memory_events_naming_idx: only the reasons that name an id)
                         AND e2.reason ~ '[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}'
                         AND r[1] IN (SELECT unnest(v_keys)));
        PERFORM mneme._mark('erasing', '');
        -- (the ids first, and the UPDATE only when there is one: an UPDATE
        -- of no row still runs the memories' statement triggers, 10 ms of a
        -- single erase's profile)
        v_more := ARRAY(SELECT DISTINCT m2.id
                        FROM mneme.memories m2,
                             regexp_matches(m2.status_reason, '[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}', 'g') r
                        WHERE m2.tenant_id = ANY (v_tenants)
                          -- (the partial index memories_reason_naming_idx)
                          AND m2.status_reason ~ '[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}'
                          AND m2.id NOT IN (SELECT unnest(ids)) AND r[1] IN (SELECT unnest(v_keys)));
        IF cardinality(v_more) > 0 THEN
            UPDATE mneme.memories m SET status_reason = m.status || ': the memory that changed it was erased'  -- (not format(), STABLE: Citus refuses it over columns in an UPDATE)
            WHERE m.id = ANY (v_more);
        END IF;
        -- A query that retrieved an erased memory asked about it: it goes
        -- too, from every copy, also where it retrieved other memories
        -- alongside (their review log, the review job that rated them).
        SELECT array_agg(DISTINCT r.job_id), array_agg(DISTINCT r.conversation_id) INTO v_jobs, v_job_convs
        FROM mneme.job_refs r
        WHERE r.ref = ANY (mneme._erase_refs(v_keys, NULL, NULL)) AND r.tenant_id = ANY (v_tenants);
        v_queries := ARRAY(
            SELECT e ->> 'query'
            FROM mneme.message_queue q, jsonb_array_elements(q.pending_reviews) e
            WHERE q.tenant_id = ANY (v_tenants) AND q.pending_reviews IS NOT NULL AND jsonb_typeof(q.pending_reviews) = 'array'
              AND (e -> 'memory_ids') ?| v_keys AND e ->> 'query' IS NOT NULL
            UNION
            SELECT e ->> 'query'
            -- (the review jobs that name one: by key, mneme.job_refs, read
            -- first; no correlated subquery: Citus refuses one beside a set
            -- returning function)
            FROM mneme.jobs x,
                 jsonb_array_elements(CASE WHEN jsonb_typeof(x.payload -> 'reviews') = 'array' THEN x.payload -> 'reviews' ELSE '[]' END) e,
                 jsonb_array_elements(CASE WHEN jsonb_typeof(e -> 'memory_ids') = 'array' THEN e -> 'memory_ids' ELSE '[]' END) i
            WHERE x.id = ANY (v_jobs) AND x.conversation_id = ANY (v_job_convs)
              AND x.kind = 'review' AND x.tenant_id = ANY (v_tenants)
              AND jsonb_typeof(x.payload -> 'reviews') = 'array'
              AND jsonb_typeof(e -> 'memory_ids') = 'array' AND e ->> 'query' IS NOT NULL
              AND jsonb_typeof(i) = 'string' AND (i #>> '{}') = ANY (v_keys)
            UNION
            SELECT r.query FROM mneme.review_log l
            JOIN mneme.review_queries r ON r.conversation_id = l.conversation_id AND r.review_log_id = l.id
            WHERE l.memory_id = ANY (ids));
        -- (by key, mneme.review_queries: their rows go; no review row is rewritten)
        PERFORM mneme._strip_review_queries(v_tenants, v_queries);
    END IF;

    -- A retrieval that returned one of them is not reviewed any more: its
    -- query may quote what is removed.
    UPDATE mneme.message_queue q
    SET pending_reviews = nullif((SELECT coalesce(jsonb_agg(e ORDER BY o), '[]'::jsonb)
                                  FROM jsonb_array_elements(q.pending_reviews) WITH ORDINALITY AS x(e, o)
                                  WHERE NOT mneme._review_entry_removed(e, v_keys, v_queries)), '[]'::jsonb),
        updated_at = now()
    WHERE q.tenant_id = ANY (v_tenants) AND q.pending_reviews IS NOT NULL AND jsonb_typeof(q.pending_reviews) = 'array'
      AND EXISTS (SELECT 1 FROM jsonb_array_elements(q.pending_reviews) e
                  WHERE mneme._review_entry_removed(e, v_keys, v_queries));

    -- The jobs of the tenant that name one of them, a message or a query
    -- (found by key in mneme.job_refs, not by reading every job's payload:
    -- issue 47).
    -- (the ids first: the planner would test every job's scrubbed payload
    -- before the join otherwise)
    SELECT array_agg(DISTINCT r.job_id), array_agg(DISTINCT r.conversation_id) INTO v_jobs, v_job_convs
    FROM mneme.job_refs r
    WHERE r.ref = ANY (mneme._erase_refs(v_keys, v_msgs, v_queries)) AND r.tenant_id = ANY (v_tenants);
    UPDATE mneme.jobs j SET payload = mneme._scrub_payload(j.payload, v_keys, v_msgs, v_queries), updated_at = now()
    WHERE j.id = ANY (v_jobs) AND j.conversation_id = ANY (v_job_convs)
      AND j.tenant_id = ANY (v_tenants)
      AND j.payload IS DISTINCT FROM mneme._scrub_payload(j.payload, v_keys, v_msgs, v_queries);

    -- Only messages of a removed memory's own tenant (its source ids are
    -- checked on write, sql/015-invariants.sql; a row written before that
    -- check may name another tenant's message, which stays).
    -- (the pairs read first, then one table's predicate: Citus refuses a
    -- subquery correlated across memories and messages)
    v_own := ARRAY(SELECT m.tenant_id || ':' || s.id::text FROM mneme.memories m, unnest(m.source_message_ids) AS s(id)
                   WHERE m.id = ANY (ids)
                   UNION
                   SELECT g.tenant_id || ':' || g.id::text FROM mneme.messages g WHERE g.memory_id = ANY (ids));
    DELETE FROM mneme.messages g
    WHERE g.id = ANY (v_msgs) AND (g.tenant_id || ':' || g.id::text) IN (SELECT unnest(v_own));
    -- The lineage link of a successor goes with the memory (the events keep the ids).
    -- (each only when there is one: an UPDATE of no row still runs the
    -- memories' statement triggers)
    IF EXISTS (SELECT 1 FROM mneme.memories m WHERE m.supersedes_id = ANY (ids) AND m.id NOT IN (SELECT unnest(ids))) THEN
        UPDATE mneme.memories m SET supersedes_id = NULL WHERE m.supersedes_id = ANY (ids) AND m.id NOT IN (SELECT unnest(ids));
    END IF;
    IF EXISTS (SELECT 1 FROM mneme.memories m WHERE m.confirms_id = ANY (ids) AND m.id NOT IN (SELECT unnest(ids))) THEN
        UPDATE mneme.memories m SET confirms_id = NULL WHERE m.confirms_id = ANY (ids) AND m.id NOT IN (SELECT unnest(ids));
    END IF;
    IF EXISTS (SELECT 1 FROM mneme.memories m WHERE m.invalidates_id = ANY (ids) AND m.id NOT IN (SELECT unnest(ids))) THEN
        UPDATE mneme.memories m SET invalidates_id = NULL WHERE m.invalidates_id = ANY (ids) AND m.id NOT IN (SELECT unnest(ids));
    END IF;

    -- Their review rows in one statement, before the memories' cascade
    -- would delete them one memory at a time (each cascade a statement of
    -- its own, with its statement triggers; issue 47).
    DELETE FROM mneme.review_log l WHERE l.memory_id = ANY (ids) AND l.conversation_id = ANY (v_convs);
    PERFORM mneme._mark('delete_event', _remove_memories.event);
    PERFORM mneme._mark('delete_reason', coalesce(_remove_memories.reason, ''));
    DELETE FROM mneme.memories m WHERE m.id = ANY (ids);
    GET DIAGNOSTICS v_n = ROW_COUNT;
    PERFORM mneme._mark('delete_event', '');
    PERFORM mneme._mark('delete_reason', '');
    RETURN v_n;
END
$$;
COMMENT ON FUNCTION mneme._remove_memories(uuid[], text, text) IS
    'Internal (purge, erase): deletes memories with their source messages, and the pending reviews and job '
    'payload entries of the tenant that refer to them; erase also takes the facts extracted from those messages, '
    'the merged duplicates, and every copy of a query that retrieved an erased memory (pending reviews, review '
    'jobs, the review log of memories retrieved alongside); lineage links to them become NULL; the delete '
    'trigger records the event.';

-- A recorded retrieval ({query, memory_ids}) that must go: it names a
-- removed memory, or its query is one that retrieved an erased memory.
CREATE OR REPLACE FUNCTION mneme._review_entry_removed(entry jsonb, memory_ids text[], queries text[])
RETURNS boolean
LANGUAGE sql IMMUTABLE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
SELECT coalesce(jsonb_typeof(entry -> 'memory_ids') = 'array' AND (entry -> 'memory_ids') ?| memory_ids, false)
    OR coalesce((entry ->> 'query') = ANY (queries), false)
$$;
COMMENT ON FUNCTION mneme._review_entry_removed(jsonb, text[], text[]) IS
    'Internal (erase, purge): whether a recorded retrieval {query, memory_ids} names a removed memory or quotes '
    'a query that retrieved an erased one.';

-- A job payload without what refers to removed memories or messages: review
-- entries naming a memory or quoting an erased query, context messages and
-- message ids.
CREATE OR REPLACE FUNCTION mneme._scrub_payload(payload jsonb, memory_ids text[], message_ids bigint[], queries text[])
RETURNS jsonb
LANGUAGE sql IMMUTABLE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
SELECT CASE WHEN jsonb_typeof(payload) <> 'object' THEN payload ELSE
    payload
    || CASE WHEN jsonb_typeof(payload -> 'reviews') = 'array' THEN jsonb_build_object('reviews',
           (SELECT coalesce(jsonb_agg(e ORDER BY o), '[]') FROM jsonb_array_elements(payload -> 'reviews') WITH ORDINALITY x(e, o)
            WHERE NOT mneme._review_entry_removed(e, memory_ids, queries))) ELSE '{}' END
    || CASE WHEN jsonb_typeof(payload -> 'context') = 'array' THEN jsonb_build_object('context',
           (SELECT coalesce(jsonb_agg(e ORDER BY o), '[]') FROM jsonb_array_elements(payload -> 'context') WITH ORDINALITY x(e, o)
            WHERE NOT (jsonb_typeof(e -> 'id') = 'number' AND (e ->> 'id')::numeric = ANY (coalesce(message_ids, '{}')::numeric[]))))
       ELSE '{}' END
    || CASE WHEN jsonb_typeof(payload -> 'message_ids') = 'array' THEN jsonb_build_object('message_ids',
           (SELECT coalesce(jsonb_agg(e ORDER BY o), '[]') FROM jsonb_array_elements(payload -> 'message_ids') WITH ORDINALITY x(e, o)
            WHERE NOT (jsonb_typeof(e) = 'number' AND e::text::numeric = ANY (coalesce(message_ids, '{}')::numeric[]))))
       ELSE '{}' END
    || CASE WHEN jsonb_typeof(payload -> 'context_message_ids') = 'array' THEN jsonb_build_object('context_message_ids',
           (SELECT coalesce(jsonb_agg(e ORDER BY o), '[]') FROM jsonb_array_elements(payload -> 'context_message_ids') WITH ORDINALITY x(e, o)
            WHERE NOT (jsonb_typeof(e) = 'number' AND e::text::numeric = ANY (coalesce(message_ids, '{}')::numeric[]))))
       ELSE '{}' END
    || CASE WHEN jsonb_typeof(payload -> 'memory_ids') = 'array' THEN jsonb_build_object('memory_ids',
           (SELECT coalesce(jsonb_agg(e ORDER BY o), '[]') FROM jsonb_array_elements(payload -> 'memory_ids') WITH ORDINALITY x(e, o)
            WHERE NOT (e #>> '{}') = ANY (memory_ids)))
       ELSE '{}' END
END
$$;
COMMENT ON FUNCTION mneme._scrub_payload(jsonb, text[], bigint[], text[]) IS
    'Internal: a job payload without review entries naming the given memories and without the given messages '
    '(context entries, message_ids, context_message_ids).';
