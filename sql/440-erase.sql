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
SET search_path = pg_catalog, pg_temp
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

CREATE OR REPLACE FUNCTION mneme.erase_conversation(conversation_id uuid, reason text)
RETURNS bigint
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
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
    -- are locked below, under the queue row's lock.
    PERFORM 1 FROM mneme.memories m WHERE m.conversation_id = erase_conversation.conversation_id FOR UPDATE;
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
        SELECT unnest(l.matched_queries) FROM mneme.review_log l
        WHERE l.asked_in = erase_conversation.conversation_id);
    IF cardinality(v_queries) > 0 THEN
        UPDATE mneme.review_log l
        SET matched_queries = ARRAY(SELECT x FROM unnest(l.matched_queries) WITH ORDINALITY AS u(x, o)
                                    WHERE NOT x = ANY (v_queries) ORDER BY o)
        WHERE l.tenant_id = v_tenant AND l.matched_queries && v_queries;
    END IF;
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

    INSERT INTO mneme.memory_events (memory_id, conversation_id, event, reason, actor, at)
    VALUES (NULL, erase_conversation.conversation_id, 'erased',
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

-- A tenant, whole: every conversation erased by erase_conversation (so a
-- drop is an erase, with its tombstones, whatever erase comes to do), then
-- what is left of the tenant without content (its jobs that name no
-- conversation, its turn in claim_jobs) and the tenant itself. Its
-- tombstones keep the id: create_tenant does not hand it out again.
CREATE OR REPLACE FUNCTION mneme.drop_tenant(tenant text, reason text)
RETURNS bigint
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
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
