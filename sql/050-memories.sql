-- =============================================================================
-- mneme explicit memory API: remember, pin/unpin, forget, inspect, history.
-- Beliefs are revised, never silently overwritten: forgetting invalidates
-- with a reason, superseding links the new memory to the old one, and both
-- rows stay. Idempotent: re-applied on every `mneme migrate`.
-- =============================================================================

-- -----------------------------------------------------------------------------
-- A memory by its id: every statement on one names its conversation too.
-- On one server that is one more probe of the primary key; on Citus
-- (distributed by conversation, docs/scale.md) it sends the statement to
-- the memory's shard, and a row lock must: Citus refuses FOR UPDATE in a
-- statement that reaches every shard.
-- -----------------------------------------------------------------------------
CREATE OR REPLACE FUNCTION mneme._memory_conversation(id uuid)
RETURNS uuid
LANGUAGE plpgsql STABLE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
#variable_conflict use_column
DECLARE
    v uuid;
BEGIN
    SELECT m.conversation_id INTO v FROM mneme.memories m WHERE m.id = _memory_conversation.id;
    RETURN v;
END
$$;
COMMENT ON FUNCTION mneme._memory_conversation(uuid) IS
    'Internal: the conversation of a memory (NULL if none is visible), so a statement on it routes to its Citus shard.';

-- Locks the memories ids (those that exist), conversation by conversation
-- and by id within each: one order for every caller that locks several
-- memories, so two of them never deadlock; on Citus one statement per
-- conversation, each routed to its shard.
CREATE OR REPLACE FUNCTION mneme._lock_memories(ids uuid[])
RETURNS void
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    c uuid;
BEGIN
    -- Citus: each locking read on one conversation's shard. One server: one
    -- read through the primary key alone (a generic plan of the
    -- per-conversation read ANDed a bitmap of the whole conversation).
    IF mneme._distributed('mneme.memories') THEN
        FOR c IN SELECT DISTINCT m.conversation_id FROM mneme.memories m WHERE m.id = ANY (_lock_memories.ids) ORDER BY 1 LOOP
            PERFORM 1 FROM mneme.memories m WHERE m.conversation_id = c AND m.id = ANY (_lock_memories.ids) ORDER BY m.id FOR UPDATE;
        END LOOP;
    ELSE
        PERFORM 1 FROM mneme.memories m WHERE m.id = ANY (_lock_memories.ids) ORDER BY m.conversation_id, m.id FOR UPDATE;
    END IF;
END
$$;
COMMENT ON FUNCTION mneme._lock_memories(uuid[]) IS
    'Internal: locks memories (FOR UPDATE) by conversation, then id: the one lock order of every multi-memory writer.';

-- The form of before `at` was added: replaced, not overloaded.
CREATE OR REPLACE FUNCTION mneme.remember(
    conversation_id uuid,
    content text,
    label text DEFAULT NULL,
    pinned boolean DEFAULT false,
    valid_until timestamptz DEFAULT NULL,
    supersedes uuid DEFAULT NULL,
    title text DEFAULT NULL,
    source_ref text DEFAULT NULL,
    at timestamptz DEFAULT NULL)
RETURNS uuid
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
SET jit = off
AS $$
#variable_conflict use_column
DECLARE
    v__entered boolean := mneme._enter(remember.conversation_id);  -- the caller forwarded first (Citus: mneme._enter)
    v_id       uuid;
    v_old      mneme.memories;
    v_old_conv uuid;
