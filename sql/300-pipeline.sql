-- =============================================================================
-- mneme pipelines: the SQL side of the segment and review jobs.
-- The sidecar decides (segmenter, reviewer, FSRS); these functions read the
-- queue and write the results, so every write and its checks live here.
-- Idempotent: re-applied on every `mneme migrate` (CREATE OR REPLACE only).
-- =============================================================================

-- -----------------------------------------------------------------------------
-- Segmentation
-- -----------------------------------------------------------------------------
-- before_gap (a check job's read): only the messages before the first gap
-- among them (segment_gap_seconds, add_message's rule). The message after a
-- gap starts the next episode and has a forced cut of its own; a check that
-- read it would judge the boundary at the gap by topic, and could cut
-- elsewhere first, leaving the gap's cut with a scrap or nothing.
CREATE OR REPLACE FUNCTION mneme.queued_messages(conversation_id uuid, through_id bigint DEFAULT NULL,
                                                 before_gap boolean DEFAULT false)
RETURNS TABLE (id bigint, role text, content text, created_at timestamptz)
LANGUAGE plpgsql STABLE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
SET jit = off
AS $$
#variable_conflict use_column
DECLARE
    v__entered boolean := mneme._enter(queued_messages.conversation_id);  -- the caller forwarded first (Citus: mneme._enter)
    v_gap_id bigint;
BEGIN
    IF queued_messages.conversation_id IS NULL THEN
        RAISE EXCEPTION 'conversation_id must not be NULL' USING ERRCODE = '22004';
    END IF;
    IF queued_messages.before_gap THEN
        SELECT min(x.id) INTO v_gap_id FROM (
            SELECT m.id, m.created_at - lag(m.created_at) OVER (ORDER BY m.id) AS since_prev
            FROM mneme.messages m
            WHERE m.conversation_id = queued_messages.conversation_id
              AND m.consumed_at IS NULL
              AND (queued_messages.through_id IS NULL OR m.id <= queued_messages.through_id)) x
        WHERE x.since_prev > make_interval(secs => mneme.setting('segment_gap_seconds')::float8);
    END IF;
    RETURN QUERY
    SELECT m.id, m.role, m.content, m.created_at
    FROM mneme.messages m
    WHERE m.conversation_id = queued_messages.conversation_id
      AND m.consumed_at IS NULL
      AND (queued_messages.through_id IS NULL OR m.id <= queued_messages.through_id)
      AND (v_gap_id IS NULL OR m.id < v_gap_id)
    ORDER BY m.id;
END
$$;
COMMENT ON FUNCTION mneme.queued_messages(uuid, bigint, boolean) IS
    'The conversation''s queued (unsegmented) messages in order, up to and including through_id when given; '
    'with before_gap, only those before the first gap longer than segment_gap_seconds among them.';
GRANT EXECUTE ON FUNCTION mneme.queued_messages(uuid, bigint, boolean) TO mneme_worker;

-- The queue as the segment job reads it: the conversation's first
-- max_messages queued messages, each with its session. A session is a run
-- of messages no episode may cross the start of: a new one starts at a gap
-- longer than segment_gap_seconds since the message before, after a
-- message segment_now ended a session (ends_session), and after a hole
-- (messages between two queued ones that are not queued: set aside, then
-- put back by retry_job). closed: the session will get no more messages
-- (another session follows it in the queue, segment_now ended it, or the
-- message after it is not queued), so it is segmented whole; the last
-- session read is otherwise open, and may still grow. Computed from the
-- messages alone, whichever job reads them:
-- every gap is a boundary wherever it lies in the queue.
CREATE OR REPLACE FUNCTION mneme.queued_sessions(conversation_id uuid, max_messages int)
RETURNS TABLE (id bigint, role text, content text, created_at timestamptz, session int, closed boolean)
LANGUAGE plpgsql STABLE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
SET jit = off
AS $$
#variable_conflict use_column
DECLARE
    v__entered boolean := mneme._enter(queued_sessions.conversation_id);  -- the caller forwarded first (Citus: mneme._enter)
    v_gap interval := make_interval(secs => mneme.setting('segment_gap_seconds')::float8);
BEGIN
    IF queued_sessions.conversation_id IS NULL THEN
        RAISE EXCEPTION 'conversation_id must not be NULL' USING ERRCODE = '22004';
    END IF;
    IF queued_sessions.max_messages IS NULL OR queued_sessions.max_messages < 1 THEN
        RAISE EXCEPTION 'max_messages must be at least 1, got %', coalesce(queued_sessions.max_messages::text, 'NULL')
            USING ERRCODE = '22023';
    END IF;
    RETURN QUERY
    WITH q AS (
        SELECT m.id, m.role, m.content, m.created_at, m.ends_session,
               lag(m.id) OVER w AS prev_id, lag(m.created_at) OVER w AS prev_at, lag(m.ends_session) OVER w AS prev_end
          FROM (SELECT m.id, m.role, m.content, m.created_at, m.ends_session FROM mneme.messages m
                 WHERE m.conversation_id = queued_sessions.conversation_id AND m.consumed_at IS NULL
                 ORDER BY m.id LIMIT queued_sessions.max_messages) m
        WINDOW w AS (ORDER BY m.id)
    ), s AS (
        SELECT q.*, sum(CASE WHEN q.prev_id IS NULL OR q.prev_end OR q.created_at - q.prev_at > v_gap
                                  OR EXISTS (SELECT 1 FROM mneme.messages x
                                              WHERE x.conversation_id = queued_sessions.conversation_id
                                                AND x.id > q.prev_id AND x.id < q.id)
                             THEN 1 ELSE 0 END) OVER (ORDER BY q.id) AS session
          FROM q
    )
    SELECT s.id, s.role, s.content, s.created_at, s.session::int,
           s.session < max(s.session) OVER () OR bool_or(s.ends_session) OVER (PARTITION BY s.session)
           -- the last one read, followed by a message that is not queued
           -- (set-aside messages put back by retry_job): it cannot grow
           OR coalesce((SELECT x.consumed_at IS NOT NULL FROM mneme.messages x
                         WHERE x.conversation_id = queued_sessions.conversation_id
                           AND x.id > (SELECT max(q.id) FROM q)
                         ORDER BY x.id LIMIT 1), false)
      FROM s ORDER BY s.id;
END
$$;
COMMENT ON FUNCTION mneme.queued_sessions(uuid, int) IS
    'Worker: the conversation''s first max_messages queued messages in order, each with its session (split at gaps '
    'longer than segment_gap_seconds, after segment_now, at holes) and whether that session is closed (segmented '
    'whole) or open (the last one, which may still grow). The segment job reads the queue with it.';
GRANT EXECUTE ON FUNCTION mneme.queued_sessions(uuid, int) TO mneme_worker;

CREATE OR REPLACE FUNCTION mneme.lock_queued(conversation_id uuid, message_ids bigint[])
RETURNS boolean
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
SET jit = off
AS $$
#variable_conflict use_column
BEGIN
    PERFORM mneme._enter(lock_queued.conversation_id);  -- the caller forwarded first (Citus: mneme._enter)
    IF lock_queued.conversation_id IS NULL OR lock_queued.message_ids IS NULL THEN
        RAISE EXCEPTION 'conversation_id and message_ids must not be NULL' USING ERRCODE = '22004';
    END IF;
    -- The queue row lock serialises segmentations of one conversation (and
    -- add_message): whoever holds it sees the other's committed drain.
    PERFORM 1 FROM mneme.message_queue q WHERE q.id = lock_queued.conversation_id FOR UPDATE;
    IF NOT FOUND THEN
        RETURN false;
    END IF;
    RETURN (SELECT count(*) FROM mneme.messages m
            WHERE m.id = ANY (lock_queued.message_ids)
              AND m.conversation_id = lock_queued.conversation_id
              AND m.consumed_at IS NULL) = cardinality(ARRAY(SELECT DISTINCT unnest(lock_queued.message_ids)));
END
$$;
COMMENT ON FUNCTION mneme.lock_queued(uuid, bigint[]) IS
    'Locks the conversation''s queue row until the end of the transaction and reports whether every given '
    'message is still queued (false: another segmentation consumed some of them first).';
GRANT EXECUTE ON FUNCTION mneme.lock_queued(uuid, bigint[]) TO mneme_worker;

-- At the end of every segment job, under the queue row lock: messages
-- queued after the last one it read get a job of their own. They are past
-- the read's limit (a backlog longer than mneme.queued_sessions returns at
-- once), or a writer committed them after the job read the queue and found
-- the job still pending, so enqueued none: without this, a gap message
-- that arrived so would leave the session before it unstored until the
-- next message. So do a segment_now mark the job did not see. Before
-- next_through_id: replaced, not overloaded (calls
-- would be ambiguous); next_through_id is no longer used.
CREATE OR REPLACE FUNCTION mneme._segment_followup(conversation_id uuid, through_id bigint, next_through_id bigint DEFAULT NULL)
RETURNS bigint
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
SET jit = off
AS $$
#variable_conflict use_column
DECLARE
    v__entered boolean := mneme._enter(_segment_followup.conversation_id);  -- the caller forwarded first (Citus: mneme._enter)
    v_last bigint;
BEGIN
    IF _segment_followup.conversation_id IS NULL OR _segment_followup.through_id IS NULL THEN
        RAISE EXCEPTION 'conversation_id and through_id must not be NULL' USING ERRCODE = '22004';
    END IF;
    SELECT max(m.id) INTO v_last FROM mneme.messages m
    WHERE m.conversation_id = _segment_followup.conversation_id AND m.consumed_at IS NULL
      AND m.id > _segment_followup.through_id;
    IF v_last IS NULL THEN
        -- A segment_now committed after the job read the queue: its mark is
        -- on a message the job read as open (the job stores a session it
        -- saw closed whole, so a mark still queued is one it did not see).
        SELECT max(m.id) INTO v_last FROM mneme.messages m
        WHERE m.conversation_id = _segment_followup.conversation_id AND m.consumed_at IS NULL AND m.ends_session;
    END IF;
    IF v_last IS NULL THEN
        RETURN NULL;
    END IF;
    RETURN mneme.enqueue_segment(_segment_followup.conversation_id, mneme._segment_payload('followup', false, v_last, v_last));
END
$$;
COMMENT ON FUNCTION mneme._segment_followup(uuid, bigint, bigint) IS
    'Internal to the segment job: enqueues the job (or returns the pending one) for the messages queued after '
    'through_id, the last it read (0: none), or for a segment_now mark still queued; NULL when there are none.';
GRANT EXECUTE ON FUNCTION mneme._segment_followup(uuid, bigint, bigint) TO mneme_worker;

-- An FSRS state a row may hold: finite stability above 0 (at most 100
-- years), difficulty 1 to 10. NaN passes "> 0" in PostgreSQL: checked apart.
CREATE OR REPLACE FUNCTION mneme._fsrs_ok(stability float8, difficulty float8)
RETURNS boolean
LANGUAGE sql IMMUTABLE PARALLEL SAFE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
SELECT _fsrs_ok.stability IS NULL
    OR (_fsrs_ok.stability <> 'NaN'::float8 AND _fsrs_ok.stability > 0 AND _fsrs_ok.stability <= 36500
        AND (_fsrs_ok.difficulty IS NULL
             OR (_fsrs_ok.difficulty <> 'NaN'::float8 AND _fsrs_ok.difficulty BETWEEN 1 AND 10)))
$$;

-- The messages a memory is made of, checked one way for every writer
-- (create_episode, add_fact): at least one id, no NULL, each a message of
-- the conversation (and, for an episode, still queued: 55000 when another
-- segmentation consumed it); their ids in order and their time span.
CREATE OR REPLACE FUNCTION mneme._source_messages(conversation_id uuid, message_ids bigint[], queued_only boolean,
                                                  OUT ids bigint[], OUT first_at timestamptz, OUT last_at timestamptz)
LANGUAGE plpgsql STABLE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF _source_messages.message_ids IS NULL THEN
        RAISE EXCEPTION 'message_ids must not be NULL' USING ERRCODE = '22004',
            HINT = 'a memory names the messages it was made from';
    END IF;
    IF cardinality(_source_messages.message_ids) = 0 OR array_position(_source_messages.message_ids, NULL) IS NOT NULL THEN
        RAISE EXCEPTION 'message_ids needs at least one message id, and no NULLs' USING ERRCODE = '22023';
    END IF;
    SELECT array_agg(m.id ORDER BY m.id), min(m.created_at), max(m.created_at)
    INTO ids, first_at, last_at
    FROM mneme.messages m
    WHERE m.id = ANY (_source_messages.message_ids) AND m.conversation_id = _source_messages.conversation_id
      AND (NOT _source_messages.queued_only OR m.consumed_at IS NULL);
    IF ids IS NULL OR cardinality(ids) <> cardinality(ARRAY(SELECT DISTINCT unnest(_source_messages.message_ids))) THEN
        IF _source_messages.queued_only THEN
            RAISE EXCEPTION 'some of the % messages are not queued in conversation %', cardinality(_source_messages.message_ids),
                _source_messages.conversation_id
                USING ERRCODE = '55000', HINT = 'another segmentation consumed them: call mneme.lock_queued first';
        END IF;
        RAISE EXCEPTION 'message_ids %: not all messages of conversation %', left(_source_messages.message_ids::text, 80),
            _source_messages.conversation_id
            USING ERRCODE = '22023', HINT = 'a memory names the messages of its own conversation it was made from';
    END IF;
END
$$;
COMMENT ON FUNCTION mneme._source_messages(uuid, bigint[], boolean) IS
    'Internal to create_episode and add_fact: the messages a memory is made of, checked (22004, 22023, 55000 when '
    'queued_only and one is consumed), their ids in order, first and last time.';

-- An episode's offline summary: its most informative sentences by the
-- search's own term weights. A word weighs its BM25 idf among the
-- conversation's memories (a word the conversation rarely uses, a name or
-- a number, weighs most; a stop word nothing) times the number of the
-- episode's messages it occurs in (tf-idf: the episode's own topic, not a
-- one-off); a sentence scores the sum of its words' weights over the square
-- root of its length plus 2, so a long sentence does not win by length
-- alone. The k best in the order they were said, each with its speaker, cut
-- at a word boundary after 200 characters (a name or number is never cut
-- in half). NULL when no sentence holds a word the search indexes.
CREATE OR REPLACE FUNCTION mneme.extractive_summary(conversation_id uuid, roles text[], contents text[], k int DEFAULT NULL)
RETURNS text
LANGUAGE plpgsql STABLE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
SET jit = off
AS $$
#variable_conflict use_column
DECLARE
    v__entered boolean := mneme._enter(extractive_summary.conversation_id);  -- the caller forwarded first (Citus: mneme._enter)
    v_k   int := coalesce(extractive_summary.k, mneme.setting('segment_summary_sentences')::int);
    v_k1  float8 := mneme.setting('bm25_k1')::float8;
    v_n   float8;
    v_out text;
