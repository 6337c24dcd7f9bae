-- The LLM usage ledger: one row per model call (chat or embedding) a job
-- made, written by the sidecar in the transaction that completes or fails
-- the job's attempt (mneme.record_llm_calls), so a retried attempt is
-- counted once, with its own attempt number. No text: the model, the
-- endpoint's name (a host, never a key), tokens as reported or estimated,
-- latency, outcome, retries. mneme.llm_usage_days holds the totals of the
-- rows of erased conversations (mneme.erase_conversation moves them there
-- before deleting the rows), without any conversation.
-- Numbered goose migration: applied once, never edited after release.

-- +goose Up
CREATE TABLE mneme.llm_calls (
    id                bigserial PRIMARY KEY,
    tenant_id         text NOT NULL,
    conversation_id   uuid,
    job_id            bigint,
    job_kind          text NOT NULL CHECK (job_kind ~ '^[a-z][a-z0-9_]*$'),
    attempt           int NOT NULL CHECK (attempt > 0),
    call              text NOT NULL CHECK (call IN ('chat', 'embedding')),
    purpose           text NOT NULL CHECK (purpose ~ '^[a-z][a-z0-9_]{0,62}$'),
    model             text NOT NULL CHECK (length(model) BETWEEN 1 AND 200),
    endpoint          text NOT NULL CHECK (length(endpoint) <= 200),
    prompt_tokens     bigint NOT NULL CHECK (prompt_tokens >= 0),
    completion_tokens bigint NOT NULL CHECK (completion_tokens >= 0),
    usage             text NOT NULL CHECK (usage IN ('reported', 'missing', 'invalid')),
    latency_ms        double precision NOT NULL CHECK (latency_ms >= 0),
    outcome           text NOT NULL CHECK (outcome IN ('ok', 'error', 'timeout', 'invalid_output', 'canceled')),
    retries           int NOT NULL CHECK (retries >= 0),
    at                timestamptz NOT NULL DEFAULT now()
);
COMMENT ON TABLE mneme.llm_calls IS
    'The LLM usage ledger: one row per model call a job made (mneme.record_llm_calls); usage says whether the tokens '
    'are as the endpoint reported them or estimated (missing, invalid). No text.';
-- (by tenant and time: a tenant's usage; by time: an operator's, every
-- tenant's; by conversation: the erase and the conversation's usage)
CREATE INDEX llm_calls_tenant_at_idx ON mneme.llm_calls (tenant_id, at);
CREATE INDEX llm_calls_at_idx ON mneme.llm_calls (at);
CREATE INDEX llm_calls_conversation_idx ON mneme.llm_calls (conversation_id);

CREATE TABLE mneme.llm_usage_days (
    tenant_id         text NOT NULL,
    day               date NOT NULL,
    job_kind          text NOT NULL,
    model             text NOT NULL,
    calls             bigint NOT NULL CHECK (calls >= 0),
    failed_calls      bigint NOT NULL CHECK (failed_calls >= 0),
    estimated_calls   bigint NOT NULL CHECK (estimated_calls >= 0),
    prompt_tokens     bigint NOT NULL CHECK (prompt_tokens >= 0),
    completion_tokens bigint NOT NULL CHECK (completion_tokens >= 0),
    latency_ms        double precision NOT NULL CHECK (latency_ms >= 0),
    PRIMARY KEY (tenant_id, day, job_kind, model)
);
COMMENT ON TABLE mneme.llm_usage_days IS
    'Totals of the LLM usage ledger rows of erased conversations, per tenant, day (UTC), job kind and model: what '
    'mneme.erase_conversation keeps of mneme.llm_calls so that mneme.llm_usage still counts them. No conversation.';

-- Row security as on the other tables (goose 00045, 00060), and one more
-- reader: an admin login bound to no tenant (an operator) sees every
-- tenant's usage (mneme._is_operator, sql/005-tenants.sql).
-- +goose StatementBegin
CREATE FUNCTION mneme._is_operator()
RETURNS boolean
LANGUAGE sql STABLE PARALLEL SAFE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$ SELECT false $$;
-- +goose StatementEnd
-- +goose StatementBegin
DO $$
DECLARE
    t text;
BEGIN
    FOREACH t IN ARRAY ARRAY['llm_calls', 'llm_usage_days'] LOOP
        EXECUTE format('ALTER TABLE mneme.%I ENABLE ROW LEVEL SECURITY', t);
        EXECUTE format('ALTER TABLE mneme.%I FORCE ROW LEVEL SECURITY', t);
        EXECUTE format('CREATE POLICY tenant_rows ON mneme.%I '
                       'USING ((SELECT mneme._is_worker()) OR tenant_id = (SELECT mneme._tenant()) OR (SELECT mneme._is_operator())) '
                       'WITH CHECK ((SELECT mneme._is_worker()) OR tenant_id = (SELECT mneme._tenant()))', t);
    END LOOP;
END
$$;
-- +goose StatementEnd

-- +goose Down
DROP TABLE mneme.llm_usage_days;
DROP TABLE mneme.llm_calls;
DROP FUNCTION mneme._is_operator();
