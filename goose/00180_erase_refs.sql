-- What an erase looks up, keyed by equality (issue 47: erase p50 1.4 s at
-- 100,000 memories, 200,000 review rows, 100,000 jobs). Under row security
-- PostgreSQL uses an index only for an operator that is LEAKPROOF (the
-- policy's qual must run first otherwise): `=` on text, uuid and bigint
-- is, jsonb `@>` and array `&&` are not, so the GIN indexes of goose 00100
-- served only sessions without row security, and an erase through the API
-- read every review job and review row of the tenant once per probe.
--   mneme.job_refs: one row per memory, message or query a job's payload
--   names (ref 'm:<uuid>', 'g:<message id>', 'q:<md5 of the query>');
--   mneme.review_queries: one row per query a review row quotes
--   (matched_queries), by the query's md5.
-- Both are kept by row triggers on mneme.jobs and mneme.review_log
-- (sql/430-cleanup.sql), carry the row's conversation (Citus colocates
-- them with it) and tenant (the same row policy), and hold no text: a
-- query is there as its md5 only.
-- Numbered goose migration: applied once, never edited after release.

-- +goose Up
CREATE TABLE mneme.job_refs (
    conversation_id uuid NOT NULL,
    job_id          bigint NOT NULL,
    tenant_id       text NOT NULL,
    ref             text NOT NULL,
    PRIMARY KEY (conversation_id, job_id, ref)
);
CREATE INDEX job_refs_ref_idx ON mneme.job_refs (ref);
CREATE TABLE mneme.review_queries (
    conversation_id uuid NOT NULL,
    review_log_id   bigint NOT NULL,
    tenant_id       text NOT NULL,
    query_key       uuid NOT NULL,
    PRIMARY KEY (conversation_id, review_log_id, query_key)
);
CREATE INDEX review_queries_key_idx ON mneme.review_queries (query_key);
-- The GIN indexes these replace: under row security no erase could use them.
DROP INDEX mneme.jobs_review_payload_idx;
DROP INDEX mneme.review_log_queries_idx;
-- +goose StatementBegin
DO $$
DECLARE
    t text;
BEGIN
    FOREACH t IN ARRAY ARRAY['job_refs', 'review_queries'] LOOP
        EXECUTE format('ALTER TABLE mneme.%I ENABLE ROW LEVEL SECURITY', t);
        EXECUTE format('ALTER TABLE mneme.%I FORCE ROW LEVEL SECURITY', t);
        EXECUTE format('CREATE POLICY tenant_rows ON mneme.%I '
                       'USING ((SELECT mneme._is_worker()) OR tenant_id = (SELECT mneme._tenant())) '
                       'WITH CHECK ((SELECT mneme._is_worker()) OR tenant_id = (SELECT mneme._tenant()))', t);
    END LOOP;
