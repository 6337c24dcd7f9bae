-- =============================================================================
-- mneme core: settings access, the job outbox, messages and pending reviews.
-- Idempotent: re-applied on every `mneme migrate` (CREATE OR REPLACE only).
-- Every function is schema-qualified, sets its search_path, checks its
-- arguments and raises with an SQLSTATE and a HINT.
-- Placeholder @extschema@ is replaced by migrate with the schema that holds
-- the vector extension (or mneme when the array fallback is in use).
-- =============================================================================

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
    SELECT s.value INTO v FROM mneme.settings s WHERE s.key = setting.key;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'unknown mneme setting "%"', setting.key
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
    IF set_setting.key IN ('vector_variant', 'embedding_dim') THEN
        RAISE EXCEPTION 'setting "%" is fixed at migrate time', set_setting.key
            USING ERRCODE = '55000', HINT = 're-embedding into a new dimension is a command: mneme reembed';
    END IF;
    IF set_setting.value IS NULL THEN
        RAISE EXCEPTION 'setting "%" needs a value', set_setting.key USING ERRCODE = '22004';
    END IF;
    IF NOT EXISTS (SELECT 1 FROM mneme.settings s WHERE s.key = set_setting.key) THEN
        RAISE EXCEPTION 'unknown mneme setting "%"', left(set_setting.key, 80)
            USING ERRCODE = '22023', HINT = 'SELECT key FROM mneme.settings lists the settings';
    END IF;
    PERFORM mneme._check_setting(set_setting.key, set_setting.value);  -- sql/010-setting-rules.sql
    UPDATE mneme.settings SET value = set_setting.value, updated_at = now() WHERE key = set_setting.key;
END
$$;
COMMENT ON FUNCTION mneme.set_setting(text, jsonb) IS
    'Changes one tunable; unknown keys, the migrate-time keys and values outside the key''s rule '
    '(sql/010-setting-rules.sql: type and range, 22023 naming the key) are errors.';

-- -----------------------------------------------------------------------------
-- Jobs: the transactional outbox
-- -----------------------------------------------------------------------------
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
    v_id bigint;
BEGIN
    IF enqueue_job.kind IS NULL OR enqueue_job.kind !~ '^[a-z][a-z0-9_]*$' THEN
        RAISE EXCEPTION 'job kind must be a lower-case identifier, got %', coalesce(quote_literal(enqueue_job.kind), 'NULL')
            USING ERRCODE = '22023';
    END IF;
    IF enqueue_job.run_at IS NOT NULL AND NOT isfinite(enqueue_job.run_at) THEN
        RAISE EXCEPTION 'run_at must be a finite time, got %', enqueue_job.run_at USING ERRCODE = '22008';
    END IF;
    IF enqueue_job.payload IS NOT NULL AND jsonb_typeof(enqueue_job.payload) <> 'object' THEN
        RAISE EXCEPTION 'job payload must be a JSON object, got %', left(enqueue_job.payload::text, 80) USING ERRCODE = '22023';
    END IF;
    -- The payloads the sidecar's handlers read: what they could only fail on
    -- is refused here.
    IF enqueue_job.kind = 'segment' AND (enqueue_job.conversation_id IS NULL
           OR jsonb_typeof(enqueue_job.payload -> 'check') IS DISTINCT FROM 'boolean'
           OR (enqueue_job.payload ->> 'check' = 'false' AND jsonb_typeof(enqueue_job.payload -> 'through_message_id') IS DISTINCT FROM 'number'))
       OR enqueue_job.kind = 'review' AND (enqueue_job.conversation_id IS NULL
           OR jsonb_typeof(enqueue_job.payload -> 'reviews') IS DISTINCT FROM 'array') THEN
        RAISE EXCEPTION '% job payload %: not what its handler reads', enqueue_job.kind, left(enqueue_job.payload::text, 80)
            USING ERRCODE = '22023',
                  HINT = 'segment: a conversation and {"check": bool, "through_message_id": id (for a forced cut)}; '
                         'review: a conversation and {"reviews": [...], "reviewed_at": time}';
    END IF;
    INSERT INTO mneme.jobs (kind, conversation_id, payload, dedupe_key, run_at)
    VALUES (enqueue_job.kind, enqueue_job.conversation_id, coalesce(enqueue_job.payload, '{}'), enqueue_job.dedupe_key, coalesce(enqueue_job.run_at, now()))
    ON CONFLICT DO NOTHING
    RETURNING id INTO v_id;
    IF v_id IS NULL THEN
        -- An equivalent job is already pending: keep it, report its id.
        SELECT j.id INTO v_id FROM mneme.jobs j
        WHERE j.state = 'pending'
          AND ((enqueue_job.dedupe_key IS NOT NULL AND j.dedupe_key = enqueue_job.dedupe_key)
               OR (enqueue_job.kind = 'segment' AND j.kind = 'segment' AND j.conversation_id = enqueue_job.conversation_id))
        LIMIT 1;
        RETURN v_id;
    END IF;
    -- A wake-up hint only: sidecars also sweep the table and may follow the
    -- WAL instead. Delivered at commit, so never for a rolled-back job.
    PERFORM pg_notify('mneme_jobs', json_build_object('id', v_id, 'kind', enqueue_job.kind)::text);
    RETURN v_id;