BEGIN
    IF extractive_summary.conversation_id IS NULL OR extractive_summary.roles IS NULL OR extractive_summary.contents IS NULL THEN
        RAISE EXCEPTION 'conversation_id, roles and contents must not be NULL' USING ERRCODE = '22004';
    END IF;
    IF cardinality(extractive_summary.roles) <> cardinality(extractive_summary.contents) THEN
        RAISE EXCEPTION 'roles (%) and contents (%) must be as many', cardinality(extractive_summary.roles),
            cardinality(extractive_summary.contents) USING ERRCODE = '22023';
    END IF;
    IF v_k IS NULL OR v_k < 1 OR v_k > 100 THEN
        RAISE EXCEPTION 'k must be from 1 to 100, got %', v_k USING ERRCODE = '22023';
    END IF;
    SELECT coalesce(sum(st.n), 0) INTO v_n FROM mneme.bm25_stats st WHERE st.conversation_id = extractive_summary.conversation_id;
    WITH sen AS (
        SELECT m.ord, x.pos, coalesce(m.role, '?') AS role, btrim(x.sentence) AS sentence,
               tsvector_to_array(mneme.bm25_tsvector(x.sentence)) AS terms  -- tokenised once
        FROM unnest(extractive_summary.roles, extractive_summary.contents) WITH ORDINALITY AS m(role, content, ord),
             regexp_split_to_table(coalesce(m.content, ''), '(?<=[.!?])\s+|\n+') WITH ORDINALITY AS x(sentence, pos)
        WHERE NOT mneme._is_blank(x.sentence)
    ), tf AS (  -- in how many of the episode's messages each term occurs
        SELECT l.term, count(DISTINCT sen.ord)::float8 AS n
        FROM sen, unnest(sen.terms) AS l(term)
        GROUP BY l.term
    ), w AS MATERIALIZED (  -- tf-idf: the episode's own words that the conversation rarely uses
        SELECT tf.term, tf.n * mneme._bm25_weight(v_n + 1, coalesce(t.df, 0), v_k1) AS wt
        FROM tf LEFT JOIN LATERAL (SELECT t.df FROM mneme.bm25_terms t
                                   WHERE t.conversation_id = extractive_summary.conversation_id AND t.term = tf.term) t ON true
    ), scored AS MATERIALIZED (  -- each sentence scored once
        SELECT sen.*,
               (SELECT coalesce(sum(w.wt), 0) / sqrt(count(*) + 2)
                FROM unnest(sen.terms) AS l(term)
                JOIN w ON w.term = l.term) AS score
        FROM sen
    ), best AS (
        SELECT * FROM scored WHERE scored.score > 0 ORDER BY scored.score DESC, scored.ord, scored.pos LIMIT v_k
    )
    SELECT string_agg(b.role || ': ' || CASE WHEN length(b.sentence) <= 200 THEN b.sentence
                                             ELSE regexp_replace(left(b.sentence, 201), '\s*\S*$', '') || ' …' END,
                      ' … ' ORDER BY b.ord, b.pos)
    INTO v_out FROM best b;
    RETURN v_out;
