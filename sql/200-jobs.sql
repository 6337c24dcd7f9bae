-- =============================================================================
-- mneme jobs: the outbox the API enqueues into (mneme.enqueue_job), the
-- runner contract the sidecar calls to claim, complete, retry and release
-- jobs, and what an operator uses to see and requeue them (mneme.job_stats,
-- mneme.retry_job). The kinds: 205-job-kinds.sql.
-- Idempotent: re-applied on every `mneme migrate` (CREATE OR REPLACE only).
--
-- A claim is a lease: state running, attempts + 1, locked_by = the worker,
-- locked_until = now() + lease. The pair (locked_by, attempts) identifies one
-- run: complete_job, fail_job and release_job act only if the job is still
-- held by that run, so a run whose lease expired and whose job was claimed
-- again commits nothing.
-- =============================================================================

-- Signatures that changed before release (a max-attempts override was added).

-- -----------------------------------------------------------------------------
-- Enqueueing: the transactional outbox
-- -----------------------------------------------------------------------------
-- The job kinds (mneme.job_kinds' rows) and their payload builders
-- (mneme._<kind>_payload) are generated from the one declaration,
-- sidecar/jobs/kinds.go, into sql/205-job-kinds.sql.

-- A pending job that does the same work as a job of this kind,
-- conversation and dedupe key: the same dedupe key, or a segment job of the
-- same conversation (the two unique indexes on pending jobs,
-- jobs_pending_dedupe and jobs_one_pending_segment). enqueue_job reports
-- it instead of a second job; a requeued job gives way to it.
CREATE OR REPLACE FUNCTION mneme._equivalent_pending_job(kind text, conversation_id uuid, dedupe_key text, except_id bigint)
RETURNS bigint
LANGUAGE plpgsql STABLE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
#variable_conflict use_column
DECLARE
    v bigint;
BEGIN
    SELECT j.id INTO v FROM mneme.jobs j
    WHERE j.state = 'pending' AND j.id IS DISTINCT FROM _equivalent_pending_job.except_id
      AND ((_equivalent_pending_job.dedupe_key IS NOT NULL AND j.dedupe_key = _equivalent_pending_job.dedupe_key)
           OR (_equivalent_pending_job.kind = 'segment' AND j.kind = 'segment'
               AND j.conversation_id = _equivalent_pending_job.conversation_id))
    LIMIT 1;
    RETURN v;
END
$$;
COMMENT ON FUNCTION mneme._equivalent_pending_job(text, uuid, text, bigint) IS
    'Internal to enqueue_job and requeueing: the pending job (other than except_id) that does the same work, if any.';

CREATE OR REPLACE FUNCTION mneme.enqueue_job(
    kind text,
    conversation_id uuid,
    payload jsonb DEFAULT '{}',
    dedupe_key text DEFAULT NULL,
    run_at timestamptz DEFAULT now())
RETURNS bigint
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
SET jit = off
AS $$
#variable_conflict use_column
DECLARE
    v__entered boolean := mneme._enter(enqueue_job.conversation_id);  -- the caller forwarded first (Citus: mneme._enter)
    v_id        bigint;
    v_max_bytes bigint;
    v_kind      mneme.job_kinds;
BEGIN
    IF enqueue_job.kind IS NULL OR enqueue_job.kind !~ '^[a-z][a-z0-9_]{0,63}$' THEN
        RAISE EXCEPTION 'job kind must be a lower-case identifier of at most 64 characters, got %', mneme._quote_prefix(enqueue_job.kind)
            USING ERRCODE = '22023';
    END IF;
    -- Only kinds the sidecar handles (mneme.job_kinds): any other would
    -- wait for a handler that never comes. A deployment with handlers of
    -- its own (and the test harness, whose job-queue tests use kinds of
    -- their own) lists them in the setting mneme.job_kinds ('*' for any).
    SELECT * INTO v_kind FROM mneme.job_kinds k WHERE k.kind = enqueue_job.kind;
    IF NOT FOUND
       AND coalesce(current_setting('mneme.job_kinds', true), '') <> '*'
       AND NOT enqueue_job.kind = ANY (string_to_array(replace(coalesce(current_setting('mneme.job_kinds', true), ''), ' ', ''), ',')) THEN
        RAISE EXCEPTION 'job kind % has no handler in the sidecar', mneme._quote_prefix(enqueue_job.kind)
            USING ERRCODE = '22023',
                  HINT = format('kinds: %s; a deployment''s own kinds go in the setting mneme.job_kinds '
                                '(ALTER DATABASE ... SET mneme.job_kinds = ''mykind'')',
                                (SELECT string_agg(k.kind, ', ' ORDER BY k.kind) FROM mneme.job_kinds k));
    END IF;
    PERFORM mneme._check_time('run_at', enqueue_job.run_at);
    IF enqueue_job.payload IS NOT NULL AND jsonb_typeof(enqueue_job.payload) <> 'object' THEN
        RAISE EXCEPTION 'job payload must be a JSON object, got %', left(enqueue_job.payload::text, 80) USING ERRCODE = '22023';
    END IF;
    -- A btree index row holds about 2.7 kB: 256 characters (at most 1 kB of
    -- UTF-8) never reach it.
    PERFORM mneme._check_length('dedupe_key', enqueue_job.dedupe_key, 256);
    -- The sidecar holds a claimed job's payload in memory. A review job
    -- carries up to pending_reviews_max (default 500) pending entries, each a
    -- query of up to 10,000 characters and up to 100 memory ids: about 32 MB
    -- at worst as JSON; the hand-over of reviews must never fail on the cap,
    -- so review jobs get 64 MB, every other kind 1 MB.
    v_max_bytes := (CASE WHEN enqueue_job.kind = 'review' THEN 64 ELSE 1 END) * 1048576;
    IF octet_length(enqueue_job.payload::text) > v_max_bytes THEN
        RAISE EXCEPTION 'payload is % bytes, over the limit of % bytes for a % job', octet_length(enqueue_job.payload::text),
                v_max_bytes, enqueue_job.kind
            USING ERRCODE = '22001', HINT = 'keep large data in tables and put its ids in the payload';
    END IF;
    -- The payload the kind's handler reads (mneme.job_kinds): what it could
    -- only fail on is refused here.
    IF v_kind.kind IS NOT NULL AND ((v_kind.needs_conversation AND enqueue_job.conversation_id IS NULL)
           OR NOT jsonb_path_match(coalesce(enqueue_job.payload, '{}'), v_kind.payload_rule)) THEN
        RAISE EXCEPTION '% job payload %: not what its handler reads', enqueue_job.kind, left(enqueue_job.payload::text, 80)
            USING ERRCODE = '22023',
                  HINT = format('a %s job: %s%s', v_kind.kind, CASE WHEN v_kind.needs_conversation THEN 'a conversation and ' ELSE '' END,
                                v_kind.payload_hint);
    END IF;
    -- A time the rule lets through by its form may still be no date
    -- (February 30) or outside the years the API takes (mneme._check_time).
    IF enqueue_job.kind = 'review' AND v_kind.kind IS NOT NULL THEN
        BEGIN
            PERFORM mneme._check_time('reviewed_at', (enqueue_job.payload ->> 'reviewed_at')::timestamptz);
            -- Go's zero time is an unset one: the review handler refuses it.
            IF (enqueue_job.payload ->> 'reviewed_at')::timestamptz = '0001-01-01 00:00:00+00'::timestamptz THEN
                RAISE EXCEPTION 'the zero time (0001-01-01T00:00:00Z) is an unset time' USING ERRCODE = '22023';
            END IF;
        EXCEPTION WHEN data_exception THEN
            RAISE EXCEPTION 'review job payload: reviewed_at %: %', mneme._quote_prefix(enqueue_job.payload ->> 'reviewed_at'), SQLERRM
                USING ERRCODE = '22023', HINT = format('a review job: %s', v_kind.payload_hint);
        END;
    END IF;
    -- A segment job cuts the conversation's queued messages: with none
    -- queued it has nothing to do, and would only fail.
    IF enqueue_job.kind = 'segment' AND enqueue_job.conversation_id IS NOT NULL
       AND NOT EXISTS (SELECT 1 FROM mneme.messages m
                       WHERE m.conversation_id = enqueue_job.conversation_id AND m.consumed_at IS NULL) THEN
        RAISE EXCEPTION 'conversation % has no queued messages: a segment job would have nothing to segment',
            enqueue_job.conversation_id USING ERRCODE = '22023',
            HINT = 'mneme.add_message queues messages and enqueues the segment job itself';
    END IF;
    -- A job of no conversation (cleanup) has the nil one: the functions
    -- that finish a job name its conversation with = (on Citus, where jobs
    -- are distributed by conversation, that routes to its shard).
    IF enqueue_job.conversation_id IS NULL THEN
        enqueue_job.conversation_id := '00000000-0000-0000-0000-000000000000';
    END IF;
    INSERT INTO mneme.jobs (kind, conversation_id, payload, dedupe_key, run_at)
    VALUES (enqueue_job.kind, enqueue_job.conversation_id, coalesce(enqueue_job.payload, '{}'), enqueue_job.dedupe_key, coalesce(enqueue_job.run_at, now()))
    ON CONFLICT DO NOTHING
    RETURNING id INTO v_id;
    IF v_id IS NULL THEN
        -- An equivalent job is already pending: keep it, report its id.
        v_id := mneme._equivalent_pending_job(enqueue_job.kind, enqueue_job.conversation_id, enqueue_job.dedupe_key, NULL);
        RETURN v_id;
    END IF;
    -- A wake-up hint only: sidecars also sweep the table and may follow the
    -- WAL instead. Delivered at commit, so never for a rolled-back job.
    -- Empty: any role may LISTEN, and a payload would tell it every
    -- tenant's job ids and kinds.
    PERFORM pg_notify('mneme_jobs', '');
    RETURN v_id;
END
$$;
COMMENT ON FUNCTION mneme.enqueue_job(text, uuid, jsonb, text, timestamptz) IS
    'Inserts a pending job in the caller''s transaction and NOTIFYs mneme_jobs at commit. '
    'A pending duplicate (same dedupe_key, or a second segment job for a conversation) is not inserted; '
    'its id is returned instead.';
GRANT EXECUTE ON FUNCTION mneme.enqueue_job(text, uuid, jsonb, text, timestamptz) TO mneme_worker;

-- (mneme._functions_reaching served the migrate-time rewriting of
-- functions on Citus, which is gone: the Citus forms are written in sql/
-- and sql/citus/; goose 00090 drops it.)

-- -----------------------------------------------------------------------------
-- Claiming
-- -----------------------------------------------------------------------------
-- The error of a job whose lease expired on its last allowed attempt (both
-- claim paths). Plain SQL: inlined into the UPDATE that fails the job.
CREATE OR REPLACE FUNCTION mneme._lease_expired_error(attempts int, max_attempts int, worker text, previous text)
RETURNS text
LANGUAGE sql STABLE
AS $$
    SELECT format('lease expired on attempt %s of %s (worker %s crashed or timed out)%s',
                  $1, $2, $3, coalesce('; previous error: ' || $4, ''))
$$;
COMMENT ON FUNCTION mneme._lease_expired_error(int, int, text, text) IS
    'Internal to the claims: last_error of a job whose lease expired on its last attempt.';

-- Fails the jobs whose lease expired on their last allowed attempt (in one
-- statement). No single row may fail the claim that calls it: if that
-- statement fails (a trigger on one row), each job is failed on its own,
-- and a job that cannot be failed even then keeps its error in last_error
-- and is left out of claims for an hour (a warning names it), so the queue
-- goes on for every other job and tenant.
CREATE OR REPLACE FUNCTION mneme._fail_expired_jobs(max_attempts int)
RETURNS void
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
#variable_conflict use_column
DECLARE
    v_id  bigint;
    v_err text;
BEGIN
    BEGIN
        UPDATE mneme.jobs j
           SET state = 'failed', finished_at = now(), updated_at = now(),
               locked_by = NULL, locked_until = NULL,
               last_error = mneme._lease_expired_error(j.attempts, coalesce(_fail_expired_jobs.max_attempts, j.max_attempts),
                                                        j.locked_by, j.last_error)
         WHERE j.id IN (SELECT x.id FROM mneme.jobs x
                         WHERE x.state = 'running' AND x.locked_until < now()
                           AND x.attempts >= coalesce(_fail_expired_jobs.max_attempts, x.max_attempts)
                         FOR UPDATE SKIP LOCKED);
        RETURN;
    EXCEPTION WHEN OTHERS THEN
        GET STACKED DIAGNOSTICS v_err = MESSAGE_TEXT;
        RAISE WARNING 'mneme: failing expired jobs in one statement failed (%); failing them one by one', v_err;
    END;
    FOR v_id IN SELECT x.id FROM mneme.jobs x
                 WHERE x.state = 'running' AND x.locked_until < now()
                   AND x.attempts >= coalesce(_fail_expired_jobs.max_attempts, x.max_attempts)
                 ORDER BY x.id LOOP
        BEGIN
            UPDATE mneme.jobs j
               SET state = 'failed', finished_at = now(), updated_at = now(),
                   locked_by = NULL, locked_until = NULL,
                   last_error = mneme._lease_expired_error(j.attempts, coalesce(_fail_expired_jobs.max_attempts, j.max_attempts),
                                                            j.locked_by, j.last_error)
             WHERE j.id = (SELECT x.id FROM mneme.jobs x WHERE x.id = v_id AND x.state = 'running' FOR UPDATE SKIP LOCKED);
        EXCEPTION WHEN OTHERS THEN
            GET STACKED DIAGNOSTICS v_err = MESSAGE_TEXT;
            RAISE WARNING 'mneme: job % cannot be marked failed: %', v_id, v_err;
            BEGIN
                UPDATE mneme.jobs j
                   SET locked_until = now() + interval '1 hour', updated_at = now(),
                       last_error = left(format('lease expired on its last attempt, and failing it failed: %s; previous error: %s',
                                                v_err, coalesce(j.last_error, 'none')), 10000)
                 WHERE j.id = v_id;
            EXCEPTION WHEN OTHERS THEN
                GET STACKED DIAGNOSTICS v_err = MESSAGE_TEXT;
                RAISE WARNING 'mneme: job % cannot be set aside either: %', v_id, v_err;
            END;
        END;
    END LOOP;
END
$$;
COMMENT ON FUNCTION mneme._fail_expired_jobs(int) IS
    'Internal to claim_jobs: fails the jobs whose lease expired on their last allowed attempt; one job that cannot '
    'be failed never fails the claim (it is set aside for an hour with the error in last_error, and a warning).';

-- max_attempts, when not NULL, overrides every job's max_attempts
-- (MNEME_MAX_ATTEMPTS); fail_job takes the same override.
CREATE OR REPLACE FUNCTION mneme.claim_jobs(worker text, max_jobs int, lease interval, max_attempts int DEFAULT NULL)
RETURNS SETOF mneme.jobs
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
SET jit = off
AS $$
DECLARE
    v__entered boolean := mneme._enter(NULL);  -- the caller forwarded first (Citus: mneme._enter)
BEGIN
    RETURN QUERY SELECT * FROM mneme.claim_jobs(claim_jobs.worker, claim_jobs.max_jobs, claim_jobs.lease, claim_jobs.max_attempts, '{}'::text[]);
END
$$;
COMMENT ON FUNCTION mneme.claim_jobs(text, int, interval, int) IS
    'claims up to max_jobs ready jobs of any kind: claim_jobs(worker, max_jobs, lease, max_attempts, except_kinds) '
    'with no kind left out. Called by a sidecar that handles every kind of mneme.job_kinds.';
GRANT EXECUTE ON FUNCTION mneme.claim_jobs(text, int, interval, int) TO mneme_worker;

-- except_kinds: kinds left where they are, for a sidecar older than the
-- schema (a kind of mneme.job_kinds it has no handler for waits for the
-- sidecars of the release that declares it, instead of failing in the
-- older one; docs/migrations.md). The sidecar passes the kinds it does
-- not know; a kind it knows but has no handler for it refuses at start.
CREATE OR REPLACE FUNCTION mneme.claim_jobs(worker text, max_jobs int, lease interval, max_attempts int, except_kinds text[])
RETURNS SETOF mneme.jobs
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
SET jit = off
AS $$
#variable_conflict use_column
DECLARE
    v__entered boolean := mneme._enter(NULL);  -- the caller forwarded first (Citus: mneme._enter)
    v_n   bigint;
    v_ids bigint[];
BEGIN
    IF claim_jobs.except_kinds IS NULL THEN
        RAISE EXCEPTION 'except_kinds must not be NULL' USING ERRCODE = '22004',
            HINT = 'an empty array claims every kind (or call claim_jobs without it)';
    END IF;
    IF claim_jobs.worker IS NULL OR claim_jobs.worker = '' THEN
        RAISE EXCEPTION 'worker (the worker id) must not be empty' USING ERRCODE = '22023';
    END IF;
    -- Stored in locked_by and quoted in last_error when its lease expires.
    PERFORM mneme._check_length('worker', claim_jobs.worker, 256);
    IF claim_jobs.max_jobs IS NULL OR claim_jobs.max_jobs < 1 THEN
        RAISE EXCEPTION 'max_jobs must be at least 1, got %', coalesce(claim_jobs.max_jobs::text, 'NULL') USING ERRCODE = '22023';
    END IF;
    IF claim_jobs.lease IS NULL OR claim_jobs.lease <= interval '0' THEN
        RAISE EXCEPTION 'lease must be a positive interval, got %', coalesce(claim_jobs.lease::text, 'NULL') USING ERRCODE = '22023';
    END IF;
    IF claim_jobs.max_attempts < 1 THEN
        RAISE EXCEPTION 'max_attempts must be at least 1, got %', claim_jobs.max_attempts USING ERRCODE = '22023';
    END IF;
    IF mneme._distributed('mneme.jobs') THEN
        RETURN QUERY SELECT * FROM mneme._claim_jobs_distributed(claim_jobs.worker, claim_jobs.max_jobs, claim_jobs.lease, claim_jobs.max_attempts,
                                                                 claim_jobs.except_kinds);
        RETURN;
    END IF;
    -- A job whose lease expired on its last allowed attempt crashed or hung
    -- its worker every time: fail it instead of handing it out again.
    PERFORM mneme._fail_expired_jobs(claim_jobs.max_attempts);
    -- Expired leases first (their worker is gone), then due pending jobs.
    RETURN QUERY
    WITH c AS (
        SELECT x.id FROM mneme.jobs x
         WHERE x.state = 'running' AND x.locked_until < now() AND x.kind <> ALL (claim_jobs.except_kinds)
         ORDER BY x.locked_until, x.id
         LIMIT claim_jobs.max_jobs
           FOR UPDATE SKIP LOCKED)
    UPDATE mneme.jobs j
       SET attempts = j.attempts + 1, locked_by = claim_jobs.worker, locked_until = now() + claim_jobs.lease, updated_at = now()
      FROM c
     WHERE j.id = c.id
    RETURNING j.*;
    GET DIAGNOSTICS v_n = ROW_COUNT;
    IF v_n >= claim_jobs.max_jobs THEN
        RETURN;
    END IF;
    -- Due pending jobs, tenants served in turn: oldest first across
    -- tenants would let one tenant's burst (thousands of revise jobs from one
    -- message) starve every other tenant's segmentation. The candidates are
    -- each tenant's oldest ready jobs (one index probe per tenant with ready
    -- jobs, jobs_ready_tenant_idx; never a scan of the whole queue), taken in
    -- rounds: every tenant's first before anyone's second, and within a
    -- round the tenant served longest ago (mneme.job_turns) first. A few
    -- spare candidates per tenant leave room for claims running at once.
    v_ids := ARRAY(
        WITH RECURSIVE t AS (
            (SELECT x.tenant_id FROM mneme.jobs x
              WHERE x.state = 'pending' AND x.run_at <= now()
              ORDER BY x.tenant_id LIMIT 1)
            UNION ALL
            SELECT (SELECT x.tenant_id FROM mneme.jobs x
                     WHERE x.state = 'pending' AND x.run_at <= now() AND x.tenant_id > t.tenant_id
                     ORDER BY x.tenant_id LIMIT 1)
              FROM t WHERE t.tenant_id IS NOT NULL)
        SELECT y.id
          FROM t
          CROSS JOIN LATERAL (
                SELECT x.id, x.run_at, row_number() OVER (ORDER BY x.run_at, x.id) AS rn
                  FROM (SELECT x.id, x.run_at FROM mneme.jobs x
                         WHERE x.state = 'pending' AND x.run_at <= now() AND x.tenant_id = t.tenant_id
                           AND x.kind <> ALL (claim_jobs.except_kinds)
                         ORDER BY x.run_at, x.id
                         LIMIT 2 * (claim_jobs.max_jobs - v_n) + 4) x) y
          LEFT JOIN mneme.job_turns s ON s.tenant_id = t.tenant_id
         WHERE t.tenant_id IS NOT NULL
         ORDER BY y.rn, s.served_at NULLS FIRST, y.run_at, y.id);
    RETURN QUERY
    WITH c AS (
        SELECT x.id FROM unnest(v_ids) WITH ORDINALITY AS u(id, ord)
          JOIN mneme.jobs x ON x.id = u.id
         WHERE x.state = 'pending' AND x.run_at <= now()
         ORDER BY u.ord
         LIMIT claim_jobs.max_jobs - v_n
           FOR UPDATE OF x SKIP LOCKED),
    claimed AS (
        UPDATE mneme.jobs j
           SET state = 'running', attempts = j.attempts + 1,
               locked_by = claim_jobs.worker, locked_until = now() + claim_jobs.lease, updated_at = now()
          FROM c
         WHERE j.id = c.id
        RETURNING j.*),
    served AS (
        INSERT INTO mneme.job_turns AS s (tenant_id, served_at)
        SELECT d.tenant_id, clock_timestamp() FROM (SELECT DISTINCT claimed.tenant_id FROM claimed) d
        ON CONFLICT (tenant_id) DO UPDATE SET served_at = excluded.served_at)
    SELECT * FROM claimed;
