-- =============================================================================
-- mneme export and import: a tenant's memory carried out and in exactly, as
-- JSON Lines (docs/export.md specifies the format, version 1). These
-- functions are the one definition of the line format: `mneme export`
-- streams their rows, mneme.export_conversation gives psql users the same
-- lines, and `mneme import` writes through the import_* functions below.
-- Idempotent: re-applied on every `mneme migrate` (CREATE OR REPLACE only).
-- =============================================================================

-- -----------------------------------------------------------------------------
-- Export
-- -----------------------------------------------------------------------------

-- Every time in the format is UTC with microseconds, whatever the session's
-- TimeZone, so two exports of the same rows are the same bytes.
CREATE OR REPLACE FUNCTION mneme._export_time(t timestamptz)
RETURNS text
LANGUAGE sql STABLE PARALLEL SAFE
AS $$ SELECT pg_catalog.to_char($1 AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"') $$;
COMMENT ON FUNCTION mneme._export_time(timestamptz) IS
    'Internal: a time as the export format writes it (UTC, microseconds, RFC 3339).';

CREATE OR REPLACE FUNCTION mneme._export_embedding(e real[])
RETURNS jsonb
LANGUAGE sql IMMUTABLE PARALLEL SAFE
AS $$ SELECT pg_catalog.to_jsonb($1) $$;
COMMENT ON FUNCTION mneme._export_embedding(real[]) IS
    'Internal: an embedding as the export format writes it (a JSON array of numbers, shortest exact form).';

CREATE OR REPLACE FUNCTION mneme.export_header(embeddings boolean DEFAULT false, model text DEFAULT NULL,
                                               mneme_version text DEFAULT NULL)
RETURNS jsonb
LANGUAGE plpgsql STABLE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
SET jit = off
AS $$
DECLARE
    v_embedder text := mneme.setting('embedder') #>> '{}';
BEGIN
    IF export_header.embeddings IS NULL THEN
        RAISE EXCEPTION 'embeddings must not be NULL' USING ERRCODE = '22004';
    END IF;
    PERFORM mneme._check_length('model', export_header.model, 200);
    PERFORM mneme._check_length('mneme_version', export_header.mneme_version, 200);
    RETURN jsonb_build_object(
        'type', 'header',
        'format', 'mneme-export',
        'version', 1,
        'mneme_version', coalesce(export_header.mneme_version, 'sql'),
        'sql_api_version', mneme.version(),
        'tenant', mneme._tenant(),
        'embedding_model', CASE WHEN v_embedder = 'hash' THEN 'hash' ELSE coalesce(export_header.model, 'external') END,
        'embedding_dim', (mneme.setting('embedding_dim') #>> '{}')::int,
        'vector_variant', mneme.setting('vector_variant') #>> '{}',
        'embeddings', export_header.embeddings,
        'exported_at', mneme._export_time(clock_timestamp()));
END
$$;
COMMENT ON FUNCTION mneme.export_header(boolean, text, text) IS
    'The first line of an export (docs/export.md): format and version, the exporting mneme''s version and '
    'the database''s SQL API version (mneme.version()), the tenant, the embedding model ("hash" for the built-in embedder, else model), dimension and vector variant, '
    'whether embeddings follow, and the time.';
GRANT EXECUTE ON FUNCTION mneme.export_header(boolean, text, text) TO mneme_app, mneme_worker, mneme_admin;

CREATE OR REPLACE FUNCTION mneme.export_settings()
RETURNS SETOF jsonb
LANGUAGE plpgsql STABLE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
SET jit = off
AS $$
BEGIN
    -- vector_variant and embedding_dim are facts of the installation (in
    -- the header), not settings an import could apply.
    RETURN QUERY
    SELECT jsonb_build_object('type', 'setting', 'key', s.key, 'value', s.value)
    FROM mneme.settings s
    WHERE s.key NOT IN ('vector_variant', 'embedding_dim')
    ORDER BY s.key;
END
$$;
COMMENT ON FUNCTION mneme.export_settings() IS
    'The setting lines of an export: every setting but the migrate-time ones (vector_variant, embedding_dim), by key.';
GRANT EXECUTE ON FUNCTION mneme.export_settings() TO mneme_app, mneme_worker, mneme_admin;

CREATE OR REPLACE FUNCTION mneme.export_conversations(after uuid DEFAULT NULL, n int DEFAULT 1000)
RETURNS SETOF uuid
LANGUAGE plpgsql STABLE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
SET jit = off
AS $$
BEGIN
    PERFORM mneme._enter(NULL);  -- the caller forwarded first (Citus: mneme._enter)
    export_conversations.n := coalesce(export_conversations.n, 1000);  -- NULL: the default
    IF export_conversations.n < 1 OR export_conversations.n > 100000 THEN
        RAISE EXCEPTION 'n must be between 1 and 100000, not %', export_conversations.n USING ERRCODE = '22023';
    END IF;
    -- The tenant's conversations, and those erased whole (a tombstone
    -- event, no queue row), by id: a page after `after`.
    RETURN QUERY
    SELECT c.id FROM (
        SELECT q.id FROM mneme.message_queue q
        WHERE q.tenant_id = mneme._tenant() AND q.id > coalesce(export_conversations.after, '00000000-0000-0000-0000-000000000000')
        UNION
        SELECT e.conversation_id FROM mneme.memory_events e
        WHERE e.tenant_id = mneme._tenant() AND e.event = 'erased' AND e.memory_id IS NULL
          AND e.conversation_id > coalesce(export_conversations.after, '00000000-0000-0000-0000-000000000000')
    ) c
    ORDER BY c.id
    LIMIT export_conversations.n;
END
$$;
COMMENT ON FUNCTION mneme.export_conversations(uuid, int) IS
    'A page of the tenant''s conversation ids (those erased whole too), in id order, after `after`: what '
    '`mneme export` walks.';
GRANT EXECUTE ON FUNCTION mneme.export_conversations(uuid, int) TO mneme_app, mneme_worker, mneme_admin;

CREATE OR REPLACE FUNCTION mneme.export_lines(conversation_id uuid, embeddings boolean DEFAULT false)
RETURNS SETOF jsonb
LANGUAGE plpgsql STABLE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
SET extra_float_digits = 1
SET jit = off
AS $$
#variable_conflict use_column
DECLARE
    v__entered boolean := mneme._enter(export_lines.conversation_id);  -- the caller forwarded first (Citus: mneme._enter)
    v_tenant text := mneme._tenant();
    v_q      mneme.message_queue;
BEGIN
    IF export_lines.conversation_id IS NULL OR export_lines.embeddings IS NULL THEN
        RAISE EXCEPTION 'conversation_id and embeddings must not be NULL' USING ERRCODE = '22004';
    END IF;
    SELECT * INTO v_q FROM mneme.message_queue q WHERE q.id = export_lines.conversation_id AND q.tenant_id = v_tenant;
    IF NOT FOUND THEN
        IF EXISTS (SELECT 1 FROM mneme.memory_events e WHERE e.conversation_id = export_lines.conversation_id
                   AND e.tenant_id = v_tenant AND e.event = 'erased' AND e.memory_id IS NULL) THEN
            -- Erased whole: its tombstones only.
            RETURN NEXT jsonb_build_object('type', 'conversation', 'id', export_lines.conversation_id, 'erased', true,
                'lines', jsonb_build_object('messages', 0, 'memories', 0, 'reviews', 0,
                    'events', (SELECT count(*) FROM mneme.memory_events e WHERE e.conversation_id = export_lines.conversation_id
                               AND e.tenant_id = v_tenant)));
        ELSE
            RAISE EXCEPTION 'conversation % does not exist in tenant %', export_lines.conversation_id, v_tenant
                USING ERRCODE = 'P0002', HINT = 'mneme.export_conversations() lists the tenant''s conversations';
        END IF;
    ELSE
        -- jsonb_strip_nulls leaves out the columns that are NULL; values
        -- that are JSON themselves are added after it, their own nulls kept.
        -- The counts of the lines that follow: an importer that misses one
        -- (a lost line) knows before it commits the conversation.
        RETURN NEXT jsonb_strip_nulls(jsonb_build_object(
                   'type', 'conversation', 'id', v_q.id, 'speakers', to_jsonb(v_q.speakers),
                   'lines', jsonb_build_object(
                       'messages', (SELECT count(*) FROM mneme.messages g WHERE g.conversation_id = v_q.id),
                       'memories', (SELECT count(*) FROM mneme.memories m WHERE m.conversation_id = v_q.id),
                       'reviews', (SELECT count(*) FROM mneme.review_log l WHERE l.conversation_id = v_q.id AND l.tenant_id = v_tenant),
                       'events', (SELECT count(*) FROM mneme.memory_events e WHERE e.conversation_id = v_q.id AND e.tenant_id = v_tenant)),
                   'last_message_at', mneme._export_time(v_q.last_message_at),
                   'created_at', mneme._export_time(v_q.created_at), 'updated_at', mneme._export_time(v_q.updated_at)))
            || CASE WHEN v_q.pending_reviews IS NULL THEN '{}'::jsonb
                    ELSE jsonb_build_object('pending_reviews', v_q.pending_reviews) END;

        -- Messages by id; seq is the message's place in the conversation,
        -- which the other lines use instead of the database's ids.
        RETURN QUERY
        SELECT jsonb_strip_nulls(jsonb_build_object(
                   'type', 'message', 'conversation', g.conversation_id, 'seq', row_number() OVER (ORDER BY g.id),
                   'role', g.role, 'content', g.content, 'created_at', mneme._export_time(g.created_at),
                   'consumed_at', mneme._export_time(g.consumed_at), 'episode', g.memory_id,
                   'ends_session', CASE WHEN g.ends_session THEN true END,
                   'embedding', CASE WHEN export_lines.embeddings THEN mneme._export_embedding(g.embedding::real[]) END))
        FROM mneme.messages g
        WHERE g.conversation_id = export_lines.conversation_id
        ORDER BY g.id;

        -- Memories by creation, with every column that defines them; an
        -- erased memory has no row: its tombstone is among the events.
        RETURN QUERY
        WITH seqs AS (
            SELECT g.id, row_number() OVER (ORDER BY g.id) AS seq
            FROM mneme.messages g WHERE g.conversation_id = export_lines.conversation_id
        ), sources AS (
            -- one hash join for the conversation, not a scan per memory
            SELECT m.id, jsonb_agg(s.seq ORDER BY u.ord) AS seqs
            FROM mneme.memories m
            CROSS JOIN LATERAL unnest(m.source_message_ids) WITH ORDINALITY AS u(mid, ord)
            JOIN seqs s ON s.id = u.mid
            WHERE m.conversation_id = export_lines.conversation_id
            GROUP BY m.id
        )
        SELECT jsonb_strip_nulls(jsonb_build_object(
                   'type', 'memory', 'conversation', m.conversation_id, 'id', m.id, 'kind', m.kind, 'title', m.title,
                   'content', m.content, 'summary', m.summary,
                   'source_messages', src.seqs,
                   'source_first_at', mneme._export_time(m.source_first_at), 'source_last_at', mneme._export_time(m.source_last_at),
                   'surprise', m.surprise, 'stability', m.stability, 'difficulty', m.difficulty, 'fsrs_state', m.fsrs_state,
                   'last_reviewed_at', mneme._export_time(m.last_reviewed_at), 'review_count', m.review_count,
                   'label', m.label, 'pinned', m.pinned, 'status', m.status, 'status_reason', m.status_reason,
                   'confidence_score', m.confidence_score, 'valid_until', mneme._export_time(m.valid_until),
                   'last_confirmed_at', mneme._export_time(m.last_confirmed_at), 'source_type', m.source_type,
                   'source_ref', m.source_ref, 'supersedes_id', m.supersedes_id, 'confirms_id', m.confirms_id,
                   'invalidates_id', m.invalidates_id, 'slot', m.slot,
                   'created_at', mneme._export_time(m.created_at), 'updated_at', mneme._export_time(m.updated_at),
                   'embedding', CASE WHEN export_lines.embeddings THEN mneme._export_embedding(m.embedding::real[]) END))
               || jsonb_build_object('metadata', m.metadata)
        FROM mneme.memories m
        LEFT JOIN sources src ON src.id = m.id
        WHERE m.conversation_id = export_lines.conversation_id
        ORDER BY m.created_at, m.id;
    END IF;

    -- The review log by id (seq: its place, which events refer to).
    RETURN QUERY
    SELECT jsonb_strip_nulls(jsonb_build_object(
               'type', 'review', 'conversation', l.conversation_id, 'seq', row_number() OVER (ORDER BY l.id),
               'memory', l.memory_id, 'rating', l.rating, 'reviewer', l.reviewer, 'defaulted', l.defaulted,
               'stability_before', l.stability_before, 'stability_after', l.stability_after,
               'difficulty_before', l.difficulty_before, 'difficulty_after', l.difficulty_after,
               'state_before', l.state_before, 'state_after', l.state_after,
               'last_reviewed_before', mneme._export_time(l.last_reviewed_before),
               'reviewed_at', mneme._export_time(l.reviewed_at), 'matched_queries', to_jsonb(coalesce(q.queries, '{}')),
               'asked_in', l.asked_in, 'evidence', l.evidence, 'created_at', mneme._export_time(l.created_at)))
    FROM mneme.review_log l
    -- (its queries: rows of mneme.review_queries, goose 00310; joined on
    -- the conversation, which Citus pushes down: a subquery in the target
    -- list it refuses, 0A000)
    LEFT JOIN (SELECT r.conversation_id, r.review_log_id, array_agg(r.query ORDER BY r.ord) AS queries
               FROM mneme.review_queries r
               WHERE r.conversation_id = export_lines.conversation_id AND r.tenant_id = v_tenant
               GROUP BY r.conversation_id, r.review_log_id) q
      ON q.conversation_id = l.conversation_id AND q.review_log_id = l.id
    WHERE l.conversation_id = export_lines.conversation_id AND l.tenant_id = v_tenant
    ORDER BY l.id;

    -- Lifecycle events by id, tombstones included (no content: erase
    -- cleared their reasons).
    RETURN QUERY
    WITH seqs AS (
        SELECT l.id, row_number() OVER (ORDER BY l.id) AS seq
        FROM mneme.review_log l WHERE l.conversation_id = export_lines.conversation_id AND l.tenant_id = v_tenant
    )
    SELECT jsonb_strip_nulls(jsonb_build_object(
               'type', 'event', 'conversation', e.conversation_id, 'memory', e.memory_id, 'event', e.event,
               'reason', e.reason, 'actor', e.actor, 'caller', e.caller, 'review', s.seq, 'at', mneme._export_time(e.at)))
    FROM mneme.memory_events e
    LEFT JOIN seqs s ON s.id = e.review_log_id
    WHERE e.conversation_id = export_lines.conversation_id AND e.tenant_id = v_tenant
    ORDER BY e.id;
END
$$;
COMMENT ON FUNCTION mneme.export_lines(uuid, boolean) IS
    'The lines of one conversation of the tenant in the export format (docs/export.md): the conversation, its '
    'messages, memories, review log and lifecycle events (erased memories as their tombstone events, without '
    'content); embeddings only when asked. P0002 for a conversation the tenant does not have.';
GRANT EXECUTE ON FUNCTION mneme.export_lines(uuid, boolean) TO mneme_app, mneme_worker, mneme_admin;

CREATE OR REPLACE FUNCTION mneme.export_conversation(conversation_id uuid, embeddings boolean DEFAULT false)
RETURNS SETOF jsonb
LANGUAGE plpgsql STABLE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
SET jit = off
AS $$
DECLARE
    v__entered boolean := mneme._enter(export_conversation.conversation_id);  -- the caller forwarded first (Citus: mneme._enter)
    v_line jsonb;
    v_n    bigint := 0;
BEGIN
    IF export_conversation.conversation_id IS NULL OR export_conversation.embeddings IS NULL THEN
        RAISE EXCEPTION 'conversation_id and embeddings must not be NULL' USING ERRCODE = '22004';
    END IF;
    RETURN NEXT mneme.export_header(export_conversation.embeddings);
    FOR v_line IN SELECT s FROM mneme.export_settings() s LOOP
        v_n := v_n + 1;
        RETURN NEXT v_line;
    END LOOP;
    FOR v_line IN SELECT l FROM mneme.export_lines(export_conversation.conversation_id, export_conversation.embeddings) l LOOP
        v_n := v_n + 1;
        RETURN NEXT v_line;
    END LOOP;
    RETURN NEXT jsonb_build_object('type', 'end', 'conversations', 1, 'lines', v_n);
END
$$;
COMMENT ON FUNCTION mneme.export_conversation(uuid, boolean) IS
    'One conversation of the caller''s tenant as a complete export file, one row per line (header, settings, the '
    'conversation''s lines, end): `psql -Atc "SELECT mneme.export_conversation(...)" > c.jsonl` writes a file '
    '`mneme import` reads (docs/export.md).';
GRANT EXECUTE ON FUNCTION mneme.export_conversation(uuid, boolean) TO mneme_app, mneme_worker, mneme_admin;

-- -----------------------------------------------------------------------------
-- Import
-- -----------------------------------------------------------------------------

-- The import functions set mneme.importing while they insert: the event
-- triggers then stand aside (mneme._importing, sql/420-events.sql), since the
-- file's events are imported as they were.
-- The lines are typed by jsonb_to_recordset (times, arrays of numbers as
-- real[] and bigint[]): a function call per column and row was most of an
-- import's time; `mneme import` checked every value (RFC 3339 times of
-- years 1 to 9999, enums, ranges) before sending.

