-- =============================================================================
-- mneme messages: append (mneme.add_message), the rule-based segmentation
-- check and the segment job it enqueues, and pending reviews (what retrieve
-- records, taken and cleared by the sidecar). The settings are in
-- 000-core.sql, the job outbox (mneme.enqueue_job) in 200-jobs.sql.
-- Idempotent: re-applied on every `mneme migrate` (CREATE OR REPLACE only).
-- =============================================================================

-- -----------------------------------------------------------------------------
-- Messages
-- -----------------------------------------------------------------------------
CREATE OR REPLACE FUNCTION mneme.set_speakers(conversation_id uuid, speakers text[])
RETURNS void
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
SET jit = off
AS $$
#variable_conflict use_column
BEGIN
    PERFORM mneme._enter(set_speakers.conversation_id);  -- the caller forwarded first (Citus: mneme._enter)
    IF set_speakers.conversation_id IS NULL THEN
        RAISE EXCEPTION 'conversation_id must not be NULL' USING ERRCODE = '22004';
    END IF;
    IF set_speakers.speakers IS NULL THEN
        RAISE EXCEPTION 'speakers must not be NULL' USING ERRCODE = '22004', HINT = 'an empty array removes the names';
    END IF;
    IF EXISTS (
        SELECT 1 FROM unnest(set_speakers.speakers) s
        WHERE s IS NULL OR s !~ '^[[:alpha:]][[:alnum:] _.''-]{0,63}$') THEN
        RAISE EXCEPTION 'speakers: each name must be 1 to 64 characters, starting with a letter'
            USING ERRCODE = '22023', HINT = 'letters, digits, space, _ . '' - are allowed';
    END IF;
    PERFORM mneme._claim_conversation(set_speakers.conversation_id);
    UPDATE mneme.message_queue SET speakers = set_speakers.speakers, updated_at = now() WHERE id = set_speakers.conversation_id;
END
$$;
COMMENT ON FUNCTION mneme.set_speakers(uuid, text[]) IS
    'Registers speaker names that add_message accepts as roles in this conversation, '
    'besides user, assistant, system and tool (e.g. the two people of a LoCoMo dialogue).';
GRANT EXECUTE ON FUNCTION mneme.set_speakers(uuid, text[]) TO mneme_app, mneme_worker, mneme_admin;

-- Blank: nothing but whitespace, separators, zero-width and control
-- characters. The one definition of "empty" of SQL (add_message, remember,
-- search) and of the Go hash embedder (embed.ErrEmptyText; a test compares
-- them on every such character).
-- Plain SQL without SET: inlined into the caller's expression (add_message
-- checks every message with it; with a SET it was a function call that
-- parsed its body each time, 56 microseconds a message).
CREATE OR REPLACE FUNCTION mneme._is_blank(input text)
RETURNS boolean
LANGUAGE sql IMMUTABLE PARALLEL SAFE
AS $$
SELECT _is_blank.input ~ '^[\u0001-\u0020\u007f-\u00a0\u1680\u180e\u2000-\u200f\u2028-\u202f\u205f-\u2064\u3000\ufeff]*$'
$$;
COMMENT ON FUNCTION mneme._is_blank(text) IS
    'Internal: whether a text holds nothing but whitespace, separators, zero-width and control characters.';

-- Word separators: Unicode White_Space (U+0009-000D, U+0020, U+0085,
-- U+00A0, U+1680, U+2000-200A, U+2028, U+2029, U+202F, U+205F, U+3000), the
-- separators of Go's strings.Fields (unicode.IsSpace), which the
-- evaluations count with, as one regular-expression bracket expression.
-- Zero-width and control characters that are not White_Space (U+200B,
-- U+FEFF, U+180E) join words, as in Go. Plain SQL without SET and without
-- arguments: the planner folds it into a constant. The generated column
-- mneme.messages.words (goose 00048) spells the same class out;
-- TestContextTermsMatchTokeniser keeps them equal.
CREATE OR REPLACE FUNCTION mneme._word_separator()
RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE
AS $$ SELECT '[\t\n\u000b\f\r \u0085\u00a0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000]'::text $$;
COMMENT ON FUNCTION mneme._word_separator() IS
    'Internal: the bracket expression of the characters that separate words (Unicode White_Space).';

-- What an error message may quote of an argument: its first 80 characters,
-- quoted (an error never echoes a 10 MB input back).
CREATE OR REPLACE FUNCTION mneme._quote_prefix(input text)
RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
SELECT CASE WHEN _quote_prefix.input IS NULL THEN 'NULL'
            WHEN length(_quote_prefix.input) <= 80 THEN quote_literal(_quote_prefix.input)
            ELSE quote_literal(left(_quote_prefix.input, 80)) || format('... (%s characters)', length(_quote_prefix.input)) END
$$;
COMMENT ON FUNCTION mneme._quote_prefix(text) IS
    'Internal: an argument as error messages quote it: at most its first 80 characters.';