BEGIN
    IF remember.conversation_id IS NULL THEN
        RAISE EXCEPTION 'conversation_id must not be NULL' USING ERRCODE = '22004';
    END IF;
    IF remember.content IS NULL THEN
        RAISE EXCEPTION 'memory content must not be NULL' USING ERRCODE = '22004';
    END IF;
    IF mneme._is_blank(remember.content) THEN
        RAISE EXCEPTION 'memory content must not be empty' USING ERRCODE = '22023';
    END IF;
    IF length(remember.content) > mneme.setting('message_max_chars')::int THEN
        RAISE EXCEPTION 'memory content is % characters, over the limit of %',
            length(remember.content), mneme.setting('message_max_chars')::int
            USING ERRCODE = '22001', HINT = 'raise setting message_max_chars';
    END IF;
    -- The vocabulary is defined once (mneme.labels); no label: the offline labeller.
    IF remember.label IS NULL THEN
        remember.label := mneme.auto_label(remember.content, now());
    ELSE
        PERFORM mneme.check_label(remember.label);
    END IF;
    PERFORM mneme._check_length('title', remember.title, 1000);
    PERFORM mneme._check_length('source_ref', remember.source_ref, 512);
    PERFORM mneme._claim_conversation(remember.conversation_id);
    -- at: when the fact was stated (an import of older facts); revision
    -- compares source times, so an older write never replaces a newer one.
    PERFORM mneme._check_time('at', remember.at);
    IF remember.at > now() + (mneme.setting('message_max_future') #>> '{}')::interval THEN
        RAISE EXCEPTION 'at % is more than message_max_future ahead', remember.at USING ERRCODE = '22008',
            HINT = 'at is when the fact was stated; omit it for now()';
    END IF;
    PERFORM mneme._check_time('valid_until', remember.valid_until);  -- '-infinity', 'infinity', year 10000: 22008 alike
    IF remember.valid_until IS NOT NULL AND remember.valid_until <= now() THEN
        RAISE EXCEPTION 'valid_until % is not in the future', remember.valid_until USING ERRCODE = '22023';
    END IF;
    IF remember.supersedes IS NOT NULL THEN
        v_old_conv := mneme._memory_conversation(remember.supersedes);
        SELECT * INTO v_old FROM mneme.memories WHERE conversation_id = v_old_conv AND id = remember.supersedes FOR UPDATE;
        IF NOT FOUND THEN
            RAISE EXCEPTION 'memory % does not exist', remember.supersedes USING ERRCODE = 'P0002',
            HINT = 'the memory is not in this tenant: check the id and mneme.set_tenant (or the login''s tenant); an erased memory leaves only its events: SELECT * FROM mneme.memory_event_log(id)';
        END IF;
        IF v_old.conversation_id <> remember.conversation_id THEN
            RAISE EXCEPTION 'memory % belongs to another conversation', remember.supersedes USING ERRCODE = '22023';
        END IF;
        IF v_old.status <> 'active' THEN
            RAISE EXCEPTION 'memory % is %, only an active memory can be superseded', remember.supersedes, v_old.status
                USING ERRCODE = '55000', HINT = 'mneme.history(id) shows its lineage';
        END IF;
    END IF;

    INSERT INTO mneme.memories (conversation_id, kind, title, content, summary, label, pinned,
                                valid_until, source_type, source_ref, supersedes_id, last_confirmed_at, confidence_score,
                                created_at, last_reviewed_at)
    VALUES (remember.conversation_id, 'semantic', remember.title, remember.content, remember.content, remember.label, coalesce(remember.pinned, false),
            remember.valid_until, 'explicit', mneme.redact(remember.source_ref), remember.supersedes, coalesce(remember.at, now()),
            mneme._source_confidence('explicit'), coalesce(remember.at, now()), coalesce(remember.at, now()))
    RETURNING id INTO v_id;

    IF remember.supersedes IS NOT NULL THEN
        -- The caller revised it: the new belief starts from the old one's
        -- FSRS state, not from zero.
        UPDATE mneme.memories n
        SET stability = v_old.stability, difficulty = v_old.difficulty, fsrs_state = v_old.fsrs_state,
            review_count = v_old.review_count
        WHERE n.conversation_id = remember.conversation_id AND n.id = v_id;
        UPDATE mneme.memories
        SET status = 'superseded', status_reason = format('superseded by %s', v_id),
            valid_until = least(coalesce(valid_until, 'infinity'), now()), updated_at = now()
        WHERE conversation_id = v_old.conversation_id AND id = remember.supersedes;
    ELSE
        -- Every other write is revised against what is already believed
        -- (the revise job: ADD, NOOP, SUPERSEDE or INVALIDATE).
        PERFORM mneme.enqueue_job('revise', remember.conversation_id, mneme._revise_payload(v_id));
    END IF;
    RETURN v_id;
END
$$;
COMMENT ON FUNCTION mneme.remember(uuid, text, text, boolean, timestamptz, uuid, text, text, timestamptz) IS
    'Writes an explicit semantic memory and returns its id. The label is one of mneme.labels() (22023 otherwise); '
    'without one, mneme.auto_label chooses. The memory starts in mneme.initial_state of its label. With supersedes, '
    'the old memory becomes superseded (kept, with status_reason and valid_until = now) and the new one points to it '
    'through supersedes_id, starting from its FSRS state; without it, a revise job revises the new memory against '
    'the closest facts (ADD, NOOP, SUPERSEDE or INVALIDATE). source_ref (at most 512 characters) is stored redacted '
    '(mneme.redact). Confidence starts at confidence_by_source.explicit. at (default now) is when the fact was '
    'stated: its created_at, the time revision compares.';
GRANT EXECUTE ON FUNCTION mneme.remember(uuid, text, text, boolean, timestamptz, uuid, text, text, timestamptz) TO mneme_app, mneme_worker, mneme_admin;

CREATE OR REPLACE FUNCTION mneme.pin(memory_id uuid, pinned boolean DEFAULT true)
RETURNS void
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
SET jit = off
AS $$
#variable_conflict use_column
DECLARE
    v__entered boolean := mneme._enter(NULL);  -- the caller forwarded first (Citus: mneme._enter)
    v_conv   uuid;
    v_status text;
BEGIN
    IF pin.memory_id IS NULL OR pin.pinned IS NULL THEN
        RAISE EXCEPTION 'memory_id and pinned must not be NULL' USING ERRCODE = '22004';
    END IF;
    v_conv := mneme._memory_conversation(pin.memory_id);
    UPDATE mneme.memories SET pinned = pin.pinned, updated_at = now()
    WHERE conversation_id = v_conv AND id = pin.memory_id
    RETURNING status INTO v_status;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'memory % does not exist', pin.memory_id USING ERRCODE = 'P0002',
            HINT = 'the memory is not in this tenant: check the id and mneme.set_tenant (or the login''s tenant); an erased memory leaves only its events: SELECT * FROM mneme.memory_event_log(id)';
    END IF;
    -- A pin keeps a belief in retrieval; a forgotten, superseded or merged
    -- memory is out of it for a reason (its status says which), and a pin
    -- would show "invalidated · pinned". Unpinning is always allowed.
    IF pin.pinned AND v_status NOT IN ('active', 'inactive') THEN
        RAISE EXCEPTION 'memory % is %, only an active or inactive memory can be pinned', pin.memory_id, v_status
            USING ERRCODE = '55000', HINT = 'mneme.history(id) shows what replaced it; pin that one';
    END IF;
END
$$;
COMMENT ON FUNCTION mneme.pin(uuid, boolean) IS
    'Pins (or with false unpins) a memory: pinned memories rank with retrievability 1 and are never purged. '
    'Only an active or inactive memory (which the pin makes active again) can be pinned: 55000 for a forgotten, superseded or merged one.';
GRANT EXECUTE ON FUNCTION mneme.pin(uuid, boolean) TO mneme_app, mneme_worker, mneme_admin;

CREATE OR REPLACE FUNCTION mneme.unpin(memory_id uuid)
RETURNS void
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
SET jit = off
AS $$
BEGIN
    PERFORM mneme._enter(NULL);  -- the caller forwarded first (Citus: mneme._enter)
    PERFORM mneme.pin(unpin.memory_id, false);
END
$$;
COMMENT ON FUNCTION mneme.unpin(uuid) IS 'Unpins a memory: mneme.pin(id, false).';
GRANT EXECUTE ON FUNCTION mneme.unpin(uuid) TO mneme_app, mneme_worker, mneme_admin;

CREATE OR REPLACE FUNCTION mneme.forget(memory_id uuid, reason text)
RETURNS void
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
SET jit = off
AS $$
#variable_conflict use_column
DECLARE
    v__entered boolean := mneme._enter(NULL);  -- the caller forwarded first (Citus: mneme._enter)
    v_status text;
    v_conv   uuid;
BEGIN
    IF forget.memory_id IS NULL THEN
        RAISE EXCEPTION 'memory_id must not be NULL' USING ERRCODE = '22004';
    END IF;
    IF forget.reason IS NULL OR mneme._is_blank(forget.reason) THEN
        RAISE EXCEPTION 'forget needs a reason' USING ERRCODE = CASE WHEN forget.reason IS NULL THEN '22004' ELSE '22023' END,
            HINT = 'the reason is kept in status_reason so the change can be explained later';
    END IF;
    PERFORM mneme._check_length('reason', forget.reason, 2000);
    v_conv := mneme._memory_conversation(forget.memory_id);
    SELECT status INTO v_status FROM mneme.memories WHERE conversation_id = v_conv AND id = forget.memory_id FOR UPDATE;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'memory % does not exist', forget.memory_id USING ERRCODE = 'P0002',
            HINT = 'the memory is not in this tenant: check the id and mneme.set_tenant (or the login''s tenant); an erased memory leaves only its events: SELECT * FROM mneme.memory_event_log(id)';
    END IF;
    IF v_status = 'invalidated' THEN
        RETURN; -- already forgotten: keep the first reason
    END IF;
    -- valid_until: believed until now (mneme.search as_of).
    UPDATE mneme.memories
    SET status = 'invalidated', status_reason = forget.reason,
        valid_until = least(coalesce(valid_until, 'infinity'), now()), updated_at = now()
    WHERE conversation_id = v_conv AND id = forget.memory_id;
END
$$;
COMMENT ON FUNCTION mneme.forget(uuid, text) IS
    'Invalidates a memory with a reason: it leaves retrieval but the row and its lineage stay. '
    'Forgetting an invalidated memory again is a no-op.';
GRANT EXECUTE ON FUNCTION mneme.forget(uuid, text) TO mneme_app, mneme_worker, mneme_admin;

CREATE OR REPLACE FUNCTION mneme.inspect(id uuid)
RETURNS TABLE (memory_id uuid, conversation_id uuid, kind text, status text, status_reason text,
               label text, pinned boolean, summary text, content text, stability float8,
               difficulty float8, last_reviewed_at timestamptz, review_count int,
               supersedes_id uuid, superseded_by uuid, created_at timestamptz,
               confidence_score real, source_type text, source_ref text, source_message_ids bigint[],
               valid_until timestamptz, last_confirmed_at timestamptz, confirms_id uuid, invalidates_id uuid,
               slot text, revision text)
LANGUAGE plpgsql STABLE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
SET jit = off
AS $$
#variable_conflict use_column
DECLARE
    v__entered boolean := mneme._enter(NULL);  -- the caller forwarded first (Citus: mneme._enter)
    v_conv uuid;
    v_by   uuid;
    v_rev  text;
BEGIN
    IF inspect.id IS NULL THEN
        RAISE EXCEPTION 'memory_id must not be NULL' USING ERRCODE = '22004';
    END IF;
    -- One statement per table, each naming the conversation where it can:
    -- Citus refuses correlated subqueries over distributed tables that are
    -- not joined on the conversation ("complex joins are only supported
    -- when ..."). What replaced it may be in another conversation (a
    -- revision with tenant scope).
    v_conv := mneme._memory_conversation(inspect.id);
    IF v_conv IS NULL THEN
        RAISE EXCEPTION 'memory % does not exist', inspect.id USING ERRCODE = 'P0002',
            HINT = 'the memory is not in this tenant: check the id and mneme.set_tenant (or the login''s tenant); an erased memory leaves only its events: SELECT * FROM mneme.memory_event_log(id)';
    END IF;
    SELECT n.id INTO v_by FROM mneme.memories n WHERE n.supersedes_id = inspect.id ORDER BY n.created_at DESC LIMIT 1;
    SELECT e.reason INTO v_rev FROM mneme.memory_events e
     WHERE e.memory_id = inspect.id AND e.conversation_id = v_conv AND e.event = 'revised'
     ORDER BY e.at DESC, e.id DESC LIMIT 1;  -- by time: on Citus each node takes ids from its own range
    RETURN QUERY
    SELECT m.id, m.conversation_id, m.kind, m.status, m.status_reason, m.label, m.pinned, m.summary,
           m.content, m.stability, m.difficulty, m.last_reviewed_at, m.review_count, m.supersedes_id, v_by,
           m.created_at, m.confidence_score, m.source_type, m.source_ref, m.source_message_ids, m.valid_until,
           m.last_confirmed_at, m.confirms_id, m.invalidates_id, m.slot, v_rev
    FROM mneme.memories m WHERE m.id = inspect.id AND m.conversation_id = v_conv;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'memory % does not exist', inspect.id USING ERRCODE = 'P0002',
            HINT = 'the memory is not in this tenant: check the id and mneme.set_tenant (or the login''s tenant); an erased memory leaves only its events: SELECT * FROM mneme.memory_event_log(id)';
    END IF;
END
$$;
COMMENT ON FUNCTION mneme.inspect(uuid) IS
    'One memory with its belief state (status, confidence, validity, slot), provenance (source type, redacted '
    'source_ref, source messages), FSRS state, its lineage links (supersedes, superseded_by, confirms, invalidates) '
    'and its revision: the decision of its revise job (NULL until the job ran), e.g. ''ADD by heuristic: new information''.';
GRANT EXECUTE ON FUNCTION mneme.inspect(uuid) TO mneme_app, mneme_worker, mneme_admin;

-- mneme.history (the lineage both ways) is in 150-revision.sql, beside the
-- revision links it follows.

-- -----------------------------------------------------------------------------
-- Reads for people looking into the memory (mneme ui, psql): a
-- conversation's memories and a memory's reviews. No side effects; row
-- security keeps them to the transaction's tenant.
-- -----------------------------------------------------------------------------
CREATE OR REPLACE FUNCTION mneme.conversation_memories(conversation_id uuid)
RETURNS TABLE (memory_id uuid, kind text, status text, label text, pinned boolean, title text, summary text,
               content text, source_message_ids bigint[], source_first_at timestamptz, stability float8,
               last_reviewed_at timestamptz, review_count int, confidence_score real, supersedes_id uuid,
               created_at timestamptz)
LANGUAGE plpgsql STABLE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
SET jit = off
AS $$
#variable_conflict use_column
BEGIN
    PERFORM mneme._enter(conversation_memories.conversation_id);  -- the caller forwarded first (Citus: mneme._enter)
    IF conversation_memories.conversation_id IS NULL THEN
        RAISE EXCEPTION 'conversation_id must not be NULL' USING ERRCODE = '22004';
    END IF;
    IF NOT mneme._readable_conversation(conversation_memories.conversation_id) THEN
        RETURN;  -- unknown, or another tenant's: no rows, as mneme.search
    END IF;
    RETURN QUERY
    SELECT m.id, m.kind, m.status, m.label, m.pinned, m.title, m.summary, m.content, m.source_message_ids,
           m.source_first_at, m.stability, m.last_reviewed_at, m.review_count, m.confidence_score,
           m.supersedes_id, m.created_at
    FROM mneme.memories m
    WHERE m.conversation_id = conversation_memories.conversation_id
    ORDER BY coalesce(m.source_first_at, m.created_at), m.created_at, m.id;
END
$$;
COMMENT ON FUNCTION mneme.conversation_memories(uuid) IS
    'A conversation''s memories of every status (episodes and facts), in the order of what they came from: '
    'belief state, label, pin, title, summary, content, source messages, FSRS stability and last review, '
    'confidence, the memory it supersedes. Unknown or another tenant''s conversation: no rows. No side effects.';
GRANT EXECUTE ON FUNCTION mneme.conversation_memories(uuid) TO mneme_app, mneme_worker, mneme_admin;

-- A person's question "what does the agent remember about X?": the
-- tenant's memories (or one conversation's), filtered, sorted and paged.
-- Two statements, one per scope, so that each is planned for its index
-- (memories_conversation_idx, memories_tenant_idx); the filters are
-- "argument IS NULL OR column = argument", which a generic plan keeps
-- as filters over that one index scan.
CREATE OR REPLACE FUNCTION mneme.find_memories(
    conversation uuid DEFAULT NULL, words text DEFAULT NULL, only_label text DEFAULT NULL, only_status text DEFAULT NULL,
    only_kind text DEFAULT NULL, only_pinned boolean DEFAULT NULL, r_min float8 DEFAULT NULL, r_max float8 DEFAULT NULL,
    sort text DEFAULT 'created', k int DEFAULT 50, page int DEFAULT 1, at timestamptz DEFAULT NULL)
