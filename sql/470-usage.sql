-- =============================================================================
-- mneme LLM usage: the ledger of model calls (mneme.llm_calls, goose 00140),
-- written by the sidecar in the transaction that ends a job's attempt, and
-- read per tenant, job kind, model or day with an estimated cost (setting
-- llm_prices). The totals of erased conversations stay in
-- mneme.llm_usage_days (mneme.erase_conversation moves them there).
-- Idempotent: re-applied on every `mneme migrate`.
-- =============================================================================

-- Whether the session is an operator's: a member of mneme_admin whose login
-- is bound to no tenant and whose transaction chose none (mneme.set_tenant).
-- It reads every tenant's usage (the row policy of mneme.llm_calls and
-- mneme.llm_usage_days); an admin that set a tenant reads that tenant's, a
-- bound login, whatever its roles, its own.
CREATE OR REPLACE FUNCTION mneme._is_operator()
RETURNS boolean
LANGUAGE sql STABLE PARALLEL SAFE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
SELECT pg_catalog.pg_has_role(session_user, 'mneme_admin', 'MEMBER')
   AND coalesce(pg_catalog.current_setting('mneme.tenant', true), '') = ''
   AND NOT EXISTS (SELECT 1 FROM mneme.tenant_logins b WHERE b.login = session_user)
$$;
COMMENT ON FUNCTION mneme._is_operator() IS
    'Internal: whether the session is an admin login bound to no tenant that chose none in its transaction (it reads '
    'every tenant''s LLM usage).';

-- The sidecar's write: the calls of one attempt of a job, in the
-- transaction that completes or fails that attempt (so a rolled-back
-- attempt leaves no row, and a retried job counts each attempt once). The
-- tenant, conversation and kind are the job's. calls is a JSON array of
-- objects with the columns of mneme.llm_calls (call, purpose, model,
-- endpoint, prompt_tokens, completion_tokens, usage, latency_ms, outcome,
-- retries, at); the sidecar has checked and marked them (sidecar/usage).
CREATE OR REPLACE FUNCTION mneme.record_llm_calls(job_id bigint, attempt int, calls jsonb)
RETURNS int
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
SET jit = off
AS $$
DECLARE
    v__entered boolean := mneme._enter(NULL);  -- the caller forwarded first (Citus: mneme._enter)
    v_job mneme.jobs;
    v_n   int;
    c     record;
BEGIN
    IF record_llm_calls.job_id IS NULL OR record_llm_calls.attempt IS NULL OR record_llm_calls.calls IS NULL THEN
        RAISE EXCEPTION 'job_id, attempt and calls must not be NULL' USING ERRCODE = '22004';
    END IF;
    IF jsonb_typeof(record_llm_calls.calls) <> 'array' THEN
        RAISE EXCEPTION 'calls must be a JSON array, got %', jsonb_typeof(record_llm_calls.calls)
            USING ERRCODE = '22023', HINT = 'one object per model call, with the columns of mneme.llm_calls';
    END IF;
    IF record_llm_calls.attempt < 1 THEN
        RAISE EXCEPTION 'attempt must be at least 1, got %', record_llm_calls.attempt USING ERRCODE = '22023';
    END IF;
    SELECT * INTO v_job FROM mneme.jobs j WHERE j.id = record_llm_calls.job_id;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'job % does not exist', record_llm_calls.job_id USING ERRCODE = 'P0002',
            HINT = 'an erased conversation''s jobs are gone, and with them its usage';
    END IF;
    -- A row at a time: a job makes a few calls, and on Citus an INSERT ...
    -- SELECT into a distributed table under row security is refused
    -- (its COPY is not supported with row-level security).
    v_n := 0;
    FOR c IN SELECT * FROM jsonb_to_recordset(record_llm_calls.calls)
             AS x(call text, purpose text, model text, endpoint text, prompt_tokens bigint, completion_tokens bigint,
                  usage text, latency_ms float8, outcome text, retries int, at timestamptz) LOOP
        INSERT INTO mneme.llm_calls (tenant_id, conversation_id, job_id, job_kind, attempt, call, purpose, model, endpoint,
                                     prompt_tokens, completion_tokens, usage, latency_ms, outcome, retries, at)
        VALUES (v_job.tenant_id, v_job.conversation_id, v_job.id, v_job.kind, record_llm_calls.attempt, c.call, c.purpose,
                c.model, coalesce(c.endpoint, ''), c.prompt_tokens, c.completion_tokens, c.usage, c.latency_ms, c.outcome,
                coalesce(c.retries, 0), coalesce(c.at, now()));
        v_n := v_n + 1;
    END LOOP;
    RETURN v_n;