END
$$;
COMMENT ON FUNCTION mneme.enqueue_job(text, uuid, jsonb, text, timestamptz) IS
    'Inserts a pending job in the caller''s transaction and NOTIFYs mneme_jobs at commit. '
    'A pending duplicate (same dedupe_key, or a second segment job for a conversation) is not inserted; '
    'its id is returned instead.';

-- -----------------------------------------------------------------------------
-- Messages
-- -----------------------------------------------------------------------------
CREATE OR REPLACE FUNCTION mneme.set_speakers(conversation_id uuid, speakers text[])
RETURNS void
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
#variable_conflict use_column
BEGIN
    IF set_speakers.conversation_id IS NULL THEN
        RAISE EXCEPTION 'conversation_id must not be NULL' USING ERRCODE = '22004';
    END IF;
    IF set_speakers.speakers IS NULL OR EXISTS (
        SELECT 1 FROM unnest(set_speakers.speakers) s
        WHERE s IS NULL OR s !~ '^[[:alpha:]][[:alnum:] _.''-]{0,63}$') THEN
        RAISE EXCEPTION 'speaker names must be 1 to 64 characters, starting with a letter'
            USING ERRCODE = '22023', HINT = 'letters, digits, space, _ . '' - are allowed';
    END IF;
    PERFORM mneme._claim_conversation(set_speakers.conversation_id);
    UPDATE mneme.message_queue SET speakers = set_speakers.speakers, updated_at = now() WHERE id = set_speakers.conversation_id;
END
$$;
COMMENT ON FUNCTION mneme.set_speakers(uuid, text[]) IS
    'Registers speaker names that add_message accepts as roles in this conversation, '
    'besides user, assistant, system and tool (e.g. the two people of a LoCoMo dialogue).';

-- Blank: nothing but whitespace, separators, zero-width and control
-- characters. The one definition of "empty" of SQL (add_message, remember,
-- search) and of the Go hash embedder (embed.ErrEmptyText; a test compares
-- them on every such character).
CREATE OR REPLACE FUNCTION mneme._is_blank(input text)
RETURNS boolean
LANGUAGE sql IMMUTABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$
SELECT _is_blank.input ~ '^[\u0001-\u0020\u007f-\u00a0\u1680\u180e\u2000-\u200f\u2028-\u202f\u205f-\u2064\u3000\ufeff]*$'
$$;
COMMENT ON FUNCTION mneme._is_blank(text) IS
    'Internal: whether a text holds nothing but whitespace, separators, zero-width and control characters.';

CREATE OR REPLACE FUNCTION mneme.add_message(
    conversation_id uuid,
    role text,
    content text,
    at timestamptz DEFAULT NULL)