END
$$;
COMMENT ON FUNCTION mneme.claim_jobs(text, int, interval, int, text[]) IS
    'claims up to max_jobs ready jobs, but none of a kind in except_kinds (pending and due, or running with an expired lease) with FOR UPDATE SKIP LOCKED: '
    'state running, attempts + 1, locked_by = worker, locked_until = now() + lease. '
    'Fails jobs whose lease expired on their last attempt. Pending jobs are handed out fairly across tenants: '
    'each tenant''s oldest first, tenants in turn (the one served longest ago first, mneme.job_turns), so one '
    'tenant''s burst does not delay the others. Called by the sidecar''s runner (except_kinds: the kinds newer than it).';
GRANT EXECUTE ON FUNCTION mneme.claim_jobs(text, int, interval, int, text[]) TO mneme_worker;

-- On Citus (mneme migrate --citus) jobs are distributed by conversation and
-- Citus refuses FOR UPDATE in a statement that reaches every shard, so the
-- claim is two steps: candidates read from every shard without a lock (the
-- expired leases, then the due pending jobs, oldest first, a few spare for
-- claims running at once), then each candidate locked and claimed by a
-- statement routed to its conversation's shard (FOR UPDATE SKIP LOCKED
-- there, its state checked again). No hot spot: no row or table every
-- claim must lock. Oldest first across tenants: the turns the one-server
-- claim takes between tenants (mneme.job_turns) are not taken here, since
-- finding each tenant's oldest job is a read of every shard per tenant and
-- recording a turn a write to a reference table (every node) per claim;
-- one tenant's burst can delay the others' jobs on Citus (docs/scale.md).
CREATE OR REPLACE FUNCTION mneme._claim_jobs_distributed(worker text, max_jobs int, lease interval, max_attempts int,
                                                         except_kinds text[])
