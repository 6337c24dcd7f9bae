-- =============================================================================
-- mneme pipelines: the SQL side of the segment and review jobs.
-- The sidecar decides (segmenter, reviewer, FSRS); these functions read the
-- queue and write the results, so every write and its checks live here.
-- Idempotent: re-applied on every `mneme migrate` (CREATE OR REPLACE only).
-- =============================================================================

-- -----------------------------------------------------------------------------
-- Segmentation
-- -----------------------------------------------------------------------------
CREATE OR REPLACE FUNCTION mneme.queued_messages(p_conversation_id uuid, p_through_id bigint DEFAULT NULL)
RETURNS TABLE (id bigint, role text, content text, created_at timestamptz)
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF p_conversation_id IS NULL THEN
        RAISE EXCEPTION 'conversation_id must not be NULL' USING ERRCODE = '22004';
    END IF;
    RETURN QUERY
    SELECT m.id, m.role, m.content, m.created_at
    FROM mneme.messages m
    WHERE m.conversation_id = p_conversation_id
      AND m.consumed_at IS NULL
      AND (p_through_id IS NULL OR m.id <= p_through_id)
    ORDER BY m.id;
END
$$;
COMMENT ON FUNCTION mneme.queued_messages(uuid, bigint) IS
    'The conversation''s queued (unsegmented) messages in order, up to and including p_through_id when given.';

CREATE OR REPLACE FUNCTION mneme.lock_queued(p_conversation_id uuid, p_message_ids bigint[])
RETURNS boolean
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF p_conversation_id IS NULL OR p_message_ids IS NULL THEN
        RAISE EXCEPTION 'conversation_id and message_ids must not be NULL' USING ERRCODE = '22004';
    END IF;
    -- The queue row lock serialises segmentations of one conversation (and
    -- add_message): whoever holds it sees the other's committed drain.
    PERFORM 1 FROM mneme.message_queue q WHERE q.id = p_conversation_id FOR UPDATE;
    IF NOT FOUND THEN
        RETURN false;
    END IF;
    RETURN (SELECT count(*) FROM mneme.messages m
            WHERE m.id = ANY (p_message_ids)
              AND m.conversation_id = p_conversation_id
              AND m.consumed_at IS NULL) = cardinality(ARRAY(SELECT DISTINCT unnest(p_message_ids)));
END
$$;
COMMENT ON FUNCTION mneme.lock_queued(uuid, bigint[]) IS
    'Locks the conversation''s queue row until the end of the transaction and reports whether every given '
    'message is still queued (false: another segmentation consumed some of them first).';

CREATE OR REPLACE FUNCTION mneme.create_episode(
    p_conversation_id uuid,
    p_message_ids bigint[],
    p_content text,
    p_summary text,
    p_embedding real[],
    p_surprise real,
    p_label text,
    p_pinned boolean,
    p_stability float8,
    p_difficulty float8,
    p_fsrs_state text DEFAULT NULL)
RETURNS uuid
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_id     uuid;
    v_n      int;
    v_first  timestamptz;
    v_last   timestamptz;
    v_ids    bigint[];