END
$$;
COMMENT ON FUNCTION mneme.extractive_summary(uuid, text[], text[], int) IS
    'Worker: an episode''s offline summary, the k (default segment_summary_sentences) sentences of its messages with '
    'the highest tf-idf per word (idf of BM25 among the conversation''s memories), in order, each with its speaker; '
    'NULL when none holds an indexed word.';
GRANT EXECUTE ON FUNCTION mneme.extractive_summary(uuid, text[], text[], int) TO mneme_worker;

-- A segment job's episodes in one statement: the checks per episode, then
-- one INSERT of them all (the BM25 statistics' statement trigger runs once
-- per job, not once per episode) and one UPDATE that consumes their
-- messages.
CREATE OR REPLACE FUNCTION mneme.create_episodes(conversation_id uuid, episodes jsonb)
RETURNS TABLE (episode int, memory_id uuid, label text, stability float8)
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
SET jit = off
AS $$
#variable_conflict use_column
DECLARE
    v__entered boolean := mneme._enter(create_episodes.conversation_id);  -- the caller forwarded first (Citus: mneme._enter)
    e        record;
    v_src    record;
    v_label  text;
    v_rows   jsonb := '[]';  -- per episode what SQL resolved: its messages, their span, the label
BEGIN
    IF create_episodes.conversation_id IS NULL THEN
        RAISE EXCEPTION 'conversation_id must not be NULL' USING ERRCODE = '22004';
    END IF;
    IF create_episodes.episodes IS NULL OR jsonb_typeof(create_episodes.episodes) <> 'array'
       OR jsonb_array_length(create_episodes.episodes) = 0 THEN
        RAISE EXCEPTION 'episodes must be a non-empty JSON array' USING ERRCODE = '22023',
            HINT = 'one object per episode: message_ids, content, summary, embedding, surprise, label, pinned';
    END IF;
    FOR e IN SELECT x.ep, x.n::int AS n FROM jsonb_array_elements(create_episodes.episodes) WITH ORDINALITY AS x(ep, n) LOOP
        IF jsonb_typeof(e.ep) <> 'object' OR jsonb_typeof(e.ep -> 'message_ids') NOT IN ('array', 'null') THEN
            RAISE EXCEPTION 'episode %: an object with an array message_ids', e.n USING ERRCODE = '22023';
        END IF;
        IF e.ep ->> 'content' IS NULL OR mneme._is_blank(e.ep ->> 'content') THEN
            RAISE EXCEPTION 'episode %: content must not be empty', e.n USING ERRCODE = '22023';
        END IF;
        IF (e.ep ->> 'surprise') IS NULL OR (e.ep ->> 'surprise')::real < 0 OR (e.ep ->> 'surprise')::real > 1 THEN
            RAISE EXCEPTION 'episode %: surprise must be between 0 and 1, got %', e.n, e.ep ->> 'surprise' USING ERRCODE = '22023';
        END IF;
        IF e.ep ->> 'label' IS NOT NULL THEN
            PERFORM mneme.check_label(e.ep ->> 'label');  -- the one vocabulary (sql/400-labels.sql)
        END IF;
        -- NULL FSRS state: the initial state of the label (trigger memories_initial_state).
        IF NOT mneme._fsrs_ok((e.ep ->> 'stability')::float8, (e.ep ->> 'difficulty')::float8) THEN
            RAISE EXCEPTION 'episode %: FSRS state out of range: stability % (> 0), difficulty % (1..10)', e.n,
                e.ep ->> 'stability', e.ep ->> 'difficulty' USING ERRCODE = '22023';
        END IF;
        SELECT x.ids, x.first_at, x.last_at INTO v_src
        FROM mneme._source_messages(create_episodes.conversation_id,
                                    CASE WHEN jsonb_typeof(e.ep -> 'message_ids') = 'array'
                                         THEN ARRAY(SELECT jsonb_array_elements_text(e.ep -> 'message_ids')::bigint) END,
                                    true) x;
        IF EXISTS (SELECT 1 FROM jsonb_array_elements(v_rows) r, jsonb_array_elements_text(r -> 'ids') i
                   WHERE i::bigint = ANY (v_src.ids)) THEN
            RAISE EXCEPTION 'episode %: a message is in two episodes', e.n USING ERRCODE = '22023',
                HINT = 'each queued message goes into one episode';
        END IF;
        v_label := e.ep ->> 'label';
        IF v_label IS NULL THEN  -- the offline segmenter: label by the rules
            v_label := mneme.episode_label(ARRAY(SELECT m.content FROM mneme.messages m
                                                 WHERE m.id = ANY (v_src.ids) ORDER BY m.id), v_src.last_at);
        END IF;
        v_rows := v_rows || jsonb_build_array(jsonb_build_object('n', e.n, 'ids', to_jsonb(v_src.ids),
                                                                 'first_at', v_src.first_at, 'last_at', v_src.last_at,
                                                                 'label', v_label));
    END LOOP;

    -- The episode happened at its last message: creation time, and the
    -- first "review" (retrievability 1 at that moment). An episode is
    -- told from the others by its first message (each message in one).
    RETURN QUERY
    WITH src AS (
        SELECT x.n::int AS n, x.ep, r.value AS r,
               ARRAY(SELECT i::bigint FROM jsonb_array_elements_text(r.value -> 'ids') i ORDER BY 1) AS ids
        FROM jsonb_array_elements(create_episodes.episodes) WITH ORDINALITY AS x(ep, n)
        JOIN jsonb_array_elements(v_rows) r ON (r.value ->> 'n')::int = x.n
    ), ins AS (
        INSERT INTO mneme.memories AS m (conversation_id, kind, content, summary, embedding,
            source_message_ids, source_first_at, source_last_at, surprise, label, pinned,
            stability, difficulty, fsrs_state, last_reviewed_at, source_type, created_at, confidence_score)
        SELECT create_episodes.conversation_id, 'episodic', s.ep ->> 'content', nullif(btrim(s.ep ->> 'summary'), ''),
               -- cast explicitly: Citus fails to plan the implicit cast
               -- to pgvector's type ("not enough default arguments")
               (CASE WHEN jsonb_typeof(s.ep -> 'embedding') = 'array'
                     THEN ARRAY(SELECT v::real FROM jsonb_array_elements_text(s.ep -> 'embedding') v) END)::mneme.embedding,
               s.ids, (s.r ->> 'first_at')::timestamptz, (s.r ->> 'last_at')::timestamptz,
               (s.ep ->> 'surprise')::real, s.r ->> 'label', coalesce((s.ep ->> 'pinned')::boolean, false),
               (s.ep ->> 'stability')::float8, (s.ep ->> 'difficulty')::float8, s.ep ->> 'fsrs_state',
               (s.r ->> 'last_at')::timestamptz, 'conversation', (s.r ->> 'last_at')::timestamptz,
               mneme._source_confidence('conversation')
        FROM src s ORDER BY s.n
        RETURNING m.id, m.source_message_ids, m.label, m.stability
    ), consumed AS (
        UPDATE mneme.messages msg SET consumed_at = now(), memory_id = ins.id
        FROM ins WHERE msg.id = ANY (ins.source_message_ids)
    )
    SELECT s.n, ins.id, ins.label, ins.stability
    FROM src s JOIN ins ON ins.source_message_ids[1] = s.ids[1]
    ORDER BY s.n;