RETURNS SETOF mneme.jobs
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
#variable_conflict use_column
DECLARE
    c   record;
    j   mneme.jobs;
    v_n int := 0;
BEGIN
    FOR c IN
        (SELECT x.conversation_id, x.id, 1 AS pass, x.locked_until AS due FROM mneme.jobs x
          WHERE x.state = 'running' AND x.locked_until < now() AND x.kind <> ALL (_claim_jobs_distributed.except_kinds)
          ORDER BY x.locked_until, x.id LIMIT 2 * _claim_jobs_distributed.max_jobs::bigint + 4)
        UNION ALL
        (SELECT x.conversation_id, x.id, 2, x.run_at FROM mneme.jobs x
          WHERE x.state = 'pending' AND x.run_at <= now() AND x.kind <> ALL (_claim_jobs_distributed.except_kinds)
          ORDER BY x.run_at, x.id LIMIT 2 * _claim_jobs_distributed.max_jobs::bigint + 4)
        ORDER BY 3, 4, 2
    LOOP
        EXIT WHEN v_n >= _claim_jobs_distributed.max_jobs;
        SELECT * INTO j FROM mneme.jobs x
         WHERE x.conversation_id = c.conversation_id AND x.id = c.id
           AND ((x.state = 'running' AND x.locked_until < now()) OR (x.state = 'pending' AND x.run_at <= now()))
           FOR UPDATE SKIP LOCKED;
        CONTINUE WHEN NOT FOUND;
        IF j.state = 'running' AND j.attempts >= coalesce(_claim_jobs_distributed.max_attempts, j.max_attempts) THEN
            -- expired on its last allowed attempt: failed, as on one server
            UPDATE mneme.jobs x
               SET state = 'failed', finished_at = now(), updated_at = now(),
                   locked_by = NULL, locked_until = NULL,
                   -- from the locked row j, not the columns: Citus refuses a
                   -- STABLE function (format) over columns in an UPDATE
                   last_error = mneme._lease_expired_error(j.attempts, coalesce(_claim_jobs_distributed.max_attempts, j.max_attempts),
                                                            j.locked_by, j.last_error)
             WHERE x.conversation_id = c.conversation_id AND x.id = c.id;
            CONTINUE;
        END IF;
        UPDATE mneme.jobs x
           SET state = 'running', attempts = x.attempts + 1, locked_by = _claim_jobs_distributed.worker,
               locked_until = now() + _claim_jobs_distributed.lease, updated_at = now()
         WHERE x.conversation_id = c.conversation_id AND x.id = c.id
        RETURNING * INTO j;
        v_n := v_n + 1;
        RETURN NEXT j;
    END LOOP;