-- A text argument longer than its limit: 22001 naming it.
CREATE OR REPLACE FUNCTION mneme._check_length(name text, input text, max_chars int)
RETURNS void
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF length(_check_length.input) > _check_length.max_chars THEN
        RAISE EXCEPTION '% is % characters, over the limit of %', _check_length.name, length(_check_length.input), _check_length.max_chars
            USING ERRCODE = '22001';
    END IF;
END
$$;
COMMENT ON FUNCTION mneme._check_length(text, text, int) IS
    'Internal: raises 22001 naming the argument when a text is longer than its limit.';

CREATE OR REPLACE FUNCTION mneme.add_message(
    conversation_id uuid,
    role text,
    content text,
    at timestamptz DEFAULT NULL)
RETURNS bigint
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
SET jit = off
AS $$
#variable_conflict use_column
DECLARE
    v__entered boolean := mneme._enter(add_message.conversation_id);  -- the caller forwarded first (Citus: mneme._enter)
    -- The settings it needs, read in one statement (it runs at every message).
    v_set       jsonb := (SELECT jsonb_object_agg(s.key, s.value) FROM mneme.settings s
                          WHERE s.key IN ('message_max_chars', 'segment_min_messages', 'segment_max_messages',
                                          'segment_gap_seconds', 'segment_min_chars', 'message_max_future'));
    v_max_chars int := (v_set->'message_max_chars')::int;
    v_min_msgs  int := (v_set->'segment_min_messages')::int;
    v_max_msgs  int := (v_set->'segment_max_messages')::int;
    v_gap       interval := make_interval(secs => (v_set->'segment_gap_seconds')::float8);
    v_min_chars int := (v_set->'segment_min_chars')::int;
    v_future    interval := (v_set->>'message_max_future')::interval;
    v_at        timestamptz;
    v_queue     mneme.message_queue;
    v_prev_id   bigint;
    v_id        bigint;
    v_queued    int;
    v_payload   jsonb;
    v_pending   boolean;