END
$$;
COMMENT ON FUNCTION mneme.create_episodes(uuid, jsonb) IS
    'Inserts episodic memories, one per object of episodes ({message_ids, content, summary, embedding, surprise, '
    'label, pinned, stability, difficulty, fsrs_state}), in one statement, each made of its queued messages (source '
    'span, created_at and last_reviewed_at taken from them), and marks exactly those messages consumed. Raises '
    '55000 if any is no longer queued, 22023 naming the episode for bad input. A missing embedding is filled by SQL '
    'with the built-in embedder; a missing label is chosen by mneme.episode_label of the messages; missing FSRS '
    'state is the label''s mneme.initial_state. Returns each episode''s position, id, label and stability.';
GRANT EXECUTE ON FUNCTION mneme.create_episodes(uuid, jsonb) TO mneme_worker;

CREATE OR REPLACE FUNCTION mneme.create_episode(
    conversation_id uuid,
    message_ids bigint[],
    content text,
    summary text,
    embedding real[],
    surprise real,
    label text,
    pinned boolean,
    stability float8,
    difficulty float8,
    fsrs_state text DEFAULT NULL)
RETURNS uuid
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
SET jit = off
AS $$
#variable_conflict use_column
DECLARE
    v__entered boolean := mneme._enter(create_episode.conversation_id);  -- the caller forwarded first (Citus: mneme._enter)
    v_id uuid;
