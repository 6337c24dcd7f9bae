-- =============================================================================
-- mneme access: who may call what. Applied last on every `mneme migrate`.
--
-- Group roles (NOLOGIN, created by goose 00045; grant them to login roles):
--   mneme_app     the application: EXECUTE on the public API only, no table
--                 privileges; sees the rows of its transaction's tenant
--   mneme_worker  the sidecar: the API and the worker functions, SELECT on
--                 the tables; sees every tenant (it works for all of them)
--   mneme_admin   operators: the API, settings, erase, tenants, maintenance
--   mneme_owner   owns the functions below, which are SECURITY DEFINER: they
--                 run with its table privileges, and row-level security
--                 applies to it (it is not a superuser and owns no table), so
--                 every query inside them sees only the caller's tenant.
-- Nothing in schema mneme is executable by PUBLIC but mneme._tenant(),
-- mneme._resolve_tenant(), mneme._is_worker() and mneme._is_operator(),
-- which the row policies call.
-- =============================================================================
DO $access$
DECLARE
    app constant text[] := ARRAY[
        'add_message', 'pop_message', 'set_speakers', 'segment_now', 'remember', 'pin', 'unpin', 'forget', 'inspect', 'history',
        'retrieve', 'retrieve_markdown', 'search', 'context', 'context_items', 'context_candidates', 'bm25_search', 'vector_search', 'setting', 'set_tenant',
        'labels', 'label_vocabulary', 'is_label', 'check_label', 'auto_label', 'episode_label', 'initial_state', 'retrievability',
        'record_retrieval', 'hash_embed', 'hash_fold', 'memory_text', 'check_embedding', 'bm25_tsvector', 'l2_normalize', 'cosine_distance',
        'redact', 'conversations', 'recent_conversations', 'conversation_messages', 'conversation_memories', 'conversation_titles', 'find_memories', 'memory_reviews',
        'memory_event_log', 'export_conversation', 'export_header', 'export_settings', 'export_conversations', 'export_lines',
        'version', 'named_conversation', 'llm_usage', 'conversation_llm_usage', 'consolidate'];
    worker constant text[] := ARRAY[
        'take_pending_reviews', 'add_pending_review', 'claim_jobs', 'extend_job_lease', 'complete_job', 'fail_job',
        'release_job', 'retry_job', 'queued_messages', 'queued_sessions', 'lock_queued', 'create_episode', 'create_episodes', 'extractive_summary', 'review_targets', 'apply_review',
        'recent_memories', 'context_messages', 'enqueue_job', 'enqueue_segment', 'unhandled_jobs', 'memories_to_embed',
        'set_embedding', 'cleanup', 'schedule_cleanup', '_segment_followup', '_interval_setting', 'revision_candidates',
        'apply_revision', 'add_fact', 'set_message_embedding', 'record_llm_calls',
        'schedule_consolidation', 'consolidation_facts', 'apply_consolidation', 'finish_consolidation'];
    admin constant text[] := ARRAY[
        'set_setting', 'change_embedding_dim', 'reset_initial_state', 'erase', 'erase_conversation', 'reactivate',
        'cleanup', 'schedule_cleanup', 'retry_job', 'bm25_reindex', 'create_tenant', 'bind_login', 'unbind_login',
        'tenants', 'drop_tenant', 'import_conversation', 'import_messages', 'import_memories', 'import_links', 'import_missing_links', 'import_reviews', 'import_events',
        'import_present', 'import_tombstones', 'import_source_erased', 'import_unembedded', 'import_unembedded_messages', 'import_fact', 'set_embedding', 'set_message_embedding'];
    f record;