BEGIN
    IF add_message.conversation_id IS NULL THEN
        RAISE EXCEPTION 'conversation_id must not be NULL' USING ERRCODE = '22004';
    END IF;
    IF add_message.role IS NULL THEN
        RAISE EXCEPTION 'role must not be NULL' USING ERRCODE = '22004',
            HINT = 'use user, assistant, system or tool';
    END IF;
    IF add_message.content IS NULL THEN
        RAISE EXCEPTION 'message content must not be NULL' USING ERRCODE = '22004';
    END IF;
    IF mneme._is_blank(add_message.content) THEN
        RAISE EXCEPTION 'message content must not be empty' USING ERRCODE = '22023',
            HINT = 'whitespace, zero-width and control characters alone do not count as content';
    END IF;
    IF length(add_message.content) > v_max_chars THEN
        RAISE EXCEPTION 'message content is % characters, over the limit of %', length(add_message.content), v_max_chars
            USING ERRCODE = '22001', HINT = 'split the message, or raise setting message_max_chars';
    END IF;
    IF add_message.at IS NOT NULL THEN  -- (NULL, the usual case, needs no call)
        PERFORM mneme._check_time('at (the message time)', add_message.at);
    END IF;
    IF add_message.at > now() + v_future THEN
        RAISE EXCEPTION 'at (the message time) % is more than % in the future', add_message.at, v_future
            USING ERRCODE = '22008',
                  HINT = 'leave the time out for the server''s clock; setting message_max_future bounds the clock skew allowed';
    END IF;

    -- The row lock orders appends within a conversation. Row security shows
    -- the row only when the conversation is the caller's; when it is not
    -- there, it is claimed (created, or refused as another tenant's) first.
    SELECT * INTO v_queue FROM mneme.message_queue q WHERE q.id = add_message.conversation_id FOR UPDATE;
    IF NOT FOUND THEN
        PERFORM mneme._claim_conversation(add_message.conversation_id);
        SELECT * INTO v_queue FROM mneme.message_queue q WHERE q.id = add_message.conversation_id FOR UPDATE;
    END IF;

    IF add_message.role NOT IN ('user', 'assistant', 'system', 'tool') AND NOT add_message.role = ANY (v_queue.speakers) THEN
        RAISE EXCEPTION 'unknown role %', mneme._quote_prefix(add_message.role) USING ERRCODE = '22023',
            HINT = 'use user, assistant, system or tool, or register speaker names with mneme.set_speakers';
    END IF;
    -- Without a time, the message arrives now: read under the row lock, so
    -- concurrent writers append in arrival order and none is "earlier".
    v_at := coalesce(add_message.at, greatest(clock_timestamp(), v_queue.last_message_at));
    IF v_at < v_queue.last_message_at THEN
        RAISE EXCEPTION 'at (the message time) % is earlier than the previous message (%)', v_at, v_queue.last_message_at
            USING ERRCODE = '22008', HINT = 'messages are appended in time order; leave the time out to append now';
    END IF;

    -- A segment job pending for the conversation (its one pending job,
    -- jobs_one_pending_segment) will read the whole queue, this message
    -- with it: every rule below would end in enqueue_segment returning that
    -- job unchanged. So the queue is not counted and no payload is built
    -- (under ingest a job is pending at most messages: skipping them cut
    -- add_message's backend CPU by about 30%, docs/performance.md). Read
    -- under the row lock above: a segment job takes that lock before it
    -- reads the queue, so one claimed after this read still sees the
    -- message.
    v_pending := EXISTS (SELECT 1 FROM mneme.jobs j
                         WHERE j.kind = 'segment' AND j.state = 'pending' AND j.conversation_id = add_message.conversation_id);

    -- The queue as it is before this message (the row lock above holds off
    -- other writers and the segment job's consumption): its last message,
    -- and its length as far as the rules below look (up to
    -- segment_max_messages: a backlogged conversation's queue is not
    -- counted whole at every message).
    IF NOT v_pending THEN
        SELECT max(x.id), count(*) INTO v_prev_id, v_queued
        FROM (SELECT m.id FROM mneme.messages m
              WHERE m.conversation_id = add_message.conversation_id AND m.consumed_at IS NULL
              ORDER BY m.id DESC LIMIT v_max_msgs) x;
    END IF;

    -- The conversation's tenant, read with the queue row above (the row's
    -- tenant trigger would read it again).
    INSERT INTO mneme.messages (conversation_id, role, content, created_at, tenant_id)
    VALUES (add_message.conversation_id, add_message.role, add_message.content, v_at, v_queue.tenant_id)
    RETURNING id INTO v_id;
    UPDATE mneme.message_queue SET last_message_at = v_at, updated_at = now() WHERE id = add_message.conversation_id;
    IF v_pending THEN
        RETURN v_id;
    END IF;

    v_queued := v_queued + 1;

    -- Whether a job runs, in this order: a long gap after a queued message (the session before it is closed:
    -- stored now, however few its messages), the message cap, too few queued to cut, a message too short to ask
    -- the segmenter about, else a check. Where the episodes end is not decided here: the job splits what is
    -- queued at every gap itself (mneme.queued_sessions), wherever the gap lies, so a gap is never lost to the
    -- moment a job ran.
    IF v_prev_id IS NOT NULL AND v_queue.last_message_at IS NOT NULL AND v_at - v_queue.last_message_at > v_gap THEN
        -- The late message starts the next episode.
        v_payload := mneme._segment_payload('gap', false, v_prev_id, v_id);
    ELSIF v_queued >= v_max_msgs THEN
        v_payload := mneme._segment_payload('max_messages', false, v_id, v_id);
    ELSIF v_queued < v_min_msgs THEN
        RETURN v_id;
    ELSIF length(regexp_replace(add_message.content, format('^%1$s+|%1$s+$', mneme._word_separator()), '', 'g')) < v_min_chars THEN
        RETURN v_id;
    ELSE
        v_payload := mneme._segment_payload('check', true, v_id, v_id);
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
GRANT EXECUTE ON FUNCTION mneme.add_message(uuid, text, text, timestamptz) TO mneme_app, mneme_worker, mneme_admin;

CREATE OR REPLACE FUNCTION mneme.enqueue_segment(conversation_id uuid, payload jsonb)
RETURNS bigint
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
SET jit = off
AS $$
#variable_conflict use_column
DECLARE
    v__entered boolean := mneme._enter(enqueue_segment.conversation_id);  -- the caller forwarded first (Citus: mneme._enter)
    v_id bigint;
BEGIN
    -- One pending segment job per conversation, and it does all there is:
    -- a segment job reads the whole queue when it runs and cuts it at every
    -- gap and segment_now mark (mneme.queued_sessions), so a later cut
    -- needs no second job and no change to the pending one's payload (the
    -- payload only says why it was enqueued). No row lock on the pending
    -- job: a writer's open transaction must
    -- not hide it from claim_jobs (SKIP LOCKED). A job claimed meanwhile may
    -- have read the queue before this message: then a new one is enqueued.
    SELECT j.id INTO v_id FROM mneme.jobs j
    WHERE j.kind = 'segment' AND j.state = 'pending' AND j.conversation_id = enqueue_segment.conversation_id;
    IF FOUND THEN
        RETURN v_id;
    END IF;
    RETURN mneme.enqueue_job('segment', enqueue_segment.conversation_id, enqueue_segment.payload);
END
$$;
COMMENT ON FUNCTION mneme.enqueue_segment(uuid, jsonb) IS
    'Enqueues the conversation''s segment job unless one is pending (it reads the whole queue when it runs, '
    'cutting at every gap and segment_now mark); returns the job''s id. Locks no pending job.';
GRANT EXECUTE ON FUNCTION mneme.enqueue_segment(uuid, jsonb) TO mneme_worker;

-- The conversation is over (or paused for good): cut what is queued into
-- episodes now instead of waiting for the next message to show the gap.
CREATE OR REPLACE FUNCTION mneme.segment_now(conversation_id uuid)
RETURNS bigint
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
SET jit = off
AS $$
#variable_conflict use_column
DECLARE
    v__entered boolean := mneme._enter(segment_now.conversation_id);  -- the caller forwarded first (Citus: mneme._enter)
    v_last bigint;
BEGIN
    IF segment_now.conversation_id IS NULL THEN
        RAISE EXCEPTION 'conversation_id must not be NULL' USING ERRCODE = '22004';
    END IF;
    -- Under the queue row lock (add_message's), so no message lands between
    -- the read and the mark.
    PERFORM 1 FROM mneme.message_queue q WHERE q.id = segment_now.conversation_id FOR UPDATE;
    SELECT max(m.id) INTO v_last FROM mneme.messages m
    WHERE m.conversation_id = segment_now.conversation_id AND m.consumed_at IS NULL;
    IF v_last IS NULL THEN
        RETURN NULL;  -- nothing queued
    END IF;
    -- The mark, not the job, carries the boundary: whichever job reads the
    -- queue, now or after a restart, ends an episode here.
    UPDATE mneme.messages m SET ends_session = true
     WHERE m.conversation_id = segment_now.conversation_id AND m.id = v_last AND NOT m.ends_session;
    RETURN mneme.enqueue_segment(segment_now.conversation_id, mneme._segment_payload('segment_now', false, v_last, v_last));
END
$$;
COMMENT ON FUNCTION mneme.segment_now(uuid) IS
    'Ends the session at the conversation''s last queued message, as a gap would: marks it (ends_session) and '
    'enqueues the segment job, which stores everything queued through it, split at gaps. Returns the job id, or '
    'NULL when nothing is queued.';
GRANT EXECUTE ON FUNCTION mneme.segment_now(uuid) TO mneme_app, mneme_worker, mneme_admin;

-- -----------------------------------------------------------------------------
-- Pending reviews
-- -----------------------------------------------------------------------------
CREATE OR REPLACE FUNCTION mneme.add_pending_review(
    conversation_id uuid,
    memory_ids uuid[],
    query text)
RETURNS void
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
SET jit = off
AS $$
#variable_conflict use_column
DECLARE
    v__entered boolean := mneme._enter(add_pending_review.conversation_id);  -- the caller forwarded first (Citus: mneme._enter)
    v_n       int;
    v_max     int := mneme.setting('pending_reviews_max')::int;
    v_reviews jsonb;
    v_context bigint[];
    v_conv    uuid;
    v_live    bigint := 0;
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
    PERFORM mneme._require_primary('mneme.add_pending_review');
    PERFORM mneme._claim_conversation(add_pending_review.conversation_id);
    -- An erase of a memory this retrieval found, under way or committed
    -- while the search ran, must not leave the query behind (a query that
    -- retrieved an erased memory goes with it). Each memory is locked (KEY
    -- SHARE) before the queue row, in the order erase locks them (memory,
    -- then queue): an erase under way is waited for, and a memory erased by
    -- then drops the entry; an erase that starts later waits for this
    -- transaction and removes the entry itself. Per conversation, so each
    -- locking read stays on one conversation's rows (on Citus, one shard).
    -- Under REPEATABLE READ an erase committed after the snapshot is a
    -- serialization failure (40001): retry the call. In the one lock order
    -- of every multi-memory writer (mneme._lock_memories: conversation,
    -- then id): in the order a scan met them, a retrieve deadlocked with a
    -- review job locking the same memories (TestRecordingLocksInTheOneOrder).
    -- On one server one statement, read through the primary key alone: the
    -- per-conversation statement's generic plan ANDed a bitmap of the whole
    -- conversation (1.5 ms of a 50,000-memory conversation's retrieve,
    -- docs/performance.md, "Sixth session").
    IF mneme._distributed('mneme.memories') THEN
        FOR v_conv IN SELECT DISTINCT m.conversation_id FROM mneme.memories m
                      WHERE m.id = ANY (add_pending_review.memory_ids) ORDER BY 1 LOOP
            v_live := v_live + (SELECT count(*) FROM (
                SELECT 1 FROM mneme.memories m
                WHERE m.conversation_id = v_conv AND m.id = ANY (add_pending_review.memory_ids)
                ORDER BY m.id
                FOR KEY SHARE) x);
        END LOOP;
    ELSE
        v_live := (SELECT count(*) FROM (
            SELECT 1 FROM mneme.memories m
            WHERE m.id = ANY (add_pending_review.memory_ids)
            ORDER BY m.conversation_id, m.id
            FOR KEY SHARE) x);
    END IF;
    IF v_live < (SELECT count(DISTINCT i) FROM unnest(add_pending_review.memory_ids) i)
       AND EXISTS (SELECT 1 FROM mneme.memory_events e
                   WHERE e.memory_id = ANY (add_pending_review.memory_ids) AND e.event = 'erased') THEN
        RETURN;
    END IF;
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
        SELECT (SELECT jsonb_agg(e.e ORDER BY e.o) FROM e WHERE e.o <= v_n - v_max / 2),
               coalesce((SELECT array_agg(m.id ORDER BY m.id) FROM mneme.messages m
                         WHERE m.conversation_id = add_pending_review.conversation_id
                           AND m.consumed_at IS NULL), '{}')
          INTO v_reviews, v_context FROM moved;
        -- Built apart from the statement on the tables (on Citus, a
        -- statement may run on a worker, which has no mneme._review_payload).
        PERFORM mneme.enqueue_job('review', add_pending_review.conversation_id,
                                  mneme._review_payload(v_reviews, now(), v_context));
    END IF;
END
$$;
COMMENT ON FUNCTION mneme.add_pending_review(uuid, uuid[], text) IS
    'Appends {query, memory_ids} to the conversation''s pending_reviews in one statement (nothing when one of '
    'the memories was erased while the retrieval ran: the memories are locked first, as erase locks them); '
    'the row lock of the UPDATE keeps concurrent appends and takes from losing entries. Past setting '
    'pending_reviews_max entries, the oldest half go to a review job at once, judged by the queued messages.';
GRANT EXECUTE ON FUNCTION mneme.add_pending_review(uuid, uuid[], text) TO mneme_worker;

-- A hot standby is read-only: the calls that record a pending review say so
-- at once, and what to call instead, rather than failing in an UPDATE
-- after the search ran.
CREATE OR REPLACE FUNCTION mneme._require_primary(call text)
RETURNS void
LANGUAGE plpgsql STABLE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF pg_catalog.pg_is_in_recovery() THEN
        RAISE EXCEPTION '% records a pending review and cannot run on a read-only standby', _require_primary.call
            USING ERRCODE = '25006',
                  HINT = 'on a standby call mneme.search or mneme.context(..., record => false), then record the '
                         'retrieval on the primary: SELECT mneme.record_retrieval(conversation_id, query, memory_ids)';
    END IF;
END
$$;
COMMENT ON FUNCTION mneme._require_primary(text) IS
    'Internal: raises 25006 with what to call instead when a recording call runs on a hot standby.';

CREATE OR REPLACE FUNCTION mneme.record_retrieval(conversation_id uuid, query text, memory_ids uuid[])
RETURNS void
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
SET jit = off
AS $$
DECLARE
    v__entered boolean := mneme._enter(record_retrieval.conversation_id);  -- the caller forwarded first (Citus: mneme._enter)
    v_missing bigint;
BEGIN
    PERFORM mneme._require_primary('mneme.record_retrieval');
    IF record_retrieval.conversation_id IS NULL OR record_retrieval.query IS NULL THEN
        RAISE EXCEPTION 'conversation_id and query must not be NULL' USING ERRCODE = '22004';
    END IF;
    PERFORM mneme._check_text('query', record_retrieval.query, mneme._limit('query_chars'));
    IF record_retrieval.memory_ids IS NULL OR array_position(record_retrieval.memory_ids, NULL) IS NOT NULL THEN
        RAISE EXCEPTION 'memory_ids must be an array of non-NULL ids' USING ERRCODE = '22004';
    END IF;
    IF cardinality(record_retrieval.memory_ids) = 0 THEN
        RETURN;  -- nothing was retrieved: nothing to review
    END IF;
    IF cardinality(record_retrieval.memory_ids) > 1000 THEN
        RAISE EXCEPTION 'memory_ids holds % ids, at most 1000', cardinality(record_retrieval.memory_ids)
            USING ERRCODE = '22023';
    END IF;
    -- Only memories this tenant can read: a review rates what it names, and
    -- the sidecar that runs it sees every tenant. The ids found in one
    -- uncorrelated read (Citus refuses a subquery correlated with unnest;
    -- the ids may be of any conversation of the tenant).
    SELECT x.o INTO v_missing FROM unnest(record_retrieval.memory_ids) WITH ORDINALITY AS x(id, o)
    WHERE x.id <> ALL (ARRAY(SELECT m.id FROM mneme.memories m WHERE m.id = ANY (record_retrieval.memory_ids)))
    ORDER BY x.o LIMIT 1;
    IF FOUND THEN
        RAISE EXCEPTION 'memory_ids[%] is not a memory of this tenant', v_missing USING ERRCODE = 'P0002',
            HINT = 'record the ids mneme.search returned, in its order';
    END IF;
    PERFORM mneme.add_pending_review(record_retrieval.conversation_id, record_retrieval.memory_ids, record_retrieval.query);
END
$$;
COMMENT ON FUNCTION mneme.record_retrieval(uuid, text, uuid[]) IS
    'Records a retrieval made elsewhere (mneme.search or mneme.context(..., record => false) on a hot standby) '
    'as mneme.retrieve would: appends {query, memory_ids} to the conversation''s pending reviews. Run it on the '
    'primary. The ids must be memories of the caller''s tenant.';
GRANT EXECUTE ON FUNCTION mneme.record_retrieval(uuid, text, uuid[]) TO mneme_app, mneme_worker, mneme_admin;

CREATE OR REPLACE FUNCTION mneme.take_pending_reviews(conversation_id uuid)
RETURNS jsonb
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
SET jit = off
AS $$
#variable_conflict use_column
DECLARE
    v__entered boolean := mneme._enter(take_pending_reviews.conversation_id);  -- the caller forwarded first (Citus: mneme._enter)
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
GRANT EXECUTE ON FUNCTION mneme.take_pending_reviews(uuid) TO mneme_worker;

-- -----------------------------------------------------------------------------
-- Reads for people looking into the memory (mneme ui, psql): the tenant's
-- conversations and a conversation's messages. mneme_app reads no table, so
-- these are its only way to list what it wrote; row security keeps them to
-- the transaction's tenant.
-- -----------------------------------------------------------------------------
CREATE OR REPLACE FUNCTION mneme.conversations(k int DEFAULT 100)
RETURNS TABLE (conversation_id uuid, messages bigint, queued_messages bigint, memories bigint,
               active_memories bigint, last_message_at timestamptz, pending_jobs bigint,
               failed_jobs bigint, pending_reviews int)
LANGUAGE plpgsql STABLE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
SET jit = off
AS $$
#variable_conflict use_column
DECLARE
    v__entered boolean := mneme._enter(NULL);  -- the caller forwarded first (Citus: mneme._enter)
    v_tenant text := mneme._tenant();
    v_ids    uuid[];
BEGIN
    IF conversations.k IS NULL THEN
        RAISE EXCEPTION 'k must not be NULL' USING ERRCODE = '22004', HINT = 'omit k for the default';
    END IF;
    IF conversations.k < 1 OR conversations.k > 10000 THEN
        RAISE EXCEPTION 'k must be between 1 and 10000, got %', conversations.k
            USING ERRCODE = '22023', HINT = 'k is how many conversations to list, the most recently active first';
    END IF;
    -- The transaction's tenant only (the sidecar's login too, which row
    -- security lets see every tenant). The job counts by the tenant's
    -- indexes (pending: jobs_ready_tenant_idx, failed:
    -- jobs_failed_tenant_idx; running jobs are few), never a read of the
    -- whole queue: the jobs table has no index by conversation.
    -- The conversations are chosen first, into an array; then every count
    -- is one grouped read by those conversations, joined on the
    -- conversation: on Citus each read goes to the conversations' shards
    -- (correlated subqueries over a chosen list are "complex joins" there),
    -- on one server the same index probes per conversation.
    v_ids := ARRAY(
        SELECT q.id FROM mneme.message_queue q
        WHERE q.tenant_id = v_tenant
        ORDER BY coalesce(q.last_message_at, q.updated_at) DESC, q.id
        LIMIT conversations.k);
    RETURN QUERY
    SELECT q.id,
           coalesce(m.n, 0),
           coalesce(m.queued, 0),
           coalesce(r.n, 0),
           coalesce(r.active, 0),
           q.last_message_at,
           coalesce(j.open, 0),
           coalesce(j.failed, 0),
           coalesce(jsonb_array_length(q.pending_reviews), 0)
    FROM mneme.message_queue q
    LEFT JOIN (SELECT g.conversation_id, count(*) AS n, count(*) FILTER (WHERE g.consumed_at IS NULL) AS queued
               FROM mneme.messages g WHERE g.conversation_id = ANY (v_ids)
               GROUP BY g.conversation_id) m ON m.conversation_id = q.id
    LEFT JOIN (SELECT e.conversation_id, count(*) AS n, count(*) FILTER (WHERE e.status = 'active') AS active
               FROM mneme.memories e WHERE e.conversation_id = ANY (v_ids)
               GROUP BY e.conversation_id) r ON r.conversation_id = q.id
    LEFT JOIN (SELECT x.conversation_id, count(*) FILTER (WHERE x.state <> 'failed') AS open, count(*) FILTER (WHERE x.state = 'failed') AS failed
               FROM (SELECT p.conversation_id, p.state FROM mneme.jobs p WHERE p.tenant_id = v_tenant AND p.state = 'pending'
                     UNION ALL
                     SELECT u.conversation_id, u.state FROM mneme.jobs u WHERE u.state = 'running' AND u.tenant_id = v_tenant
                     UNION ALL
                     SELECT f.conversation_id, f.state FROM mneme.jobs f WHERE f.tenant_id = v_tenant AND f.state = 'failed') x
               WHERE x.conversation_id = ANY (v_ids)
               GROUP BY x.conversation_id) j ON j.conversation_id = q.id
    WHERE q.id = ANY (v_ids)
    ORDER BY coalesce(q.last_message_at, q.updated_at) DESC, q.id;
END
$$;
COMMENT ON FUNCTION mneme.conversations(int) IS
    'The transaction''s tenant''s conversations (the sidecar''s login too: one tenant), the most recently active first (at most k, 1..10000): messages '
    '(all, and still queued for segmentation), memories (all, and active), the last message''s time, jobs pending '
    'or running and failed, and pending review entries. No side effects.';
GRANT EXECUTE ON FUNCTION mneme.conversations(int) TO mneme_app, mneme_worker, mneme_admin;

CREATE OR REPLACE FUNCTION mneme.conversation_messages(conversation_id uuid)
RETURNS TABLE (message_id bigint, role text, content text, created_at timestamptz, consumed_at timestamptz,
               memory_id uuid, set_aside_job_id bigint)
LANGUAGE plpgsql STABLE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
SET jit = off
AS $$
#variable_conflict use_column
BEGIN
    PERFORM mneme._enter(conversation_messages.conversation_id);  -- the caller forwarded first (Citus: mneme._enter)
    IF conversation_messages.conversation_id IS NULL THEN
        RAISE EXCEPTION 'conversation_id must not be NULL' USING ERRCODE = '22004';
    END IF;
    IF NOT mneme._readable_conversation(conversation_messages.conversation_id) THEN
        RETURN;  -- unknown, or another tenant's: no rows, as mneme.search
    END IF;
    RETURN QUERY
    SELECT m.id, m.role, m.content, m.created_at, m.consumed_at, m.memory_id, m.set_aside_job_id
    FROM mneme.messages m
    WHERE m.conversation_id = conversation_messages.conversation_id
    ORDER BY m.id;
END
$$;
COMMENT ON FUNCTION mneme.conversation_messages(uuid) IS
    'A conversation''s messages in order, each with the episodic memory it went into (memory_id, NULL while '
    'queued), when segmentation consumed it, and the failed job that set it aside, if any. Unknown or another '
    'tenant''s conversation: no rows. No side effects.';
GRANT EXECUTE ON FUNCTION mneme.conversation_messages(uuid) TO mneme_app, mneme_worker, mneme_admin;

-- What a person recognises a conversation by (mneme ui's list and titles):
-- its speakers (mneme.set_speakers, else the roles of its first messages)
-- and its first message.
CREATE OR REPLACE FUNCTION mneme.conversation_titles(conversation_ids uuid[])
RETURNS TABLE (conversation_id uuid, speakers text[], first_message text, first_message_at timestamptz)
LANGUAGE plpgsql STABLE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
SET jit = off
AS $$
#variable_conflict use_column
BEGIN
    PERFORM mneme._enter(NULL);  -- the caller forwarded first (Citus: mneme._enter)
    IF conversation_titles.conversation_ids IS NULL THEN
        RAISE EXCEPTION 'conversation_ids must not be NULL' USING ERRCODE = '22004', HINT = 'an empty array lists none';
    END IF;
    IF cardinality(conversation_titles.conversation_ids) > 10000 THEN
        RAISE EXCEPTION 'at most 10000 conversations, got %', cardinality(conversation_titles.conversation_ids)
            USING ERRCODE = '22023', HINT = 'as mneme.conversations lists at most';
    END IF;
    RETURN QUERY
    SELECT q.id,
           CASE WHEN cardinality(q.speakers) > 0 THEN q.speakers
                ELSE ARRAY(SELECT r.role FROM (SELECT m.role, min(m.id) AS first
                                               FROM (SELECT m.role, m.id FROM mneme.messages m WHERE m.conversation_id = q.id
                                                     ORDER BY m.id LIMIT 50) m GROUP BY m.role) r ORDER BY r.first) END,
           f.content, f.created_at
    FROM mneme.message_queue q
    LEFT JOIN LATERAL (SELECT left(m.content, 200) AS content, m.created_at FROM mneme.messages m
                       WHERE m.conversation_id = q.id ORDER BY m.id LIMIT 1) f ON true
    WHERE q.id = ANY (conversation_titles.conversation_ids) AND q.tenant_id = mneme._tenant();
END
$$;
COMMENT ON FUNCTION mneme.conversation_titles(uuid[]) IS
    'For each of the transaction''s tenant''s conversations named (at most 10000; others and unknown ones: no row): '
    'its speakers (mneme.set_speakers'' names, else the roles of its first 50 messages in order of appearance), and its first '
    'message (the first 200 characters) with its time. No side effects.';
GRANT EXECUTE ON FUNCTION mneme.conversation_titles(uuid[]) TO mneme_app, mneme_worker, mneme_admin;

-- -----------------------------------------------------------------------------
-- pop_message: take back the latest message (an agent framework's "pop",
-- the OpenAI Agents SDK session's popItem / pop_item)
-- -----------------------------------------------------------------------------
-- The undo of add_message while nothing was made of the message: still
-- queued (or set aside by a failed job), it is no memory's source, so
-- deleting the row removes its words for good and leaves nothing derived
-- to tombstone (docs/forgetting.md, "Taking back a message"). Once an
-- episode (or a fact) holds it, popping it alone would leave its words in
-- the memory: refused (55000), naming the memory to erase instead.
CREATE OR REPLACE FUNCTION mneme.pop_message(conversation_id uuid)
RETURNS TABLE (message_id bigint, role text, content text, created_at timestamptz)
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
SET jit = off
AS $$
#variable_conflict use_column
DECLARE
    v_msg    mneme.messages;
    v_memory uuid;
BEGIN
    IF pop_message.conversation_id IS NULL THEN
        RAISE EXCEPTION 'conversation_id must not be NULL' USING ERRCODE = '22004';
    END IF;
    PERFORM mneme._enter(pop_message.conversation_id);
    -- The queue row lock holds off add_message and segmentation (lock_queued
    -- takes it too, and finds a popped message gone: its job stores nothing
    -- of it).
    PERFORM 1 FROM mneme.message_queue q
    WHERE q.id = pop_message.conversation_id AND (q.tenant_id = mneme._tenant() OR mneme._is_worker())
    FOR UPDATE;
    IF NOT FOUND THEN
        RETURN;  -- unknown, or another tenant's: nothing to pop, as an empty conversation
    END IF;
    SELECT * INTO v_msg FROM mneme.messages m
    WHERE m.conversation_id = pop_message.conversation_id
    ORDER BY m.id DESC LIMIT 1;
    IF NOT FOUND THEN
        RETURN;
    END IF;
    v_memory := coalesce(v_msg.memory_id,
                         (SELECT mm.id FROM mneme.memories mm
                          WHERE mm.conversation_id = pop_message.conversation_id AND v_msg.id = ANY (mm.source_message_ids)
                          ORDER BY mm.created_at, mm.id LIMIT 1));
    IF v_memory IS NOT NULL THEN
        RAISE EXCEPTION 'the latest message (%) of conversation % is in memory % already; nothing was removed',
                v_msg.id, pop_message.conversation_id, v_memory
            USING ERRCODE = '55000',
                  HINT = 'segmentation stored it: mneme.erase(memory_id, reason) (mneme_admin) erases the memory with the '
                         'messages it was made of; mneme.forget(memory_id, reason) invalidates it';
    END IF;
    DELETE FROM mneme.messages m WHERE m.conversation_id = pop_message.conversation_id AND m.id = v_msg.id;
    -- The conversation's last message is the one before (a message given
    -- a time may again be as early as that one).
    UPDATE mneme.message_queue q
    SET last_message_at = (SELECT max(m.created_at) FROM mneme.messages m WHERE m.conversation_id = pop_message.conversation_id),
        updated_at = now()
    WHERE q.id = pop_message.conversation_id;
    RETURN QUERY SELECT v_msg.id, v_msg.role, v_msg.content, v_msg.created_at;
END
$$;
COMMENT ON FUNCTION mneme.pop_message(uuid) IS
    'Removes and returns the conversation''s latest message (no row when it has none, or is unknown or another '
    'tenant''s): the undo of add_message while no memory holds the message (queued, or set aside by a failed job). '
    'The row is deleted for good: nothing was derived from it, so no tombstone. A message an episode or fact holds '
    'already is refused (55000) and nothing changes: erase that memory instead.';
GRANT EXECUTE ON FUNCTION mneme.pop_message(uuid) TO mneme_app, mneme_worker, mneme_admin;

-- A chooser's list (mneme ui's conversation selector on the search and
-- memories pages): the tenant's most recently active conversations with
-- what a person recognises them by, and no counts. mneme.conversations
-- counts every message, memory and open job of each (16 to 53 ms for 20
-- conversations holding 10,000 memories and 20,000 jobs, loaded machine):
-- a selector needs none of it.
CREATE OR REPLACE FUNCTION mneme.recent_conversations(k int DEFAULT 100)
RETURNS TABLE (conversation_id uuid, last_message_at timestamptz, speakers text[], first_message text,
               first_message_at timestamptz)
LANGUAGE plpgsql STABLE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
SET jit = off
AS $$
#variable_conflict use_column
DECLARE
    v_ids uuid[];
BEGIN
    PERFORM mneme._enter(NULL);
    IF recent_conversations.k IS NULL THEN
        RAISE EXCEPTION 'k must not be NULL' USING ERRCODE = '22004', HINT = 'omit k for the default';
    END IF;
    IF recent_conversations.k < 1 OR recent_conversations.k > 10000 THEN
        RAISE EXCEPTION 'k must be between 1 and 10000, got %', recent_conversations.k
            USING ERRCODE = '22023', HINT = 'k is how many conversations to list, the most recently active first';
    END IF;
    -- The order of mneme.conversations, by the tenant's queue rows alone.
    v_ids := ARRAY(
        SELECT q.id FROM mneme.message_queue q
        WHERE q.tenant_id = mneme._tenant()
        ORDER BY coalesce(q.last_message_at, q.updated_at) DESC, q.id
        LIMIT recent_conversations.k);
    RETURN QUERY
    SELECT q.id, q.last_message_at, t.speakers, t.first_message, t.first_message_at
    FROM mneme.message_queue q
    JOIN mneme.conversation_titles(v_ids) t ON t.conversation_id = q.id
    WHERE q.id = ANY (v_ids)
    ORDER BY coalesce(q.last_message_at, q.updated_at) DESC, q.id;
END
$$;
COMMENT ON FUNCTION mneme.recent_conversations(int) IS
    'The transaction''s tenant''s k (1..10000) most recently active conversations, as mneme.conversations orders them, '
    'with mneme.conversation_titles'' speakers and first message and the last message''s time; no counts (cheap: '
    'for a chooser). No side effects.';
GRANT EXECUTE ON FUNCTION mneme.recent_conversations(int) TO mneme_app, mneme_worker, mneme_admin;