END
$$;
COMMENT ON FUNCTION mneme._claim_jobs_distributed(text, int, interval, int, text[]) IS
    'Internal to claim_jobs on Citus: candidates read from every shard, then each claimed by a statement routed '
    'to its conversation (FOR UPDATE SKIP LOCKED there).';

-- The conversation of job id: the finishing functions name it beside the
-- id (with =: a job of no conversation has the nil one, mneme.enqueue_job),
-- so that on Citus their statements go to that conversation's shard (one
-- server: one more probe of the primary key).
CREATE OR REPLACE FUNCTION mneme._job_conversation(id bigint)
RETURNS uuid
LANGUAGE plpgsql STABLE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
#variable_conflict use_column
DECLARE
    v uuid;
BEGIN
    SELECT j.conversation_id INTO v FROM mneme.jobs j WHERE j.id = _job_conversation.id;
    RETURN v;
END
$$;
COMMENT ON FUNCTION mneme._job_conversation(bigint) IS
    'Internal: the conversation of a job (the nil one for none; NULL for no such job), so a statement on the job routes to its Citus shard.';

CREATE OR REPLACE FUNCTION mneme.extend_job_lease(id bigint, worker text, attempt int, lease interval)
RETURNS boolean
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
SET jit = off
AS $$
#variable_conflict use_column
DECLARE
    v__entered boolean := mneme._enter(NULL);  -- the caller forwarded first (Citus: mneme._enter)
    v_job_conv uuid := mneme._job_conversation(extend_job_lease.id);