BEGIN
    SELECT e.memory_id INTO v_id
    FROM mneme.create_episodes(create_episode.conversation_id, jsonb_build_array(jsonb_strip_nulls(jsonb_build_object(
        'message_ids', to_jsonb(create_episode.message_ids), 'content', create_episode.content,
        'summary', create_episode.summary, 'embedding', to_jsonb(create_episode.embedding),
        'surprise', create_episode.surprise, 'label', create_episode.label, 'pinned', create_episode.pinned,
        'stability', create_episode.stability, 'difficulty', create_episode.difficulty,
        'fsrs_state', create_episode.fsrs_state)))) e;
    RETURN v_id;
END
$$;
COMMENT ON FUNCTION mneme.create_episode(uuid, bigint[], text, text, real[], real, text, boolean, float8, float8, text) IS
    'Inserts an episodic memory made of the given queued messages (source span, created_at and last_reviewed_at '
    'taken from them) and marks exactly those messages consumed by it. Raises 55000 if any is no longer queued. '
    'A NULL embedding is filled by SQL when the built-in embedder is configured. A NULL label is chosen by '
    'mneme.episode_label of the messages; NULL stability, difficulty, fsrs_state are the label''s mneme.initial_state.';
GRANT EXECUTE ON FUNCTION mneme.create_episode(uuid, bigint[], text, text, real[], real, text, boolean, float8, float8, text) TO mneme_worker;