-- The tombstones an import consults (docs/forgetting.md): which of ids the
-- tenant erased, as a memory (an "erased" event naming it) or as a
-- conversation (an "erased" event naming it, without a memory). mneme
-- import asks with the file's ids before it gives them new ones
-- (--conversations new), and skips what comes back.
CREATE OR REPLACE FUNCTION mneme.import_tombstones(ids uuid[])
RETURNS SETOF uuid
LANGUAGE plpgsql STABLE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
SET jit = off
AS $$
DECLARE
    v__entered boolean := mneme._enter(NULL);  -- the caller forwarded first (Citus: mneme._enter)
    v_tenant text := mneme._tenant();
BEGIN
    IF import_tombstones.ids IS NULL THEN
        RAISE EXCEPTION 'ids must not be NULL' USING ERRCODE = '22004';
    END IF;
    -- (two reads by value, no correlated subquery: Citus plans each over
    -- the shards)
    RETURN QUERY
    SELECT e.memory_id FROM mneme.memory_events e
    WHERE e.memory_id = ANY (import_tombstones.ids) AND e.event = 'erased' AND e.tenant_id = v_tenant
    UNION
    SELECT e.conversation_id FROM mneme.memory_events e
    WHERE e.conversation_id = ANY (import_tombstones.ids) AND e.memory_id IS NULL AND e.event = 'erased'
      AND e.tenant_id = v_tenant;
