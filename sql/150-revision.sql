-- =============================================================================
-- mneme belief revision. Every explicit write (mneme.remember) and
-- every fact extracted from a conversation (mneme.add_fact) enqueues a
-- 'revise' job in its transaction; the new memory is visible at once. The
-- sidecar's job compares it with the closest facts of its scope
-- (mneme.revision_candidates), classifies it (an LLM, or the offline
-- classifier) and applies the decision here (mneme.apply_revision):
--   ADD         nothing else changes
--   NOOP        it restates a fact: that fact is reconfirmed
--               (last_confirmed_at, confidence up, and a "good" FSRS review
--               the job applies); the new row stays for provenance, status
--               'merged', confirms_id pointing at it, out of retrieval
--   SUPERSEDE   it replaces a fact's value: the old one 'superseded'
--               (valid_until = the new one's time), the new one points to it
--               (supersedes_id) and starts from its FSRS state; a write
--               older than the fact it would replace is stored as already
--               superseded by it instead
--   INVALIDATE  it retracts a fact: the old one 'invalidated'
--               (valid_until = the retraction's time), invalidates_id links
-- Nothing is deleted. Every action is a memory_events row ('revised').
-- Provenance: source_ref is bounded and redacted (mneme.redact).
-- Idempotent: re-applied on every migrate.
-- =============================================================================

-- -----------------------------------------------------------------------------
-- Provenance
-- -----------------------------------------------------------------------------
-- A source type's initial confidence (setting confidence_by_source).
CREATE OR REPLACE FUNCTION mneme._source_confidence(source_type text)
RETURNS real
LANGUAGE sql STABLE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
SELECT least(1, greatest(0, coalesce((mneme.setting('confidence_by_source') ->> _source_confidence.source_type)::real, 1)))
$$;
COMMENT ON FUNCTION mneme._source_confidence(text) IS
    'Internal: the initial confidence_score of a source type (setting confidence_by_source; 1 when unknown).';

CREATE OR REPLACE FUNCTION mneme.redact(input text)
RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
SET jit = off
AS $$
SELECT regexp_replace(regexp_replace(regexp_replace(regexp_replace(regexp_replace(redact.input,
    -- credentials in a URL: scheme://user:password@host
    '([a-zA-Z][a-zA-Z0-9+.-]*://)[^/\s:@]*:[^/\s@]*@', '\1[REDACTED]@', 'g'),
    -- bearer and basic authorization values
    '\m(bearer|basic)(\s+|%20)[A-Za-z0-9._~+/=-]+', '\1\2[REDACTED]', 'gi'),
    -- secrets in query strings and key=value pairs
    '\m((api[_-]?key|apikey|access[_-]?token|auth[_-]?token|token|secret|password|passwd|pwd|client[_-]?secret|sig|signature|key)\s*[=:]\s*)[^\s&;,]+',
    '\1[REDACTED]', 'gi'),
    -- well-known key prefixes (OpenAI, GitHub, Slack, AWS, Google)
    '\m(sk-[A-Za-z0-9_-]{16,}|gh[pousr]_[A-Za-z0-9]{20,}|xox[abprs]-[A-Za-z0-9-]{10,}|AKIA[0-9A-Z]{16}|AIza[0-9A-Za-z_-]{30,})', '[REDACTED]', 'g'),
    -- any other long run of letters and digits that has both (no hyphens:
    -- uuids and dates stay readable)
    '\m(?=[A-Za-z_]*[0-9])(?=[0-9_]*[A-Za-z])[A-Za-z0-9_]{32,}\M', '[REDACTED]', 'g')
$$;
COMMENT ON FUNCTION mneme.redact(text) IS
    'A source reference with secrets replaced by [REDACTED]: credentials in URLs, bearer/basic authorization values, '
    'key=value secrets (api_key, token, password, secret, ...), well-known API key prefixes and long letter-and-digit '
    'runs. Applied to source_ref before it is stored.';
GRANT EXECUTE ON FUNCTION mneme.redact(text) TO mneme_app, mneme_worker, mneme_admin;

-- -----------------------------------------------------------------------------
-- Facts extracted from conversations (the segment job)
-- -----------------------------------------------------------------------------
CREATE OR REPLACE FUNCTION mneme.add_fact(
    conversation_id uuid,
    content text,
    message_ids bigint[],
    episode_id uuid DEFAULT NULL,
    label text DEFAULT NULL)
RETURNS uuid
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
SET jit = off
AS $$
#variable_conflict use_column
DECLARE
    v__entered boolean := mneme._enter(add_fact.conversation_id);  -- the caller forwarded first (Citus: mneme._enter)
    v_id    uuid;
    v_ids   bigint[];
    v_first timestamptz;
    v_last  timestamptz;
    v_scope bigint[];
    v_scope_first timestamptz;
    v_n     int;
    v_max   int;
BEGIN
    IF add_fact.conversation_id IS NULL THEN
        RAISE EXCEPTION 'conversation_id must not be NULL' USING ERRCODE = '22004';
    END IF;
    IF add_fact.content IS NULL OR mneme._is_blank(add_fact.content) THEN
        RAISE EXCEPTION 'fact content must not be NULL or empty' USING ERRCODE = '22023';
    END IF;
    PERFORM mneme._check_length('content', add_fact.content, 2000);
    IF add_fact.label IS NOT NULL AND NOT mneme.is_label(add_fact.label) THEN
        add_fact.label := NULL;  -- a model's label outside the vocabulary: the offline labeller chooses
    END IF;
    SELECT x.ids, x.first_at, x.last_at INTO v_ids, v_first, v_last
    FROM mneme._source_messages(add_fact.conversation_id, add_fact.message_ids, false) x;
    -- One message can state thousands of facts, each a memory and a revise
    -- job: at most extract_facts_max per episode (the facts drawn from its
    -- messages; without an episode, from the fact's own messages). The
    -- segment job keeps to the cap; this is the check no caller bypasses.
    -- (A lookup, then the fallback: the same as an outer join of one row
    -- to the episode, which under row security crashed the Citus 13.2.2
    -- coordinator, signal 11.)
    SELECT e.source_message_ids, e.source_first_at INTO v_scope, v_scope_first
    FROM mneme.memories e
    WHERE e.id = add_fact.episode_id AND e.conversation_id = add_fact.conversation_id AND e.kind = 'episodic';
    v_scope := coalesce(v_scope, v_ids);
    v_scope_first := coalesce(v_scope_first, v_first);
    v_max := mneme.setting('extract_facts_max')::int;
    SELECT count(*) INTO v_n FROM mneme.memories f
    WHERE f.conversation_id = add_fact.conversation_id AND f.created_at >= v_scope_first
      AND f.source_type = 'extracted' AND f.source_message_ids && v_scope;
    IF v_n >= v_max THEN
        RAISE EXCEPTION 'episode % already has % extracted facts, the most setting extract_facts_max allows',
            coalesce(add_fact.episode_id::text, 'of messages ' || left(v_ids::text, 80)), v_n
            USING ERRCODE = '54000', HINT = 'SELECT mneme.set_setting(''extract_facts_max'', ...) raises the cap';
    END IF;
    INSERT INTO mneme.memories (conversation_id, kind, content, summary, source_message_ids, source_first_at, source_last_at,
                                label, source_type, source_ref, confidence_score, created_at, last_reviewed_at)
    VALUES (add_fact.conversation_id, 'semantic', btrim(add_fact.content), btrim(add_fact.content), v_ids, v_first, v_last,
            coalesce(add_fact.label, mneme.auto_label(add_fact.content, v_last)), 'extracted',
            left(concat_ws(' ', CASE WHEN add_fact.episode_id IS NOT NULL THEN 'episode ' || add_fact.episode_id END,
                           'messages ' || array_to_string(v_ids, ',')), 512),
            mneme._source_confidence('extracted'), v_last, v_last)
    RETURNING id INTO v_id;
    PERFORM mneme.enqueue_job('revise', add_fact.conversation_id, mneme._revise_payload(v_id));
    RETURN v_id;
END
$$;
COMMENT ON FUNCTION mneme.add_fact(uuid, text, bigint[], uuid, text) IS
    'Worker: stores a fact extracted from messages of the conversation as a semantic memory (source_type extracted, '
    'source_ref the episode and message ids, source_message_ids, created at its newest message''s time, confidence '
    'confidence_by_source.extracted) and enqueues its revise job. Returns its id. Raises 54000 when the episode '
    '(or, without one, the fact''s messages) has extract_facts_max facts already.';
GRANT EXECUTE ON FUNCTION mneme.add_fact(uuid, text, bigint[], uuid, text) TO mneme_worker;

-- -----------------------------------------------------------------------------
-- Candidates
-- -----------------------------------------------------------------------------
CREATE OR REPLACE FUNCTION mneme.revision_candidates(memory_id uuid, k int DEFAULT NULL, same_slot text DEFAULT NULL)
RETURNS TABLE (id uuid, content text, at timestamptz, label text, slot text, score float8)
LANGUAGE plpgsql STABLE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
SET jit = off
AS $$
#variable_conflict use_column
DECLARE
    v__entered boolean := mneme._enter(NULL);  -- the caller forwarded first (Citus: mneme._enter)
    v_new   mneme.memories;
    v_k     int := coalesce(revision_candidates.k, mneme.setting('revision_candidates')::int);
    v_scope text := mneme.setting('revision_scope') #>> '{}';
    v_convs uuid[];
    v_found uuid[];
    v_score float8[];
BEGIN
    IF revision_candidates.memory_id IS NULL THEN
        RAISE EXCEPTION 'memory_id must not be NULL' USING ERRCODE = '22004';
    END IF;
    IF v_k < 1 OR v_k > 99 THEN
        RAISE EXCEPTION 'k must be 1 to 99, got %', v_k USING ERRCODE = '22023';
    END IF;
    SELECT * INTO v_new FROM mneme.memories m WHERE m.id = revision_candidates.memory_id;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'memory % does not exist', revision_candidates.memory_id USING ERRCODE = 'P0002';
    END IF;
    v_convs := mneme._scope_conversations(v_new.conversation_id, v_scope);
    -- The hybrid ranking over the new text (facts only: an episode is a
    -- transcript, not a belief to replace), then every active fact of the
    -- same slot, whatever its words. Under an external embedder SQL cannot
    -- embed the text: BM25 alone, asked for ('{}'; search refuses a NULL
    -- there).
    -- The ranking first, by itself (joined with mneme.memories in one
    -- statement, Citus pushed the call into the query on every shard, where
    -- with scope tenant it saw only that worker's memories; issue 47).
    SELECT coalesce(array_agg(x.memory_id ORDER BY x.score DESC, x.memory_id), '{}'),
           coalesce(array_agg(x.score ORDER BY x.score DESC, x.memory_id), '{}')
    INTO v_found, v_score
    FROM (SELECT s.memory_id, s.score
          FROM mneme.search(v_new.conversation_id, left(v_new.content, 10000), 100,
                            CASE WHEN mneme.setting('embedder') #>> '{}' = 'hash' THEN NULL ELSE '{}'::real[] END,
                            scope => v_scope) s
          WHERE s.memory_id <> v_new.id AND s.kind = 'semantic'
          ORDER BY s.score DESC, s.memory_id
          LIMIT v_k) x;
    RETURN QUERY
    WITH s AS (
        SELECT u.memory_id, u.score FROM unnest(v_found, v_score) AS u(memory_id, score)
    ), sl AS (
        SELECT m.id AS memory_id, 0::float8 AS score
        FROM mneme.memories m
        WHERE revision_candidates.same_slot IS NOT NULL AND m.slot = lower(btrim(revision_candidates.same_slot))
          AND m.conversation_id = ANY (v_convs) AND m.status = 'active' AND m.id <> v_new.id
          AND m.id <> ALL (v_found)
        ORDER BY m.created_at DESC
        LIMIT mneme.setting('revision_slot_candidates')::int
    )
    SELECT m.id, m.content, m.created_at, m.label, m.slot, c.score
    FROM (SELECT * FROM s UNION ALL SELECT * FROM sl) c JOIN mneme.memories m ON m.id = c.memory_id
    ORDER BY c.score DESC, m.created_at DESC, m.id;
END
$$;
COMMENT ON FUNCTION mneme.revision_candidates(uuid, int, text) IS
    'Worker: the facts a new memory is revised against: the top k (setting revision_candidates) active semantic '
    'memories of its scope (setting revision_scope) by mneme.search over its text, itself excluded, best first; then '
    'the newest active facts of the same slot (when given, at most revision_slot_candidates) that the ranking missed. Never the whole store.';
GRANT EXECUTE ON FUNCTION mneme.revision_candidates(uuid, int, text) TO mneme_worker;

-- -----------------------------------------------------------------------------
-- Applying a decision
-- -----------------------------------------------------------------------------
-- The four actions of apply_revision, one function each. They run under
-- apply_revision's row locks with its checks done, the new fact v_new and
-- its target v_old as read there, and v_note the reason recorded.

-- NOOP: the new fact restates v_old; it becomes a merged duplicate and v_old
-- is reconfirmed (time, confidence, the duplicate's provenance).
CREATE OR REPLACE FUNCTION mneme._revise_noop(v_new mneme.memories, v_old mneme.memories, v_note text)
RETURNS void
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
#variable_conflict use_column
DECLARE
    v_new_at timestamptz := v_new.created_at;
BEGIN
    UPDATE mneme.memories m
    SET last_confirmed_at = greatest(coalesce(m.last_confirmed_at, v_new_at), v_new_at),
        confidence_score = least(1, m.confidence_score + mneme.setting('revision_reconfirm_boost')::float8),
        -- Provenance the duplicate carried is kept on the confirmed row too.
        source_message_ids = CASE WHEN v_new.source_message_ids IS NULL THEN m.source_message_ids
                                  ELSE ARRAY(SELECT DISTINCT x FROM unnest(coalesce(m.source_message_ids, '{}') || v_new.source_message_ids) x ORDER BY x) END,
        updated_at = now()
    WHERE m.conversation_id = v_old.conversation_id AND m.id = v_old.id;
    UPDATE mneme.memories m SET status = 'merged', confirms_id = v_old.id, status_reason = v_note, updated_at = now()
    WHERE m.conversation_id = v_new.conversation_id AND m.id = v_new.id;
END
$$;

-- A lineage is one chain in the order its statements were said: each row's
-- supersedes_id points at the row said right before it. Writes arrive out
-- of order (a late write, two revise jobs of one slot run in either order,
-- a slot's older facts retired together), so a SUPERSEDE does not link one
-- pair: it merges the lineages of the rows it touches into one chain
-- sorted by created_at. history() then finds every row from either end.
CREATE OR REPLACE FUNCTION mneme._lineage_merge(a uuid, b uuid)
RETURNS void
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
#variable_conflict use_column
DECLARE
    v_ids   uuid[] := '{}';
    v_start uuid;
    v_cur   uuid;
    v_next  uuid;
    v_prev  uuid;
    v_first boolean := true;
    r       record;
BEGIN
    FOREACH v_start IN ARRAY ARRAY[_lineage_merge.a, _lineage_merge.b] LOOP
        v_cur := v_start;
        WHILE v_cur IS NOT NULL AND NOT v_cur = ANY (v_ids) AND cardinality(v_ids) < 1000 LOOP
            v_ids := v_ids || v_cur;
            v_next := NULL;
            SELECT m.supersedes_id INTO v_next FROM mneme.memories m WHERE m.id = v_cur;
            v_cur := v_next;
        END LOOP;
    END LOOP;
    PERFORM mneme._lock_memories(v_ids);
    FOR r IN SELECT m.id, m.conversation_id, m.supersedes_id, m.created_at, m.status, m.valid_until,
                    lead(m.created_at) OVER (ORDER BY m.created_at, m.id) AS next_at
             FROM mneme.memories m
             WHERE m.id = ANY (v_ids) ORDER BY m.created_at, m.id LOOP
        -- The oldest keeps a link that leaves the set (a chain cut at 1,000
        -- links); every other row points at the one said before it.
        IF NOT (v_first AND r.supersedes_id IS NOT NULL AND NOT r.supersedes_id = ANY (v_ids))
           AND r.supersedes_id IS DISTINCT FROM v_prev THEN
            UPDATE mneme.memories m SET supersedes_id = v_prev, updated_at = now()
            WHERE m.conversation_id = r.conversation_id AND m.id = r.id;
        END IF;
        -- A superseded row was believed until the row said after it: as_of
        -- finds one link of the lineage at a time.
        IF r.status = 'superseded' AND r.next_at IS NOT NULL AND coalesce(r.valid_until, 'infinity') > r.next_at THEN
            UPDATE mneme.memories m SET valid_until = r.next_at, updated_at = now()
            WHERE m.conversation_id = r.conversation_id AND m.id = r.id;
        END IF;
        v_prev := r.id;
        v_first := false;
    END LOOP;
END
$$;
COMMENT ON FUNCTION mneme._lineage_merge(uuid, uuid) IS
    'Internal: merges the supersedes lineages of two memories into one chain in the order they were said '
    '(created_at, id): each row''s supersedes_id becomes the row said right before it, and a superseded row''s '
    'valid_until at most the time of the row said after it.';

-- SUPERSEDE: the new fact replaces v_old (and every older active fact of
-- its slot); an older write is stored as superseded in v_old's lineage, at
-- its place in time. Returns the note, which says so then.
CREATE OR REPLACE FUNCTION mneme._revise_supersede(v_new mneme.memories, v_old mneme.memories, v_note text, v_slot text)
RETURNS text
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
#variable_conflict use_column
DECLARE
    v_new_at timestamptz := v_new.created_at;
    v_old_at timestamptz := v_old.created_at;
    v_convs  uuid[];
    v_ids    uuid[];
    v_id     uuid;
    v_after  mneme.memories;  -- a late write: the row said right after it
BEGIN
    IF v_new_at < v_old_at THEN
        -- An older write never replaces a newer belief: it goes in that
        -- belief's lineage at its place in time, superseded by the row said
        -- right after it, and believed until that row was said.
        UPDATE mneme.memories m SET status = 'superseded', updated_at = now()
        WHERE m.conversation_id = v_new.conversation_id AND m.id = v_new.id;
        PERFORM mneme._lineage_merge(v_old.id, v_new.id);
        SELECT * INTO v_after FROM mneme.memories m WHERE m.supersedes_id = v_new.id ORDER BY m.created_at LIMIT 1;
        v_after := coalesce(v_after, v_old);
        v_note := format('%s (older than %s, which stays current: stored as superseded by %s)', v_note, v_old.id,
                         CASE WHEN v_after.id = v_old.id THEN 'it' ELSE format('%s, said right after it', v_after.id) END);
        UPDATE mneme.memories m SET status_reason = v_note, valid_until = least(v_after.created_at, v_old_at), updated_at = now()
        WHERE m.conversation_id = v_new.conversation_id AND m.id = v_new.id;
        RETURN v_note;
    END IF;
    UPDATE mneme.memories m SET status = 'superseded', status_reason = format('%s (by %s)', v_note, v_new.id),
                                valid_until = least(coalesce(m.valid_until, 'infinity'), v_new_at),
                                updated_at = now()
    WHERE m.conversation_id = v_old.conversation_id AND m.id = v_old.id;
    -- The new belief starts from the old one's FSRS state, not from zero.
    UPDATE mneme.memories m SET stability = v_old.stability,
                                difficulty = v_old.difficulty, fsrs_state = v_old.fsrs_state,
                                review_count = v_old.review_count,
                                last_reviewed_at = greatest(v_old.last_reviewed_at, m.last_reviewed_at),
                                pinned = m.pinned OR v_old.pinned, updated_at = now()
    WHERE m.conversation_id = v_new.conversation_id AND m.id = v_new.id;
    -- The lineage stays one chain in time order (an older write may have
    -- been linked behind the new belief already: it arrived late).
    PERFORM mneme._lineage_merge(v_new.id, v_old.id);
    -- One current value per slot: other active facts of the same slot,
    -- older than the new one, are superseded by it too (two revise jobs
    -- of one slot may each have seen only the other's target), and join
    -- its lineage.
    IF v_slot IS NOT NULL THEN
        v_convs := mneme._scope_conversations(v_new.conversation_id, mneme.setting('revision_scope') #>> '{}');
        v_ids := ARRAY(SELECT x.id FROM mneme.memories x
                        WHERE x.slot = v_slot
                          AND x.status = 'active' AND x.kind = 'semantic' AND x.id <> v_new.id
                          AND x.created_at <= v_new_at AND x.conversation_id = ANY (v_convs));
        PERFORM mneme._lock_memories(v_ids);  -- then the conditions again, under the lock
        FOREACH v_id IN ARRAY v_ids LOOP
            UPDATE mneme.memories m SET status = 'superseded',
                                        status_reason = format('SUPERSEDE of the same slot %s (by %s)', v_slot, v_new.id),
                                        valid_until = least(coalesce(m.valid_until, 'infinity'), v_new_at),
                                        updated_at = now()
            WHERE m.id = v_id
              AND m.slot = v_slot AND m.status = 'active' AND m.kind = 'semantic' AND m.id <> v_new.id
              AND m.created_at <= v_new_at AND m.conversation_id = ANY (v_convs);
            IF FOUND THEN
                PERFORM mneme._lineage_merge(v_new.id, v_id);
            END IF;
        END LOOP;
    END IF;
    RETURN v_note;
END
$$;

-- INVALIDATE: the new fact retracts v_old; a retraction older than the fact
-- it names is kept, retired. Returns the note.
CREATE OR REPLACE FUNCTION mneme._revise_invalidate(v_new mneme.memories, v_old mneme.memories, v_note text)
RETURNS text
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
#variable_conflict use_column
DECLARE
    v_new_at timestamptz := v_new.created_at;
    v_old_at timestamptz := v_old.created_at;
BEGIN
    IF v_new_at < v_old_at THEN
        -- A retraction older than the fact it names was overtaken by it: the
        -- fact was said again afterwards. The retraction is kept, retired.
        v_note := format('%s (older than %s, which stays current)', v_note, v_old.id);
        UPDATE mneme.memories m SET status = 'superseded', status_reason = v_note, valid_until = v_old_at,
                                    invalidates_id = v_old.id, updated_at = now()
        WHERE m.conversation_id = v_new.conversation_id AND m.id = v_new.id;
        RETURN v_note;
    END IF;
    UPDATE mneme.memories m SET status = 'invalidated', status_reason = format('%s (by %s)', v_note, v_new.id),
                                valid_until = least(coalesce(m.valid_until, 'infinity'), v_new_at), updated_at = now()
    WHERE m.conversation_id = v_old.conversation_id AND m.id = v_old.id;
    UPDATE mneme.memories m SET invalidates_id = v_old.id, updated_at = now() WHERE m.conversation_id = v_new.conversation_id AND m.id = v_new.id;
    RETURN v_note;
END
$$;

-- A fact that fills a known slot and has no title is titled with the
-- slot's words (issue 52): the question a user asks about a slot names the
-- slot, not the words of the statement that filled it ("Which company do I
-- work for?" and "I got a job at Contoso."). The title is indexed with the
-- fact (BM25, and the hash embedder's vector), so the current belief is
-- found whatever words it was said in.
CREATE OR REPLACE FUNCTION mneme._slot_title(slot text)
RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
SET jit = off
AS $$
SELECT CASE a
           WHEN 'lives_in' THEN 'lives in: home, city, place'
           WHEN 'works_at' THEN 'works at: employer, company, workplace'
           WHEN 'job_title' THEN 'job: occupation, profession, role'
           WHEN 'married_to' THEN 'married to: spouse, wife, husband'
           WHEN 'partner' THEN 'partner: girlfriend, boyfriend, relationship'
           WHEN 'age' THEN 'age: how old, years old'
           WHEN 'drives' THEN 'drives: car, vehicle'
           WHEN 'studies' THEN 'studies: study, major, subject'
           WHEN 'name' THEN 'name: called'
           ELSE CASE WHEN a LIKE 'uses\_for\_%' THEN 'uses for ' || replace(substr(a, 10), '_', ' ') || ': tool'
                     WHEN a LIKE 'favourite\_%' THEN 'favourite ' || replace(substr(a, 11), '_', ' ') || ': favorite'
                     ELSE replace(a, '_', ' ') END
       END
FROM (SELECT nullif(split_part($1, '|', 2), '') AS a) s
$$;
COMMENT ON FUNCTION mneme._slot_title(text) IS
    'Internal: the title apply_revision gives a fact of a slot that has none: the slot''s attribute in words, with '
    'the words a question about it uses (lives_in: home, city, place); NULL for NULL or a slot without attribute.';

CREATE OR REPLACE FUNCTION mneme.apply_revision(
    memory_id uuid,
    action text,
    target_id uuid,
    reason text,
    classifier text,
    slot text DEFAULT NULL,
    force boolean DEFAULT false,
    job_id bigint DEFAULT NULL)
RETURNS text
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
SET jit = off
AS $$
#variable_conflict use_column
DECLARE
    v__entered boolean := mneme._enter(NULL);  -- the caller forwarded first (Citus: mneme._enter)
    v_new    mneme.memories;
    v_old    mneme.memories;
    v_action text := upper(btrim(apply_revision.action));
    v_note   text;
    v_slot   text;  -- the new fact's slot: the classifier's, else the one it has
    v_conv   uuid;
BEGIN
    IF apply_revision.memory_id IS NULL OR apply_revision.action IS NULL OR apply_revision.classifier IS NULL THEN
        RAISE EXCEPTION 'memory_id, action and classifier must not be NULL' USING ERRCODE = '22004';
    END IF;
    IF v_action NOT IN ('ADD', 'NOOP', 'SUPERSEDE', 'INVALIDATE') THEN
        RAISE EXCEPTION 'action must be ADD, NOOP, SUPERSEDE or INVALIDATE, got %', mneme._quote_prefix(apply_revision.action)
            USING ERRCODE = '22023';
    END IF;
    IF v_action <> 'ADD' AND (apply_revision.target_id IS NULL OR apply_revision.target_id = apply_revision.memory_id) THEN
        RAISE EXCEPTION '% needs a target memory other than the new one', v_action USING ERRCODE = '22023';
    END IF;
    IF apply_revision.classifier NOT IN ('llm', 'heuristic') THEN
        RAISE EXCEPTION 'classifier must be llm or heuristic, got %', mneme._quote_prefix(apply_revision.classifier)
            USING ERRCODE = '22023';
    END IF;
    PERFORM mneme._check_length('reason', apply_revision.reason, 2000);
    PERFORM mneme._check_length('slot', apply_revision.slot, 200);
    v_note := format('%s by %s: %s', v_action, apply_revision.classifier,
                     coalesce(nullif(btrim(apply_revision.reason), ''), 'no reason given'));

    -- Both rows locked in id order: two revisions of one fact at once never
    -- deadlock, and the second sees what the first did.
    -- (Each row by its conversation too: on Citus a lock must name the
    -- shard; mneme._lock_memories.)
    PERFORM mneme._lock_memories(ARRAY[apply_revision.memory_id, apply_revision.target_id]);
    v_conv := mneme._memory_conversation(apply_revision.memory_id);
    SELECT * INTO v_new FROM mneme.memories m WHERE m.conversation_id = v_conv AND m.id = apply_revision.memory_id;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'memory % does not exist', apply_revision.memory_id USING ERRCODE = 'P0002';
    END IF;
    IF apply_revision.job_id IS NOT NULL AND v_new.tenant_id IS DISTINCT FROM
       (SELECT j.tenant_id FROM mneme.jobs j WHERE j.id = apply_revision.job_id) THEN
        -- A job touches only rows of its own conversation's tenant (a
        -- job that is gone: its conversation was erased).
        RAISE EXCEPTION 'job % may not revise memory % of another tenant (or the job is gone)', apply_revision.job_id,
            apply_revision.memory_id USING ERRCODE = '42501', HINT = 'a revise job names a memory of its own conversation';
    END IF;
    IF v_new.status <> 'active' THEN
        RETURN 'SKIPPED';  -- revised, forgotten or erased meanwhile
    END IF;
    IF v_action <> 'ADD' THEN
        v_conv := mneme._memory_conversation(apply_revision.target_id);
        SELECT * INTO v_old FROM mneme.memories m WHERE m.conversation_id = v_conv AND m.id = apply_revision.target_id;
        IF NOT FOUND OR v_old.status <> 'active' OR v_old.tenant_id <> v_new.tenant_id THEN
            -- Re-checked under the lock: the target changed since the
            -- classifier saw it. Nothing is written; the job reads the
            -- candidates again and decides anew (force: store it as an ADD).
            IF NOT apply_revision.force THEN
                RETURN 'STALE';
            END IF;
            v_note := format('ADD (%s of %s no longer applies: the target is %s)', v_action, apply_revision.target_id,
                             coalesce(v_old.status, 'gone'));
            v_action := 'ADD';
        END IF;
    END IF;
    PERFORM mneme._mark('actor', 'revise:' || apply_revision.classifier);
    PERFORM mneme._mark('event_reason', left(v_note, 500));
    v_slot := CASE WHEN apply_revision.slot IS NULL OR mneme._is_blank(apply_revision.slot) THEN v_new.slot
                   ELSE lower(btrim(apply_revision.slot)) END;
    IF v_slot IS DISTINCT FROM v_new.slot
       OR (v_new.title IS NULL AND v_new.kind = 'semantic' AND mneme._slot_title(v_slot) IS NOT NULL) THEN
        -- The slot, and a title of its words for a fact that has none
        -- (mneme._slot_title: a question names the slot, not the statement's words).
        UPDATE mneme.memories m
        SET slot = v_slot,
            title = CASE WHEN m.title IS NULL AND m.kind = 'semantic' THEN mneme._slot_title(v_slot) ELSE m.title END
        WHERE m.conversation_id = v_new.conversation_id AND m.id = v_new.id;
    END IF;

    IF v_action = 'NOOP' THEN
        PERFORM mneme._revise_noop(v_new, v_old, v_note);
    ELSIF v_action = 'SUPERSEDE' THEN
        v_note := mneme._revise_supersede(v_new, v_old, v_note, v_slot);
    ELSIF v_action = 'INVALIDATE' THEN
        v_note := mneme._revise_invalidate(v_new, v_old, v_note);
    END IF;
    INSERT INTO mneme.memory_events (memory_id, conversation_id, event, reason, actor)
    VALUES (v_new.id, v_new.conversation_id, 'revised',
            left(v_note, 1500) || CASE WHEN v_action <> 'ADD' THEN format(' [target %s]', v_old.id) ELSE '' END,
            mneme._event_actor());
    PERFORM mneme._mark('event_reason', '');
    PERFORM mneme._mark('actor', '');
    RETURN v_action;
END
$$;
COMMENT ON FUNCTION mneme.apply_revision(uuid, text, uuid, text, text, text, boolean, bigint) IS
    'Worker: applies a revise decision in one transaction. Locks the new memory and its target (id order) and '
    're-checks both: a new memory no longer active returns SKIPPED; a target no longer active returns STALE with '
    'nothing written (the job decides again), or with force stores an ADD. ADD: nothing else changes. NOOP: the new '
    'row becomes merged (confirms_id), the target is reconfirmed (last_confirmed_at, confidence + revision_reconfirm_boost). SUPERSEDE: '
    'the target becomes superseded (valid_until = the new one''s time) and the new one points to it and starts from '
    'its FSRS state; a new memory older than the target is stored as superseded instead, in the target''s lineage '
    'at its place in time (the link said right after it points to it). INVALIDATE: the '
    'target becomes invalidated (invalidates_id links them). Records slot when given, and a revised event.';
GRANT EXECUTE ON FUNCTION mneme.apply_revision(uuid, text, uuid, text, text, text, boolean, bigint) TO mneme_worker;

-- -----------------------------------------------------------------------------
-- Lineage
-- -----------------------------------------------------------------------------
-- A lineage's rows: the supersedes chain (depth, memory, relation: self,
-- replaced, replaced_by), then beside each link the rows that confirmed it
-- (merged), invalidated it, and what it confirmed or invalidated itself.
-- mneme.history's chain comes from a recursive read on one server and a
-- walk a step at a time on Citus; the rows from here on both.
CREATE OR REPLACE FUNCTION mneme._history_rows(v_d int[], v_ids uuid[], v_rel text[])
RETURNS TABLE (depth int, relation text, memory_id uuid, status text, status_reason text, content text,
               supersedes_id uuid, confidence_score real, source_type text, valid_until timestamptz,
               created_at timestamptz)
LANGUAGE plpgsql STABLE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
#variable_conflict use_column
BEGIN
    RETURN QUERY
    WITH chain AS (
        SELECT c.d, c.id, c.rel FROM unnest(v_d, v_ids, v_rel) AS c(d, id, rel)
    ), related AS (
        SELECT c.d, x.id, 'confirmed_by' AS rel FROM chain c JOIN mneme.memories x ON x.confirms_id = c.id
        UNION ALL
        SELECT c.d, x.id, 'invalidated_by' FROM chain c JOIN mneme.memories x ON x.invalidates_id = c.id
        UNION ALL
        SELECT c.d, m.confirms_id, 'confirms' FROM chain c JOIN mneme.memories m ON m.id = c.id WHERE m.confirms_id IS NOT NULL
        UNION ALL
        SELECT c.d, m.invalidates_id, 'invalidates' FROM chain c JOIN mneme.memories m ON m.id = c.id WHERE m.invalidates_id IS NOT NULL
    ), lineage AS (
        SELECT * FROM chain UNION SELECT * FROM related
    )
    SELECT l.d, l.rel, x.id, x.status, x.status_reason, x.content, x.supersedes_id, x.confidence_score, x.source_type,
           x.valid_until, x.created_at
    FROM lineage l JOIN mneme.memories x ON x.id = l.id
    ORDER BY l.d, CASE l.rel WHEN 'self' THEN 0 WHEN 'replaced' THEN 0 WHEN 'replaced_by' THEN 0 ELSE 1 END, x.created_at, x.id;
END
$$;
COMMENT ON FUNCTION mneme._history_rows(int[], uuid[], text[]) IS
    'Internal: mneme.history''s rows for a supersedes chain given as depths, ids and relations.';

-- mneme.history on Citus, which refuses a recursive CTE over a distributed
-- table without a filter on the conversation ("recursive CTEs are only
-- supported when they contain a filter on the distribution column"): a
-- lineage may link memories of several conversations (a revision with
-- tenant scope), so the same walk a step at a time, each step one read by
-- the ids found so far (on every shard: history is an inspection call, not
-- a hot path).
CREATE OR REPLACE FUNCTION mneme._history_distributed(id uuid)
RETURNS TABLE (depth int, relation text, memory_id uuid, status text, status_reason text, content text,
               supersedes_id uuid, confidence_score real, source_type text, valid_until timestamptz,
               created_at timestamptz)
LANGUAGE plpgsql STABLE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
#variable_conflict use_column
DECLARE
    v_d    int[] := ARRAY[0];
    v_ids  uuid[] := ARRAY[_history_distributed.id];
    v_rel  text[] := ARRAY['self'];
    v_cur  uuid := _history_distributed.id;
    v_next uuid;
    v_step int := 0;
    v_front uuid[] := ARRAY[_history_distributed.id];
    r      record;
BEGIN
    -- what it replaced, oldest last
    LOOP
        SELECT m.supersedes_id INTO v_next FROM mneme.memories m WHERE m.id = v_cur;
        EXIT WHEN v_next IS NULL OR v_step <= -1000 OR v_next = ANY (v_ids);
        v_step := v_step - 1;
        v_d := v_d || v_step; v_ids := v_ids || v_next; v_rel := v_rel || 'replaced'::text;
        v_cur := v_next;
    END LOOP;
    -- what replaced it, a generation at a time
    v_step := 0;
    LOOP
        v_front := ARRAY(SELECT m.id FROM mneme.memories m WHERE m.supersedes_id = ANY (v_front) AND NOT m.id = ANY (v_ids));
        EXIT WHEN cardinality(v_front) = 0 OR v_step >= 1000;
        v_step := v_step + 1;
        v_d := v_d || array_fill(v_step, ARRAY[cardinality(v_front)]);
        v_ids := v_ids || v_front;
        v_rel := v_rel || array_fill('replaced_by'::text, ARRAY[cardinality(v_front)]);
    END LOOP;
    RETURN QUERY SELECT * FROM mneme._history_rows(v_d, v_ids, v_rel);
END
$$;
COMMENT ON FUNCTION mneme._history_distributed(uuid) IS
    'Internal, Citus: mneme.history walked a step at a time (no recursive CTE over a distributed table).';

CREATE OR REPLACE FUNCTION mneme.history(id uuid)
RETURNS TABLE (depth int, relation text, memory_id uuid, status text, status_reason text, content text,
               supersedes_id uuid, confidence_score real, source_type text, valid_until timestamptz,
               created_at timestamptz)
LANGUAGE plpgsql STABLE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
SET jit = off
AS $$
#variable_conflict use_column
DECLARE
    v__entered boolean := mneme._enter(NULL);  -- the caller forwarded first (Citus: mneme._enter)
    v_d   int[];
    v_ids uuid[];
    v_rel text[];
BEGIN
    IF history.id IS NULL THEN
        RAISE EXCEPTION 'memory_id must not be NULL' USING ERRCODE = '22004';
    END IF;
    IF NOT EXISTS (SELECT 1 FROM mneme.memories m WHERE m.id = history.id) THEN
        RAISE EXCEPTION 'memory % does not exist', history.id USING ERRCODE = 'P0002';
    END IF;
    IF mneme._distributed('mneme.memories') THEN
        RETURN QUERY SELECT * FROM mneme._history_distributed(history.id);
        RETURN;
    END IF;
    -- The supersedes chain both ways (depth < 0 what it replaced, > 0 what
    -- replaced it); _history_rows adds what stands beside each link.
    SELECT array_agg(c.d), array_agg(c.id), array_agg(c.rel) INTO v_d, v_ids, v_rel FROM (
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
    )
    SELECT o.d, o.id, CASE WHEN o.d = 0 THEN 'self' ELSE 'replaced' END AS rel FROM older o
    UNION
    SELECT n.d, n.id, CASE WHEN n.d = 0 THEN 'self' ELSE 'replaced_by' END FROM newer n) c;
    RETURN QUERY SELECT * FROM mneme._history_rows(v_d, v_ids, v_rel);
END
$$;
COMMENT ON FUNCTION mneme.history(uuid) IS
    'How a belief changed, both ways: the supersedes lineage oldest first (depth < 0 what it replaced, 0 itself, '
    '> 0 what replaced it; relation self, replaced, replaced_by), and beside each link the memories that confirmed '
    'it (confirmed_by: merged duplicates), invalidated it (invalidated_by), or that it confirmed or invalidated.';
GRANT EXECUTE ON FUNCTION mneme.history(uuid) TO mneme_app, mneme_worker, mneme_admin;
