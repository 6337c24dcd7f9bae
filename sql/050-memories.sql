-- =============================================================================
-- mneme explicit memory API: remember, pin/unpin, forget, inspect, history.
-- Beliefs are revised, never silently overwritten: forgetting invalidates
-- with a reason, superseding links the new memory to the old one, and both
-- rows stay. Idempotent: re-applied on every `mneme migrate`.
-- =============================================================================

CREATE OR REPLACE FUNCTION mneme.remember(
    conversation_id uuid,
    content text,
    label text DEFAULT NULL,
    pinned boolean DEFAULT false,
    valid_until timestamptz DEFAULT NULL,
    supersedes uuid DEFAULT NULL,
    title text DEFAULT NULL,
    source_ref text DEFAULT NULL)
RETURNS uuid
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
#variable_conflict use_column
DECLARE
    v_id  uuid;
    v_old mneme.memories;
BEGIN
    IF remember.conversation_id IS NULL THEN
        RAISE EXCEPTION 'conversation_id must not be NULL' USING ERRCODE = '22004';
    END IF;
    IF remember.content IS NULL OR mneme._is_blank(remember.content) THEN
        RAISE EXCEPTION 'memory content must not be NULL or empty' USING ERRCODE = '22023';
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
    PERFORM mneme._check_length('source_ref', remember.source_ref, 2000);
    PERFORM mneme._claim_conversation(remember.conversation_id);
    IF remember.valid_until IS NOT NULL AND remember.valid_until <= now() THEN
        RAISE EXCEPTION 'valid_until % is not in the future', remember.valid_until USING ERRCODE = '22023';
    END IF;
    IF remember.supersedes IS NOT NULL THEN
        SELECT * INTO v_old FROM mneme.memories WHERE id = remember.supersedes FOR UPDATE;
        IF NOT FOUND THEN
            RAISE EXCEPTION 'memory % does not exist', remember.supersedes USING ERRCODE = 'P0002';
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
                                valid_until, source_type, source_ref, supersedes_id, last_confirmed_at)
    VALUES (remember.conversation_id, 'semantic', remember.title, remember.content, remember.content, remember.label, coalesce(remember.pinned, false),
            remember.valid_until, 'explicit', remember.source_ref, remember.supersedes, now())
    RETURNING id INTO v_id;

    IF remember.supersedes IS NOT NULL THEN
        UPDATE mneme.memories
        SET status = 'superseded', status_reason = format('superseded by %s', v_id), updated_at = now()
        WHERE id = remember.supersedes;
    END IF;
    RETURN v_id;
END
$$;
COMMENT ON FUNCTION mneme.remember(uuid, text, text, boolean, timestamptz, uuid, text, text) IS
    'Writes an explicit semantic memory and returns its id. The label is one of mneme.labels() (22023 otherwise); '
    'without one, mneme.auto_label chooses. The memory starts in mneme.initial_state of its label. With supersedes, '
    'the old memory becomes superseded (kept, with status_reason) and the new one points to it through supersedes_id.';

CREATE OR REPLACE FUNCTION mneme.pin(memory_id uuid, pinned boolean DEFAULT true)
RETURNS void
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
#variable_conflict use_column
BEGIN
    IF pin.memory_id IS NULL OR pin.pinned IS NULL THEN
        RAISE EXCEPTION 'memory_id and pinned must not be NULL' USING ERRCODE = '22004';
    END IF;
    UPDATE mneme.memories SET pinned = pin.pinned, updated_at = now() WHERE id = pin.memory_id;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'memory % does not exist', pin.memory_id USING ERRCODE = 'P0002';
    END IF;
END
$$;
COMMENT ON FUNCTION mneme.pin(uuid, boolean) IS
    'Pins (or with false unpins) a memory: pinned memories rank with retrievability 1 and are never purged.';

CREATE OR REPLACE FUNCTION mneme.unpin(memory_id uuid)
RETURNS void
LANGUAGE sql
SET search_path = pg_catalog, pg_temp
AS $$ SELECT mneme.pin(unpin.memory_id, false) $$;
COMMENT ON FUNCTION mneme.unpin(uuid) IS 'Unpins a memory: mneme.pin(id, false).';

CREATE OR REPLACE FUNCTION mneme.forget(memory_id uuid, reason text)
RETURNS void
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
#variable_conflict use_column
DECLARE
    v_status text;
