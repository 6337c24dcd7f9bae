-- =============================================================================
-- mneme on Citus: distribute every table (`mneme migrate --citus`, once, in
-- one transaction, after the goose migrations and before the SQL layer is
-- re-applied; docs/scale.md says why each choice).
--
-- Distribution column: the conversation. Every call that must be fast names
-- one, so its statements go to the one worker that holds it. Reference
-- tables (a copy on every node): settings, tenants, tenant_logins,
-- job_kinds, job_turns, erasures, instance_key, llm_usage_days
-- (mneme.call_marks stays local: on Citus marks are settings). Everything
-- else is distributed by
-- conversation and colocated with mneme.message_queue (whose id is the
-- conversation).
--
-- What Citus needs that one server does not:
--   * row policies without subqueries ("Subqueries are not supported in
--     policies on distributed tables");
--   * primary and unique keys that include the conversation;
--   * foreign keys between distributed tables only within a conversation:
--     messages -> message_queue and review_log -> memories are kept (with the
--     conversation in them); the lineage keys of memories (supersedes_id,
--     confirms_id, invalidates_id) are dropped: a revision with tenant scope
--     may link memories of two conversations on two workers;
--   * no foreign key from a distributed table to a reference table
--     (message_queue -> tenants is dropped: add_message checks the tenant);
--   * the caller's tenant forwarded to the workers by every API call
--     (mneme._enter, sql/005-tenants.sql);
--   * mneme_owner, which owns the SECURITY DEFINER functions, may log in:
--     Citus opens its connections to the workers as the current role (set
--     up authentication between the nodes for it, as for any Citus role).
-- The SQL layer then creates row triggers where one server has statement
-- triggers with transition tables (mneme._distributed, sql/110, sql/420).
-- =============================================================================
DO $citus$
DECLARE
    t text;
BEGIN
    FOREACH t IN ARRAY ARRAY['message_queue', 'messages', 'memories', 'jobs', 'review_log', 'memory_events',
                             'job_refs', 'review_queries'] LOOP
        EXECUTE format('DROP POLICY IF EXISTS tenant_rows ON mneme.%I', t);
        EXECUTE format('CREATE POLICY tenant_rows ON mneme.%I '
                       'USING (mneme._is_worker() OR tenant_id = mneme._tenant()) '
                       'WITH CHECK (mneme._is_worker() OR tenant_id = mneme._tenant())', t);
    END LOOP;
    -- The LLM usage ledger (goose 00140): an operator reads every tenant.
    FOREACH t IN ARRAY ARRAY['llm_calls', 'llm_usage_days'] LOOP
        EXECUTE format('DROP POLICY IF EXISTS tenant_rows ON mneme.%I', t);
        EXECUTE format('CREATE POLICY tenant_rows ON mneme.%I '
                       'USING (mneme._is_worker() OR tenant_id = mneme._tenant() OR mneme._is_operator()) '
                       'WITH CHECK (mneme._is_worker() OR tenant_id = mneme._tenant())', t);
    END LOOP;
END
$citus$;

ALTER TABLE mneme.messages DROP CONSTRAINT messages_conversation_id_fkey;
ALTER TABLE mneme.messages DROP CONSTRAINT messages_pkey;
ALTER TABLE mneme.messages ADD PRIMARY KEY (conversation_id, id);

ALTER TABLE mneme.review_log DROP CONSTRAINT review_log_memory_id_fkey;
ALTER TABLE mneme.memories DROP CONSTRAINT memories_supersedes_id_fkey,
                           DROP CONSTRAINT memories_confirms_id_fkey,
                           DROP CONSTRAINT memories_invalidates_id_fkey;
ALTER TABLE mneme.memories DROP CONSTRAINT memories_pkey;
ALTER TABLE mneme.memories ADD PRIMARY KEY (conversation_id, id);
ALTER TABLE mneme.bm25_docs DROP CONSTRAINT bm25_docs_pkey;
ALTER TABLE mneme.bm25_docs ADD PRIMARY KEY (conversation_id, memory_id);
ALTER TABLE mneme.review_log DROP CONSTRAINT review_log_pkey;
ALTER TABLE mneme.review_log ADD PRIMARY KEY (conversation_id, id);
ALTER TABLE mneme.message_queue DROP CONSTRAINT message_queue_tenant_id_fkey;

ALTER TABLE mneme.jobs DROP CONSTRAINT jobs_pkey;
ALTER TABLE mneme.jobs ADD PRIMARY KEY (conversation_id, id);
DROP INDEX mneme.jobs_pending_dedupe;
CREATE UNIQUE INDEX jobs_pending_dedupe ON mneme.jobs (conversation_id, dedupe_key)
    WHERE state = 'pending' AND dedupe_key IS NOT NULL;
-- A job of no conversation (cleanup) has the nil conversation (enqueue_job).
UPDATE mneme.jobs SET conversation_id = '00000000-0000-0000-0000-000000000000' WHERE conversation_id IS NULL;
ALTER TABLE mneme.memory_events DROP CONSTRAINT memory_events_pkey;
ALTER TABLE mneme.memory_events ADD PRIMARY KEY (conversation_id, id);
-- A ledger row of a job of no conversation has the job's nil conversation.
UPDATE mneme.llm_calls SET conversation_id = '00000000-0000-0000-0000-000000000000' WHERE conversation_id IS NULL;
ALTER TABLE mneme.llm_calls DROP CONSTRAINT llm_calls_pkey;
ALTER TABLE mneme.llm_calls ADD PRIMARY KEY (conversation_id, id);

SELECT create_reference_table('mneme.tenants');
SELECT create_reference_table('mneme.settings');
SELECT create_reference_table('mneme.tenant_logins');
SELECT create_reference_table('mneme.job_kinds');
SELECT create_reference_table('mneme.job_turns');
SELECT create_reference_table('mneme.erasures');
-- The installation's key (mneme.named_conversation): one row, read on
-- whichever node runs the call.
SELECT create_reference_table('mneme.instance_key');
-- mneme.call_marks stays local to the coordinator, unused there: on Citus
-- the marks are transaction-local settings (mneme._mark), which the
-- workers' triggers see.
SELECT create_reference_table('mneme.llm_usage_days');
SELECT create_distributed_table('mneme.message_queue', 'id');
SELECT create_distributed_table(t, 'conversation_id', colocate_with => 'mneme.message_queue')
FROM unnest(ARRAY['mneme.messages', 'mneme.memories', 'mneme.bm25_docs', 'mneme.bm25_postings', 'mneme.bm25_terms',
                  'mneme.bm25_stats', 'mneme.review_log', 'mneme.jobs', 'mneme.memory_events', 'mneme.llm_calls',
                  'mneme.job_refs', 'mneme.review_queries']) AS t;

ALTER TABLE mneme.messages ADD CONSTRAINT messages_conversation_id_fkey
    FOREIGN KEY (conversation_id) REFERENCES mneme.message_queue (id) ON DELETE CASCADE;
ALTER TABLE mneme.review_log ADD CONSTRAINT review_log_memory_id_fkey
    FOREIGN KEY (conversation_id, memory_id) REFERENCES mneme.memories (conversation_id, id) ON DELETE CASCADE;

ALTER ROLE mneme_owner LOGIN;