BEGIN
    UPDATE mneme.jobs
       SET locked_until = now() + extend_job_lease.lease
     WHERE conversation_id = v_job_conv AND id = extend_job_lease.id
       AND state = 'running' AND locked_by = extend_job_lease.worker AND attempts = extend_job_lease.attempt;
    RETURN CASE WHEN FOUND THEN true END;
END
$$;
COMMENT ON FUNCTION mneme.extend_job_lease(bigint, text, int, interval) IS
    'Heartbeat: pushes a running job''s lease forward if this run (worker, attempt) still holds it; NULL otherwise.';
GRANT EXECUTE ON FUNCTION mneme.extend_job_lease(bigint, text, int, interval) TO mneme_worker;

-- -----------------------------------------------------------------------------
-- Finishing
-- -----------------------------------------------------------------------------
CREATE OR REPLACE FUNCTION mneme.complete_job(id bigint, worker text, attempt int)
RETURNS boolean
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
SET jit = off
AS $$
#variable_conflict use_column
DECLARE
    v__entered boolean := mneme._enter(NULL);  -- the caller forwarded first (Citus: mneme._enter)
    v_job_conv uuid := mneme._job_conversation(complete_job.id);
BEGIN
    UPDATE mneme.jobs
       SET state = 'done', finished_at = now(), updated_at = now(),
           locked_by = NULL, locked_until = NULL
     WHERE conversation_id = v_job_conv AND id = complete_job.id AND state = 'running' AND locked_by = complete_job.worker AND attempts = complete_job.attempt;
    RETURN FOUND;