-- A message's embedding by the external embedder, written by the segment job
-- with the episode the message went into (the context ranks turns by it).
CREATE OR REPLACE FUNCTION mneme.set_message_embedding(message_id bigint, embedding real[])
RETURNS void
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
SET jit = off
AS $$
BEGIN
    PERFORM mneme._enter(NULL);  -- the caller forwarded first (Citus: mneme._enter)
    IF set_message_embedding.message_id IS NULL OR set_message_embedding.embedding IS NULL THEN
        RAISE EXCEPTION 'message_id and embedding must not be NULL' USING ERRCODE = '22004';
    END IF;
    PERFORM mneme.check_embedding(set_message_embedding.embedding);  -- finite, the database's dimension (22023)
    UPDATE mneme.messages m SET embedding = set_message_embedding.embedding WHERE m.id = set_message_embedding.message_id;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'no message %', set_message_embedding.message_id USING ERRCODE = 'P0002';
    END IF;
END
$$;
COMMENT ON FUNCTION mneme.set_message_embedding(bigint, real[]) IS
    'Stores a message''s embedding computed by the external embedder (the segment job, beside its episode''s); '
    'the context ranks the candidate episodes'' turns by cosine to the query embedding as well as by BM25.';
GRANT EXECUTE ON FUNCTION mneme.set_message_embedding(bigint, real[]) TO mneme_worker, mneme_admin;

-- -----------------------------------------------------------------------------
-- Review
-- -----------------------------------------------------------------------------
CREATE OR REPLACE FUNCTION mneme.review_targets(memory_ids uuid[], lock boolean DEFAULT false)
RETURNS TABLE (id uuid, conversation_id uuid, summary text, content text, status text,
               stability float8, difficulty float8, fsrs_state text, last_reviewed_at timestamptz,
               review_count int)
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
SET jit = off
AS $$
#variable_conflict use_column
BEGIN
    PERFORM mneme._enter(NULL);  -- the caller forwarded first (Citus: mneme._enter)
    IF review_targets.memory_ids IS NULL THEN
        RAISE EXCEPTION 'memory_ids must not be NULL' USING ERRCODE = '22004';
    END IF;
    IF review_targets.lock THEN
        -- In the one lock order (mneme._lock_memories), so concurrent
        -- reviews and revisions of overlapping sets never deadlock.
        PERFORM mneme._lock_memories(review_targets.memory_ids);
    END IF;
    RETURN QUERY
    SELECT m.id, m.conversation_id, m.summary, m.content, m.status, m.stability, m.difficulty,
           m.fsrs_state, m.last_reviewed_at, m.review_count
    FROM mneme.memories m WHERE m.id = ANY (review_targets.memory_ids)
    ORDER BY m.id;
END
$$;
COMMENT ON FUNCTION mneme.review_targets(uuid[], boolean) IS
    'The memories a review rates, with their FSRS state; lock locks them (in id order) for the update.';
GRANT EXECUTE ON FUNCTION mneme.review_targets(uuid[], boolean) TO mneme_worker;