END
$$;
-- +goose StatementEnd
-- The rows written before: the same keys the triggers compute
-- (mneme._payload_refs, sql/430-cleanup.sql).
-- (one statement per kind of key, without a lateral UNION: on a
-- distributed mneme Citus cannot push that down to the shards, 0A000)
INSERT INTO mneme.job_refs (conversation_id, job_id, tenant_id, ref)
SELECT DISTINCT coalesce(j.conversation_id, '00000000-0000-0000-0000-000000000000'), j.id, j.tenant_id, 'm:' || (i #>> '{}')
FROM mneme.jobs j, jsonb_array_elements(CASE WHEN jsonb_typeof(j.payload -> 'reviews') = 'array' THEN j.payload -> 'reviews' ELSE '[]' END) e,
     jsonb_array_elements(CASE WHEN jsonb_typeof(e -> 'memory_ids') = 'array' THEN e -> 'memory_ids' ELSE '[]' END) i
WHERE jsonb_typeof(j.payload) = 'object' AND jsonb_typeof(i) = 'string'
ON CONFLICT DO NOTHING;
INSERT INTO mneme.job_refs (conversation_id, job_id, tenant_id, ref)
SELECT DISTINCT coalesce(j.conversation_id, '00000000-0000-0000-0000-000000000000'), j.id, j.tenant_id, 'q:' || md5(e ->> 'query')
FROM mneme.jobs j, jsonb_array_elements(CASE WHEN jsonb_typeof(j.payload -> 'reviews') = 'array' THEN j.payload -> 'reviews' ELSE '[]' END) e
WHERE jsonb_typeof(j.payload) = 'object' AND jsonb_typeof(e -> 'query') = 'string'
ON CONFLICT DO NOTHING;
INSERT INTO mneme.job_refs (conversation_id, job_id, tenant_id, ref)
SELECT DISTINCT coalesce(j.conversation_id, '00000000-0000-0000-0000-000000000000'), j.id, j.tenant_id, 'm:' || (i #>> '{}')
FROM mneme.jobs j, jsonb_array_elements(CASE WHEN jsonb_typeof(j.payload -> 'memory_ids') = 'array' THEN j.payload -> 'memory_ids' ELSE '[]' END) i
WHERE jsonb_typeof(j.payload) = 'object' AND jsonb_typeof(i) = 'string'
ON CONFLICT DO NOTHING;
INSERT INTO mneme.job_refs (conversation_id, job_id, tenant_id, ref)
SELECT DISTINCT coalesce(j.conversation_id, '00000000-0000-0000-0000-000000000000'), j.id, j.tenant_id, 'g:' || trim_scale((e ->> 'id')::numeric)::text
FROM mneme.jobs j, jsonb_array_elements(CASE WHEN jsonb_typeof(j.payload -> 'context') = 'array' THEN j.payload -> 'context' ELSE '[]' END) e
WHERE jsonb_typeof(j.payload) = 'object' AND jsonb_typeof(e -> 'id') = 'number'
ON CONFLICT DO NOTHING;
INSERT INTO mneme.job_refs (conversation_id, job_id, tenant_id, ref)
SELECT DISTINCT coalesce(j.conversation_id, '00000000-0000-0000-0000-000000000000'), j.id, j.tenant_id, 'g:' || trim_scale((i #>> '{}')::numeric)::text
FROM mneme.jobs j, jsonb_array_elements(CASE WHEN jsonb_typeof(j.payload -> 'message_ids') = 'array' THEN j.payload -> 'message_ids' ELSE '[]' END) i
WHERE jsonb_typeof(j.payload) = 'object' AND jsonb_typeof(i) = 'number'
ON CONFLICT DO NOTHING;
INSERT INTO mneme.job_refs (conversation_id, job_id, tenant_id, ref)
SELECT DISTINCT coalesce(j.conversation_id, '00000000-0000-0000-0000-000000000000'), j.id, j.tenant_id, 'g:' || trim_scale((i #>> '{}')::numeric)::text
FROM mneme.jobs j, jsonb_array_elements(CASE WHEN jsonb_typeof(j.payload -> 'context_message_ids') = 'array' THEN j.payload -> 'context_message_ids' ELSE '[]' END) i
WHERE jsonb_typeof(j.payload) = 'object' AND jsonb_typeof(i) = 'number'
ON CONFLICT DO NOTHING;
INSERT INTO mneme.review_queries (conversation_id, review_log_id, tenant_id, query_key)
SELECT DISTINCT l.conversation_id, l.id, l.tenant_id, md5(q)::uuid
FROM mneme.review_log l, unnest(l.matched_queries) q
WHERE q IS NOT NULL;

-- +goose Down
DROP TRIGGER IF EXISTS jobs_refs ON mneme.jobs;
DROP TRIGGER IF EXISTS review_log_queries ON mneme.review_log;
DROP FUNCTION IF EXISTS mneme.jobs_refs_trg();
DROP FUNCTION IF EXISTS mneme.review_log_queries_trg();
DROP TRIGGER IF EXISTS jobs_refs_update ON mneme.jobs;
DROP TRIGGER IF EXISTS review_log_queries_update ON mneme.review_log;
CREATE INDEX jobs_review_payload_idx ON mneme.jobs USING gin (payload jsonb_path_ops) WHERE kind = 'review';
CREATE INDEX review_log_queries_idx ON mneme.review_log USING gin (matched_queries);
DROP TABLE mneme.review_queries;
DROP TABLE mneme.job_refs;