RETURNS bigint
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
#variable_conflict use_column
DECLARE
    v_max_chars int := mneme.setting('message_max_chars')::int;
    v_min_msgs  int := mneme.setting('segment_min_messages')::int;
    v_max_msgs  int := mneme.setting('segment_max_messages')::int;
    v_gap       interval := make_interval(secs => mneme.setting('segment_gap_seconds')::float8);
    v_min_chars int := mneme.setting('segment_min_chars')::int;
    v_future    interval := (mneme.setting('message_max_future') #>> '{}')::interval;
    v_at        timestamptz;
    v_queue     mneme.message_queue;
    v_prev_id   bigint;
    v_id        bigint;
    v_queued    int;
    v_payload   jsonb;
BEGIN
    IF add_message.conversation_id IS NULL THEN
        RAISE EXCEPTION 'conversation_id must not be NULL' USING ERRCODE = '22004';
    END IF;
    IF add_message.role IS NULL THEN
        RAISE EXCEPTION 'role must not be NULL' USING ERRCODE = '22004',
            HINT = 'use user, assistant, system or tool';
    END IF;
    IF add_message.content IS NULL OR mneme._is_blank(add_message.content) THEN
        RAISE EXCEPTION 'message content must not be NULL or empty' USING ERRCODE = '22023',
            HINT = 'whitespace, zero-width and control characters alone do not count as content';
    END IF;
    IF length(add_message.content) > v_max_chars THEN
        RAISE EXCEPTION 'message content is % characters, over the limit of %', length(add_message.content), v_max_chars
            USING ERRCODE = '22001', HINT = 'split the message, or raise setting message_max_chars';
    END IF;
    IF add_message.at IS NOT NULL AND NOT isfinite(add_message.at) THEN
        RAISE EXCEPTION 'message time must be a finite timestamp' USING ERRCODE = '22008';
    END IF;
    IF add_message.at > now() + v_future THEN
        RAISE EXCEPTION 'message time % is more than % in the future', add_message.at, v_future
            USING ERRCODE = '22008',
                  HINT = 'leave the time out for the server''s clock; setting message_max_future bounds the clock skew allowed';
    END IF;

    PERFORM mneme._claim_conversation(add_message.conversation_id);
    -- The row lock orders appends within a conversation.
    SELECT * INTO v_queue FROM mneme.message_queue q WHERE q.id = add_message.conversation_id FOR UPDATE;

    IF add_message.role NOT IN ('user', 'assistant', 'system', 'tool') AND NOT add_message.role = ANY (v_queue.speakers) THEN
        RAISE EXCEPTION 'unknown role "%"', add_message.role USING ERRCODE = '22023',
            HINT = 'use user, assistant, system or tool, or register speaker names with mneme.set_speakers';
    END IF;
    -- Without a time, the message arrives now: read under the row lock, so
    -- concurrent writers append in arrival order and none is "earlier".
    v_at := coalesce(add_message.at, greatest(clock_timestamp(), v_queue.last_message_at));
    IF v_at < v_queue.last_message_at THEN
        RAISE EXCEPTION 'message time % is earlier than the previous message (%)', v_at, v_queue.last_message_at
            USING ERRCODE = '22008', HINT = 'messages are appended in time order; leave the time out to append now';
    END IF;

    SELECT max(m.id) INTO v_prev_id FROM mneme.messages m
    WHERE m.conversation_id = add_message.conversation_id AND m.consumed_at IS NULL;

    INSERT INTO mneme.messages (conversation_id, role, content, created_at)
    VALUES (add_message.conversation_id, add_message.role, add_message.content, v_at)
    RETURNING id INTO v_id;
    UPDATE mneme.message_queue SET last_message_at = v_at, updated_at = now() WHERE id = add_message.conversation_id;

    SELECT count(*) INTO v_queued FROM mneme.messages m
    WHERE m.conversation_id = add_message.conversation_id AND m.consumed_at IS NULL;

    -- The seed's rule-based check, in its order.
    IF v_queued < v_min_msgs THEN
        RETURN v_id;
    ELSIF v_queued >= v_max_msgs THEN
        v_payload := jsonb_build_object('reason', 'max_messages', 'check', false,
                                        'through_message_id', v_id, 'trigger_message_id', v_id);
    ELSIF v_queue.last_message_at IS NOT NULL AND v_at - v_queue.last_message_at > v_gap THEN
        -- The late message starts the next episode: consume up to the one before.
        v_payload := jsonb_build_object('reason', 'gap', 'check', false,
                                        'through_message_id', v_prev_id, 'trigger_message_id', v_id);
    ELSIF length(regexp_replace(add_message.content, '^[[:space:]]+|[[:space:]]+$', '', 'g')) < v_min_chars THEN
        RETURN v_id;
    ELSE
        v_payload := jsonb_build_object('reason', 'check', 'check', true,
                                        'through_message_id', v_id, 'trigger_message_id', v_id);
    END IF;

    PERFORM mneme.enqueue_segment(add_message.conversation_id, v_payload);
    RETURN v_id;
END
$$;
COMMENT ON FUNCTION mneme.add_message(uuid, text, text, timestamptz) IS
    'Appends a message to a conversation (creating it on first use) and applies the rule-based '
    'segmentation check (settings segment_*): a positive check enqueues one segment job in the same '
    'transaction. Returns the message id. Roles: user, assistant, system, tool, or a registered speaker. '
    'Without a time (or with NULL) the message arrives at the server''s clock, in arrival order; a given time '
    'must not be earlier than the previous message nor more than message_max_future ahead.';

CREATE OR REPLACE FUNCTION mneme.enqueue_segment(conversation_id uuid, payload jsonb)
RETURNS bigint
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
#variable_conflict use_column
DECLARE
    v_job mneme.jobs;
BEGIN
    -- No row lock on a pending job unless it changes: a writer's open
    -- transaction must not hide the job from claim_jobs (SKIP LOCKED).
    SELECT * INTO v_job FROM mneme.jobs j
    WHERE j.kind = 'segment' AND j.state = 'pending' AND j.conversation_id = enqueue_segment.conversation_id;
    IF FOUND THEN
        -- One pending segment job per conversation. A check segments what is
        -- queued when it runs, so a new check changes nothing; a forced cut
        -- replaces a pending check and a pending forced cut keeps its boundary.
        IF NOT (v_job.payload->>'check')::boolean OR (enqueue_segment.payload->>'check')::boolean THEN
            RETURN v_job.id;
        END IF;
        UPDATE mneme.jobs SET payload = enqueue_segment.payload, updated_at = now()
         WHERE id = v_job.id AND state = 'pending';
        IF FOUND THEN
            RETURN v_job.id;
        END IF;
        -- Claimed meanwhile: it runs without this cut, so enqueue the cut.
    END IF;
    RETURN mneme.enqueue_job('segment', enqueue_segment.conversation_id, enqueue_segment.payload);
END
$$;
COMMENT ON FUNCTION mneme.enqueue_segment(uuid, jsonb) IS
    'Enqueues the conversation''s segment job, or updates the pending one (a forced cut replaces a check; '
    'a pending forced cut keeps its boundary; a check segments what is queued when it runs). Locks the pending '
    'job only to change it.';

-- The conversation is over (or paused for good): cut what is queued into
-- episodes now instead of waiting for the next message to show the gap.
CREATE OR REPLACE FUNCTION mneme.segment_now(conversation_id uuid)
RETURNS bigint
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
#variable_conflict use_column
DECLARE
    v_last bigint;
BEGIN
    IF segment_now.conversation_id IS NULL THEN
        RAISE EXCEPTION 'conversation_id must not be NULL' USING ERRCODE = '22004';
    END IF;
    SELECT max(m.id) INTO v_last FROM mneme.messages m
    WHERE m.conversation_id = segment_now.conversation_id AND m.consumed_at IS NULL;
    IF v_last IS NULL THEN
        RETURN NULL;  -- nothing queued
    END IF;
    RETURN mneme.enqueue_segment(segment_now.conversation_id, jsonb_build_object(
        'reason', 'gap', 'check', false, 'through_message_id', v_last, 'trigger_message_id', v_last));
END
$$;
COMMENT ON FUNCTION mneme.segment_now(uuid) IS
    'Forces a cut through the conversation''s last queued message, as a gap would: the segment job segments '
    'everything queued. Returns the job id, or NULL when nothing is queued.';

-- -----------------------------------------------------------------------------
-- Pending reviews
-- -----------------------------------------------------------------------------
CREATE OR REPLACE FUNCTION mneme.add_pending_review(
    conversation_id uuid,
    memory_ids uuid[],
    query text)
RETURNS void
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
#variable_conflict use_column
DECLARE
    v_n       int;
    v_max     int := mneme.setting('pending_reviews_max')::int;
    v_payload jsonb;
BEGIN
    IF add_pending_review.conversation_id IS NULL THEN
        RAISE EXCEPTION 'conversation_id must not be NULL' USING ERRCODE = '22004';
    END IF;
    IF add_pending_review.memory_ids IS NULL OR array_position(add_pending_review.memory_ids, NULL) IS NOT NULL THEN
        RAISE EXCEPTION 'memory_ids must be an array of non-NULL ids' USING ERRCODE = '22004';
    END IF;
    IF add_pending_review.query IS NULL THEN
        RAISE EXCEPTION 'query must not be NULL' USING ERRCODE = '22004';
    END IF;
    PERFORM mneme._claim_conversation(add_pending_review.conversation_id);
    UPDATE mneme.message_queue q
       SET pending_reviews = COALESCE(q.pending_reviews, '[]'::jsonb)
               || jsonb_build_array(jsonb_build_object('query', add_pending_review.query,
                                                       'memory_ids', to_jsonb(add_pending_review.memory_ids))),
           updated_at = now()
     WHERE q.id = add_pending_review.conversation_id
    RETURNING jsonb_array_length(q.pending_reviews) INTO v_n;
    -- Bounded: past pending_reviews_max the oldest entries go to a review job
    -- now (under the row lock the UPDATE took), judged by what is queued.
    IF v_n > v_max THEN
        WITH e AS (
            SELECT x.e, x.o FROM mneme.message_queue q, jsonb_array_elements(q.pending_reviews) WITH ORDINALITY AS x(e, o)
            WHERE q.id = add_pending_review.conversation_id
        ), moved AS (
            UPDATE mneme.message_queue q
               SET pending_reviews = (SELECT jsonb_agg(e.e ORDER BY e.o) FROM e WHERE e.o > v_n - v_max / 2)
             WHERE q.id = add_pending_review.conversation_id
            RETURNING q.id
        )
        SELECT jsonb_build_object(
                   'reviews', (SELECT jsonb_agg(e.e ORDER BY e.o) FROM e WHERE e.o <= v_n - v_max / 2),
                   'reviewed_at', now(),
                   'context_message_ids', coalesce((SELECT jsonb_agg(m.id ORDER BY m.id) FROM mneme.messages m
                                                    WHERE m.conversation_id = add_pending_review.conversation_id
                                                      AND m.consumed_at IS NULL), '[]'::jsonb))
          INTO v_payload FROM moved;
        PERFORM mneme.enqueue_job('review', add_pending_review.conversation_id, v_payload);
    END IF;
END
$$;
COMMENT ON FUNCTION mneme.add_pending_review(uuid, uuid[], text) IS
    'Appends {query, memory_ids} to the conversation''s pending_reviews in one statement; '
    'the row lock of the UPDATE keeps concurrent appends and takes from losing entries. Past setting '
    'pending_reviews_max entries, the oldest half go to a review job at once, judged by the queued messages.';

CREATE OR REPLACE FUNCTION mneme.take_pending_reviews(conversation_id uuid)
RETURNS jsonb
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
#variable_conflict use_column
DECLARE
    v jsonb;
BEGIN
    IF take_pending_reviews.conversation_id IS NULL THEN
        RAISE EXCEPTION 'conversation_id must not be NULL' USING ERRCODE = '22004';
    END IF;
    -- One UPDATE reads the old value under the row lock and clears it: an
    -- append that commits first is returned here, one that waits lands after.
    UPDATE mneme.message_queue q
    SET pending_reviews = NULL, updated_at = now()
    FROM (SELECT id, pending_reviews FROM mneme.message_queue
          WHERE id = take_pending_reviews.conversation_id FOR UPDATE) old
    WHERE q.id = old.id AND old.pending_reviews IS NOT NULL
    RETURNING old.pending_reviews INTO v;
    RETURN v;
END
$$;
COMMENT ON FUNCTION mneme.take_pending_reviews(uuid) IS
    'Returns the conversation''s pending reviews (NULL when none) and clears them atomically.';