END
$$;
COMMENT ON FUNCTION mneme.complete_job(bigint, text, int) IS
    'Marks a job done if this run (worker, attempt) still holds it; false means the lease was lost and the '
    'caller must roll back. The runner calls it in the handler''s transaction, so effect and completion commit together.';
GRANT EXECUTE ON FUNCTION mneme.complete_job(bigint, text, int) TO mneme_worker;

-- Puts a running job back to pending at run_at. If an equivalent job is
-- pending already (mneme._equivalent_pending_job), that one will do the work: this one ends done, with the
-- note in last_error. Returns the new state.
CREATE OR REPLACE FUNCTION mneme._requeue_job(id bigint, run_at timestamptz, error text, attempts int)
RETURNS text
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
#variable_conflict use_column
DECLARE
    v_other bigint;
    v_job_conv uuid := mneme._job_conversation(_requeue_job.id);
BEGIN
    BEGIN
        UPDATE mneme.jobs
           SET state = 'pending', run_at = _requeue_job.run_at, attempts = _requeue_job.attempts, last_error = _requeue_job.error,
               locked_by = NULL, locked_until = NULL, updated_at = now()
         WHERE conversation_id = v_job_conv AND id = _requeue_job.id;
        RETURN 'pending';
    EXCEPTION WHEN unique_violation THEN
        SELECT mneme._equivalent_pending_job(j.kind, j.conversation_id, j.dedupe_key, j.id) INTO v_other
        FROM mneme.jobs j WHERE j.conversation_id = v_job_conv AND j.id = _requeue_job.id;
        UPDATE mneme.jobs
           SET state = 'done', finished_at = now(), updated_at = now(), locked_by = NULL, locked_until = NULL,
               last_error = format('not retried: equivalent pending job %s does this work; last error: %s',
                                   coalesce(v_other::text, '?'), coalesce(_requeue_job.error, 'none'))
         WHERE conversation_id = v_job_conv AND id = _requeue_job.id;
        RETURN 'done';
    END;
END
$$;
COMMENT ON FUNCTION mneme._requeue_job(bigint, timestamptz, text, int) IS
    'Internal to fail_job and release_job: back to pending, or done when an equivalent job is already pending.';

CREATE OR REPLACE FUNCTION mneme.fail_job(
    id bigint, worker text, attempt int, error text, retry_in interval, permanent boolean DEFAULT false,
    max_attempts int DEFAULT NULL)
RETURNS text
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
SET jit = off
AS $$
#variable_conflict use_column
DECLARE
    v__entered boolean := mneme._enter(NULL);  -- the caller forwarded first (Citus: mneme._enter)
    j mneme.jobs;
    v_job_conv uuid := mneme._job_conversation(fail_job.id);
    -- A worker's error is always recorded: a long one is cut, never refused
    -- (refusing it would leave the job running until its lease expires).
    v_error text := CASE WHEN length(fail_job.error) > 10000
                         THEN left(fail_job.error, 10000) || format('... (%s characters)', length(fail_job.error))
                         ELSE coalesce(fail_job.error, 'unknown error') END;
