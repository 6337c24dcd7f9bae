-- =============================================================================
-- mneme core: settings access and the job outbox (messages and pending
-- reviews: 020-messages.sql).
-- Idempotent: re-applied on every `mneme migrate` (CREATE OR REPLACE only).
-- Every function is schema-qualified, sets its search_path, checks its
-- arguments and raises with an SQLSTATE and a HINT.
-- Placeholder @extschema@ is replaced by migrate with the schema that holds
-- the vector extension (or mneme when the array fallback is in use).
-- =============================================================================

-- -----------------------------------------------------------------------------
-- Citus (docs/scale.md): whether a table is distributed. On one server
-- (no citus extension, no pg_dist_partition) always false, and every table
-- keeps its single-server form; `mneme migrate --citus` distributes them,
-- and the files below then create the forms Citus runs on shards (row
-- triggers instead of statement triggers with transition tables).
-- -----------------------------------------------------------------------------
CREATE OR REPLACE FUNCTION mneme._distributed(rel regclass)
RETURNS boolean
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v boolean;
BEGIN
    IF to_regclass('pg_catalog.pg_dist_partition') IS NULL THEN
        RETURN false;
    END IF;
    EXECUTE 'SELECT EXISTS (SELECT 1 FROM pg_catalog.pg_dist_partition WHERE logicalrelid = $1)' INTO v USING rel;
    RETURN v;
END
$$;
COMMENT ON FUNCTION mneme._distributed(regclass) IS
    'Internal: true when rel is a Citus distributed or reference table (mneme migrate --citus).';