-- A review row's queries as rows of mneme.review_queries (goose 00310):
-- each distinct text once, at the place it first appears, keyed by its
-- md5. The one rule of apply_review and import_reviews; SQL, so that it
-- is inlined into their INSERT ... SELECT.
CREATE OR REPLACE FUNCTION mneme._review_query_rows(queries text[])
RETURNS TABLE (query_key uuid, query text, ord int)
LANGUAGE sql IMMUTABLE PARALLEL SAFE
AS $$
    SELECT pg_catalog.md5(u.x)::pg_catalog.uuid, u.x, pg_catalog.min(u.o)::pg_catalog.int4
    FROM pg_catalog.unnest($1) WITH ORDINALITY AS u(x, o)
    WHERE u.x IS NOT NULL
    GROUP BY u.x
$$;
COMMENT ON FUNCTION mneme._review_query_rows(text[]) IS
    'Internal: a review''s queries as mneme.review_queries rows: each distinct non-NULL text once, its key md5, its '
    'ord where it first appears.';

CREATE OR REPLACE FUNCTION mneme.apply_review(
    memory_id uuid,
    rating text,
    stability float8,
    difficulty float8,
    fsrs_state text,
    reviewed_at timestamptz,
    reviewer text,
    matched_queries text[] DEFAULT '{}',
    defaulted boolean DEFAULT false,
    job_id bigint DEFAULT NULL,
    evidence jsonb DEFAULT NULL)
RETURNS boolean
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
SET jit = off
AS $$
#variable_conflict use_column
DECLARE
    v__entered boolean := mneme._enter(NULL);  -- the caller forwarded first (Citus: mneme._enter)
    m         mneme.memories;
    v_conv    uuid;
    v_job     record;
    v_asked   uuid;
    v_queries text[] := coalesce(apply_review.matched_queries, '{}');
    v_log     bigint;
    v_tenant  text;
    v_n       bigint;
BEGIN
    IF apply_review.memory_id IS NULL OR apply_review.reviewed_at IS NULL THEN
        RAISE EXCEPTION 'memory_id and reviewed_at must not be NULL' USING ERRCODE = '22004';
    END IF;
    PERFORM mneme._check_time('reviewed_at', apply_review.reviewed_at);
    IF apply_review.evidence IS NOT NULL
       AND (jsonb_typeof(apply_review.evidence) <> 'object' OR pg_column_size(apply_review.evidence) > 4096) THEN
        RAISE EXCEPTION 'evidence must be a JSON object of at most 4 kB'
            USING ERRCODE = '22023', HINT = '{"score": ..., "thresholds": {...}} or {"reason": "..."}';
    END IF;
    IF apply_review.reviewed_at > now() + interval '1 day' THEN
        RAISE EXCEPTION 'reviewed_at must be a finite time not in the future, got %', apply_review.reviewed_at
            USING ERRCODE = '22008', HINT = 'the time of the conversation that used the memory';
    END IF;
    IF apply_review.rating IS NULL OR apply_review.rating NOT IN ('again', 'hard', 'good', 'easy') THEN
        RAISE EXCEPTION 'rating must be again, hard, good or easy, got %', mneme._quote_prefix(apply_review.rating)
            USING ERRCODE = '22023';
    END IF;
    IF apply_review.reviewer IS NULL OR apply_review.reviewer NOT IN ('llm', 'heuristic') THEN
        RAISE EXCEPTION 'reviewer must be llm or heuristic, got %', mneme._quote_prefix(apply_review.reviewer)
            USING ERRCODE = '22023';
    END IF;
    IF apply_review.fsrs_state IS NULL OR apply_review.fsrs_state NOT IN ('learning', 'review', 'relearning') THEN
        RAISE EXCEPTION 'fsrs_state must be learning, review or relearning, got %', mneme._quote_prefix(apply_review.fsrs_state)
            USING ERRCODE = '22023';
    END IF;
    IF apply_review.stability IS NULL OR apply_review.difficulty IS NULL
       OR NOT mneme._fsrs_ok(apply_review.stability, apply_review.difficulty) THEN
        RAISE EXCEPTION 'FSRS state out of range: stability % (> 0), difficulty % (1..10)', apply_review.stability, apply_review.difficulty
            USING ERRCODE = '22023';
    END IF;

    v_conv := mneme._memory_conversation(apply_review.memory_id);
    SELECT * INTO m FROM mneme.memories WHERE conversation_id = v_conv AND id = apply_review.memory_id FOR UPDATE;
    IF NOT FOUND OR m.status NOT IN ('active', 'inactive') THEN
        RETURN false;  -- an inactive memory is reviewed and so active again (trigger memories_reactivate)
    END IF;
    IF apply_review.reviewed_at <= m.last_reviewed_at THEN
        RETURN false; -- stale: a newer review (or the creation) is already applied
    END IF;

    IF apply_review.job_id IS NOT NULL THEN
        -- The job as it is now, locked against an erase until this
        -- transaction ends (its conversation first: on Citus a lock names
        -- the shard).
        SELECT j.conversation_id INTO v_asked FROM mneme.jobs j WHERE j.id = apply_review.job_id;
        SELECT j.id, j.kind, j.tenant_id, j.payload INTO v_job FROM mneme.jobs j
        WHERE j.conversation_id = v_asked AND j.id = apply_review.job_id FOR SHARE;
        IF NOT FOUND THEN
            RAISE EXCEPTION 'job % does not exist (its conversation was erased?)', apply_review.job_id USING ERRCODE = 'P0002';
        END IF;
        -- A job touches only rows of its own conversation's tenant.
        IF v_job.tenant_id IS DISTINCT FROM m.tenant_id THEN
            RAISE EXCEPTION 'job % of tenant % may not review memory % of another tenant', apply_review.job_id, v_job.tenant_id, m.id
                USING ERRCODE = '42501', HINT = 'a review job names only memories its conversation''s tenant retrieved';
        END IF;
        -- A review job's handler read its payload before the model call; an
        -- erase since then took the retrievals of an erased memory (and
        -- every copy of their queries) out of it. Only the queries the
        -- payload still records for this memory are kept.
        IF v_job.kind = 'review' THEN
            v_queries := ARRAY(
                SELECT x FROM unnest(v_queries) WITH ORDINALITY AS u(x, o)
                WHERE EXISTS (SELECT 1 FROM jsonb_array_elements(CASE WHEN jsonb_typeof(v_job.payload -> 'reviews') = 'array'
                                                                      THEN v_job.payload -> 'reviews' ELSE '[]' END) e
                              WHERE e ->> 'query' = x AND jsonb_typeof(e -> 'memory_ids') = 'array'
                                AND (e -> 'memory_ids') ? m.id::text)
                ORDER BY o);
        END IF;
    END IF;

    INSERT INTO mneme.review_log (memory_id, conversation_id, job_id, rating, reviewer, defaulted,
        stability_before, stability_after, difficulty_before, difficulty_after,
        state_before, state_after, last_reviewed_before, reviewed_at, asked_in, evidence)
    VALUES (m.id, m.conversation_id, apply_review.job_id, apply_review.rating, apply_review.reviewer, coalesce(apply_review.defaulted, false),
        m.stability, apply_review.stability, m.difficulty, apply_review.difficulty,
        m.fsrs_state, apply_review.fsrs_state, m.last_reviewed_at, apply_review.reviewed_at, v_asked, apply_review.evidence)
    RETURNING id, tenant_id INTO v_log, v_tenant;
    -- Its queries: the distinct texts, in the order they first appear, as
    -- rows of mneme.review_queries (goose 00310; an erase deletes them
    -- there without rewriting the review row). (RETURNING: on Citus an
    -- INSERT ... SELECT without it goes to the shard as COPY, which row
    -- security refuses.)
    IF cardinality(v_queries) > 0 THEN
        WITH ins AS (
            INSERT INTO mneme.review_queries (conversation_id, review_log_id, tenant_id, query_key, query, ord)
            SELECT m.conversation_id, v_log, v_tenant, q.query_key, q.query, q.ord
            FROM mneme._review_query_rows(v_queries) AS q
            RETURNING 1)
        SELECT count(*) INTO v_n FROM ins;
    END IF;

    UPDATE mneme.memories
    SET stability = apply_review.stability, difficulty = apply_review.difficulty, fsrs_state = apply_review.fsrs_state,
        last_reviewed_at = apply_review.reviewed_at, review_count = review_count + 1, updated_at = now()
    WHERE conversation_id = m.conversation_id AND id = m.id;
    RETURN true;