BEGIN
    IF NOT pg_catalog.pg_has_role(current_user, 'mneme_owner', 'MEMBER') THEN
        BEGIN
            EXECUTE format('GRANT mneme_owner TO %I', current_user);
        EXCEPTION WHEN insufficient_privilege THEN
            RAISE EXCEPTION 'mneme migrate: role % must be a member of mneme_owner to hand it the API functions', current_user
                USING ERRCODE = '42501', HINT = format('an admin runs once: GRANT mneme_owner TO %I', current_user);
        END;
    END IF;
    GRANT USAGE, CREATE ON SCHEMA mneme TO mneme_owner;
    GRANT SELECT, INSERT, UPDATE, DELETE, TRUNCATE ON ALL TABLES IN SCHEMA mneme TO mneme_owner;
    GRANT USAGE, SELECT, UPDATE ON ALL SEQUENCES IN SCHEMA mneme TO mneme_owner;
    GRANT USAGE ON SCHEMA mneme TO mneme_app, mneme_worker, mneme_admin;
    REVOKE ALL ON ALL TABLES IN SCHEMA mneme FROM PUBLIC, mneme_app;
    GRANT SELECT ON ALL TABLES IN SCHEMA mneme TO mneme_worker, mneme_admin;
    -- The BM25 statistics carry no tenant: every tenant's words with their
    -- document frequencies. Only the functions (as mneme_owner, checking
    -- the conversation's tenant) read them.
    REVOKE ALL ON mneme.bm25_postings, mneme.bm25_docs, mneme.bm25_terms, mneme.bm25_stats
        FROM mneme_worker, mneme_admin;
    -- The installation's key and the functions' marks (goose 00100): only the
    -- functions read them.
    REVOKE ALL ON mneme.instance_key, mneme.call_marks FROM mneme_worker, mneme_admin;

    FOR f IN SELECT p.oid::regprocedure AS sig, p.proname AS name, p.prorettype = 'pg_catalog.trigger'::regtype AS trg,
                    -- Plain SQL without SET (mneme._retrievability, the BM25
                    -- weighting, mneme._label_key), and internal plain SQL
                    -- that reads tables (mneme._bm25_sums, called only inside
                    -- the API's functions, as mneme_owner): the planner
                    -- inlines them into the query that calls them, which it
                    -- cannot do for a SECURITY DEFINER function.
                    p.prolang = (SELECT l.oid FROM pg_catalog.pg_language l WHERE l.lanname = 'sql')
                        AND p.proconfig IS NULL
                        AND (p.provolatile = 'i' OR (p.provolatile = 's' AND p.proname LIKE '\_%')) AS inlined,
                    p.prolang = (SELECT l.oid FROM pg_catalog.pg_language l WHERE l.lanname = 'plpgsql') AS plpgsql
             FROM pg_catalog.pg_proc p WHERE p.pronamespace = 'mneme'::regnamespace AND p.prokind = 'f' LOOP
        EXECUTE format('REVOKE ALL ON FUNCTION %s FROM PUBLIC', f.sig);
        IF f.name IN ('_tenant', '_resolve_tenant', '_is_worker', '_is_operator') THEN
            -- The row policies call them as whoever queries. _tenant and
            -- _is_operator read the login bindings (SECURITY DEFINER, as
            -- mneme_owner); on Citus through _resolve_tenant
            -- (sql/citus/200-functions.sql).
            IF f.name IN ('_tenant', '_resolve_tenant', '_is_operator') THEN
                EXECUTE format('ALTER FUNCTION %s OWNER TO mneme_owner', f.sig);
            END IF;
            EXECUTE format('GRANT EXECUTE ON FUNCTION %s TO PUBLIC', f.sig);
            CONTINUE;
        END IF;
        IF f.trg THEN
            -- run by their triggers as whoever writes (mneme_owner inside
            -- the API); the invariants checked at commit run as the
            -- caller's login then, which has no table privileges: as
            -- mneme_owner (sql/015-invariants.sql)
            IF f.name IN ('messages_invariant_trg', 'message_queue_invariant_trg') THEN
                EXECUTE format('ALTER FUNCTION %s OWNER TO mneme_owner', f.sig);
                EXECUTE format('ALTER FUNCTION %s SECURITY DEFINER', f.sig);
            END IF;
            CONTINUE;
        END IF;
        IF f.name IN ('change_embedding_dim', 'vector_index_plan') THEN
            -- DDL: runs as its caller, who must own the tables (mneme reembed
            -- and mneme vector-indexes run as the role that migrates).
            EXECUTE format('GRANT EXECUTE ON FUNCTION %s TO mneme_admin', f.sig);
            CONTINUE;
        END IF;
        IF f.name = 'vector_index_status' THEN
            -- Runs as its caller: the build's progress is the caller's to see.
            EXECUTE format('GRANT EXECUTE ON FUNCTION %s TO mneme_worker, mneme_admin', f.sig);
            CONTINUE;
        END IF;
        IF f.name = 'erase_vacuum_targets' THEN
            -- Runs as its caller: it reports whether the caller may VACUUM.
            EXECUTE format('GRANT EXECUTE ON FUNCTION %s TO mneme_worker, mneme_admin', f.sig);
            CONTINUE;
        END IF;
        EXECUTE format('ALTER FUNCTION %s OWNER TO mneme_owner', f.sig);
        IF NOT f.inlined THEN
            EXECUTE format('ALTER FUNCTION %s SECURITY DEFINER', f.sig);
        END IF;
        -- (PL/pgSQL, and SQL that is not inlined)
        IF (f.plpgsql OR NOT f.inlined) AND f.name = ANY (app || worker || admin) THEN
            -- No JIT inside a call: mneme's statements run for milliseconds,
            -- but the planner's guesses for unnest and regexp splits can pass
            -- jit_above_cost, and compiling then takes far longer than the
            -- call (300 ms in a 10 ms extractive_summary). Set on the entry
            -- points, it holds for every statement and trigger they run.
            EXECUTE format('ALTER FUNCTION %s SET jit = off', f.sig);
        END IF;
        IF f.name = ANY (app) THEN
            EXECUTE format('GRANT EXECUTE ON FUNCTION %s TO mneme_app, mneme_worker, mneme_admin', f.sig);
        END IF;
        IF f.name = ANY (worker) THEN
            EXECUTE format('GRANT EXECUTE ON FUNCTION %s TO mneme_worker', f.sig);
        END IF;
        IF f.name = ANY (admin) THEN
            EXECUTE format('GRANT EXECUTE ON FUNCTION %s TO mneme_admin', f.sig);
        END IF;
    END LOOP;
END
$access$;
