-- =============================================================================
-- mneme consolidation (issue 52): a second look at what is believed.
--
-- Revision (sql/150-revision.sql) compares each new fact, once, with the
-- few facts of its scope closest to it. A change stated far apart, in other
-- words or out of order slips past it. The consolidate job looks again at
-- every active fact of a conversation's scope (the conversation, or its
-- tenant with revision_scope 'tenant'): it supersedes what a later
-- statement replaced and merges duplicates into one memory, each change an
-- ordinary revision (a 'revised' event with its reason, the lineage in
-- history(), erase following merged copies). The sidecar decides
-- (sidecar/revision/consolidate.go: rules offline, a bounded number of
-- model calls with MNEME_LLM_*); the functions here read and write.
--
-- It runs on demand (mneme.consolidate), and on the sidecar's schedule
-- once a conversation whose facts were revised went quiet
-- (mneme.schedule_consolidation, every minute).
-- Idempotent: re-applied on every `mneme migrate`.
-- =============================================================================

-- On demand: enqueue (or bring forward) the conversation's consolidate job.
CREATE OR REPLACE FUNCTION mneme.consolidate(conversation_id uuid)
RETURNS bigint
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
SET jit = off
AS $$
#variable_conflict use_column
DECLARE
    v_id bigint;
BEGIN
    IF consolidate.conversation_id IS NULL THEN
        RAISE EXCEPTION 'conversation_id must not be NULL' USING ERRCODE = '22004';
    END IF;
    PERFORM mneme._enter(consolidate.conversation_id);
    IF NOT EXISTS (SELECT 1 FROM mneme.message_queue q WHERE q.id = consolidate.conversation_id) THEN
        RAISE EXCEPTION 'conversation % does not exist', consolidate.conversation_id USING ERRCODE = 'P0002',
            HINT = 'a conversation exists once a message or memory was added to it (of the caller''s tenant)';
    END IF;
    v_id := mneme.enqueue_job('consolidate', consolidate.conversation_id, mneme._consolidate_payload('on_demand'),
                              'consolidate:' || consolidate.conversation_id, now());
    -- A pending one scheduled for later (quiet) runs now.
    UPDATE mneme.jobs j SET run_at = now(), updated_at = now()
     WHERE j.conversation_id = consolidate.conversation_id AND j.id = v_id AND j.state = 'pending' AND j.run_at > now();
    RETURN v_id;
END
$$;
COMMENT ON FUNCTION mneme.consolidate(uuid) IS
    'Enqueues the conversation''s consolidate job now (one pending at a time: a pending one is brought forward) and '
    'returns its id. The sidecar then looks at every active fact of the conversation''s scope (setting revision_scope) '
    'and supersedes what a later statement replaced and merges duplicates, as revisions (history() shows them, '
    'jobs.result counts them and the model calls). P0002 for a conversation the caller cannot see.';
GRANT EXECUTE ON FUNCTION mneme.consolidate(uuid) TO mneme_app, mneme_worker, mneme_admin;

-- The schedule: consolidate the conversations whose facts were revised
-- since their last consolidation, once quiet.
CREATE OR REPLACE FUNCTION mneme.schedule_consolidation()
RETURNS SETOF bigint
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
SET jit = off
AS $$
#variable_conflict use_column
DECLARE
    v_quiet interval := mneme._interval_setting('consolidate_quiet');
    v_max   interval := mneme._interval_setting('consolidate_max_delay');
    v_conv  uuid;
BEGIN
    PERFORM mneme._enter(NULL);
    IF v_quiet IS NULL THEN
        RETURN;  -- consolidation on demand only
    END IF;
    -- The revise jobs done since the conversation's last consolidate job
    -- (done jobs are kept for jobs_retention): due when the last is
    -- consolidate_quiet old, or the first consolidate_max_delay old (a
    -- conversation that is never quiet).
    FOR v_conv IN
        WITH c AS (
            SELECT j.conversation_id, max(j.created_at) AS last_at
            FROM mneme.jobs j WHERE j.kind = 'consolidate' AND j.conversation_id IS NOT NULL
            GROUP BY j.conversation_id
        ), r AS (
            SELECT j.conversation_id, max(j.finished_at) AS last_at, min(j.finished_at) AS first_at
            FROM mneme.jobs j LEFT JOIN c ON c.conversation_id = j.conversation_id
            WHERE j.kind = 'revise' AND j.state = 'done' AND j.conversation_id IS NOT NULL
              AND j.finished_at > coalesce(c.last_at, '-infinity')
            GROUP BY j.conversation_id
        )
        SELECT r.conversation_id FROM r
        WHERE r.last_at <= now() - v_quiet OR r.first_at <= now() - v_max
        ORDER BY r.first_at
        LIMIT 1000
    LOOP
        RETURN NEXT mneme.enqueue_job('consolidate', v_conv, mneme._consolidate_payload('quiet'), 'consolidate:' || v_conv, now());
    END LOOP;
