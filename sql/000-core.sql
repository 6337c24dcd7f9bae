-- =============================================================================
-- mneme core: the Citus helpers, settings, times and the API's version
-- (jobs: 200-jobs.sql; messages and pending reviews: 020-messages.sql).
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
SECURITY DEFINER
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
SECURITY DEFINER
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
SECURITY DEFINER
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
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
SET jit = off
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
GRANT EXECUTE ON FUNCTION mneme.setting(text) TO mneme_app, mneme_worker, mneme_admin;

CREATE OR REPLACE FUNCTION mneme.set_setting(key text, value jsonb)
RETURNS void
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
SET jit = off
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
GRANT EXECUTE ON FUNCTION mneme.set_setting(text, jsonb) TO mneme_admin;

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
SECURITY DEFINER
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
-- The SQL API's version (semantic: a major change breaks callers, a minor
-- one adds functions or arguments). Clients and the sidecar read it at
-- connect time and refuse a major they do not speak (docs/migrations.md).
-- Bumped by hand with any change of the API's signatures or meaning.
-- -----------------------------------------------------------------------------
CREATE OR REPLACE FUNCTION mneme.version()
RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
SET jit = off
AS $$ SELECT '1.0.0'::text $$;

COMMENT ON FUNCTION mneme.version() IS
    'The semantic version of mneme''s SQL API in this database (major.minor.patch): clients check its major at connect time.';
GRANT EXECUTE ON FUNCTION mneme.version() TO mneme_app, mneme_worker, mneme_admin;