BEGIN
    IF forget.memory_id IS NULL THEN
        RAISE EXCEPTION 'memory_id must not be NULL' USING ERRCODE = '22004';
    END IF;
    IF forget.reason IS NULL OR mneme._is_blank(forget.reason) THEN
        RAISE EXCEPTION 'forget needs a reason' USING ERRCODE = '22023',
            HINT = 'the reason is kept in status_reason so the change can be explained later';
    END IF;
    PERFORM mneme._check_length('reason', forget.reason, 2000);
    SELECT status INTO v_status FROM mneme.memories WHERE id = forget.memory_id FOR UPDATE;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'memory % does not exist', forget.memory_id USING ERRCODE = 'P0002';
    END IF;
    IF v_status = 'invalidated' THEN
        RETURN; -- already forgotten: keep the first reason
    END IF;
    UPDATE mneme.memories
    SET status = 'invalidated', status_reason = forget.reason, updated_at = now()
    WHERE id = forget.memory_id;
END
$$;
COMMENT ON FUNCTION mneme.forget(uuid, text) IS
    'Invalidates a memory with a reason: it leaves retrieval but the row and its lineage stay. '
    'Forgetting an invalidated memory again is a no-op.';

CREATE OR REPLACE FUNCTION mneme.inspect(id uuid)
RETURNS TABLE (memory_id uuid, conversation_id uuid, kind text, status text, status_reason text,
               label text, pinned boolean, summary text, content text, stability float8,
               difficulty float8, last_reviewed_at timestamptz, review_count int,
               supersedes_id uuid, superseded_by uuid, created_at timestamptz)
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
#variable_conflict use_column
BEGIN
    IF inspect.id IS NULL THEN
        RAISE EXCEPTION 'memory_id must not be NULL' USING ERRCODE = '22004';
    END IF;
    RETURN QUERY
    SELECT m.id, m.conversation_id, m.kind, m.status, m.status_reason, m.label, m.pinned, m.summary,
           m.content, m.stability, m.difficulty, m.last_reviewed_at, m.review_count, m.supersedes_id,
           (SELECT n.id FROM mneme.memories n WHERE n.supersedes_id = m.id ORDER BY n.created_at DESC LIMIT 1),
           m.created_at
    FROM mneme.memories m WHERE m.id = inspect.id;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'memory % does not exist', inspect.id USING ERRCODE = 'P0002';
    END IF;
END
$$;
COMMENT ON FUNCTION mneme.inspect(uuid) IS
    'One memory with its belief state, FSRS state and both lineage links.';

CREATE OR REPLACE FUNCTION mneme.history(id uuid)
RETURNS TABLE (depth int, memory_id uuid, status text, status_reason text, content text,
               supersedes_id uuid, created_at timestamptz)
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
#variable_conflict use_column
BEGIN
    IF history.id IS NULL THEN
        RAISE EXCEPTION 'memory_id must not be NULL' USING ERRCODE = '22004';
    END IF;
    IF NOT EXISTS (SELECT 1 FROM mneme.memories m WHERE m.id = history.id) THEN
        RAISE EXCEPTION 'memory % does not exist', history.id USING ERRCODE = 'P0002';
    END IF;
    -- depth 0 is the given memory; negative depths are what it superseded,
    -- positive depths what superseded it.
    RETURN QUERY
    WITH RECURSIVE older AS (
        SELECT 0 AS d, m.id, m.supersedes_id FROM mneme.memories m WHERE m.id = history.id
        UNION ALL
        SELECT o.d - 1, m.id, m.supersedes_id FROM older o JOIN mneme.memories m ON m.id = o.supersedes_id
        WHERE o.d > -1000
    ), newer AS (
        SELECT 0 AS d, m.id FROM mneme.memories m WHERE m.id = history.id
        UNION ALL
        SELECT n.d + 1, m.id FROM newer n JOIN mneme.memories m ON m.supersedes_id = n.id
        WHERE n.d < 1000
    ), lineage AS (
        SELECT o.d, o.id FROM older o UNION SELECT n.d, n.id FROM newer n
    )
    SELECT l.d, x.id, x.status, x.status_reason, x.content, x.supersedes_id, x.created_at
    FROM lineage l JOIN mneme.memories x ON x.id = l.id
    ORDER BY l.d, x.created_at, x.id;
END
$$;
COMMENT ON FUNCTION mneme.history(uuid) IS
    'The supersedes lineage of a memory, oldest first: depth < 0 what it replaced, 0 itself, > 0 its successors.';