END
$$;
COMMENT ON FUNCTION mneme.schedule_consolidation() IS
    'Worker: enqueues a consolidate job (one pending per conversation) for each conversation with revise jobs done '
    'since its last consolidation, the last at least consolidate_quiet ago or the first at least consolidate_max_delay '
    'ago; at most 1,000 a call, the longest waiting first. Returns their ids; none when consolidate_quiet is null. '
    'The sidecar calls it every minute.';
GRANT EXECUTE ON FUNCTION mneme.schedule_consolidation() TO mneme_worker;

-- The facts a consolidation looks at: every active fact of the scope.
CREATE OR REPLACE FUNCTION mneme.consolidation_facts(conversation_id uuid, k int DEFAULT 1000)
RETURNS TABLE (id uuid, content text, at timestamptz, slot text, review_count int)
LANGUAGE plpgsql STABLE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
SET jit = off
AS $$
#variable_conflict use_column
DECLARE
    v_convs uuid[];
BEGIN
    IF consolidation_facts.conversation_id IS NULL OR consolidation_facts.k IS NULL THEN
        RAISE EXCEPTION 'conversation_id and k must not be NULL' USING ERRCODE = '22004';
    END IF;
    IF consolidation_facts.k < 1 OR consolidation_facts.k > 100000 THEN
        RAISE EXCEPTION 'k must be 1 to 100000, got %', consolidation_facts.k USING ERRCODE = '22023';
    END IF;
    PERFORM mneme._enter(consolidation_facts.conversation_id);
    v_convs := mneme._scope_conversations(consolidation_facts.conversation_id, mneme.setting('revision_scope') #>> '{}');
    -- The newest k, returned oldest first (the order they were said).
    RETURN QUERY
    SELECT x.id, x.content, x.created_at, x.slot, x.review_count FROM (
        SELECT m.id, m.content, m.created_at, m.slot, m.review_count
        FROM mneme.memories m
        WHERE m.conversation_id = ANY (v_convs) AND m.kind = 'semantic' AND m.status = 'active'
          AND (m.valid_until IS NULL OR m.valid_until > now())
        ORDER BY m.created_at DESC, m.id DESC
        LIMIT consolidation_facts.k) x
    ORDER BY x.created_at, x.id;
END
$$;
COMMENT ON FUNCTION mneme.consolidation_facts(uuid, int) IS
    'Worker: the active facts (semantic memories, unexpired) of the conversation''s scope (setting revision_scope), the '
    'newest k, oldest first: what a consolidate job looks at.';
GRANT EXECUTE ON FUNCTION mneme.consolidation_facts(uuid, int) TO mneme_worker;

-- One consolidation decision, applied as a revision.
CREATE OR REPLACE FUNCTION mneme.apply_consolidation(
    action text,
    memory_id uuid,
    target_id uuid,
    reason text,
    classifier text,
    job_id bigint DEFAULT NULL)
RETURNS text
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
SET jit = off
AS $$
#variable_conflict use_column
DECLARE
    v_action text := upper(btrim(apply_consolidation.action));
    v_new    mneme.memories;
    v_old    mneme.memories;
    v_note   text;
BEGIN
    IF apply_consolidation.action IS NULL OR apply_consolidation.memory_id IS NULL OR apply_consolidation.target_id IS NULL
       OR apply_consolidation.classifier IS NULL THEN
        RAISE EXCEPTION 'action, memory_id, target_id and classifier must not be NULL' USING ERRCODE = '22004';
    END IF;
    IF v_action NOT IN ('SUPERSEDE', 'INVALIDATE', 'MERGE') THEN
        RAISE EXCEPTION 'action must be SUPERSEDE, INVALIDATE or MERGE, got %', mneme._quote_prefix(apply_consolidation.action)
            USING ERRCODE = '22023';
    END IF;
    IF apply_consolidation.memory_id = apply_consolidation.target_id THEN
        RAISE EXCEPTION '% needs a target other than the memory itself', v_action USING ERRCODE = '22023';
    END IF;
    IF apply_consolidation.classifier NOT IN ('llm', 'heuristic') THEN
        RAISE EXCEPTION 'classifier must be llm or heuristic, got %', mneme._quote_prefix(apply_consolidation.classifier)
            USING ERRCODE = '22023';
    END IF;
    PERFORM mneme._check_length('reason', apply_consolidation.reason, 2000);
    PERFORM mneme._enter(NULL);
    PERFORM mneme._lock_memories(ARRAY[apply_consolidation.memory_id, apply_consolidation.target_id]);
    SELECT * INTO v_new FROM mneme.memories m
     WHERE m.conversation_id = mneme._memory_conversation(apply_consolidation.memory_id) AND m.id = apply_consolidation.memory_id;
    SELECT * INTO v_old FROM mneme.memories m
     WHERE m.conversation_id = mneme._memory_conversation(apply_consolidation.target_id) AND m.id = apply_consolidation.target_id;
    IF v_new.id IS NULL OR v_old.id IS NULL THEN
        RAISE EXCEPTION 'memory % or % does not exist', apply_consolidation.memory_id, apply_consolidation.target_id
            USING ERRCODE = 'P0002';
    END IF;
    IF v_new.tenant_id <> v_old.tenant_id OR (apply_consolidation.job_id IS NOT NULL AND v_new.tenant_id IS DISTINCT FROM
       (SELECT j.tenant_id FROM mneme.jobs j
         WHERE j.conversation_id = mneme._job_conversation(apply_consolidation.job_id) AND j.id = apply_consolidation.job_id)) THEN
        RAISE EXCEPTION 'job % may not consolidate memories % and % (another tenant, or the job is gone)',
            apply_consolidation.job_id, apply_consolidation.memory_id, apply_consolidation.target_id USING ERRCODE = '42501',
            HINT = 'a consolidate job acts on the facts of its own conversation''s scope';
    END IF;
    IF v_new.kind <> 'semantic' OR v_old.kind <> 'semantic' THEN
        RAISE EXCEPTION 'only facts (semantic memories) are consolidated: an episode is a transcript' USING ERRCODE = '22023';
    END IF;
    IF v_new.status <> 'active' OR v_old.status <> 'active' THEN
        RETURN 'STALE';  -- revised, forgotten or erased since the job read them: nothing written
    END IF;
    IF v_action IN ('SUPERSEDE', 'INVALIDATE') AND v_new.created_at < v_old.created_at THEN
        RAISE EXCEPTION '% by an older statement: % was said before %', v_action, v_new.id, v_old.id USING ERRCODE = '22023',
            HINT = 'the memory that replaces or retracts is the later statement';
    END IF;
    v_note := format('%s by consolidate:%s: %s', v_action, apply_consolidation.classifier,
                     coalesce(nullif(btrim(apply_consolidation.reason), ''), 'no reason given'));
    PERFORM mneme._mark('actor', 'consolidate:' || apply_consolidation.classifier);
    PERFORM mneme._mark('event_reason', left(v_note, 500));
    IF v_action = 'SUPERSEDE' THEN
        v_note := mneme._revise_supersede(v_new, v_old, v_note, NULL);
    ELSIF v_action = 'INVALIDATE' THEN
        v_note := mneme._revise_invalidate(v_new, v_old, v_note);
    ELSE
        -- MERGE: memory_id is the copy that goes (merged, confirms_id the
        -- kept one, out of retrieval, kept for provenance: erase follows
        -- it); the kept one is reconfirmed and gains its sources.
        PERFORM mneme._revise_noop(v_new, v_old, v_note);
    END IF;
    INSERT INTO mneme.memory_events (memory_id, conversation_id, event, reason, actor)
    VALUES (v_new.id, v_new.conversation_id, 'revised', left(v_note, 1500) || format(' [target %s]', v_old.id),
            mneme._event_actor());
    PERFORM mneme._mark('event_reason', '');
    PERFORM mneme._mark('actor', '');
    RETURN v_action;
END
$$;
COMMENT ON FUNCTION mneme.apply_consolidation(text, uuid, uuid, text, text, bigint) IS
    'Worker: applies one consolidation decision as a revision, under row locks: SUPERSEDE (memory_id, the later '
    'statement, replaces target_id, which joins its lineage), INVALIDATE (memory_id retracts target_id) or MERGE '
    '(memory_id becomes a merged copy of target_id, which keeps its sources). STALE when either is no longer active '
    '(nothing written); 42501 for a memory of another tenant than the job''s; a revised event with the reason.';
GRANT EXECUTE ON FUNCTION mneme.apply_consolidation(text, uuid, uuid, text, text, bigint) TO mneme_worker;

-- What the run did, in the job's row (read by operators: SELECT result FROM mneme.jobs).
CREATE OR REPLACE FUNCTION mneme.finish_consolidation(job_id bigint, conversation_id uuid, result jsonb)
RETURNS boolean
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
SET jit = off
AS $$
#variable_conflict use_column
BEGIN
    IF finish_consolidation.job_id IS NULL OR finish_consolidation.conversation_id IS NULL OR finish_consolidation.result IS NULL THEN
        RAISE EXCEPTION 'job_id, conversation_id and result must not be NULL' USING ERRCODE = '22004';
    END IF;
    IF jsonb_typeof(finish_consolidation.result) <> 'object' OR pg_column_size(finish_consolidation.result) > 8192 THEN
        RAISE EXCEPTION 'result must be a JSON object of at most 8 kB, got %', left(finish_consolidation.result::text, 80)
            USING ERRCODE = '22023';
    END IF;
    PERFORM mneme._enter(finish_consolidation.conversation_id);
    UPDATE mneme.jobs j SET result = finish_consolidation.result, updated_at = now()
     WHERE j.conversation_id = finish_consolidation.conversation_id AND j.id = finish_consolidation.job_id
       AND j.kind = 'consolidate';
    RETURN FOUND;
END
$$;
COMMENT ON FUNCTION mneme.finish_consolidation(bigint, uuid, jsonb) IS
    'Worker: stores a consolidate job''s result (its counts, model calls and tokens) in mneme.jobs.result; false when '
    'the job is not a consolidate job of that conversation.';
GRANT EXECUTE ON FUNCTION mneme.finish_consolidation(bigint, uuid, jsonb) TO mneme_worker;