BEGIN
    IF fail_job.retry_in IS NULL OR fail_job.retry_in < interval '0' THEN
        RAISE EXCEPTION 'retry_in must be a zero or positive interval, got %', coalesce(fail_job.retry_in::text, 'NULL') USING ERRCODE = '22023';
    END IF;
    SELECT * INTO j FROM mneme.jobs
     WHERE conversation_id = v_job_conv AND id = fail_job.id AND state = 'running' AND locked_by = fail_job.worker AND attempts = fail_job.attempt
       FOR UPDATE;
    IF NOT FOUND THEN
        RETURN NULL; -- lease lost: whoever holds the job now decides
    END IF;
    IF fail_job.permanent OR j.attempts >= coalesce(fail_job.max_attempts, j.max_attempts) THEN
        -- A job its handler rejected (permanent: malformed, no conversation)
        -- failed on itself, not on the messages: a segment job's stay queued
        -- for the next valid segmentation (jobs_set_aside_trg).
        IF fail_job.permanent THEN
            PERFORM mneme._mark('job_rejected', fail_job.id::text);
        END IF;
        UPDATE mneme.jobs
           SET state = 'failed', finished_at = now(), updated_at = now(),
               locked_by = NULL, locked_until = NULL, last_error = v_error
         WHERE conversation_id = v_job_conv AND id = fail_job.id;
        PERFORM mneme._mark('job_rejected', NULL);
        RETURN 'failed';
    END IF;
    RETURN mneme._requeue_job(fail_job.id, now() + fail_job.retry_in, v_error, j.attempts);
END
$$;
COMMENT ON FUNCTION mneme.fail_job(bigint, text, int, text, interval, boolean, int) IS
    'Records a failed attempt of a run that still holds the job: back to pending after retry_in, or failed '
    '(with last_error, cut to its first 10,000 characters) when permanent or out of attempts. Returns the new state, '
    'NULL if the lease was lost.';
GRANT EXECUTE ON FUNCTION mneme.fail_job(bigint, text, int, text, interval, boolean, int) TO mneme_worker;

CREATE OR REPLACE FUNCTION mneme.release_job(id bigint, worker text, attempt int)
RETURNS text
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
SET jit = off
AS $$
#variable_conflict use_column
DECLARE
    v__entered boolean := mneme._enter(NULL);  -- the caller forwarded first (Citus: mneme._enter)
    j mneme.jobs;
    v_job_conv uuid := mneme._job_conversation(release_job.id);
BEGIN
    SELECT * INTO j FROM mneme.jobs
     WHERE conversation_id = v_job_conv AND id = release_job.id AND state = 'running' AND locked_by = release_job.worker AND attempts = release_job.attempt
       FOR UPDATE;
    IF NOT FOUND THEN
        RETURN NULL;
    END IF;
    -- An interrupted run was not the job's fault: it does not count.
    RETURN mneme._requeue_job(release_job.id, now(), j.last_error, greatest(j.attempts - 1, 0));
END
$$;
COMMENT ON FUNCTION mneme.release_job(bigint, text, int) IS
    'Gives a running job back (sidecar shutdown): pending now, the attempt not counted. NULL if the lease was lost.';
GRANT EXECUTE ON FUNCTION mneme.release_job(bigint, text, int) TO mneme_worker;

-- -----------------------------------------------------------------------------
-- Operator views and commands
-- -----------------------------------------------------------------------------
CREATE OR REPLACE VIEW mneme.job_stats WITH (security_invoker = true) AS
SELECT j.kind,
       j.state,
       count(*)            AS jobs,
       min(j.created_at)   AS oldest_created_at,
       min(j.run_at) FILTER (WHERE j.state = 'pending') AS next_run_at,
       max(j.finished_at)  AS last_finished_at
  FROM mneme.jobs j
 GROUP BY j.kind, j.state;
COMMENT ON VIEW mneme.job_stats IS
    'Jobs per kind and state (pending, running, done, failed). SELECT * FROM mneme.jobs WHERE state = ''failed'' shows last_error.';

CREATE OR REPLACE FUNCTION mneme.retry_job(id bigint)
RETURNS void
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
SET jit = off
AS $$
#variable_conflict use_column
DECLARE
    v__entered boolean := mneme._enter(NULL);  -- the caller forwarded first (Citus: mneme._enter)
    j mneme.jobs;
    v_job_conv uuid := mneme._job_conversation(retry_job.id);
BEGIN
    IF retry_job.id IS NULL THEN
        RAISE EXCEPTION 'job id must not be NULL' USING ERRCODE = '22004';
    END IF;
    SELECT * INTO j FROM mneme.jobs WHERE conversation_id = v_job_conv AND id = retry_job.id FOR UPDATE;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'job % does not exist', retry_job.id
            USING ERRCODE = 'P0002', HINT = 'SELECT id, kind, state FROM mneme.jobs WHERE state = ''failed'' lists failed jobs';
    END IF;
    IF j.state <> 'failed' THEN
        RAISE EXCEPTION 'job % is %, only a failed job can be retried', retry_job.id, j.state
            USING ERRCODE = '55000', HINT = 'pending and running jobs are retried by the sidecar already';
    END IF;
    -- A segment job's payload only says why it was enqueued (the job reads
    -- the whole queue): one its handler could not read, or that its kind's
    -- rule does not take, is replaced by a plain check, saying so, so the
    -- retry does not fail the same way again.
    IF j.kind = 'segment' AND (NOT coalesce(jsonb_path_match(j.payload, (SELECT k.payload_rule FROM mneme.job_kinds k WHERE k.kind = 'segment')), false)
                               OR j.payload::text ~ '_id": -?[0-9]*[.eE]') THEN
        RAISE NOTICE 'job %: its payload % is not what the segment handler reads; retried as {"check": true}',
            retry_job.id, left(j.payload::text, 200);
        UPDATE mneme.jobs SET payload = '{"check": true, "reason": "retry"}'
         WHERE conversation_id = v_job_conv AND id = retry_job.id;
    END IF;
    BEGIN
        UPDATE mneme.jobs
           SET state = 'pending', attempts = 0, run_at = now(), finished_at = NULL, updated_at = now()
         WHERE conversation_id = v_job_conv AND id = retry_job.id;
    EXCEPTION WHEN unique_violation THEN
        RAISE EXCEPTION 'job % cannot be requeued: an equivalent job is already pending', retry_job.id
            USING ERRCODE = '23505', HINT = 'the pending job does the same work; see SELECT * FROM mneme.jobs WHERE state = ''pending''';
    END;
    -- requeued: the replication transport sees inserts only, so it listens
    -- for these notifications (and only these) as well.
    PERFORM pg_notify('mneme_jobs', 'requeued');  -- no id or kind: any role may LISTEN