-- The table a row trigger writes for a row of the conversation: on one
-- server rel itself; on Citus the shard of rel that holds the conversation,
-- a plain local table on the worker the trigger runs on (colocated with
-- the shard of the trigger's row). Why the triggers of a distributed mneme
-- write shards by name: there a row trigger runs on the worker, and had it
-- written mneme's tables by their names, Citus would run those writes as
-- distributed statements of their own inside the coordinator's transaction,
-- which then fails to commit in two phases on the worker (measured: "could
-- not commit transaction for shard", then a crash in COMMIT PREPARED). So
-- a row trigger writes format('... %s ...', mneme._shard(rel, conversation))
-- with EXECUTE, and gives the columns Citus leaves without their defaults
-- on a shard (memory_events' id and caller).
CREATE OR REPLACE FUNCTION mneme._shard(rel regclass, conversation_id uuid)
RETURNS text
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF _shard.rel IS NULL OR _shard.conversation_id IS NULL THEN
        RAISE EXCEPTION 'mneme._shard: the table and the conversation must not be NULL' USING ERRCODE = '22004';
    END IF;
    IF NOT mneme._distributed(_shard.rel) THEN
        RETURN _shard.rel::text;  -- qualified: mneme is not on the search_path
    END IF;
    RETURN pg_catalog.shard_name(_shard.rel, pg_catalog.get_shard_id_for_distribution_column(_shard.rel, _shard.conversation_id));
END
$$;
COMMENT ON FUNCTION mneme._shard(regclass, uuid) IS
    'Internal: the qualified name of the table a row trigger writes for the conversation: rel on one server, '
    'on Citus the shard of rel that holds the conversation.';

-- A transaction-local mneme.* setting that the triggers read (the event's
-- actor, reason and time, erasing, the kind of a delete): set_config(...,
-- true) on one server. On Citus the triggers run on the workers, which see
-- a setting only when Citus forwards it: a SET LOCAL, with
-- citus.propagate_set_commands = local, reaches every worker the
-- transaction uses.
CREATE OR REPLACE FUNCTION mneme._set_local(name text, value text)
RETURNS void
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF _set_local.name !~ '^mneme\.[a-z_]+$' THEN
        RAISE EXCEPTION 'not a mneme setting: %', _set_local.name USING ERRCODE = '22023';
    END IF;
    IF mneme._distributed('mneme.memories') THEN
        SET LOCAL citus.propagate_set_commands = 'local';
        EXECUTE format('SET LOCAL %s = %L', _set_local.name, coalesce(_set_local.value, ''));
    ELSE
        PERFORM pg_catalog.set_config(_set_local.name, coalesce(_set_local.value, ''), true);
    END IF;
END
$$;
COMMENT ON FUNCTION mneme._set_local(text, text) IS
    'Internal: a transaction-local mneme.* setting the triggers read; on Citus forwarded to the workers (SET LOCAL).';

-- Earlier versions made per-shard copies of the row triggers' functions at
-- migrate time and called them through mneme._shard_local_trg; the
-- triggers' functions now write through mneme._shard (goose 00090 drops
-- the dispatcher where no trigger calls it; sql/citus/300-triggers.sql the
-- copies).

-- -----------------------------------------------------------------------------
-- Settings
-- -----------------------------------------------------------------------------
CREATE OR REPLACE FUNCTION mneme.setting(key text)
RETURNS jsonb
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
#variable_conflict use_column
DECLARE
    v jsonb;
BEGIN
    IF setting.key IS NULL THEN
        RAISE EXCEPTION 'key must not be NULL' USING ERRCODE = '22004', HINT = 'SELECT key FROM mneme.settings lists the settings';
    END IF;
    SELECT s.value INTO v FROM mneme.settings s WHERE s.key = setting.key;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'unknown mneme setting key %', mneme._quote_prefix(setting.key)
            USING ERRCODE = '22023', HINT = 'SELECT key FROM mneme.settings lists the settings';
    END IF;
    RETURN v;
END
$$;
COMMENT ON FUNCTION mneme.setting(text) IS
    'The value of one tunable from mneme.settings; raises 22023 for an unknown key.';

CREATE OR REPLACE FUNCTION mneme.set_setting(key text, value jsonb)
RETURNS void
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
#variable_conflict use_column
BEGIN
    -- Settings are global: one value for every tenant, so only a login
    -- that acts for every tenant (an unbound admin) changes them.
    PERFORM mneme._require_unbound('change settings (they apply to every tenant)');
    IF set_setting.key IN ('vector_variant', 'embedding_dim') THEN
        RAISE EXCEPTION 'setting "%" is fixed at migrate time', set_setting.key
            USING ERRCODE = '55000', HINT = 're-embedding into a new dimension is a command: mneme reembed';
    END IF;
    IF set_setting.key IS NULL OR set_setting.value IS NULL THEN
        RAISE EXCEPTION 'setting "%" needs a key and a value', coalesce(set_setting.key, 'NULL') USING ERRCODE = '22004';
    END IF;
    IF NOT EXISTS (SELECT 1 FROM mneme.settings s WHERE s.key = set_setting.key) THEN
        RAISE EXCEPTION 'unknown mneme setting key %', mneme._quote_prefix(set_setting.key)
            USING ERRCODE = '22023', HINT = 'SELECT key FROM mneme.settings lists the settings';
    END IF;
    PERFORM mneme._check_setting(set_setting.key, set_setting.value);  -- sql/010-setting-rules.sql
    -- The key and its pair (min and max of one quantity) locked in key
    -- order, so two concurrent changes of the two sides neither cross each
    -- other nor deadlock.
    PERFORM 1 FROM mneme.settings s
     WHERE s.key = set_setting.key
        OR s.key IN (SELECT p.lower_key FROM mneme._setting_pairs() p WHERE p.upper_key = set_setting.key
                     UNION ALL SELECT p.upper_key FROM mneme._setting_pairs() p WHERE p.lower_key = set_setting.key)
     ORDER BY s.key
       FOR UPDATE;
    PERFORM mneme._check_setting_pair(set_setting.key, set_setting.value);
    UPDATE mneme.settings SET value = set_setting.value, updated_at = now() WHERE key = set_setting.key;
END
$$;
COMMENT ON FUNCTION mneme.set_setting(text, jsonb) IS
    'Changes one tunable, for every tenant (an unbound admin: a login bound to a tenant gets 42501); unknown keys, the migrate-time keys and values outside the key''s rule '
    '(sql/010-setting-rules.sql: type and range, 22023 naming the key) are errors, and so is a minimum above its '
    'maximum (segment_min_messages and segment_max_messages, segment_episode_min and segment_episode_max: 22023 naming both).';

-- -----------------------------------------------------------------------------
-- Times
-- -----------------------------------------------------------------------------
-- The one rule for a time an argument gives mneme (a message's or a fact's
-- time, the time of a search, a belief's as_of, a job's run_at): years 1 to
-- 9999 in UTC. PostgreSQL carries more (4713 BC to 294276 AD, and
-- infinity), but the sidecar's Go times do not survive JSON outside years 0
-- to 9999 (a segment job of a message in 100 BC failed for good), and an
-- infinite time breaks the forgetting curve's arithmetic. NULL passes: the
-- caller decides what a missing time means.
CREATE OR REPLACE FUNCTION mneme._check_time(name text, value timestamptz)
RETURNS void
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF _check_time.value < '0001-01-01 00:00:00+00'::timestamptz OR _check_time.value >= '10000-01-01 00:00:00+00'::timestamptz THEN
        RAISE EXCEPTION '% must be a finite time from year 1 to 9999, got %', _check_time.name, _check_time.value
            USING ERRCODE = '22008', HINT = format('leave %s out for the default', _check_time.name);
    END IF;
END
$$;
COMMENT ON FUNCTION mneme._check_time(text, timestamptz) IS
    'Internal: raises 22008 naming the argument when a time is outside years 1 to 9999 (UTC) or infinite; '
    'the one rule for every time argument of the API.';

-- -----------------------------------------------------------------------------
-- Jobs: the transactional outbox
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
SET search_path = pg_catalog, pg_temp
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

-- (mneme._functions_reaching served the migrate-time rewriting of
-- functions on Citus, which is gone: the Citus forms are written in sql/
-- and sql/citus/; goose 00090 drops it.)

-- -----------------------------------------------------------------------------
-- The SQL API's version (semantic: a major change breaks callers, a minor
-- one adds functions or arguments). Clients and the sidecar read it at
-- connect time and refuse a major they do not speak (docs/migrations.md).
-- Bumped by hand with any change of the API's signatures or meaning.
-- -----------------------------------------------------------------------------
CREATE OR REPLACE FUNCTION mneme.version()
RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$ SELECT '1.0.0'::text $$;

COMMENT ON FUNCTION mneme.version() IS
    'The semantic version of mneme''s SQL API in this database (major.minor.patch): clients check its major at connect time.';