END
$$;
COMMENT ON FUNCTION mneme.record_llm_calls(bigint, int, jsonb) IS
    'Sidecar: writes the model calls of one attempt of a job into the LLM usage ledger (mneme.llm_calls), with the '
    'job''s tenant, conversation and kind, in the transaction that ends the attempt. Returns the rows written.';
GRANT EXECUTE ON FUNCTION mneme.record_llm_calls(bigint, int, jsonb) TO mneme_worker;

-- The estimated cost of tokens of a model: setting llm_prices, per 1,000
-- tokens in and out; a model without a price costs 0.
CREATE OR REPLACE FUNCTION mneme._llm_cost(prices jsonb, model text, prompt_tokens numeric, completion_tokens numeric)
RETURNS numeric
LANGUAGE sql IMMUTABLE PARALLEL SAFE
AS $$
SELECT coalesce((prices -> model ->> 'in')::numeric * prompt_tokens / 1000, 0)
     + coalesce((prices -> model ->> 'out')::numeric * completion_tokens / 1000, 0)
$$;
COMMENT ON FUNCTION mneme._llm_cost(jsonb, text, numeric, numeric) IS
    'Internal: the estimated cost of tokens of a model at the prices of setting llm_prices (per 1,000 tokens).';

-- LLM usage between two times, by tenant, job kind, model or day (UTC).
-- An operator (an admin bound to no tenant that set none) sees every
-- tenant; any other caller its own tenant (a bound login's, or the
-- transaction's). Erased
-- conversations count through their daily totals (mneme.llm_usage_days).
CREATE OR REPLACE FUNCTION mneme.llm_usage(since timestamptz, until timestamptz, group_by text DEFAULT 'day')
RETURNS TABLE (key text, calls bigint, failed_calls bigint, estimated_calls bigint, prompt_tokens bigint,
               completion_tokens bigint, avg_latency_ms float8, estimated_cost numeric)
LANGUAGE plpgsql STABLE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
SET jit = off
AS $$
#variable_conflict use_column
DECLARE
    v__entered boolean := mneme._enter(NULL);  -- the caller forwarded first (Citus: mneme._enter)
    v_prices jsonb := mneme.setting('llm_prices');
BEGIN
    IF llm_usage.since IS NULL OR llm_usage.until IS NULL OR llm_usage.group_by IS NULL THEN
        RAISE EXCEPTION 'since, until and group_by must not be NULL' USING ERRCODE = '22004',
            HINT = 'e.g. mneme.llm_usage(now() - interval ''30 days'', now(), ''tenant'')';
    END IF;
    IF NOT llm_usage.group_by = ANY (ARRAY['tenant', 'kind', 'model', 'day']) THEN
        RAISE EXCEPTION 'group_by must be tenant, kind, model or day, got %', left(llm_usage.group_by, 80)
            USING ERRCODE = '22023';
    END IF;
    IF NOT isfinite(llm_usage.since) OR NOT isfinite(llm_usage.until) OR llm_usage.until < llm_usage.since THEN
        RAISE EXCEPTION 'since (%) and until (%) must be finite times, since first', llm_usage.since, llm_usage.until
            USING ERRCODE = '22008';
    END IF;
    RETURN QUERY
    WITH rows AS (
        SELECT c.tenant_id, c.job_kind, c.model, (c.at AT TIME ZONE 'UTC')::date AS day,
               1::bigint AS calls, (c.outcome <> 'ok')::int::bigint AS failed, (c.usage <> 'reported')::int::bigint AS estimated,
               c.prompt_tokens, c.completion_tokens, c.latency_ms
        FROM mneme.llm_calls c
        WHERE c.at >= llm_usage.since AND c.at < llm_usage.until
        UNION ALL
        -- (a day's totals count when the day starts within the range)
        SELECT d.tenant_id, d.job_kind, d.model, d.day, d.calls, d.failed_calls, d.estimated_calls,
               d.prompt_tokens, d.completion_tokens, d.latency_ms
        FROM mneme.llm_usage_days d
        WHERE (d.day::timestamp AT TIME ZONE 'UTC') >= llm_usage.since AND (d.day::timestamp AT TIME ZONE 'UTC') < llm_usage.until
    )
    SELECT CASE llm_usage.group_by WHEN 'tenant' THEN r.tenant_id WHEN 'kind' THEN r.job_kind
                                   WHEN 'model' THEN r.model ELSE r.day::text END AS key,
           sum(r.calls)::bigint, sum(r.failed)::bigint, sum(r.estimated)::bigint,
           sum(r.prompt_tokens)::bigint, sum(r.completion_tokens)::bigint,
           sum(r.latency_ms) / nullif(sum(r.calls), 0),
           sum(mneme._llm_cost(v_prices, r.model, r.prompt_tokens, r.completion_tokens))
    FROM rows r
    GROUP BY 1
    ORDER BY 1;
END
$$;
COMMENT ON FUNCTION mneme.llm_usage(timestamptz, timestamptz, text) IS
    'LLM usage (calls, failures, calls with estimated tokens, prompt and completion tokens, mean latency, estimated cost '
    'at setting llm_prices) between since and until, grouped by tenant, kind (job kind), model or day (UTC). An admin '
    'bound to no tenant that set none (mneme.set_tenant) sees every tenant; any other caller its own tenant. The cost '
    'is an estimate.';
GRANT EXECUTE ON FUNCTION mneme.llm_usage(timestamptz, timestamptz, text) TO mneme_app, mneme_worker, mneme_admin;

-- One conversation's usage, for the UI's conversation page: one row.
CREATE OR REPLACE FUNCTION mneme.conversation_llm_usage(conversation_id uuid)
RETURNS TABLE (calls bigint, failed_calls bigint, prompt_tokens bigint, completion_tokens bigint, estimated_cost numeric)
LANGUAGE plpgsql STABLE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
SET jit = off
AS $$
DECLARE
    v__entered boolean := mneme._enter(conversation_llm_usage.conversation_id);  -- the caller forwarded first (Citus: mneme._enter)
    v_prices jsonb := mneme.setting('llm_prices');
BEGIN
    IF conversation_llm_usage.conversation_id IS NULL THEN
        RAISE EXCEPTION 'conversation_id must not be NULL' USING ERRCODE = '22004';
    END IF;
    RETURN QUERY
    SELECT count(*), count(*) FILTER (WHERE c.outcome <> 'ok'), coalesce(sum(c.prompt_tokens), 0)::bigint,
           coalesce(sum(c.completion_tokens), 0)::bigint,
           coalesce(sum(mneme._llm_cost(v_prices, c.model, c.prompt_tokens, c.completion_tokens)), 0)
    FROM mneme.llm_calls c
    WHERE c.conversation_id = conversation_llm_usage.conversation_id;
END
$$;
COMMENT ON FUNCTION mneme.conversation_llm_usage(uuid) IS
    'The LLM usage of one conversation of the caller''s tenant: calls, failed calls, prompt and completion tokens, '
    'estimated cost (setting llm_prices).';
GRANT EXECUTE ON FUNCTION mneme.conversation_llm_usage(uuid) TO mneme_app, mneme_worker, mneme_admin;

-- What erase_conversation keeps of a conversation's ledger rows: their
-- totals per tenant, day, job kind and model, without the conversation.
CREATE OR REPLACE FUNCTION mneme._fold_llm_calls(conversation_id uuid)
RETURNS void
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    t record;
BEGIN
    -- (a total at a time: on Citus the totals are a reference table and the
    -- rows distributed, and an INSERT ... SELECT between them under row
    -- security is refused)
    FOR t IN SELECT c.tenant_id, (c.at AT TIME ZONE 'UTC')::date AS day, c.job_kind, c.model, count(*) AS calls,
                    count(*) FILTER (WHERE c.outcome <> 'ok') AS failed, count(*) FILTER (WHERE c.usage <> 'reported') AS estimated,
                    sum(c.prompt_tokens) AS prompt, sum(c.completion_tokens) AS completion, sum(c.latency_ms) AS latency
             FROM mneme.llm_calls c
             WHERE c.conversation_id = _fold_llm_calls.conversation_id
             GROUP BY 1, 2, 3, 4 LOOP
        INSERT INTO mneme.llm_usage_days AS d (tenant_id, day, job_kind, model, calls, failed_calls, estimated_calls,
                                               prompt_tokens, completion_tokens, latency_ms)
        VALUES (t.tenant_id, t.day, t.job_kind, t.model, t.calls, t.failed, t.estimated, t.prompt, t.completion, t.latency)
        ON CONFLICT (tenant_id, day, job_kind, model) DO UPDATE
        SET calls = d.calls + EXCLUDED.calls, failed_calls = d.failed_calls + EXCLUDED.failed_calls,
            estimated_calls = d.estimated_calls + EXCLUDED.estimated_calls,
            prompt_tokens = d.prompt_tokens + EXCLUDED.prompt_tokens,
            completion_tokens = d.completion_tokens + EXCLUDED.completion_tokens,
            latency_ms = d.latency_ms + EXCLUDED.latency_ms;
    END LOOP;
    DELETE FROM mneme.llm_calls c WHERE c.conversation_id = _fold_llm_calls.conversation_id;
END
$$;
COMMENT ON FUNCTION mneme._fold_llm_calls(uuid) IS
    'Internal to erase_conversation: adds the conversation''s LLM usage ledger rows to the daily totals '
    '(mneme.llm_usage_days) and deletes them.';
