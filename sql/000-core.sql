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
-- migrate time and called them through mneme._shard_local_trg; on Citus the
-- triggers' functions are now written whole in sql/citus/300-triggers.sql
-- (goose 00090 drops the dispatcher where no trigger calls it).

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
-- The kinds the sidecar handles and the payload each handler reads (the
-- table is goose 00056's; its rows are written here, so a release that adds
-- a kind or changes a rule changes them on migrate).
-- Each rule is built from the fields its handler reads, each with its type
-- and range: an id is a whole JSON number from 1 to 2^63-1 (bigint), a
-- uuid a uuid string, a time an RFC 3339 string, a flag a boolean. A
-- payload a rule lets through never fails its handler's decoding, nor a
-- cast in SQL that reads it. The jsonpath is lax: .type() does not unwrap arrays
-- (so [5] is no id), a filter does (so the ranges are checked apart from
-- the types), and a missing optional field matches nothing.
WITH fields (kind, path, type, required) AS (VALUES
    ('segment', '$.check', 'boolean', true),
    ('segment', '$.reason', 'string', false),
    ('segment', '$.through_message_id', 'id', false),
    ('segment', '$.trigger_message_id', 'id', false),
    ('segment', '$.next_through_message_id', 'id', false),
    ('review', '$.reviews', 'array', true),
    ('review', '$.reviews[*]', 'object', false),
    ('review', '$.reviews[*].query', 'string', false),
    ('review', '$.reviews[*].memory_ids', 'array', false),
    ('review', '$.reviews[*].memory_ids[*]', 'string', false),
    ('review', '$.reviewed_at', 'time', true),
    ('review', '$.context_message_ids', 'array', false),
    ('review', '$.context_message_ids[*]', 'id', false),
    ('review', '$.context', 'array', false),
    ('review', '$.context[*]', 'object', false),
    ('review', '$.context[*].id', 'id', false),
    ('review', '$.context[*].role', 'string', false),
    ('review', '$.context[*].content', 'string', false),
    ('review', '$.context[*].at', 'time', false),
    ('revise', '$.memory_id', 'uuid', true),
    ('consolidate', '$.reason', 'string', false)
), checks AS (
    SELECT f.kind,
           string_agg(concat_ws(' && ',
               CASE WHEN f.required THEN format('exists(%s)', f.path) END,
               format('!exists(%s.type() ? (@ != "%s"))', f.path,
                      CASE f.type WHEN 'id' THEN 'number' WHEN 'time' THEN 'string' WHEN 'uuid' THEN 'string' ELSE f.type END),
               CASE f.type
                   WHEN 'id' THEN format('!exists(%s ? (@ < 1 || @ > 9223372036854775807 || @ != @.floor()))', f.path)
                   WHEN 'time' THEN format('!exists(%s ? (!(@ like_regex "%s")))', f.path,
                       '^[0-9]{4}-(0[1-9]|1[0-2])-(0[1-9]|[12][0-9]|3[01])T([01][0-9]|2[0-3]):[0-5][0-9]:[0-5][0-9]'
                       '(\\.[0-9]{1,9})?(Z|[+-]([01][0-9]|2[0-3]):[0-5][0-9])$')
                   WHEN 'uuid' THEN format('!exists(%s ? (!(@ like_regex "%s" flag "i") || @ == "00000000-0000-0000-0000-000000000000"))',
                       f.path, '^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$')
               END), ' && ') AS rule,
           string_agg(format('%s: %s%s', f.path, CASE f.type WHEN 'id' THEN 'integer id (1 to 9223372036854775807)'
                                                              WHEN 'time' THEN 'RFC 3339 time' ELSE f.type END,
                             CASE WHEN f.required THEN '' ELSE ' (optional)' END), '; ') AS hint
      FROM fields f GROUP BY f.kind
), kinds (kind, needs_conversation, payload_rule, payload_hint, description) AS (
    SELECT k.kind, k.needs_conversation,
           concat_ws(' && ', '$.type() == "object"', c.rule, k.extra),
           concat_ws('; ', c.hint, k.extra_hint), k.description
      FROM (VALUES
        ('segment', true, '($.check == true || exists($.through_message_id))', 'through_message_id is required when check is false',
         'cut the conversation''s queued messages into episodes and store them as memories'),
        ('review', true, NULL, NULL,
         'rate the memories a retrieval returned by their use in the conversation since, and move their FSRS state'),
        ('revise', true, NULL, 'not the nil uuid',
         'compare a new fact with what the conversation believes: add, merge, supersede or invalidate'),
        ('consolidate', true, NULL, NULL,
         'look again at the active facts of the conversation''s scope across episodes and time: supersede what a later statement replaced, merge duplicates'),
        ('cleanup', false, NULL, 'any object (the handler reads no field)',
         'the lifecycle policy (mneme.cleanup): inactivate faded memories, record expired ones, purge long-inactive ones and prune done jobs, as the settings say'),
        ('noop', false, NULL, 'any object', 'nothing: benchmarks and smoke tests')
      ) AS k (kind, needs_conversation, extra, extra_hint, description)
      LEFT JOIN checks c ON c.kind = k.kind
), gone AS (  -- a kind no longer handled
    DELETE FROM mneme.job_kinds j WHERE j.kind NOT IN (SELECT kinds.kind FROM kinds)
)
INSERT INTO mneme.job_kinds AS k (kind, needs_conversation, payload_rule, payload_hint, description)
SELECT kinds.kind, kinds.needs_conversation, kinds.payload_rule::jsonpath, kinds.payload_hint, kinds.description FROM kinds
ON CONFLICT (kind) DO UPDATE SET needs_conversation = EXCLUDED.needs_conversation, payload_rule = EXCLUDED.payload_rule,
    payload_hint = EXCLUDED.payload_hint, description = EXCLUDED.description
