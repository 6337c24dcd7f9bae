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
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
SET jit = off
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
GRANT EXECUTE ON FUNCTION mneme._interval_setting(text) TO mneme_worker;

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
SECURITY DEFINER
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
SECURITY DEFINER
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
SECURITY DEFINER
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
SECURITY DEFINER
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
SECURITY DEFINER
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
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
SET jit = off
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
GRANT EXECUTE ON FUNCTION mneme.cleanup(boolean) TO mneme_worker, mneme_admin;

-- -----------------------------------------------------------------------------
-- The cleanup job's schedule
-- -----------------------------------------------------------------------------
CREATE OR REPLACE FUNCTION mneme.schedule_cleanup(after interval DEFAULT NULL)
RETURNS bigint
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
SET jit = off
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
GRANT EXECUTE ON FUNCTION mneme.schedule_cleanup(interval) TO mneme_worker, mneme_admin;

-- -----------------------------------------------------------------------------
-- Reactivation
-- -----------------------------------------------------------------------------
CREATE OR REPLACE FUNCTION mneme.reactivate(memory_id uuid)
RETURNS boolean
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
SET jit = off
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
GRANT EXECUTE ON FUNCTION mneme.reactivate(uuid) TO mneme_admin;