BEGIN
    IF p_conversation_id IS NULL THEN
        RAISE EXCEPTION 'conversation_id must not be NULL' USING ERRCODE = '22004';
    END IF;
    IF p_message_ids IS NULL OR cardinality(p_message_ids) = 0 OR array_position(p_message_ids, NULL) IS NOT NULL THEN
        RAISE EXCEPTION 'an episode needs at least one message id, and no NULLs' USING ERRCODE = '22023';
    END IF;
    IF p_content IS NULL OR btrim(p_content) = '' THEN
        RAISE EXCEPTION 'episode content must not be empty' USING ERRCODE = '22023';
    END IF;
    IF p_surprise IS NULL OR p_surprise < 0 OR p_surprise > 1 THEN
        RAISE EXCEPTION 'surprise must be between 0 and 1, got %', p_surprise USING ERRCODE = '22023';
    END IF;
    IF p_label IS NOT NULL THEN
        PERFORM mneme.check_label(p_label);  -- the one vocabulary (sql/400-labels.sql)
    END IF;
    -- NULL FSRS state: the initial state of the label (trigger memories_initial_state).
    IF p_stability <= 0 OR p_difficulty < 1 OR p_difficulty > 10 THEN
        RAISE EXCEPTION 'FSRS state out of range: stability % (> 0), difficulty % (1..10)', p_stability, p_difficulty
            USING ERRCODE = '22023';
    END IF;

    SELECT array_agg(m.id ORDER BY m.id), min(m.created_at), max(m.created_at), count(*)
    INTO v_ids, v_first, v_last, v_n
    FROM mneme.messages m
    WHERE m.id = ANY (p_message_ids) AND m.conversation_id = p_conversation_id AND m.consumed_at IS NULL;
    IF v_n <> cardinality(ARRAY(SELECT DISTINCT unnest(p_message_ids))) THEN
        RAISE EXCEPTION 'some of the % messages are not queued in conversation %', cardinality(p_message_ids), p_conversation_id
            USING ERRCODE = '55000', HINT = 'another segmentation consumed them: call mneme.lock_queued first';
    END IF;

    IF p_label IS NULL THEN  -- the offline segmenter: label by the rules
        p_label := mneme.auto_label((SELECT string_agg(m.content, E'\n' ORDER BY m.id) FROM mneme.messages m
                                     WHERE m.id = ANY (v_ids)), v_last);
    END IF;

    -- The episode happened at its last message: creation time, and the
    -- first "review" (retrievability 1 at that moment).
    INSERT INTO mneme.memories (conversation_id, kind, content, summary, embedding,
        source_message_ids, source_first_at, source_last_at, surprise, label, pinned,
        stability, difficulty, fsrs_state, last_reviewed_at, source_type, created_at)
    VALUES (p_conversation_id, 'episodic', p_content, nullif(btrim(p_summary), ''), p_embedding,
        v_ids, v_first, v_last, p_surprise, p_label, coalesce(p_pinned, false),
        p_stability, p_difficulty, p_fsrs_state, v_last, 'conversation', v_last)
    RETURNING id INTO v_id;

    UPDATE mneme.messages m SET consumed_at = now(), memory_id = v_id
    WHERE m.id = ANY (v_ids);
    RETURN v_id;
END
$$;
COMMENT ON FUNCTION mneme.create_episode(uuid, bigint[], text, text, real[], real, text, boolean, float8, float8, text) IS
    'Inserts an episodic memory made of the given queued messages (source span, created_at and last_reviewed_at '
    'taken from them) and marks exactly those messages consumed by it. Raises 55000 if any is no longer queued. '
    'A NULL embedding is filled by SQL when the built-in embedder is configured. A NULL label is chosen by '
    'mneme.auto_label from the messages; NULL stability, difficulty, fsrs_state are the label''s mneme.initial_state.';

-- -----------------------------------------------------------------------------
-- Review
-- -----------------------------------------------------------------------------
CREATE OR REPLACE FUNCTION mneme.review_targets(p_memory_ids uuid[], p_lock boolean DEFAULT false)
RETURNS TABLE (id uuid, conversation_id uuid, summary text, content text, status text,
               stability float8, difficulty float8, fsrs_state text, last_reviewed_at timestamptz,
               review_count int)
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF p_memory_ids IS NULL THEN
        RAISE EXCEPTION 'memory_ids must not be NULL' USING ERRCODE = '22004';
    END IF;
    IF p_lock THEN
        -- In id order, so concurrent reviews of overlapping sets never deadlock.
        RETURN QUERY
        SELECT m.id, m.conversation_id, m.summary, m.content, m.status, m.stability, m.difficulty,
               m.fsrs_state, m.last_reviewed_at, m.review_count
        FROM mneme.memories m WHERE m.id = ANY (p_memory_ids)
        ORDER BY m.id FOR UPDATE;
    ELSE
        RETURN QUERY
        SELECT m.id, m.conversation_id, m.summary, m.content, m.status, m.stability, m.difficulty,
               m.fsrs_state, m.last_reviewed_at, m.review_count
        FROM mneme.memories m WHERE m.id = ANY (p_memory_ids)
        ORDER BY m.id;
    END IF;
END
$$;
COMMENT ON FUNCTION mneme.review_targets(uuid[], boolean) IS
    'The memories a review rates, with their FSRS state; p_lock locks them (in id order) for the update.';

CREATE OR REPLACE FUNCTION mneme.apply_review(
    p_memory_id uuid,
    p_rating text,
    p_stability float8,
    p_difficulty float8,
    p_fsrs_state text,
    p_reviewed_at timestamptz,
    p_reviewer text,
    p_matched_queries text[] DEFAULT '{}',
    p_defaulted boolean DEFAULT false,
    p_job_id bigint DEFAULT NULL)