WHERE (k.needs_conversation, k.payload_rule::text, k.payload_hint, k.description)
      IS DISTINCT FROM (EXCLUDED.needs_conversation, EXCLUDED.payload_rule::text, EXCLUDED.payload_hint, EXCLUDED.description);

-- One payload builder per kind: every SQL site that enqueues a kind builds
-- its payload here, with the fields and JSON names of the kind's Go type
-- (sidecar/jobs/kinds.go) and of its rule above; an optional field given
-- NULL is left out. tests/job_contract_test.go decodes each builder's
-- output strictly into the Go type. A new kind gets a row above, a builder
-- here (mneme._<kind>_payload) and a Go type.
CREATE OR REPLACE FUNCTION mneme._segment_payload(
    reason text, "check" boolean, through_message_id bigint, trigger_message_id bigint)
RETURNS jsonb
LANGUAGE plpgsql IMMUTABLE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF _segment_payload."check" IS NULL THEN
        RAISE EXCEPTION 'segment payload: check must not be NULL' USING ERRCODE = '22004';
    END IF;
    IF NOT _segment_payload."check" AND _segment_payload.through_message_id IS NULL THEN
        RAISE EXCEPTION 'segment payload: through_message_id is required when check is false' USING ERRCODE = '22004';
    END IF;
    IF _segment_payload.through_message_id < 1 OR _segment_payload.trigger_message_id < 1 THEN
        RAISE EXCEPTION 'segment payload: message ids must be at least 1, got % and %',
            _segment_payload.through_message_id, _segment_payload.trigger_message_id USING ERRCODE = '22023';
    END IF;
    RETURN jsonb_strip_nulls(jsonb_build_object(
        'reason', _segment_payload.reason, 'check', _segment_payload."check",
        'through_message_id', _segment_payload.through_message_id,
        'trigger_message_id', _segment_payload.trigger_message_id));
END
$$;
COMMENT ON FUNCTION mneme._segment_payload(text, boolean, bigint, bigint) IS
    'Internal: a segment job''s payload {reason, check, through_message_id, trigger_message_id} (Go: jobs.SegmentArgs); '
    'NULL reason or ids are left out; through_message_id is required when check is false.';

-- STABLE: reviewed_at is written in the session's time zone, as to_jsonb
-- writes a timestamptz.
CREATE OR REPLACE FUNCTION mneme._review_payload(reviews jsonb, reviewed_at timestamptz, context_message_ids bigint[])
RETURNS jsonb
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF _review_payload.reviews IS NULL OR _review_payload.reviewed_at IS NULL THEN
        RAISE EXCEPTION 'review payload: reviews and reviewed_at must not be NULL' USING ERRCODE = '22004';
    END IF;
    IF jsonb_typeof(_review_payload.reviews) <> 'array' THEN
        RAISE EXCEPTION 'review payload: reviews must be a JSON array, got %', left(_review_payload.reviews::text, 80)
            USING ERRCODE = '22023';
    END IF;
    IF array_position(_review_payload.context_message_ids, NULL) IS NOT NULL THEN
        RAISE EXCEPTION 'review payload: context_message_ids must not hold NULL' USING ERRCODE = '22004';
    END IF;
    RETURN jsonb_build_object('reviews', _review_payload.reviews, 'reviewed_at', _review_payload.reviewed_at)
        || CASE WHEN _review_payload.context_message_ids IS NULL THEN '{}'::jsonb
                ELSE jsonb_build_object('context_message_ids', to_jsonb(_review_payload.context_message_ids)) END;
