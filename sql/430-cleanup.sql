-- =============================================================================
-- mneme lifecycle, cleanup (inactive, expired, purge), its schedule and reactivation by hand
-- (the lifecycle is introduced in 400-labels.sql).
-- Idempotent: re-applied on every `mneme migrate` (CREATE OR REPLACE only).
-- =============================================================================

-- -----------------------------------------------------------------------------
-- Cleanup
-- -----------------------------------------------------------------------------
CREATE OR REPLACE FUNCTION mneme._interval_setting(key text)
RETURNS interval
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v jsonb := mneme.setting(_interval_setting.key);
    r interval;
BEGIN
    IF v = 'null'::jsonb THEN
        RETURN NULL;
    END IF;
    BEGIN
        r := (v #>> '{}')::interval;
    EXCEPTION WHEN others THEN
        r := NULL;
    END;
    IF jsonb_typeof(v) <> 'string' OR r IS NULL OR r <= interval '0' THEN
        RAISE EXCEPTION 'setting % must be a positive interval as a JSON string, or null; got %', _interval_setting.key, v
            USING ERRCODE = '22023', HINT = format('SELECT mneme.set_setting(%L, %L)', _interval_setting.key, '"1 day"');
    END IF;
    RETURN r;
END
$$;
COMMENT ON FUNCTION mneme._interval_setting(text) IS
    'Internal: a setting holding a PostgreSQL interval as a JSON string, or null; raises 22023 otherwise.';

-- The one rule of what cleanup may move on (active to inactive, inactive to
-- purged): a memory in from_status that is neither pinned nor important.
-- Plain immutable SQL without SET, so the planner inlines it into each
-- statement that calls it (TestInlinedHelpersStayInlinable).
CREATE OR REPLACE FUNCTION mneme._cleanup_eligible(status text, pinned boolean, label text, from_status text)
RETURNS boolean
LANGUAGE sql IMMUTABLE PARALLEL SAFE
AS $$
SELECT _cleanup_eligible.status OPERATOR(pg_catalog.=) _cleanup_eligible.from_status
   AND NOT _cleanup_eligible.pinned
   AND _cleanup_eligible.label OPERATOR(pg_catalog.<>) 'important'
$$;
COMMENT ON FUNCTION mneme._cleanup_eligible(text, boolean, text, text) IS
    'Internal, inlined: whether cleanup may move a memory on from from_status (in it, not pinned, not important).';

-- 1. Inactive: active, not pinned, not important, R below the threshold.
-- The row lock re-checks R on the row as it is now (a review that
-- committed meanwhile raised it: the row no longer qualifies); a row a
-- review holds locked is skipped until the next run.
CREATE OR REPLACE FUNCTION mneme._cleanup_inactivate(at timestamptz, dry_run boolean, threshold float8)
RETURNS bigint
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_at      timestamptz := _cleanup_inactivate.at;
    v_r       float8 := _cleanup_inactivate.threshold;
    v_at_text text := to_char(_cleanup_inactivate.at AT TIME ZONE 'UTC', 'YYYY-MM-DD HH24:MI "UTC"');
    v_n       bigint;
    v_ids     uuid[];
    v_conv    uuid;
BEGIN
    IF v_at IS NULL OR dry_run IS NULL OR v_r IS NULL THEN
        RAISE EXCEPTION 'at, dry_run and threshold must not be NULL' USING ERRCODE = '22004';
    END IF;
    IF dry_run THEN
        SELECT count(*) INTO v_n FROM mneme.memories m
        WHERE mneme._cleanup_eligible(m.status, m.pinned, m.label, 'active')
          AND mneme._retrievability(m.stability, m.last_reviewed_at, v_at) < v_r;
    ELSIF mneme._distributed('mneme.memories') THEN
        -- Citus refuses FOR UPDATE in a statement over every shard: the
        -- same, conversation by conversation, each statement routed to the
        -- conversation's shard. The reason is the same text as format()'s
        -- but built of immutable parts: Citus refuses a STABLE function over
        -- columns in an UPDATE, and a reason picked from an array parameter
        -- by the row's id crashed the coordinator (measured: signal 11).
        v_n := 0;
        FOR v_conv IN
            SELECT DISTINCT m.conversation_id FROM mneme.memories m
            WHERE mneme._cleanup_eligible(m.status, m.pinned, m.label, 'active')
              AND mneme._retrievability(m.stability, m.last_reviewed_at, v_at) < v_r
        LOOP
            v_ids := ARRAY(
                SELECT m.id FROM mneme.memories m
                WHERE m.conversation_id = v_conv AND mneme._cleanup_eligible(m.status, m.pinned, m.label, 'active')
                  AND mneme._retrievability(m.stability, m.last_reviewed_at, v_at) < v_r
                ORDER BY m.id
                FOR UPDATE SKIP LOCKED);
            CONTINUE WHEN cardinality(v_ids) = 0;
            UPDATE mneme.memories m
            SET status = 'inactive',
                status_reason = 'retrievability ' || round(mneme._retrievability(m.stability, m.last_reviewed_at, v_at)::numeric, 4)::text
                                || ' at ' || v_at_text || ' is below inactive_below_r ' || v_r::text,
                updated_at = now()
            WHERE m.conversation_id = v_conv AND m.id = ANY (v_ids);
            v_n := v_n + cardinality(v_ids);
        END LOOP;
    ELSE
        WITH c AS (
            SELECT m.id FROM mneme.memories m
            WHERE mneme._cleanup_eligible(m.status, m.pinned, m.label, 'active')
              AND mneme._retrievability(m.stability, m.last_reviewed_at, v_at) < v_r
            ORDER BY m.id
            FOR UPDATE SKIP LOCKED
        ), u AS (
            UPDATE mneme.memories m
            SET status = 'inactive',
                status_reason = format('retrievability %s at %s is below inactive_below_r %s',
                                       round(mneme._retrievability(m.stability, m.last_reviewed_at, v_at)::numeric, 4),
                                       v_at_text, v_r),
                updated_at = now()
            FROM c
            WHERE m.id = c.id AND mneme._cleanup_eligible(m.status, m.pinned, m.label, 'active')
              AND mneme._retrievability(m.stability, m.last_reviewed_at, v_at) < v_r
            RETURNING m.id)
        SELECT count(*) INTO v_n FROM u;
    END IF;
    RETURN v_n;
END
$$;
COMMENT ON FUNCTION mneme._cleanup_inactivate(timestamptz, boolean, float8) IS
    'Internal (cleanup, phase 1): active memories, neither pinned nor important, with retrievability at `at` below '
    'threshold become inactive with a status_reason saying why; dry_run counts only. Returns the count.';

-- 2. Expired (valid_until passed): recorded once, the memory is kept
-- (retrieval already leaves it out, and `as of` a past time still sees it).
CREATE OR REPLACE FUNCTION mneme._cleanup_expire(at timestamptz, dry_run boolean, actor text)
RETURNS bigint
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_at     timestamptz := _cleanup_expire.at;
    v_ids    uuid[];
    v_conv   uuid;
    v_id     uuid;
    v_at_row timestamptz;
BEGIN
    IF v_at IS NULL OR dry_run IS NULL OR actor IS NULL THEN
        RAISE EXCEPTION 'at, dry_run and actor must not be NULL' USING ERRCODE = '22004';
    END IF;
    SELECT array_agg(m.id ORDER BY m.id) INTO v_ids FROM mneme.memories m
    WHERE m.valid_until <= v_at AND m.status = 'active'
      AND NOT EXISTS (SELECT 1 FROM mneme.memory_events e
                      WHERE e.conversation_id = m.conversation_id AND e.memory_id = m.id AND e.tenant_id = m.tenant_id
                        AND e.event = 'expired');
    IF NOT dry_run AND v_ids IS NOT NULL AND mneme._distributed('mneme.memories') THEN
        -- A row at a time on Citus: an INSERT ... SELECT whose select list
        -- calls format() over columns is run through the coordinator,
        -- which copies the rows in, and COPY is refused under row security.
        FOR v_conv, v_at_row, v_id IN
            SELECT m.conversation_id, m.valid_until, m.id FROM mneme.memories m
            WHERE m.id = ANY (v_ids) ORDER BY m.id
        LOOP
            INSERT INTO mneme.memory_events (memory_id, conversation_id, event, reason, actor, at)
            VALUES (v_id, v_conv, 'expired',
                    format('valid_until %s passed', to_char(v_at_row AT TIME ZONE 'UTC', 'YYYY-MM-DD HH24:MI "UTC"')),
                    _cleanup_expire.actor, v_at);
        END LOOP;
    ELSIF NOT dry_run AND v_ids IS NOT NULL THEN
        INSERT INTO mneme.memory_events (memory_id, conversation_id, event, reason, actor, at)
        SELECT m.id, m.conversation_id, 'expired',
               format('valid_until %s passed', to_char(m.valid_until AT TIME ZONE 'UTC', 'YYYY-MM-DD HH24:MI "UTC"')),
               _cleanup_expire.actor, v_at
        FROM mneme.memories m WHERE m.id = ANY (v_ids) ORDER BY m.id;
    END IF;
    RETURN coalesce(cardinality(v_ids), 0);
END
$$;
COMMENT ON FUNCTION mneme._cleanup_expire(timestamptz, boolean, text) IS
    'Internal (cleanup, phase 2): records one expired event, by actor, for each active memory whose valid_until '
    'passed by `at` and has none yet (the memory is kept); dry_run counts only. Returns the count.';

-- 3. Purge, only when the operator set purge_after_days: inactive for
-- longer than that (since its last inactivated event), never pinned or
-- important. The memory, its source messages and its review log go; the
-- events stay (a tombstone: ids, time, reason).
CREATE OR REPLACE FUNCTION mneme._cleanup_purge(at timestamptz, dry_run boolean, days float8)
RETURNS bigint
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_at   timestamptz := _cleanup_purge.at;
    v_days float8 := _cleanup_purge.days;
    v_ids  uuid[];
    v_conv uuid;
BEGIN
    IF v_at IS NULL OR dry_run IS NULL THEN
        RAISE EXCEPTION 'at and dry_run must not be NULL' USING ERRCODE = '22004';
    END IF;
    IF v_days IS NULL THEN
        RETURN 0;  -- purge_after_days null: never purge
    END IF;
    IF mneme._distributed('mneme.memories') THEN
        -- Conversation by conversation on Citus (FOR UPDATE, as in
        -- mneme._cleanup_inactivate).
        FOR v_conv IN
            SELECT DISTINCT m.conversation_id FROM mneme.memories m
            WHERE mneme._cleanup_eligible(m.status, m.pinned, m.label, 'inactive')
        LOOP
            v_ids := v_ids || ARRAY(
                SELECT m.id FROM mneme.memories m
                WHERE m.conversation_id = v_conv AND mneme._cleanup_eligible(m.status, m.pinned, m.label, 'inactive')
                  AND coalesce((SELECT max(e.at) FROM mneme.memory_events e
                                WHERE e.conversation_id = v_conv AND e.memory_id = m.id AND e.tenant_id = m.tenant_id
                                  AND e.event = 'inactivated'), m.updated_at)
                      < v_at - make_interval(secs => v_days * 86400)
                ORDER BY m.id
                FOR UPDATE SKIP LOCKED);
        END LOOP;
        v_ids := nullif(v_ids, '{}');
    ELSE
        SELECT array_agg(x.id ORDER BY x.id) INTO v_ids FROM (
            SELECT m.id FROM mneme.memories m
            WHERE mneme._cleanup_eligible(m.status, m.pinned, m.label, 'inactive')
              AND coalesce((SELECT max(e.at) FROM mneme.memory_events e
                            WHERE e.memory_id = m.id AND e.tenant_id = m.tenant_id AND e.event = 'inactivated'), m.updated_at)
                  < v_at - make_interval(secs => v_days * 86400)
            ORDER BY m.id
            FOR UPDATE SKIP LOCKED) x;
    END IF;
    IF NOT dry_run AND v_ids IS NOT NULL THEN
        PERFORM mneme._remove_memories(v_ids, 'purged',
            format('inactive for more than purge_after_days %s', v_days));
    END IF;
    RETURN coalesce(cardinality(v_ids), 0);
END
$$;
COMMENT ON FUNCTION mneme._cleanup_purge(timestamptz, boolean, float8) IS
    'Internal (cleanup, phase 3): deletes the memories inactive for more than `days` days at `at` (since their last '
    'inactivated event), never pinned or important, with their source messages (mneme._remove_memories; the '
    'events stay); days NULL purges nothing; dry_run counts only. Returns the count.';

-- 4. Done jobs past their retention (failed jobs stay for an operator).
CREATE OR REPLACE FUNCTION mneme._cleanup_prune_jobs(at timestamptz, dry_run boolean, retention interval)
RETURNS bigint
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_at timestamptz := _cleanup_prune_jobs.at;
    v_n  bigint;
BEGIN
    IF v_at IS NULL OR dry_run IS NULL THEN
        RAISE EXCEPTION 'at and dry_run must not be NULL' USING ERRCODE = '22004';
    END IF;
    IF retention IS NULL THEN
        RETURN 0;  -- jobs_retention null: keep every job
    ELSIF dry_run THEN
        SELECT count(*) INTO v_n FROM mneme.jobs j WHERE j.state = 'done' AND j.finished_at < v_at - retention;
    ELSE
        DELETE FROM mneme.jobs j WHERE j.state = 'done' AND j.finished_at < v_at - retention;
        GET DIAGNOSTICS v_n = ROW_COUNT;
    END IF;
    RETURN v_n;
END
$$;
COMMENT ON FUNCTION mneme._cleanup_prune_jobs(timestamptz, boolean, interval) IS
    'Internal (cleanup, phase 4): deletes the done jobs that finished more than retention before `at` (failed jobs '
    'stay); retention NULL deletes nothing; dry_run counts only. Returns the count.';

-- The orchestrator: checks the arguments and the settings, then runs the
-- four phases in order, the events they cause attributed to actor at `at`.
CREATE OR REPLACE FUNCTION mneme._cleanup(at timestamptz, dry_run boolean, actor text DEFAULT 'cleanup')
RETURNS TABLE (action text, count bigint)
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_at        timestamptz := _cleanup.at;
    v_actor     text := coalesce(_cleanup.actor, 'cleanup');
    v_thr       jsonb := mneme.setting('inactive_below_r');
    v_purge     jsonb := mneme.setting('purge_after_days');
    v_retention interval := mneme._interval_setting('jobs_retention');
BEGIN
    IF v_at IS NULL OR NOT isfinite(v_at) THEN
        RAISE EXCEPTION 'at must be a finite timestamp' USING ERRCODE = '22004';
    END IF;
    IF dry_run IS NULL THEN
        RAISE EXCEPTION 'dry_run must not be NULL' USING ERRCODE = '22004', HINT = 'true reports, false acts';
    END IF;
    IF jsonb_typeof(v_thr) IS DISTINCT FROM 'number' OR NOT (v_thr::float8 >= 0 AND v_thr::float8 < 1) THEN
        RAISE EXCEPTION 'setting inactive_below_r must be a number in [0, 1), got %', v_thr
            USING ERRCODE = '22023', HINT = 'SELECT mneme.set_setting(''inactive_below_r'', ''0.5'') restores the default; 0 never inactivates';
    END IF;
    IF v_purge <> 'null'::jsonb AND (jsonb_typeof(v_purge) <> 'number' OR NOT v_purge::float8 > 0 OR v_purge::float8 = 'Infinity') THEN
        RAISE EXCEPTION 'setting purge_after_days must be a positive number of days or null (never purge), got %', v_purge
            USING ERRCODE = '22023', HINT = 'SELECT mneme.set_setting(''purge_after_days'', ''null'') turns purging off';
    END IF;

    PERFORM mneme._mark('actor', v_actor);
    PERFORM mneme._mark('event_at', v_at::text);
    action := 'inactivated'; count := mneme._cleanup_inactivate(v_at, dry_run, v_thr::float8); RETURN NEXT;
    action := 'expired';     count := mneme._cleanup_expire(v_at, dry_run, v_actor); RETURN NEXT;
    action := 'purged';      count := mneme._cleanup_purge(v_at, dry_run, CASE WHEN v_purge = 'null'::jsonb THEN NULL ELSE v_purge::float8 END);
    RETURN NEXT;
    action := 'jobs_pruned'; count := mneme._cleanup_prune_jobs(v_at, dry_run, v_retention); RETURN NEXT;
    PERFORM mneme._mark('actor', '');
    PERFORM mneme._mark('event_at', '');
END
$$;
COMMENT ON FUNCTION mneme._cleanup(timestamptz, boolean, text) IS
    'Internal: mneme.cleanup evaluated at a given time (the lifecycle simulation runs a year in minutes): checks '
    'the settings, then runs the phases _cleanup_inactivate, _cleanup_expire, _cleanup_purge, _cleanup_prune_jobs.';

CREATE OR REPLACE FUNCTION mneme.cleanup(dry_run boolean DEFAULT false)
RETURNS TABLE (action text, count bigint)
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    PERFORM mneme._enter(NULL);  -- the caller forwarded first (Citus: mneme._enter)
    RETURN QUERY SELECT * FROM mneme._cleanup(now(), cleanup.dry_run);
END
$$;
COMMENT ON FUNCTION mneme.cleanup(boolean) IS
    'The lifecycle policy, callable from psql or pg_cron (the sidecar runs it as the cleanup job every '
    'cleanup_interval): active memories with retrievability below inactive_below_r become inactive (kept, out of '
    'retrieval, status_reason says why); memories past valid_until are recorded as expired; memories inactive '
    'longer than purge_after_days are purged (only when that setting is not null); done jobs older than '
    'jobs_retention are deleted. Pinned and important memories are never inactivated or purged. Every change is a '
    'mneme.memory_events row. dry_run: count only. Returns one row per action with its count.';

-- Deletes memories for real (purge and erase): their source messages,
-- references in pending reviews and job payloads, then the rows (BM25
-- statistics follow by trigger, review_log by cascade). The delete trigger
-- records one event per memory with the given event and reason.
CREATE OR REPLACE FUNCTION mneme._remove_memories(ids uuid[], event text, reason text)
RETURNS bigint
LANGUAGE plpgsql
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
                        WHERE NOT m.id = ANY (ids)
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
        UPDATE mneme.memories m SET status_reason = m.status || ': the memory that changed it was erased'  -- (not format(), STABLE: Citus refuses it over columns in an UPDATE)
        WHERE m.id IN (SELECT m2.id
                       FROM mneme.memories m2,
                            regexp_matches(m2.status_reason, '[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}', 'g') r
                       WHERE m2.tenant_id = ANY (v_tenants)
                         -- (the partial index memories_reason_naming_idx)
                         AND m2.status_reason ~ '[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}'
                         AND NOT m2.id = ANY (ids) AND r[1] IN (SELECT unnest(v_keys)));
        -- A query that retrieved an erased memory asked about it: it goes
        -- too, from every copy, also where it retrieved other memories
        -- alongside (their review log, the review job that rated them).
        v_queries := ARRAY(
            SELECT e ->> 'query'
            FROM mneme.message_queue q, jsonb_array_elements(q.pending_reviews) e
            WHERE q.tenant_id = ANY (v_tenants) AND q.pending_reviews IS NOT NULL AND jsonb_typeof(q.pending_reviews) = 'array'
              AND (e -> 'memory_ids') ?| v_keys AND e ->> 'query' IS NOT NULL
            UNION
            SELECT e ->> 'query'
            -- (the review jobs that name one: a GIN lookup per probe,
            -- jobs_review_payload_idx; the planner uses no GIN index for @> ANY)
            FROM (SELECT DISTINCT x.id, x.payload
                  FROM unnest(mneme._payload_probes(v_keys, NULL, NULL)) AS p(doc)
                  JOIN mneme.jobs x ON x.payload @> p.doc AND x.kind = 'review' AND x.tenant_id = ANY (v_tenants)
                  WHERE cardinality(v_keys) <= 10
                  UNION ALL
                  SELECT x.id, x.payload FROM mneme.jobs x
                  WHERE cardinality(v_keys) > 10 AND x.kind = 'review' AND x.tenant_id = ANY (v_tenants)) j,
                 jsonb_array_elements(j.payload -> 'reviews') e
            WHERE jsonb_typeof(j.payload -> 'reviews') = 'array'
              AND jsonb_typeof(e -> 'memory_ids') = 'array' AND (e -> 'memory_ids') ?| v_keys AND e ->> 'query' IS NOT NULL
            UNION
            SELECT unnest(l.matched_queries) FROM mneme.review_log l WHERE l.memory_id = ANY (ids));
        UPDATE mneme.review_log l
        SET matched_queries = ARRAY(SELECT x FROM unnest(l.matched_queries) WITH ORDINALITY AS u(x, o)
                                    WHERE NOT x = ANY (v_queries) ORDER BY o)
        WHERE l.tenant_id = ANY (v_tenants) AND l.matched_queries && v_queries AND NOT l.memory_id = ANY (ids);
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

    -- The jobs of their conversations, and the review jobs of the tenant
    -- that name one of them, a message or a query (found through
    -- jobs_conversation_idx and jobs_review_payload_idx, not by reading
    -- every job's payload: issue 47).
    UPDATE mneme.jobs j SET payload = mneme._scrub_payload(j.payload, v_keys, v_msgs, v_queries), updated_at = now()
    -- (of the conversation's jobs, the kinds whose payloads can name one:
    -- a segment, revise or cleanup payload names no message or memory this
    -- scrubs, and review jobs are found by the probes)
    WHERE j.id IN (SELECT x.id FROM mneme.jobs x
                   WHERE x.conversation_id = ANY (v_convs) AND x.kind NOT IN ('segment', 'revise', 'review', 'cleanup', 'noop')
                   UNION
                   -- a few: looked up probe by probe (jobs_review_payload_idx
                   -- where no row security stands between; under it, a pass
                   -- over the review jobs per probe); many: one pass
                   SELECT x.id FROM unnest(mneme._payload_probes(v_keys, v_msgs, v_queries)) AS p(doc)
                   JOIN mneme.jobs x ON x.payload @> p.doc AND x.kind = 'review'
                   WHERE cardinality(v_keys) <= 10
                   UNION
                   SELECT x.id FROM mneme.jobs x WHERE cardinality(v_keys) > 10 AND x.kind = 'review')
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
    WHERE g.id = ANY (v_msgs) AND (g.tenant_id || ':' || g.id::text) = ANY (v_own);
    -- The lineage link of a successor goes with the memory (the events keep the ids).
    -- (each only when there is one: an UPDATE of no row still runs the
    -- memories' statement triggers)
    IF EXISTS (SELECT 1 FROM mneme.memories m WHERE m.supersedes_id = ANY (ids) AND NOT m.id = ANY (ids)) THEN
        UPDATE mneme.memories m SET supersedes_id = NULL WHERE m.supersedes_id = ANY (ids) AND NOT m.id = ANY (ids);
    END IF;
    IF EXISTS (SELECT 1 FROM mneme.memories m WHERE m.confirms_id = ANY (ids) AND NOT m.id = ANY (ids)) THEN
        UPDATE mneme.memories m SET confirms_id = NULL WHERE m.confirms_id = ANY (ids) AND NOT m.id = ANY (ids);
    END IF;
    IF EXISTS (SELECT 1 FROM mneme.memories m WHERE m.invalidates_id = ANY (ids) AND NOT m.id = ANY (ids)) THEN
        UPDATE mneme.memories m SET invalidates_id = NULL WHERE m.invalidates_id = ANY (ids) AND NOT m.id = ANY (ids);
    END IF;

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

-- The JSON documents a review job's payload contains (@>) when it names
-- one of the memories, messages or queries: what jobs_review_payload_idx
-- finds without reading every payload (mneme._remove_memories).
CREATE OR REPLACE FUNCTION mneme._payload_probes(memory_ids text[], message_ids bigint[], queries text[])
RETURNS jsonb[]
LANGUAGE sql IMMUTABLE
SET search_path = pg_catalog, pg_temp
AS $$
SELECT ARRAY(
    SELECT jsonb_build_object('reviews', jsonb_build_array(jsonb_build_object('memory_ids', jsonb_build_array(k))))
    FROM unnest(coalesce(memory_ids, '{}')) k
    UNION ALL
    SELECT jsonb_build_object('memory_ids', jsonb_build_array(k)) FROM unnest(coalesce(memory_ids, '{}')) k
    UNION ALL
    SELECT jsonb_build_object('reviews', jsonb_build_array(jsonb_build_object('query', q))) FROM unnest(coalesce(queries, '{}')) q
    UNION ALL
    SELECT p FROM unnest(coalesce(message_ids, '{}')) m,
           LATERAL (VALUES (jsonb_build_object('context', jsonb_build_array(jsonb_build_object('id', m)))),
                           (jsonb_build_object('message_ids', jsonb_build_array(m))),
                           (jsonb_build_object('context_message_ids', jsonb_build_array(m)))) v(p))
$$;
COMMENT ON FUNCTION mneme._payload_probes(text[], bigint[], text[]) IS
    'Internal (erase, purge): the documents a job payload contains (@>) when it names one of the memories, '
    'messages or queries (review entries, context, message_ids, context_message_ids, memory_ids).';

-- A recorded retrieval ({query, memory_ids}) that must go: it names a
-- removed memory, or its query is one that retrieved an erased memory.
CREATE OR REPLACE FUNCTION mneme._review_entry_removed(entry jsonb, memory_ids text[], queries text[])
RETURNS boolean
LANGUAGE sql IMMUTABLE
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

-- -----------------------------------------------------------------------------
-- The cleanup job's schedule
-- -----------------------------------------------------------------------------
CREATE OR REPLACE FUNCTION mneme.schedule_cleanup(after interval DEFAULT NULL)
RETURNS bigint
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v__entered boolean := mneme._enter(NULL);  -- the caller forwarded first (Citus: mneme._enter)
    v_every interval := mneme._interval_setting('cleanup_interval');
    v_at    timestamptz;
BEGIN
    IF v_every IS NULL THEN
        RETURN NULL;  -- the operator runs mneme.cleanup() (pg_cron) or nothing
    END IF;
    -- At most 100 years: the job's run_at must stay a time the sidecar's Go
    -- times carry (mneme._check_time).
    IF after < interval '0' OR after > interval '100 years' THEN
        RAISE EXCEPTION 'after must be from 0 to 100 years, got %', after USING ERRCODE = '22023';
    END IF;
    IF after IS NOT NULL THEN
        v_at := now() + after;
    ELSE
        SELECT max(j.finished_at) + v_every INTO v_at FROM mneme.jobs j WHERE j.kind = 'cleanup' AND j.state = 'done';
        v_at := greatest(coalesce(v_at, now()), now());
    END IF;
    -- One pending cleanup at a time: the dedupe key returns the pending one.
    RETURN mneme.enqueue_job('cleanup', NULL, mneme._cleanup_payload(), 'cleanup', v_at);
END
$$;
COMMENT ON FUNCTION mneme.schedule_cleanup(interval) IS
    'Enqueues the cleanup job (dedupe key "cleanup": one pending at a time; returns the pending one''s id if there '
    'is one), due `after` from now, or cleanup_interval after the last cleanup finished (now if none did). NULL when '
    'cleanup_interval is null. The sidecar calls it at start and after each cleanup job.';

-- -----------------------------------------------------------------------------
-- Reactivation
-- -----------------------------------------------------------------------------
CREATE OR REPLACE FUNCTION mneme.reactivate(memory_id uuid)
RETURNS boolean
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v__entered boolean := mneme._enter(NULL);  -- the caller forwarded first (Citus: mneme._enter)
    v_status text;
    v_conv   uuid;
BEGIN
    IF reactivate.memory_id IS NULL THEN
        RAISE EXCEPTION 'memory_id must not be NULL' USING ERRCODE = '22004';
    END IF;
    v_conv := mneme._memory_conversation(reactivate.memory_id);
    SELECT m.status INTO v_status FROM mneme.memories m WHERE m.conversation_id = v_conv AND m.id = reactivate.memory_id FOR UPDATE;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'memory % does not exist', reactivate.memory_id USING ERRCODE = 'P0002',
            HINT = 'a purged or erased memory cannot come back; SELECT * FROM mneme.memory_events WHERE memory_id = ... shows what happened';
    END IF;
    IF v_status = 'active' THEN
        RETURN false;
    END IF;
    IF v_status <> 'inactive' THEN
        RAISE EXCEPTION 'memory % is %, only an inactive memory can be reactivated', reactivate.memory_id, v_status
            USING ERRCODE = '55000', HINT = 'superseded and forgotten memories stay out of retrieval; mneme.history(id) shows the lineage';
    END IF;
    -- A fresh start of its forgetting curve (stability kept): otherwise the
    -- next cleanup would take it out again at once.
    PERFORM mneme._mark('event_reason', 'reactivated by hand');
    UPDATE mneme.memories m
    SET status = 'active', status_reason = NULL, last_reviewed_at = greatest(m.last_reviewed_at, now()), updated_at = now()
    WHERE m.conversation_id = v_conv AND m.id = reactivate.memory_id;
    PERFORM mneme._mark('event_reason', '');
    RETURN true;
END
$$;
COMMENT ON FUNCTION mneme.reactivate(uuid) IS
    'Makes an inactive memory active again, its forgetting curve restarted now (stability kept). Returns false for '
    'a memory that is active already; raises P0002 for an unknown id and 55000 for a superseded or forgotten one.';