RETURNS boolean
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    m mneme.memories;
BEGIN
    IF p_memory_id IS NULL OR p_reviewed_at IS NULL THEN
        RAISE EXCEPTION 'memory_id and reviewed_at must not be NULL' USING ERRCODE = '22004';
    END IF;
    IF p_rating IS NULL OR p_rating NOT IN ('again', 'hard', 'good', 'easy') THEN
        RAISE EXCEPTION 'rating must be again, hard, good or easy, got %', coalesce(quote_literal(p_rating), 'NULL')
            USING ERRCODE = '22023';
    END IF;
    IF p_reviewer IS NULL OR p_reviewer NOT IN ('llm', 'heuristic') THEN
        RAISE EXCEPTION 'reviewer must be llm or heuristic, got %', coalesce(quote_literal(p_reviewer), 'NULL')
            USING ERRCODE = '22023';
    END IF;
    IF p_stability IS NULL OR p_stability <= 0 OR p_difficulty IS NULL OR p_difficulty < 1 OR p_difficulty > 10 THEN
        RAISE EXCEPTION 'FSRS state out of range: stability % (> 0), difficulty % (1..10)', p_stability, p_difficulty
            USING ERRCODE = '22023';
    END IF;

    SELECT * INTO m FROM mneme.memories WHERE id = p_memory_id FOR UPDATE;
    IF NOT FOUND OR m.status NOT IN ('active', 'inactive') THEN
        RETURN false;  -- an inactive memory is reviewed and so active again (trigger memories_reactivate)
    END IF;
    IF p_reviewed_at <= m.last_reviewed_at THEN
        RETURN false; -- stale: a newer review (or the creation) is already applied
    END IF;

    INSERT INTO mneme.review_log (memory_id, conversation_id, job_id, rating, reviewer, defaulted,
        stability_before, stability_after, difficulty_before, difficulty_after,
        state_before, state_after, last_reviewed_before, reviewed_at, matched_queries)
    VALUES (m.id, m.conversation_id, p_job_id, p_rating, p_reviewer, coalesce(p_defaulted, false),
        m.stability, p_stability, m.difficulty, p_difficulty,
        m.fsrs_state, p_fsrs_state, m.last_reviewed_at, p_reviewed_at, coalesce(p_matched_queries, '{}'));

    UPDATE mneme.memories
    SET stability = p_stability, difficulty = p_difficulty, fsrs_state = p_fsrs_state,
        last_reviewed_at = p_reviewed_at, review_count = review_count + 1, updated_at = now()
    WHERE id = m.id;
    RETURN true;
END
$$;
COMMENT ON FUNCTION mneme.apply_review(uuid, text, float8, float8, text, timestamptz, text, text[], boolean, bigint) IS
    'Writes one review''s FSRS result (computed by the sidecar from the locked row) and its review_log row. '
    'Returns false, writing nothing, when the memory is gone, superseded or forgotten, or when reviewed_at is not '
    'after its last_reviewed_at (stale). A review of an inactive memory makes it active again.';


-- -----------------------------------------------------------------------------
-- Reads of the worker (no side effects)
-- -----------------------------------------------------------------------------
CREATE OR REPLACE FUNCTION mneme.recent_memories(conversation_id uuid, k int)
RETURNS TABLE (memory_id uuid, summary text, content text)
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF recent_memories.conversation_id IS NULL THEN
        RAISE EXCEPTION 'conversation_id must not be NULL' USING ERRCODE = '22004';
    END IF;
    IF k IS NULL OR k < 0 OR k > 1000 THEN
        RAISE EXCEPTION 'k must be 0 to 1000, got %', coalesce(k::text, 'NULL') USING ERRCODE = '22023';
    END IF;
    RETURN QUERY
    SELECT m.id, coalesce(m.summary, ''), m.content
    FROM mneme.memories m
    WHERE m.conversation_id = recent_memories.conversation_id AND m.status = 'active'
    ORDER BY m.created_at DESC, m.id
    LIMIT k;
END
$$;
COMMENT ON FUNCTION mneme.recent_memories(uuid, int) IS
    'The conversation''s k most recent active memories, newest first: what a segmenter compares a new episode '
    'with for surprise.';

CREATE OR REPLACE FUNCTION mneme.context_messages(conversation_id uuid, message_ids bigint[])
RETURNS TABLE (id bigint, role text, content text, created_at timestamptz)
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF context_messages.conversation_id IS NULL OR message_ids IS NULL THEN
        RAISE EXCEPTION 'conversation_id and message_ids must not be NULL' USING ERRCODE = '22004';
    END IF;
    RETURN QUERY
    SELECT m.id, m.role, m.content, m.created_at
    FROM mneme.messages m
    WHERE m.conversation_id = context_messages.conversation_id AND m.id = ANY (message_ids)
    ORDER BY m.id;
END
$$;
COMMENT ON FUNCTION mneme.context_messages(uuid, bigint[]) IS
    'The given messages of the conversation in order: a review job''s context, referenced by id so message '
    'text is stored once. Messages that no longer exist are left out.';