END
$$;
COMMENT ON FUNCTION mneme.import_tombstones(uuid[]) IS
    'Import: which of ids the tenant erased (a memory or a whole conversation: their tombstones, "erased" events); '
    'mneme import skips those lines, import_conversation and import_memories refuse them (22023).';
GRANT EXECUTE ON FUNCTION mneme.import_tombstones(uuid[]) TO mneme_admin;

CREATE OR REPLACE FUNCTION mneme.import_conversation(line jsonb)
RETURNS text
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
SET jit = off
AS $$
DECLARE
    v__entered boolean := mneme._enter(NULL);  -- the caller forwarded first (Citus: mneme._enter)
    v_id       uuid;
    v_tenant   text := mneme._tenant();
    v_speakers text[];
BEGIN
    IF import_conversation.line IS NULL THEN
        RAISE EXCEPTION 'line must not be NULL' USING ERRCODE = '22004';
    END IF;
    IF import_conversation.line ->> 'type' IS DISTINCT FROM 'conversation' THEN
        RAISE EXCEPTION 'not a conversation line' USING ERRCODE = '22023';
    END IF;
    v_id := (import_conversation.line ->> 'id')::uuid;
    IF coalesce((import_conversation.line ->> 'erased')::boolean, false) THEN
        IF EXISTS (SELECT 1 FROM mneme.memory_events e WHERE e.conversation_id = v_id AND e.tenant_id = v_tenant
                   AND e.event = 'erased' AND e.memory_id IS NULL) THEN
            RETURN 'exists';
        END IF;
        IF EXISTS (SELECT 1 FROM mneme.message_queue q WHERE q.id = v_id) THEN
            RAISE EXCEPTION 'conversation % exists (erased in the file)', v_id USING ERRCODE = '23505';
        END IF;
        RETURN 'erased';
    END IF;
    IF EXISTS (SELECT 1 FROM mneme.message_queue q WHERE q.id = v_id AND q.tenant_id = v_tenant) THEN
        RETURN 'exists';
    END IF;
    -- Erase is final: a conversation the tenant erased does not come back
    -- (its tombstone, an "erased" event without a memory, names it).
    IF EXISTS (SELECT 1 FROM mneme.import_tombstones(ARRAY[v_id]) AS t(id)) THEN
        RAISE EXCEPTION 'conversation % was erased in tenant %: an import does not bring it back', v_id, v_tenant
            USING ERRCODE = '22023',
                  HINT = 'mneme import skips the conversations and memories the tenant erased, saying so (docs/forgetting.md)';
    END IF;
    -- The speakers into a variable first: Citus refuses a subquery in an
    -- INSERT's VALUES ("subqueries are not supported within INSERT queries").
    v_speakers := coalesce(ARRAY(SELECT jsonb_array_elements_text(import_conversation.line -> 'speakers')), '{}');
    INSERT INTO mneme.message_queue (id, tenant_id, speakers, pending_reviews, last_message_at, created_at, updated_at)
    VALUES (v_id, v_tenant,
            v_speakers,
            nullif(import_conversation.line -> 'pending_reviews', 'null'::jsonb),
            ((import_conversation.line -> 'last_message_at') #>> '{}')::timestamptz,
            ((import_conversation.line -> 'created_at') #>> '{}')::timestamptz,
            ((import_conversation.line -> 'updated_at') #>> '{}')::timestamptz)
    ON CONFLICT (id) DO NOTHING;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'conversation % belongs to another tenant', v_id USING ERRCODE = '23505',
            HINT = 'import with --conversations new to give the file''s conversations and memories new ids (what the '
                   'tenant erased stays out either way)';
    END IF;
    RETURN 'created';
END
$$;
COMMENT ON FUNCTION mneme.import_conversation(jsonb) IS
    'Import: creates a conversation of the tenant from its export line. Returns created, exists (the tenant has '
    'it: the importer checks it holds the file''s rows) or erased (an erased conversation: only its events follow). '
    '23505 for an id another tenant holds.';
GRANT EXECUTE ON FUNCTION mneme.import_conversation(jsonb) TO mneme_admin;

CREATE OR REPLACE FUNCTION mneme.import_messages(conversation_id uuid, lines jsonb)
RETURNS SETOF bigint
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
SET jit = off
AS $$
BEGIN
    PERFORM mneme._enter(import_messages.conversation_id);  -- the caller forwarded first (Citus: mneme._enter)
    IF import_messages.conversation_id IS NULL OR import_messages.lines IS NULL THEN
        RAISE EXCEPTION 'conversation_id and lines must not be NULL' USING ERRCODE = '22004';
    END IF;
    IF jsonb_typeof(import_messages.lines) <> 'array' THEN
        RAISE EXCEPTION 'lines must be an array of lines' USING ERRCODE = '22023';
    END IF;
    IF NOT EXISTS (SELECT 1 FROM mneme.message_queue q WHERE q.id = import_messages.conversation_id AND q.tenant_id = mneme._tenant()) THEN
        RAISE EXCEPTION 'conversation % does not exist in this tenant', import_messages.conversation_id USING ERRCODE = 'P0002';
    END IF;
    -- Ids in the lines' order (a bigserial: one statement, ordered input).
    RETURN QUERY
    WITH ins AS (
        INSERT INTO mneme.messages (conversation_id, tenant_id, role, content, created_at, consumed_at, memory_id,
                                    ends_session, embedding)
        SELECT import_messages.conversation_id, mneme._tenant(), r.role, r.content, r.created_at, r.consumed_at,
               r.episode, coalesce(r.ends_session, false), r.embedding
        FROM ROWS FROM (jsonb_to_recordset(import_messages.lines)
                        AS (role text, content text, created_at timestamptz, consumed_at timestamptz, episode uuid,
                            ends_session boolean, embedding real[])) WITH ORDINALITY
             AS r(role, content, created_at, consumed_at, episode, ends_session, embedding, ord)
        ORDER BY r.ord
        RETURNING id
    )
    SELECT ins.id FROM ins ORDER BY ins.id;
END
$$;
COMMENT ON FUNCTION mneme.import_messages(uuid, jsonb) IS
    'Import: appends message lines (source seqs resolved by the caller) to a conversation; returns the new ids in order.';
GRANT EXECUTE ON FUNCTION mneme.import_messages(uuid, jsonb) TO mneme_admin;

-- The bulk path. A batch is one INSERT whose rows bring what the per-row
-- triggers would compute: the importer sends the built-in embeddings (the
-- same floats hash_embed computes), the FSRS state and the tenant, so the
-- triggers that fill those are skipped by their WHEN; the array variant's
-- normalisation is done set-wise in the insert (or by the importer, with
-- normalized => true) and its trigger stands aside (mneme.bulk_load, which
-- counts only in an admin's or the owner's session: an application login
-- that sets it by hand is normalised all the same); BM25 is maintained by
-- its statement trigger, once per batch, from one tokenising pass
-- (sql/110-bm25.sql). The result is the per-row path's, row for row
-- (TestImportBulkEqualsRowPath). On Citus the rows go through the
-- triggers as they are (no bulk_load: the trigger runs on the shards).
CREATE OR REPLACE FUNCTION mneme.import_memories(conversation_id uuid, lines jsonb, normalized boolean DEFAULT false,
                                                 embeddings real[] DEFAULT NULL)
RETURNS TABLE (memory_id uuid, link text, target uuid)
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
SET jit = off
AS $$
DECLARE
    v__entered boolean := mneme._enter(import_memories.conversation_id);  -- the caller forwarded first (Citus: mneme._enter)
    v_bulk      boolean := NOT mneme._distributed('mneme.memories');
    v_normalize boolean;
    v_erased    uuid;
BEGIN
    IF import_memories.conversation_id IS NULL OR import_memories.lines IS NULL OR import_memories.normalized IS NULL THEN
        RAISE EXCEPTION 'conversation_id, lines and normalized must not be NULL' USING ERRCODE = '22004';
    END IF;
    IF jsonb_typeof(import_memories.lines) <> 'array' THEN
        RAISE EXCEPTION 'lines must be an array of lines' USING ERRCODE = '22023';
    END IF;
    IF NOT EXISTS (SELECT 1 FROM mneme.message_queue q WHERE q.id = import_memories.conversation_id AND q.tenant_id = mneme._tenant()) THEN
        RAISE EXCEPTION 'conversation % does not exist in this tenant', import_memories.conversation_id USING ERRCODE = 'P0002';
    END IF;
    -- Normalised here unless the importer did (array variant; the trigger
    -- does it on Citus).
    v_normalize := v_bulk AND NOT import_memories.normalized AND mneme.setting('vector_variant') #>> '{}' = 'array';
    IF import_memories.embeddings IS NOT NULL
       AND cardinality(import_memories.embeddings) % (mneme.setting('embedding_dim') #>> '{}')::int <> 0 THEN
        RAISE EXCEPTION 'embeddings holds % numbers, not a whole number of embeddings of % dimensions',
            cardinality(import_memories.embeddings), mneme.setting('embedding_dim') #>> '{}' USING ERRCODE = '22023';
    END IF;
    IF EXISTS (SELECT 1 FROM jsonb_array_elements(import_memories.lines) l
               WHERE l ? 'embedding_at'
                 AND (jsonb_typeof(l -> 'embedding_at') <> 'number'
                      OR (l ->> 'embedding_at')::numeric NOT BETWEEN 1
                         AND coalesce(cardinality(import_memories.embeddings), 0) / (mneme.setting('embedding_dim') #>> '{}')::int)) THEN
        RAISE EXCEPTION 'a line''s embedding_at is not the place of an embedding in embeddings (1 to %)',
            coalesce(cardinality(import_memories.embeddings), 0) / (mneme.setting('embedding_dim') #>> '{}')::int
            USING ERRCODE = '22023';
    END IF;
    -- Erase is final: a memory the tenant erased does not come back.
    SELECT t.id INTO v_erased
    FROM mneme.import_tombstones(ARRAY(SELECT (l ->> 'id')::uuid FROM jsonb_array_elements(import_memories.lines) l
                                       WHERE l ->> 'id' IS NOT NULL)) AS t(id)
    LIMIT 1;
    IF v_erased IS NOT NULL THEN
        RAISE EXCEPTION 'memory % was erased in tenant %: an import does not bring it back', v_erased, mneme._tenant()
            USING ERRCODE = '22023',
                  HINT = 'mneme import skips the memories the tenant erased, with their messages, reviews and events (docs/forgetting.md)';
    END IF;
    PERFORM mneme._mark('importing', 'on');
    IF v_bulk THEN
        PERFORM mneme._set_local('mneme.bulk_load', 'on');
    END IF;
    BEGIN
        PERFORM mneme._import_memory_rows(import_memories.conversation_id, import_memories.lines, v_normalize,
                                          import_memories.embeddings);
    EXCEPTION WHEN unique_violation THEN
        -- Row security hides the other row (and the key from the error):
        -- find the id that collides, one probe insert at a time.
        PERFORM mneme._set_local('mneme.bulk_load', '');
        PERFORM mneme._import_collision(import_memories.conversation_id, import_memories.lines);
        RAISE;
    END;
    IF v_bulk THEN
        PERFORM mneme._set_local('mneme.bulk_load', '');
    END IF;
    PERFORM mneme._mark('importing', '');

    -- (the targets read first, as import_links does)
    RETURN QUERY
    WITH links AS (
        SELECT (x.l ->> 'id')::uuid AS id, k, (x.l ->> k)::uuid AS target
        FROM jsonb_array_elements(import_memories.lines) AS x(l), unnest(ARRAY['supersedes_id', 'confirms_id', 'invalidates_id']) k
        WHERE x.l ->> k IS NOT NULL
    )
    SELECT l.id, l.k, l.target FROM links l
    WHERE NOT l.target = ANY (mneme._present_memories(ARRAY(SELECT t.target FROM links t)));
END
$$;
COMMENT ON FUNCTION mneme.import_memories(uuid, jsonb, boolean, real[]) IS
    'Import: inserts memory lines into a conversation as they were (FSRS state, status, times, provenance), with '
    'no events (the file''s follow), as one set-wise insert per call; BM25 and, with the built-in embedder, missing '
    'embeddings are computed as for any insert. normalized: the caller vouches that the embeddings are as the '
    'array variant stores them (mneme.l2_normalize''s floats), so they are not normalised again. embeddings: the '
    'lines'' embeddings in one binary array, embedding_dim numbers each; a line''s embedding_at (1, 2, ...) is its '
    'place there (a line''s own embedding is taken first). Returns the lineage '
    'links whose target is not in yet (mneme.import_links sets them later). 23505 naming the id for a memory id '
    'another conversation or tenant holds.';
GRANT EXECUTE ON FUNCTION mneme.import_memories(uuid, jsonb, boolean, real[]) TO mneme_admin;

CREATE OR REPLACE FUNCTION mneme._import_collision(conversation_id uuid, lines jsonb)
RETURNS void
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v uuid;
BEGIN
    FOR v IN SELECT (l ->> 'id')::uuid FROM jsonb_array_elements(_import_collision.lines) l LOOP
        BEGIN
            INSERT INTO mneme.memories (id, conversation_id, tenant_id, kind, content, summary, stability, difficulty,
                                        fsrs_state, label, status, created_at, last_reviewed_at, updated_at)
            VALUES (v, _import_collision.conversation_id, mneme._tenant(), 'semantic', 'probe', 'probe', 1, 5,
                    'review', 'general', 'merged', now(), now(), now());
            RAISE EXCEPTION USING ERRCODE = 'P0004';  -- undo the probe
        EXCEPTION
            WHEN assert_failure THEN NULL;
            WHEN unique_violation THEN
                RAISE EXCEPTION 'memory % is held by another conversation or tenant', v USING ERRCODE = '23505',
                    DETAIL = format('Key (id)=(%s) already exists.', v),
                    HINT = 'import with --conversations new to give the file''s conversations and memories new ids';
        END;
    END LOOP;
END
$$;
COMMENT ON FUNCTION mneme._import_collision(uuid, jsonb) IS
    'Internal: after a unique violation in mneme.import_memories, raises 23505 naming the first memory id of lines '
    'that another row holds.';

CREATE OR REPLACE FUNCTION mneme._import_memory_rows(conversation_id uuid, lines jsonb, renormalize boolean,
                                                     embeddings real[])
RETURNS void
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_hash boolean := _import_memory_rows.renormalize AND mneme.setting('embedder') #>> '{}' = 'hash';
    v_dim  int := (mneme.setting('embedding_dim') #>> '{}')::int;
    v_n    bigint;
BEGIN
    -- Lineage links whose target exists (already, or in this batch: the
    -- foreign keys are checked at the statement's end) are set now; the
    -- others are returned, for the importer to set once their target is in.
    -- jsonb_to_recordset types every column in one pass over each line
    -- (arrays of numbers become real[] and bigint[]).
    WITH src AS (
        SELECT r.* FROM jsonb_to_recordset(_import_memory_rows.lines) AS r(
            id uuid, kind text, title text, content text, summary text, source_message_ids bigint[],
            source_first_at timestamptz, source_last_at timestamptz, surprise real, stability float8, difficulty float8,
            fsrs_state text, last_reviewed_at timestamptz, review_count int, label text, pinned boolean, status text,
            status_reason text, confidence_score real, valid_until timestamptz, last_confirmed_at timestamptz,
            source_type text, source_ref text, supersedes_id uuid, confirms_id uuid, invalidates_id uuid, slot text,
            metadata jsonb, created_at timestamptz, updated_at timestamptz, embedding real[], embedding_at int)
    ), emb AS (
        -- a line's embedding: its own, or its slice of the binary array
        SELECT s.*, coalesce(s.embedding, _import_memory_rows.embeddings[(s.embedding_at - 1) * v_dim + 1 : s.embedding_at * v_dim])
                    AS vec
        FROM src s
    ), known AS (
        SELECT s.id FROM src s
        UNION ALL
        SELECT m.id FROM mneme.memories m
        WHERE m.id IN (SELECT s.supersedes_id FROM src s UNION SELECT s.confirms_id FROM src s
                       UNION SELECT s.invalidates_id FROM src s)
    ), ins AS (
    -- RETURNING: on Citus an INSERT ... SELECT without it goes to the
    -- shards as COPY, which row security refuses ("COPY FROM not supported
    -- with row-level security").
    INSERT INTO mneme.memories (id, conversation_id, tenant_id, kind, title, content, summary, source_message_ids,
                                source_first_at, source_last_at, surprise, stability, difficulty, fsrs_state,
                                last_reviewed_at, review_count, label, pinned, status, status_reason, confidence_score,
                                valid_until, last_confirmed_at, source_type, source_ref, supersedes_id, confirms_id,
                                invalidates_id, slot, metadata, created_at, updated_at, embedding)
    SELECT s.id, _import_memory_rows.conversation_id, mneme._tenant(), s.kind, s.title, s.content, s.summary,
           s.source_message_ids, s.source_first_at, s.source_last_at, s.surprise, s.stability, s.difficulty, s.fsrs_state,
           s.last_reviewed_at, s.review_count, s.label, s.pinned, s.status, s.status_reason, s.confidence_score,
           s.valid_until, s.last_confirmed_at, s.source_type, s.source_ref,
           CASE WHEN s.supersedes_id IN (SELECT k.id FROM known k) THEN s.supersedes_id END,
           CASE WHEN s.confirms_id IN (SELECT k.id FROM known k) THEN s.confirms_id END,
           CASE WHEN s.invalidates_id IN (SELECT k.id FROM known k) THEN s.invalidates_id END,
           s.slot, coalesce(s.metadata, '{}'), s.created_at, s.updated_at,
           -- (renormalize: the array variant's trigger stands aside; the
           -- built-in embedding of a line without one, which the hash
           -- trigger would add before it, is normalised here too)
           CASE WHEN _import_memory_rows.renormalize
                THEN (SELECT n.embedding FROM mneme._l2_normalized(coalesce(s.vec,
                          CASE WHEN v_hash THEN mneme.hash_embed(mneme.memory_text(s.title, s.summary, s.content)) END)) n)
                ELSE s.vec END
    FROM emb s
    RETURNING 1)
    SELECT count(*) INTO v_n FROM ins;
END
$$;
COMMENT ON FUNCTION mneme._import_memory_rows(uuid, jsonb, boolean, real[]) IS
    'Internal: the insert of mneme.import_memories (renormalize: L2-normalise the embeddings in it).';

CREATE OR REPLACE FUNCTION mneme._present_memories(ids uuid[])
RETURNS uuid[]
LANGUAGE plpgsql STABLE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    RETURN ARRAY(SELECT t.id FROM mneme.memories t WHERE t.id = ANY (_present_memories.ids));
END
$$;
COMMENT ON FUNCTION mneme._present_memories(uuid[]) IS
    'Import: those of ids (lineage links'' targets) that are memories the caller can read. Read before the '
    'statement that uses them: on Citus a subquery correlated with a link is refused (its target may be on another shard).';

CREATE OR REPLACE FUNCTION mneme.import_links(links jsonb)
RETURNS TABLE (memory_id uuid, link text, target uuid)
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
SET jit = off
AS $$
DECLARE
    v__entered boolean := mneme._enter(NULL);  -- the caller forwarded first (Citus: mneme._enter)
    v_present uuid[];
    v_tenant  text := mneme._tenant();
    x         record;
BEGIN
    IF import_links.links IS NULL THEN
        RAISE EXCEPTION 'links must not be NULL' USING ERRCODE = '22004';
    END IF;
    IF jsonb_typeof(import_links.links) <> 'array' THEN
        RAISE EXCEPTION 'links must be an array of {memory_id, link, target}' USING ERRCODE = '22023';
    END IF;
    -- The targets that are in, read once by their ids; then one update per
    -- link (lineage links are few), by the memory's id. On Citus a memory
    -- and its target may be on two shards: a read of the targets correlated
    -- with the update is a "complex join" there.
    v_present := mneme._present_memories(ARRAY(SELECT (l ->> 'target')::uuid FROM jsonb_array_elements(import_links.links) l));
    FOR x IN SELECT (l ->> 'memory_id')::uuid AS id, l ->> 'link' AS link, (l ->> 'target')::uuid AS target
             FROM jsonb_array_elements(import_links.links) l
             WHERE (l ->> 'target')::uuid = ANY (v_present)
               AND l ->> 'link' IN ('supersedes_id', 'confirms_id', 'invalidates_id') LOOP
        EXECUTE format('UPDATE mneme.memories m SET %I = $1 WHERE m.id = $2 AND m.tenant_id = $3', x.link)
        USING x.target, x.id, v_tenant;
    END LOOP;
    RETURN QUERY
    SELECT (l ->> 'memory_id')::uuid, l ->> 'link', (l ->> 'target')::uuid
    FROM jsonb_array_elements(import_links.links) l
    WHERE NOT (l ->> 'target')::uuid = ANY (v_present);
END
$$;
COMMENT ON FUNCTION mneme.import_links(jsonb) IS
    'Import: sets lineage links (supersedes_id, confirms_id, invalidates_id) whose target is in now; returns the '
    'links whose target is still missing.';
GRANT EXECUTE ON FUNCTION mneme.import_links(jsonb) TO mneme_admin;

CREATE OR REPLACE FUNCTION mneme.import_missing_links(links jsonb)
RETURNS TABLE (memory_id uuid, link text, target uuid)
LANGUAGE plpgsql STABLE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
SET jit = off
AS $$
BEGIN
    PERFORM mneme._enter(NULL);  -- the caller forwarded first (Citus: mneme._enter)
    IF import_missing_links.links IS NULL THEN
        RAISE EXCEPTION 'links must not be NULL' USING ERRCODE = '22004';
    END IF;
    IF jsonb_typeof(import_missing_links.links) <> 'array' THEN
        RAISE EXCEPTION 'links must be an array of {memory_id, link, target}' USING ERRCODE = '22023';
    END IF;
    -- (the targets read first: on Citus a subquery correlated with the
    -- links is refused)
    RETURN QUERY
    SELECT (l ->> 'memory_id')::uuid, l ->> 'link', (l ->> 'target')::uuid
    FROM jsonb_array_elements(import_missing_links.links) l
    WHERE NOT (l ->> 'target')::uuid = ANY (mneme._present_memories(
        ARRAY(SELECT (t ->> 'target')::uuid FROM jsonb_array_elements(import_missing_links.links) t)));
END
$$;
COMMENT ON FUNCTION mneme.import_missing_links(jsonb) IS
    'Import: the lineage links whose target memory is not in (yet), of a conversation imported before (a resumed '
    'import sets them when their target comes in).';
GRANT EXECUTE ON FUNCTION mneme.import_missing_links(jsonb) TO mneme_admin;

CREATE OR REPLACE FUNCTION mneme.import_reviews(conversation_id uuid, lines jsonb)
RETURNS SETOF bigint
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
SET jit = off
AS $$
DECLARE
    v_ids bigint[];
    v_n   bigint;
BEGIN
    PERFORM mneme._enter(import_reviews.conversation_id);  -- the caller forwarded first (Citus: mneme._enter)
    IF import_reviews.conversation_id IS NULL OR import_reviews.lines IS NULL THEN
        RAISE EXCEPTION 'conversation_id and lines must not be NULL' USING ERRCODE = '22004';
    END IF;
    IF jsonb_typeof(import_reviews.lines) <> 'array' THEN
        RAISE EXCEPTION 'lines must be an array of lines' USING ERRCODE = '22023';
    END IF;
    PERFORM mneme._mark('importing', 'on');
    WITH ins AS (
        INSERT INTO mneme.review_log (memory_id, conversation_id, tenant_id, rating, reviewer, defaulted,
                                      stability_before, stability_after, difficulty_before, difficulty_after,
                                      state_before, state_after, last_reviewed_before, reviewed_at, asked_in,
                                      evidence, created_at)
        SELECT r.memory, import_reviews.conversation_id, mneme._tenant(), r.rating, r.reviewer, r.defaulted,
               r.stability_before, r.stability_after, r.difficulty_before, r.difficulty_after, r.state_before,
               r.state_after, r.last_reviewed_before, r.reviewed_at, r.asked_in,
               r.evidence, r.created_at
        FROM ROWS FROM (jsonb_to_recordset(import_reviews.lines)
                        AS (memory uuid, rating text, reviewer text, defaulted boolean, stability_before float8,
                            stability_after float8, difficulty_before float8, difficulty_after float8, state_before text,
                            state_after text, last_reviewed_before timestamptz, reviewed_at timestamptz,
                            matched_queries text[], asked_in uuid, evidence jsonb, created_at timestamptz)) WITH ORDINALITY
             AS r(memory, rating, reviewer, defaulted, stability_before, stability_after, difficulty_before,
                  difficulty_after, state_before, state_after, last_reviewed_before, reviewed_at, matched_queries,
                  asked_in, evidence, created_at, ord)
        ORDER BY r.ord
        RETURNING id
    )
    SELECT array_agg(ins.id ORDER BY ins.id) INTO v_ids FROM ins;
    -- The lines' queries, as rows of mneme.review_queries (goose 00310):
    -- each line's distinct texts in the order they first appear
    -- (mneme._review_query_rows, as apply_review's), with the id its row
    -- got (the ids follow the lines' order). (RETURNING: on Citus an
    -- INSERT ... SELECT without it goes to the shards as COPY, which row
    -- security refuses.)
    WITH ins AS (
        INSERT INTO mneme.review_queries (conversation_id, review_log_id, tenant_id, query_key, query, ord)
        SELECT import_reviews.conversation_id, v_ids[r.ord], mneme._tenant(), q.query_key, q.query, q.ord
        FROM ROWS FROM (jsonb_to_recordset(import_reviews.lines) AS (matched_queries text[])) WITH ORDINALITY
             AS r(matched_queries, ord),
             mneme._review_query_rows(r.matched_queries) AS q
        RETURNING 1)
    SELECT count(*) INTO v_n FROM ins;
    PERFORM mneme._mark('importing', '');
    RETURN QUERY SELECT i.id FROM unnest(v_ids) WITH ORDINALITY AS i(id, o) ORDER BY i.o;
END
$$;
COMMENT ON FUNCTION mneme.import_reviews(uuid, jsonb) IS
    'Import: inserts review log lines (no events: the file''s follow) and their queries (mneme.review_queries); '
    'returns the new ids in order.';
GRANT EXECUTE ON FUNCTION mneme.import_reviews(uuid, jsonb) TO mneme_admin;

CREATE OR REPLACE FUNCTION mneme.import_events(conversation_id uuid, lines jsonb)
RETURNS bigint
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
SET jit = off
AS $$
DECLARE
    v__entered boolean := mneme._enter(import_events.conversation_id);  -- the caller forwarded first (Citus: mneme._enter)
    v_n bigint;
BEGIN
    IF import_events.conversation_id IS NULL OR import_events.lines IS NULL THEN
        RAISE EXCEPTION 'conversation_id and lines must not be NULL' USING ERRCODE = '22004';
    END IF;
    IF jsonb_typeof(import_events.lines) <> 'array' THEN
        RAISE EXCEPTION 'lines must be an array of lines' USING ERRCODE = '22023';
    END IF;
    -- RETURNING, as import_reviews: on Citus an INSERT ... SELECT from the
    -- lines without it goes to the shards as COPY, which row security
    -- refuses ("COPY FROM not supported with row-level security").
    WITH ins AS (
        INSERT INTO mneme.memory_events (memory_id, conversation_id, tenant_id, event, reason, actor, caller, review_log_id, at)
        SELECT r.memory, import_events.conversation_id, mneme._tenant(), r.event, r.reason, r.actor, r.caller,
               r.review_log_id, r.at
        FROM ROWS FROM (jsonb_to_recordset(import_events.lines)
                        AS (memory uuid, event text, reason text, actor text, caller name, review_log_id bigint,
                            at timestamptz)) WITH ORDINALITY
             AS r(memory, event, reason, actor, caller, review_log_id, at, ord)
        ORDER BY r.ord
        RETURNING 1
    )
    SELECT count(*) INTO v_n FROM ins;
    RETURN v_n;
END
$$;
COMMENT ON FUNCTION mneme.import_events(uuid, jsonb) IS
    'Import: appends lifecycle event lines (review seqs resolved by the caller) as they were: who, when, why.';
GRANT EXECUTE ON FUNCTION mneme.import_events(uuid, jsonb) TO mneme_admin;

CREATE OR REPLACE FUNCTION mneme.import_present(conversation_id uuid, memory_ids uuid[])
RETURNS bigint
LANGUAGE plpgsql STABLE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
SET jit = off
AS $$
BEGIN
    PERFORM mneme._enter(import_present.conversation_id);  -- the caller forwarded first (Citus: mneme._enter)
    IF import_present.conversation_id IS NULL OR import_present.memory_ids IS NULL THEN
        RAISE EXCEPTION 'conversation_id and memory_ids must not be NULL' USING ERRCODE = '22004';
    END IF;
    RETURN (SELECT count(*) FROM mneme.memories m
            WHERE m.conversation_id = import_present.conversation_id AND m.tenant_id = mneme._tenant()
              AND m.id = ANY (import_present.memory_ids));
END
$$;
COMMENT ON FUNCTION mneme.import_present(uuid, uuid[]) IS
    'Import: how many of memory_ids the tenant''s conversation holds (an import resumed skips a conversation that '
    'holds all of the file''s).';
GRANT EXECUTE ON FUNCTION mneme.import_present(uuid, uuid[]) TO mneme_admin;

CREATE OR REPLACE FUNCTION mneme.import_unembedded(conversation_id uuid, after uuid DEFAULT NULL, n int DEFAULT 64)
RETURNS TABLE (memory_id uuid, memory_text text)
LANGUAGE plpgsql STABLE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
SET jit = off
AS $$
BEGIN
    PERFORM mneme._enter(import_unembedded.conversation_id);  -- the caller forwarded first (Citus: mneme._enter)
    IF import_unembedded.conversation_id IS NULL THEN
        RAISE EXCEPTION 'conversation_id must not be NULL' USING ERRCODE = '22004';
    END IF;
    RETURN QUERY
    SELECT m.id, mneme.memory_text(m.title, m.summary, m.content)
    FROM mneme.memories m
    WHERE m.conversation_id = import_unembedded.conversation_id AND m.tenant_id = mneme._tenant()
      AND m.embedding IS NULL AND m.id > coalesce(import_unembedded.after, '00000000-0000-0000-0000-000000000000')
    ORDER BY m.id
    LIMIT greatest(1, least(coalesce(import_unembedded.n, 64), 10000));
END
$$;
COMMENT ON FUNCTION mneme.import_unembedded(uuid, uuid, int) IS
    'Import: a page of the conversation''s memories without an embedding and their text, for an external embedder.';
GRANT EXECUTE ON FUNCTION mneme.import_unembedded(uuid, uuid, int) TO mneme_admin;

CREATE OR REPLACE FUNCTION mneme.import_unembedded_messages(conversation_id uuid, after bigint DEFAULT NULL, n int DEFAULT 64)
RETURNS TABLE (message_id bigint, content text)
LANGUAGE plpgsql STABLE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
SET jit = off
AS $$
BEGIN
    PERFORM mneme._enter(import_unembedded_messages.conversation_id);  -- the caller forwarded first (Citus: mneme._enter)
    -- The messages of episodes: the segment job embeds those (external
    -- embedder), the context ranks their turns by them.
    IF import_unembedded_messages.conversation_id IS NULL THEN
        RAISE EXCEPTION 'conversation_id must not be NULL' USING ERRCODE = '22004';
    END IF;
    RETURN QUERY
    SELECT g.id, g.content
    FROM mneme.messages g
    WHERE g.conversation_id = import_unembedded_messages.conversation_id AND g.tenant_id = mneme._tenant()
      AND g.memory_id IS NOT NULL AND g.embedding IS NULL AND g.id > coalesce(import_unembedded_messages.after, 0)
    ORDER BY g.id
    LIMIT greatest(1, least(coalesce(import_unembedded_messages.n, 64), 10000));
END
$$;
COMMENT ON FUNCTION mneme.import_unembedded_messages(uuid, bigint, int) IS
    'Import: a page of the conversation''s episode messages without an embedding, for an external embedder.';
GRANT EXECUTE ON FUNCTION mneme.import_unembedded_messages(uuid, bigint, int) TO mneme_admin;

-- -----------------------------------------------------------------------------
-- Import from other memory systems (mem0)
-- -----------------------------------------------------------------------------
CREATE OR REPLACE FUNCTION mneme.import_fact(conversation_id uuid, content text, at timestamptz, origin jsonb,
                                             label text DEFAULT NULL)
RETURNS uuid
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
SET jit = off
AS $$
#variable_conflict use_column
DECLARE
    v__entered boolean := mneme._enter(import_fact.conversation_id);  -- the caller forwarded first (Citus: mneme._enter)
    v_id  uuid;
    v_key text;
BEGIN
    IF import_fact.conversation_id IS NULL OR import_fact.content IS NULL OR import_fact.origin IS NULL THEN
        RAISE EXCEPTION 'conversation_id, content and origin must not be NULL' USING ERRCODE = '22004';
    END IF;
    IF jsonb_typeof(import_fact.origin) <> 'object'
       OR (SELECT count(*) FROM jsonb_object_keys(import_fact.origin)) <> 1 THEN
        RAISE EXCEPTION 'origin must be an object of one key, the source system (e.g. {"mem0": {...}})' USING ERRCODE = '22023';
    END IF;
    SELECT k INTO v_key FROM jsonb_object_keys(import_fact.origin) k;
    IF import_fact.origin -> v_key ->> 'id' IS NULL THEN
        RAISE EXCEPTION 'origin.%.id is needed (the source system''s id: an import run again skips it)', v_key USING ERRCODE = '22023';
    END IF;
    -- Erased (the memory imported from this source id, or the conversation
    -- whole): it stays erased; mneme import --from mem0 counts it.
    IF mneme.import_source_erased(import_fact.conversation_id, left(v_key || ':' || (import_fact.origin -> v_key ->> 'id'), 512)) THEN
        RAISE NOTICE 'source memory %:% was erased in conversation %: skipped', v_key, import_fact.origin -> v_key ->> 'id',
            import_fact.conversation_id;
        RETURN NULL;
    END IF;
    -- Imported already (a resumed or repeated import): nothing to do.
    SELECT m.id INTO v_id FROM mneme.memories m
    WHERE m.conversation_id = import_fact.conversation_id AND m.source_type = 'import'
      AND m.metadata -> v_key ->> 'id' = import_fact.origin -> v_key ->> 'id';
    IF FOUND THEN
        RETURN NULL;
    END IF;
    -- remember: the checks, the label, the revise job (duplicates and
    -- contradictions are handled as for any write); then the provenance.
    v_id := mneme.remember(import_fact.conversation_id, import_fact.content, label => import_fact.label,
                           source_ref => left(v_key || ':' || (import_fact.origin -> v_key ->> 'id'), 512),
                           at => import_fact.at);
    UPDATE mneme.memories m
    SET source_type = 'import', confidence_score = mneme._source_confidence('import'), metadata = import_fact.origin
    WHERE m.conversation_id = import_fact.conversation_id AND m.id = v_id;
    RETURN v_id;
END
$$;
COMMENT ON FUNCTION mneme.import_fact(uuid, text, timestamptz, jsonb, text) IS
    'Import from another memory system: remembers content as stated at `at` (mneme.remember: label, revise job), '
    'with source_type import, confidence_by_source.import, and the source''s record (origin, {"mem0": {...}}) as '
    'its metadata. Returns the new id, or NULL when the conversation has that source id already (a repeated import) '
    'or the tenant erased it (mneme.import_source_erased: the tombstone keeps the source id).';
GRANT EXECUTE ON FUNCTION mneme.import_fact(uuid, text, timestamptz, jsonb, text) TO mneme_admin;

CREATE OR REPLACE FUNCTION mneme.import_source_erased(conversation_id uuid, source_ref text)
RETURNS boolean
LANGUAGE plpgsql STABLE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
SET jit = off
AS $$
BEGIN
    IF import_source_erased.conversation_id IS NULL OR import_source_erased.source_ref IS NULL THEN
        RAISE EXCEPTION 'conversation_id and source_ref must not be NULL' USING ERRCODE = '22004';
    END IF;
    PERFORM mneme._enter(import_source_erased.conversation_id);
    RETURN EXISTS (SELECT 1 FROM mneme.import_tombstones(ARRAY[import_source_erased.conversation_id]))
        OR EXISTS (SELECT 1 FROM mneme.memory_events e
                   WHERE e.conversation_id = import_source_erased.conversation_id
                     AND e.source_ref = import_source_erased.source_ref AND e.event = 'erased'
                     AND e.tenant_id = mneme._tenant());
END
$$;
COMMENT ON FUNCTION mneme.import_source_erased(uuid, text) IS
    'Import: whether the tenant erased the memory imported from source_ref (e.g. ''mem0:<id>'', its tombstone keeps it) '
    'in the conversation, or the conversation whole. mneme.import_fact skips such a memory.';
GRANT EXECUTE ON FUNCTION mneme.import_source_erased(uuid, text) TO mneme_admin;