END
$$;
COMMENT ON FUNCTION mneme._review_payload(jsonb, timestamptz, bigint[]) IS
    'Internal: a review job''s payload {reviews, reviewed_at, context_message_ids} (Go: jobs.ReviewArgs); '
    'reviews is the array of pending reviews as taken; NULL context_message_ids is left out.';

CREATE OR REPLACE FUNCTION mneme._revise_payload(memory_id uuid)
RETURNS jsonb
LANGUAGE plpgsql IMMUTABLE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF _revise_payload.memory_id IS NULL THEN
        RAISE EXCEPTION 'revise payload: memory_id must not be NULL' USING ERRCODE = '22004';
    END IF;
    IF _revise_payload.memory_id = '00000000-0000-0000-0000-000000000000' THEN
        RAISE EXCEPTION 'revise payload: memory_id must not be the nil uuid' USING ERRCODE = '22023';
    END IF;
    RETURN jsonb_build_object('memory_id', _revise_payload.memory_id);
END
$$;
COMMENT ON FUNCTION mneme._revise_payload(uuid) IS
    'Internal: a revise job''s payload {memory_id} (Go: jobs.ReviseArgs).';

CREATE OR REPLACE FUNCTION mneme._consolidate_payload(reason text)
RETURNS jsonb
LANGUAGE plpgsql IMMUTABLE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    RETURN jsonb_strip_nulls(jsonb_build_object('reason', _consolidate_payload.reason));
END
$$;
COMMENT ON FUNCTION mneme._consolidate_payload(text) IS
    'Internal: a consolidate job''s payload {reason} (Go: jobs.ConsolidateArgs): why it was enqueued '
    '(quiet, on_demand); a NULL reason is left out.';

CREATE OR REPLACE FUNCTION mneme._cleanup_payload()
RETURNS jsonb
LANGUAGE sql IMMUTABLE
SET search_path = pg_catalog, pg_temp
AS $$ SELECT '{}'::jsonb $$;
COMMENT ON FUNCTION mneme._cleanup_payload() IS
    'Internal: a cleanup job''s payload, {} (Go: jobs.CleanupArgs; the handler reads no field).';

CREATE OR REPLACE FUNCTION mneme._noop_payload()
RETURNS jsonb
LANGUAGE sql IMMUTABLE
SET search_path = pg_catalog, pg_temp
AS $$ SELECT '{}'::jsonb $$;
COMMENT ON FUNCTION mneme._noop_payload() IS
    'Internal: a noop job''s payload, {} (Go: jobs.NoopArgs).';

-- A pending job that does the same work as a job of this kind,
-- conversation and dedupe key: the same dedupe key, or a segment job of the
-- same conversation (the two unique indexes on pending jobs,
-- jobs_pending_dedupe and jobs_one_pending_segment). enqueue_job reports
-- it instead of a second job; a requeued job gives way to it.
CREATE OR REPLACE FUNCTION mneme._equivalent_pending_job(kind text, conversation_id uuid, dedupe_key text, except_id bigint)
RETURNS bigint
LANGUAGE sql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
SELECT j.id FROM mneme.jobs j
WHERE j.state = 'pending' AND j.id IS DISTINCT FROM _equivalent_pending_job.except_id
  AND ((_equivalent_pending_job.dedupe_key IS NOT NULL AND j.dedupe_key = _equivalent_pending_job.dedupe_key)
       OR (_equivalent_pending_job.kind = 'segment' AND j.kind = 'segment'
           AND j.conversation_id = _equivalent_pending_job.conversation_id))
LIMIT 1
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
    -- Distributed by conversation (Citus), a job needs one: a job of no
    -- conversation (cleanup) goes to the nil conversation's shard.
    IF enqueue_job.conversation_id IS NULL AND mneme._distributed('mneme.jobs') THEN
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
-- functions on Citus, which is gone: sql/citus/100-generated.sql is made
-- ahead of time; goose 00090 drops it.)

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