END
$$;
COMMENT ON FUNCTION mneme.apply_review(uuid, text, float8, float8, text, timestamptz, text, text[], boolean, bigint, jsonb) IS
    'Writes one review''s FSRS result (computed by the sidecar from the locked row) and its review_log row. '
    'Returns false, writing nothing, when the memory is gone, superseded or forgotten, or when reviewed_at is not '
    'after its last_reviewed_at (stale). A review of an inactive memory makes it active again. With job_id: the '
    'job must exist (P0002) and be of the memory''s tenant (42501); a review job''s matched_queries keep only the '
    'queries its payload still records for the memory (an erase during the model call took the others). The queries '
    'are stored as rows of mneme.review_queries (each distinct text once, in the order given). evidence (a JSON '
    'object, at most 4 kB) is why the reviewer rated so, shown with the review: the heuristic''s score and thresholds, or the LLM''s reason.';
GRANT EXECUTE ON FUNCTION mneme.apply_review(uuid, text, float8, float8, text, timestamptz, text, text[], boolean, bigint, jsonb) TO mneme_worker;


-- -----------------------------------------------------------------------------
-- Reads of the worker (no side effects)
-- -----------------------------------------------------------------------------
CREATE OR REPLACE FUNCTION mneme.recent_memories(conversation_id uuid, k int)
RETURNS TABLE (memory_id uuid, summary text, content text)
LANGUAGE plpgsql STABLE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
SET jit = off
AS $$
BEGIN
    PERFORM mneme._enter(recent_memories.conversation_id);  -- the caller forwarded first (Citus: mneme._enter)
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
GRANT EXECUTE ON FUNCTION mneme.recent_memories(uuid, int) TO mneme_worker;

CREATE OR REPLACE FUNCTION mneme.context_messages(conversation_id uuid, message_ids bigint[])
RETURNS TABLE (id bigint, role text, content text, created_at timestamptz)
LANGUAGE plpgsql STABLE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
SET jit = off
AS $$
BEGIN
    PERFORM mneme._enter(context_messages.conversation_id);  -- the caller forwarded first (Citus: mneme._enter)
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
GRANT EXECUTE ON FUNCTION mneme.context_messages(uuid, bigint[]) TO mneme_worker;