RETURNS TABLE (memory_id uuid, conversation_id uuid, kind text, status text, label text, pinned boolean, title text,
               summary text, content text, source_first_at timestamptz, created_at timestamptz, valid_until timestamptz,
               stability float8, last_reviewed_at timestamptz, review_count int, confidence_score real,
               retrievability float8, supersedes_id uuid, total bigint)
LANGUAGE plpgsql STABLE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
SET jit = off
AS $$
#variable_conflict use_column
DECLARE
    v__entered boolean := mneme._enter(NULL);  -- the caller forwarded first (Citus: mneme._enter)
    v_at     timestamptz := coalesce(find_memories.at, now());
    v_sort   text := coalesce(find_memories.sort, 'created');
    v_k      int := coalesce(find_memories.k, 50);
    v_page   int := coalesce(find_memories.page, 1);
    v_words  text[];
    v_tenant text := mneme._tenant();
BEGIN
    IF v_sort NOT IN ('created', 'created_asc', 'said', 'said_asc', 'r', 'r_desc', 'stability', 'reviews') THEN
        RAISE EXCEPTION 'sort must be created, created_asc, said, said_asc, r, r_desc, stability or reviews, got %', mneme._quote_prefix(v_sort)
            USING ERRCODE = '22023', HINT = 'created: newest stored first; said: newest source message first; r: the most faded first';
    END IF;
    IF v_k < 1 OR v_k > 500 THEN
        RAISE EXCEPTION 'k must be between 1 and 500, got %', v_k USING ERRCODE = '22023', HINT = 'k is the page size';
    END IF;
    IF v_page < 1 OR v_page > 100000 THEN
        RAISE EXCEPTION 'page must be between 1 and 100000, got %', v_page USING ERRCODE = '22023', HINT = 'pages count from 1';
    END IF;
    IF find_memories.only_status IS NOT NULL
       AND find_memories.only_status NOT IN ('active', 'superseded', 'invalidated', 'inactive', 'merged') THEN
        RAISE EXCEPTION 'only_status must be active, superseded, invalidated, inactive or merged, got %', mneme._quote_prefix(find_memories.only_status)
            USING ERRCODE = '22023', HINT = 'omit only_status (NULL) for every status';
    END IF;
    IF find_memories.only_kind IS NOT NULL AND find_memories.only_kind NOT IN ('episodic', 'semantic') THEN
        RAISE EXCEPTION 'only_kind must be episodic or semantic, got %', mneme._quote_prefix(find_memories.only_kind)
            USING ERRCODE = '22023', HINT = 'omit only_kind (NULL) for both';
    END IF;
    IF find_memories.r_min NOT BETWEEN 0 AND 1 OR find_memories.r_max NOT BETWEEN 0 AND 1 THEN
        RAISE EXCEPTION 'r_min and r_max must be between 0 and 1, got % and %', find_memories.r_min, find_memories.r_max
            USING ERRCODE = '22023', HINT = 'retrievability is between 0 and 1; omit a bound (NULL) for none';
    END IF;
    IF find_memories.at IS NOT NULL AND NOT isfinite(find_memories.at) THEN
        RAISE EXCEPTION 'at must be a finite time, got %', find_memories.at USING ERRCODE = '22008';
    END IF;
    -- Every one of the words, anywhere in the title, summary or content, any case
    -- (LIKE's wildcards in the words taken literally).
    SELECT array_agg('%' || replace(replace(replace(w, '\', '\\'), '%', '\%'), '_', '\_') || '%')
    INTO v_words
    FROM regexp_split_to_table(lower(coalesce(find_memories.words, '')), '\s+') w WHERE w <> '';
    IF find_memories.conversation IS NOT NULL THEN
        IF NOT mneme._readable_conversation(find_memories.conversation) THEN
            RETURN;  -- unknown, or another tenant's: no rows, as mneme.search
        END IF;
        RETURN QUERY
        WITH f AS (
            SELECT m.*, CASE WHEN m.pinned THEN 1::float8 ELSE mneme._retrievability(m.stability, m.last_reviewed_at, v_at) END AS r
            FROM mneme.memories m
            WHERE m.conversation_id = find_memories.conversation
              AND (find_memories.only_label IS NULL OR m.label = find_memories.only_label)
              AND (find_memories.only_status IS NULL OR m.status = find_memories.only_status)
              AND (find_memories.only_kind IS NULL OR m.kind = find_memories.only_kind)
              AND (find_memories.only_pinned IS NULL OR m.pinned = find_memories.only_pinned)
              AND (v_words IS NULL OR lower(concat_ws(' ', m.title, m.summary, m.content)) LIKE ALL (v_words))
        )
        SELECT f.id, f.conversation_id, f.kind, f.status, f.label, f.pinned, f.title, f.summary, f.content, f.source_first_at,
               f.created_at, f.valid_until, f.stability, f.last_reviewed_at, f.review_count, f.confidence_score, f.r,
               f.supersedes_id, count(*) OVER ()
        FROM f
        WHERE (find_memories.r_min IS NULL OR f.r >= find_memories.r_min) AND (find_memories.r_max IS NULL OR f.r <= find_memories.r_max)
        ORDER BY CASE WHEN v_sort = 'r' THEN f.r END, CASE WHEN v_sort = 'r_desc' THEN f.r END DESC,
                 CASE WHEN v_sort = 'said' THEN coalesce(f.source_first_at, f.created_at) END DESC,
                 CASE WHEN v_sort = 'said_asc' THEN coalesce(f.source_first_at, f.created_at) END,
                 CASE WHEN v_sort = 'stability' THEN f.stability END DESC, CASE WHEN v_sort = 'reviews' THEN f.review_count END DESC,
                 CASE WHEN v_sort = 'created_asc' THEN f.created_at END, f.created_at DESC, f.id
        LIMIT v_k OFFSET (v_page - 1)::bigint * v_k;
        RETURN;
    END IF;
    RETURN QUERY
    WITH f AS (
        SELECT m.*, CASE WHEN m.pinned THEN 1::float8 ELSE mneme._retrievability(m.stability, m.last_reviewed_at, v_at) END AS r
        FROM mneme.memories m
        WHERE m.tenant_id = v_tenant
          AND (find_memories.only_label IS NULL OR m.label = find_memories.only_label)
          AND (find_memories.only_status IS NULL OR m.status = find_memories.only_status)
          AND (find_memories.only_kind IS NULL OR m.kind = find_memories.only_kind)
          AND (find_memories.only_pinned IS NULL OR m.pinned = find_memories.only_pinned)
          AND (v_words IS NULL OR lower(concat_ws(' ', m.title, m.summary, m.content)) LIKE ALL (v_words))
    )
    SELECT f.id, f.conversation_id, f.kind, f.status, f.label, f.pinned, f.title, f.summary, f.content, f.source_first_at,
           f.created_at, f.valid_until, f.stability, f.last_reviewed_at, f.review_count, f.confidence_score, f.r,
           f.supersedes_id, count(*) OVER ()
    FROM f
    WHERE (find_memories.r_min IS NULL OR f.r >= find_memories.r_min) AND (find_memories.r_max IS NULL OR f.r <= find_memories.r_max)
    ORDER BY CASE WHEN v_sort = 'r' THEN f.r END, CASE WHEN v_sort = 'r_desc' THEN f.r END DESC,
             CASE WHEN v_sort = 'said' THEN coalesce(f.source_first_at, f.created_at) END DESC,
             CASE WHEN v_sort = 'said_asc' THEN coalesce(f.source_first_at, f.created_at) END,
             CASE WHEN v_sort = 'stability' THEN f.stability END DESC, CASE WHEN v_sort = 'reviews' THEN f.review_count END DESC,
             CASE WHEN v_sort = 'created_asc' THEN f.created_at END, f.created_at DESC, f.id
    LIMIT v_k OFFSET (v_page - 1)::bigint * v_k;
END
$$;
COMMENT ON FUNCTION mneme.find_memories(uuid, text, text, text, text, boolean, float8, float8, text, int, int, timestamptz) IS
    'The transaction''s tenant''s memories (or, with conversation, one conversation''s; unknown or another tenant''s: no rows), '
    'for a person looking: every one of words in the title, summary or content (any case), only_label, only_status, only_kind, only_pinned, '
    'retrievability at `at` (default now; pinned: 1) between r_min and r_max; sorted by sort (created: newest stored first, '
    'created_asc, said: newest source message first, said_asc, r: most faded first, r_desc, stability, reviews); page of k '
    '(1..500) rows, total the rows of every page. NULL filters filter nothing. No side effects.';
GRANT EXECUTE ON FUNCTION mneme.find_memories(uuid, text, text, text, text, boolean, float8, float8, text, int, int, timestamptz) TO mneme_app, mneme_worker, mneme_admin;

CREATE OR REPLACE FUNCTION mneme.memory_reviews(memory_id uuid)
RETURNS TABLE (reviewed_at timestamptz, rating text, reviewer text, defaulted boolean, stability_before float8,
               stability_after float8, difficulty_before float8, difficulty_after float8, state_before text,
               state_after text, last_reviewed_before timestamptz, matched_queries text[], job_id bigint, evidence jsonb)
LANGUAGE plpgsql STABLE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
SET jit = off
AS $$
#variable_conflict use_column
DECLARE
    v__entered boolean := mneme._enter(NULL);  -- the caller forwarded first (Citus: mneme._enter)
    v_conv uuid;
    v_rows bigint[];
BEGIN
    IF memory_reviews.memory_id IS NULL THEN
        RAISE EXCEPTION 'memory_id must not be NULL' USING ERRCODE = '22004';
    END IF;
    v_conv := mneme._memory_conversation(memory_reviews.memory_id);
    IF v_conv IS NULL THEN
        RAISE EXCEPTION 'memory % does not exist', memory_reviews.memory_id USING ERRCODE = 'P0002',
            HINT = 'the memory is not in this tenant: check the id and mneme.set_tenant (or the login''s tenant); an erased memory leaves only its events: SELECT * FROM mneme.memory_event_log(id)';
    END IF;
    -- (its review rows first: their queries are read by their ids)
    v_rows := ARRAY(SELECT l.id FROM mneme.review_log l
                    WHERE l.memory_id = memory_reviews.memory_id AND l.conversation_id = v_conv);
    RETURN QUERY
    SELECT l.reviewed_at, l.rating, l.reviewer, l.defaulted, l.stability_before, l.stability_after,
           l.difficulty_before, l.difficulty_after, l.state_before, l.state_after, l.last_reviewed_before,
           coalesce(q.queries, '{}'), l.job_id, l.evidence
    FROM mneme.review_log l
    -- (the queries are rows of mneme.review_queries, goose 00310; joined on
    -- the conversation, which Citus pushes down: a subquery in the target
    -- list it refuses, 0A000)
    LEFT JOIN (SELECT r.conversation_id, r.review_log_id, array_agg(r.query ORDER BY r.ord) AS queries
               FROM mneme.review_queries r WHERE r.conversation_id = v_conv AND r.review_log_id = ANY (v_rows)
               GROUP BY r.conversation_id, r.review_log_id) q
      ON q.conversation_id = l.conversation_id AND q.review_log_id = l.id
    WHERE l.memory_id = memory_reviews.memory_id AND l.conversation_id = v_conv
    ORDER BY l.reviewed_at, l.id;
END
$$;
COMMENT ON FUNCTION mneme.memory_reviews(uuid) IS
    'A memory''s reviews oldest first (the rows of mneme.review_log): the rating, who rated, FSRS stability, '
    'difficulty and phase before and after, the queries that retrieved it, and the evidence for the rating (the heuristic''s '
    'score and thresholds or the LLM''s reason; NULL for older reviews). Raises P0002 for an unknown '
    'memory (or another tenant''s). No side effects.';
GRANT EXECUTE ON FUNCTION mneme.memory_reviews(uuid) TO mneme_app, mneme_worker, mneme_admin;