END
$$;
COMMENT ON FUNCTION mneme.retry_job(bigint) IS
    'Requeues a failed job with a fresh set of attempts (last_error is kept until the next failure); a segment '
    'job''s set-aside messages go back in the queue, and a segment payload its handler cannot read becomes '
    '{"check": true} (a NOTICE says so). '
    'Raises P0002 for an unknown id and 55000 for a job that is not failed.';
GRANT EXECUTE ON FUNCTION mneme.retry_job(bigint) TO mneme_worker, mneme_admin;

-- -----------------------------------------------------------------------------
-- A segment job that failed for good does not stop its conversation
-- -----------------------------------------------------------------------------
-- Its messages are set aside: out of the queue (consumed_at set, no memory),
-- kept, listed by mneme.set_aside_messages with the job's error, so the next
-- messages segment. mneme.retry_job puts them back in the queue.
CREATE OR REPLACE FUNCTION mneme.jobs_set_aside_trg()
RETURNS trigger
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF NEW.state = 'failed' AND mneme._marked('job_rejected') IS NOT DISTINCT FROM NEW.id::text THEN
        RETURN NULL;  -- rejected by its handler as malformed: the messages stay queued (mneme.fail_job)
    ELSIF NEW.state = 'failed' THEN
        -- A segment job reads everything queued when it runs
        -- (mneme.queued_sessions), so it failed on all of it. Nothing of the
        -- payload is read: this runs inside fail_job and the claim, where a
        -- cast that throws would leave the job running and fail every claim.
        -- (a row trigger writes the table mneme._shard names: on Citus the
        -- conversation's shard of the messages, it says why)
        EXECUTE format('UPDATE %s m SET consumed_at = now(), set_aside_job_id = $1 '
                       'WHERE m.conversation_id = $2 AND m.consumed_at IS NULL',
                       mneme._shard('mneme.messages', NEW.conversation_id))
            USING NEW.id, NEW.conversation_id;
    ELSE
        EXECUTE format('UPDATE %s m SET consumed_at = NULL, set_aside_job_id = NULL WHERE m.set_aside_job_id = $1',
                       mneme._shard('mneme.messages', NEW.conversation_id))
            USING NEW.id;
    END IF;
    RETURN NULL;
END
$$;
DROP TRIGGER IF EXISTS jobs_set_aside ON mneme.jobs;
CREATE TRIGGER jobs_set_aside AFTER UPDATE OF state ON mneme.jobs
    FOR EACH ROW WHEN (NEW.kind = 'segment' AND (NEW.state = 'failed') IS DISTINCT FROM (OLD.state = 'failed'))
    EXECUTE FUNCTION mneme.jobs_set_aside_trg();

CREATE OR REPLACE VIEW mneme.set_aside_messages WITH (security_invoker = true) AS
SELECT m.conversation_id, m.id AS message_id, m.role, m.content, m.created_at,
       m.set_aside_job_id AS job_id, m.consumed_at AS set_aside_at, j.last_error
FROM mneme.messages m
-- (the job is the conversation's segment job: joined on both, so that on
-- Citus the join stays on the conversation's shard)
LEFT JOIN mneme.jobs j ON j.conversation_id = m.conversation_id AND j.id = m.set_aside_job_id
WHERE m.set_aside_job_id IS NOT NULL;
COMMENT ON VIEW mneme.set_aside_messages IS
    'Messages of segment jobs that failed for good, set aside so their conversation goes on segmenting; '
    'SELECT mneme.retry_job(job_id) puts them back in the queue.';

-- -----------------------------------------------------------------------------
-- Replication transport
-- -----------------------------------------------------------------------------
-- The publication the replication transport reads: inserts into mneme.jobs
-- only (a new job is the only event). Created by migration 00020; re-created
-- here on every migrate if it was dropped, so this is its one definition.
DO $$
BEGIN
    IF NOT EXISTS (SELECT 1 FROM pg_catalog.pg_publication WHERE pubname = 'mneme_jobs') THEN
        CREATE PUBLICATION mneme_jobs FOR TABLE mneme.jobs WITH (publish = 'insert');
    END IF;
END
$$;

CREATE OR REPLACE FUNCTION mneme.unhandled_jobs(job_ids bigint[])
RETURNS SETOF bigint
LANGUAGE plpgsql STABLE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
SET jit = off
AS $$
BEGIN
    PERFORM mneme._enter(NULL);  -- the caller forwarded first (Citus: mneme._enter)
    RETURN QUERY
    SELECT j.id FROM mneme.jobs j
    WHERE j.id = ANY (unhandled_jobs.job_ids)
      AND (j.state = 'running' OR (j.state = 'pending' AND j.attempts = 0 AND j.run_at <= now()));
END
$$;
COMMENT ON FUNCTION mneme.unhandled_jobs(bigint[]) IS
    'Of the given jobs, those not handled yet: waiting to run for the first time, or running now. The '
    'replication transport confirms a position only once every job inserted before it is handled.';
GRANT EXECUTE ON FUNCTION mneme.unhandled_jobs(bigint[]) TO mneme_worker;
