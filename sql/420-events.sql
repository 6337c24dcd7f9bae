-- =============================================================================
-- mneme lifecycle, the record of every lifecycle change (mneme.memory_events) and reactivation on review
-- (the lifecycle is introduced in 400-labels.sql).
-- Idempotent: re-applied on every `mneme migrate` (CREATE OR REPLACE only).
-- =============================================================================

-- -----------------------------------------------------------------------------
-- Lifecycle events
-- -----------------------------------------------------------------------------
-- Who called: the login. On Citus a worker's statements of an API call run
-- on a connection of mneme_owner (Citus connects as the functions' owner),
-- and the coordinator forwards the login as mneme.caller (mneme._enter):
-- that setting counts on the owner's sessions only.
CREATE OR REPLACE FUNCTION mneme._caller()
RETURNS name
LANGUAGE sql STABLE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$ SELECT CASE WHEN session_user = 'mneme_owner'
                  THEN coalesce(nullif(current_setting('mneme.caller', true), ''), session_user::text)::name
                  ELSE session_user END $$;
COMMENT ON FUNCTION mneme._caller() IS
    'Internal: the login that called (session_user); on a Citus worker''s connection of mneme_owner, the login '
    'the coordinator forwarded (mneme._enter).';

CREATE OR REPLACE FUNCTION mneme._event_actor()
RETURNS text
LANGUAGE sql STABLE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$ SELECT CASE WHEN mneme._is_worker() THEN coalesce(mneme._marked('actor'), mneme._caller()::text)
                 ELSE mneme._caller()::text END $$;
COMMENT ON FUNCTION mneme._event_actor() IS
    'Internal: who acts: the login (session_user); in a session of mneme_worker, the name a mneme function '
    'gave its work with the mark actor (cleanup, revise:...). No caller can set it.';

CREATE OR REPLACE FUNCTION mneme._event_at()
RETURNS timestamptz
LANGUAGE sql STABLE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$ SELECT CASE WHEN mneme._is_worker() THEN coalesce(mneme._marked('event_at')::timestamptz, now())
                 ELSE now() END $$;
COMMENT ON FUNCTION mneme._event_at() IS
    'Internal: when: now(); in a session of mneme_worker, the time a mneme function gave its work with the mark '
    'event_at (a cleanup run at a given time). No caller can set it.';

-- A memory that becomes inactive is active again when it is reviewed,
-- reconfirmed or pinned.
CREATE OR REPLACE FUNCTION mneme.memories_reactivate_trg()
RETURNS trigger
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF (NEW.pinned AND NOT OLD.pinned)
       OR NEW.last_reviewed_at > OLD.last_reviewed_at
       OR NEW.last_confirmed_at > coalesce(OLD.last_confirmed_at, '-infinity') THEN
        NEW.status := 'active';
        NEW.status_reason := NULL;
    END IF;
    RETURN NEW;
END
$$;
COMMENT ON FUNCTION mneme.memories_reactivate_trg() IS
    'BEFORE UPDATE of an inactive memory: a review (last_reviewed_at later), a reconfirmation (last_confirmed_at '
    'later) or a pin makes it active again.';

DROP TRIGGER IF EXISTS memories_reactivate ON mneme.memories;
CREATE TRIGGER memories_reactivate BEFORE UPDATE ON mneme.memories
    FOR EACH ROW WHEN (OLD.status = 'inactive' AND NEW.status = 'inactive')
    EXECUTE FUNCTION mneme.memories_reactivate_trg();

-- What a lifecycle change is called and why, for the statement trigger
-- below and its row form (Citus): one definition, inlined into both.
CREATE OR REPLACE FUNCTION mneme._created_reason(source_type text, kind text, label text, stability float8)
RETURNS text
LANGUAGE sql STABLE PARALLEL SAFE
AS $$ SELECT pg_catalog.format('%s %s memory, label %s, stability %s days', $1, $2, $3, pg_catalog.round($4::numeric, 2)) $$;
COMMENT ON FUNCTION mneme._created_reason(text, text, text, float8) IS
    'Internal: the reason of a "created" event.';

CREATE OR REPLACE FUNCTION mneme._status_event(status text)
RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE
AS $$ SELECT CASE $1 WHEN 'superseded' THEN 'superseded' WHEN 'invalidated' THEN 'forgotten'
                     WHEN 'inactive' THEN 'inactivated' WHEN 'merged' THEN 'merged' ELSE 'reactivated' END $$;
COMMENT ON FUNCTION mneme._status_event(text) IS
    'Internal: the event of a memory whose status became status.';

-- The reason a mneme function gave for the status change its UPDATE makes
-- (its mark event_reason: apply_revision, reactivate). A mark is a row
-- only mneme's functions write (mneme._mark, sql/015-invariants.sql): a
-- caller cannot plant one. (A session setting, which any session may SET,
-- and then a check of the call stack's text, which a function name with
-- a newline could forge, came before: issues 38 and 47.)
CREATE OR REPLACE FUNCTION mneme._event_reason()
RETURNS text
LANGUAGE sql STABLE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$ SELECT mneme._marked('event_reason') $$;
COMMENT ON FUNCTION mneme._event_reason() IS
    'Internal: the reason mneme.apply_revision or mneme.reactivate gave for the status change under way (their '
    'mark event_reason), NULL otherwise; a caller cannot set it.';

CREATE OR REPLACE FUNCTION mneme._status_reason(
    status text, status_reason text, reviewed_at timestamptz, old_reviewed_at timestamptz,
    pinned boolean, old_pinned boolean, confirmed_at timestamptz, old_confirmed_at timestamptz)
RETURNS text
LANGUAGE sql STABLE PARALLEL SAFE
AS $$ SELECT CASE WHEN $1 <> 'active' THEN $2
                  WHEN mneme._event_reason() IS NOT NULL THEN mneme._event_reason()
                  WHEN $3 > $4 THEN 'reviewed'
                  WHEN $5 AND NOT $6 THEN 'pinned'
                  WHEN $7 > coalesce($8, '-infinity') THEN 'reconfirmed'
                  ELSE 'status set to active'
             END $$;
COMMENT ON FUNCTION mneme._status_reason(text, text, timestamptz, timestamptz, boolean, boolean, timestamptz, timestamptz) IS
    'Internal: the reason of a status change (new status and reason, then the review, pin and confirmation times '
    'and pins after and before).';

CREATE OR REPLACE FUNCTION mneme._deleted_event()
RETURNS text
LANGUAGE sql STABLE
AS $$ SELECT coalesce(mneme._marked('delete_event'), 'purged') $$;
COMMENT ON FUNCTION mneme._deleted_event() IS
    'Internal: the event of a deleted memory (purged, or what the deleting function set).';

CREATE OR REPLACE FUNCTION mneme._deleted_reason()
RETURNS text
LANGUAGE sql STABLE
AS $$ SELECT coalesce(mneme._marked('delete_reason'), 'row deleted') $$;
COMMENT ON FUNCTION mneme._deleted_reason() IS
    'Internal: the reason of a deleted memory''s event.';

-- While mneme import writes a conversation's rows it writes their events
-- from the file: the event triggers stand aside, for a session of an admin
-- (or the owner) inside the import functions (sql/460-export.sql) only.
CREATE OR REPLACE FUNCTION mneme._importing()
RETURNS boolean
LANGUAGE sql STABLE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$ SELECT coalesce(mneme._marked('importing') = 'on', false) $$;
COMMENT ON FUNCTION mneme._importing() IS
    'Internal: whether mneme import is writing rows (the event triggers then write none: the file''s events are imported).';

CREATE OR REPLACE FUNCTION mneme.memories_events_trg()
RETURNS trigger
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_actor  text := mneme._event_actor();
    v_at     timestamptz := mneme._event_at();
    v_event  text;
    v_reason text;
BEGIN
    IF mneme._importing() THEN
        RETURN NULL;  -- mneme import writes the file's events
    END IF;
    IF TG_OP = 'INSERT' THEN
        -- (the tenant given: the events' tenant trigger looked it up per row
        -- otherwise; a memory's tenant is its conversation's, which is what
        -- it looked up)
        INSERT INTO mneme.memory_events (memory_id, conversation_id, tenant_id, event, reason, actor, at)
        -- At the real time of the write (mneme._event_at), not created_at:
        -- that is when the thing was said, which the caller gives (remember's
        -- at, a message's time) and which may be 1901 or an hour ahead.
        SELECT n.id, n.conversation_id, n.tenant_id, 'created', mneme._created_reason(n.source_type, n.kind, n.label, n.stability),
               v_actor, v_at
        FROM new_rows n ORDER BY n.created_at, n.id;
    ELSIF TG_OP = 'UPDATE' THEN
        INSERT INTO mneme.memory_events (memory_id, conversation_id, tenant_id, event, reason, actor, at)
        SELECT x.id, x.conversation_id, x.tenant_id, x.event, x.reason, v_actor, v_at
        FROM (
            SELECT n.id, n.conversation_id, n.tenant_id, mneme._status_event(n.status) AS event,
                   mneme._status_reason(n.status, n.status_reason, n.last_reviewed_at, o.last_reviewed_at,
                                        n.pinned, o.pinned, n.last_confirmed_at, o.last_confirmed_at) AS reason, 1 AS ord
            FROM old_rows o JOIN new_rows n ON n.id = o.id
            WHERE o.status IS DISTINCT FROM n.status
            UNION ALL
            SELECT n.id, n.conversation_id, n.tenant_id, CASE WHEN n.pinned THEN 'pinned' ELSE 'unpinned' END, NULL, 0
            FROM old_rows o JOIN new_rows n ON n.id = o.id
            WHERE o.pinned IS DISTINCT FROM n.pinned
        ) x
        ORDER BY x.id, x.ord;
    ELSE
        -- (an imported memory's tombstone keeps its source's id: a later
        -- import of it finds it, mneme.import_source_erased)
        -- (the event and reason read once, into variables: in the SELECT
        -- they were read per row, a mark's lookup each; issue 47)
        v_event := mneme._deleted_event();
        v_reason := mneme._deleted_reason();
        INSERT INTO mneme.memory_events (memory_id, conversation_id, tenant_id, event, reason, actor, at, source_ref)
        SELECT o.id, o.conversation_id, o.tenant_id, v_event, v_reason, v_actor, v_at,
               CASE WHEN v_event = 'erased' AND o.source_type = 'import' THEN o.source_ref END
        FROM old_rows o ORDER BY o.id;
    END IF;
    RETURN NULL;
END
$$;
COMMENT ON FUNCTION mneme.memories_events_trg() IS
    'Statement-level AFTER trigger on mneme.memories: one mneme.memory_events row per lifecycle change '
    '(created, pinned, unpinned, forgotten, superseded, inactivated, reactivated, purged, erased). No content.';

-- The same events one row at a time, for mneme.memories distributed by
-- Citus (a statement trigger with transition tables does not run on a
-- shard): the statement trigger's events over the row alone, written to
-- the table mneme._shard names (there the conversation's shard: it says
-- why), with the id and caller a shard has no defaults for.
CREATE OR REPLACE FUNCTION mneme.memories_events_row_trg()
RETURNS trigger
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_actor  text := mneme._event_actor();
    v_at     timestamptz := mneme._event_at();
    v_insert text;
BEGIN
    IF mneme._importing() THEN
        RETURN NULL;  -- mneme import writes the file's events
    END IF;
    v_insert := format('INSERT INTO %s (id, caller, memory_id, conversation_id, event, reason, actor, at, source_ref) '
                       'VALUES (nextval(''mneme.memory_events_id_seq''), $1, $2, $3, $4, $5, $6, $7, $8)',
                       mneme._shard('mneme.memory_events', CASE WHEN TG_OP = 'DELETE' THEN OLD.conversation_id ELSE NEW.conversation_id END));
    IF TG_OP = 'INSERT' THEN
        EXECUTE v_insert USING mneme._caller(), NEW.id, NEW.conversation_id, 'created',
            mneme._created_reason(NEW.source_type, NEW.kind, NEW.label, NEW.stability), v_actor, v_at, NULL::text;
    ELSIF TG_OP = 'UPDATE' THEN
        IF OLD.pinned IS DISTINCT FROM NEW.pinned THEN
            EXECUTE v_insert USING mneme._caller(), NEW.id, NEW.conversation_id,
                CASE WHEN NEW.pinned THEN 'pinned' ELSE 'unpinned' END, NULL::text, v_actor, v_at, NULL::text;
        END IF;
        IF OLD.status IS DISTINCT FROM NEW.status THEN
            EXECUTE v_insert USING mneme._caller(), NEW.id, NEW.conversation_id, mneme._status_event(NEW.status),
                mneme._status_reason(NEW.status, NEW.status_reason, NEW.last_reviewed_at, OLD.last_reviewed_at,
                                     NEW.pinned, OLD.pinned, NEW.last_confirmed_at, OLD.last_confirmed_at),
                v_actor, v_at, NULL::text;
        END IF;
    ELSE
        EXECUTE v_insert USING mneme._caller(), OLD.id, OLD.conversation_id, mneme._deleted_event(), mneme._deleted_reason(),
            v_actor, v_at, CASE WHEN mneme._deleted_event() = 'erased' AND OLD.source_type = 'import' THEN OLD.source_ref END;
    END IF;
    RETURN NULL;
END
$$;
COMMENT ON FUNCTION mneme.memories_events_row_trg() IS
    'Row-level AFTER trigger on mneme.memories when Citus distributes it: the events of memories_events_trg, one row at a time.';

DROP TRIGGER IF EXISTS memories_events_insert ON mneme.memories;
DROP TRIGGER IF EXISTS memories_events_update ON mneme.memories;
DROP TRIGGER IF EXISTS memories_events_delete ON mneme.memories;
DROP TRIGGER IF EXISTS memories_events_row ON mneme.memories;
DO $trg$
BEGIN
    IF mneme._distributed('mneme.memories') THEN
        CREATE TRIGGER memories_events_row AFTER INSERT OR UPDATE OR DELETE ON mneme.memories
            FOR EACH ROW EXECUTE FUNCTION mneme.memories_events_row_trg();
    ELSE
        CREATE TRIGGER memories_events_insert AFTER INSERT ON mneme.memories
            REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION mneme.memories_events_trg();
        CREATE TRIGGER memories_events_update AFTER UPDATE ON mneme.memories
            REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION mneme.memories_events_trg();
        CREATE TRIGGER memories_events_delete AFTER DELETE ON mneme.memories
            REFERENCING OLD TABLE AS old_rows FOR EACH STATEMENT EXECUTE FUNCTION mneme.memories_events_trg();
    END IF;
END
$trg$;

CREATE OR REPLACE FUNCTION mneme.review_log_events_trg()
RETURNS trigger
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF mneme._importing() THEN
        RETURN NULL;  -- mneme import writes the file's events
    END IF;
    INSERT INTO mneme.memory_events (memory_id, conversation_id, tenant_id, event, reason, actor, review_log_id, at)
    SELECT n.memory_id, n.conversation_id, n.tenant_id, 'reviewed',
           format('%s (%s%s)', n.rating, n.reviewer, CASE WHEN n.defaulted THEN ', defaulted' ELSE '' END),
           'review', n.id, mneme._event_at()  -- the write's time; review_log.reviewed_at keeps the conversation's
    FROM new_rows n ORDER BY n.id;
    RETURN NULL;
END
$$;
COMMENT ON FUNCTION mneme.review_log_events_trg() IS
    'Statement-level AFTER INSERT trigger on mneme.review_log: a "reviewed" event per rating, with its review_log id.';

CREATE OR REPLACE FUNCTION mneme.review_log_events_row_trg()
RETURNS trigger
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF mneme._importing() THEN
        RETURN NULL;  -- mneme import writes the file's events
    END IF;
    -- (to the table mneme._shard names, as memories_events_row_trg)
    EXECUTE format('INSERT INTO %s (id, caller, memory_id, conversation_id, event, reason, actor, review_log_id, at) '
                   'VALUES (nextval(''mneme.memory_events_id_seq''), $1, $2, $3, ''reviewed'', $4, ''review'', $5, $6)',
                   mneme._shard('mneme.memory_events', NEW.conversation_id))
        USING mneme._caller(), NEW.memory_id, NEW.conversation_id,
              format('%s (%s%s)', NEW.rating, NEW.reviewer, CASE WHEN NEW.defaulted THEN ', defaulted' ELSE '' END),
              NEW.id, mneme._event_at();
    RETURN NULL;
END
$$;
COMMENT ON FUNCTION mneme.review_log_events_row_trg() IS
    'Row-level AFTER INSERT trigger on mneme.review_log when Citus distributes it: review_log_events_trg one row at a time.';

DROP TRIGGER IF EXISTS review_log_events ON mneme.review_log;
DROP TRIGGER IF EXISTS review_log_events_row ON mneme.review_log;
DO $trg$
BEGIN
    IF mneme._distributed('mneme.review_log') THEN
        CREATE TRIGGER review_log_events_row AFTER INSERT ON mneme.review_log
            FOR EACH ROW EXECUTE FUNCTION mneme.review_log_events_row_trg();
    ELSE
        CREATE TRIGGER review_log_events AFTER INSERT ON mneme.review_log
            REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION mneme.review_log_events_trg();
    END IF;
END
$trg$;

CREATE OR REPLACE FUNCTION mneme.memory_events_append_only_trg()
RETURNS trigger
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    -- erase may remove content from earlier events' reasons, nothing else:
    -- an UPDATE statement only while erase marks itself (checked once per
    -- statement, not per row: an erase_conversation clears tens of
    -- thousands), and of each row only the reason, to NULL (the row
    -- trigger's WHEN lets such rows through without a call).
    IF TG_OP = 'UPDATE' AND TG_LEVEL = 'STATEMENT' AND mneme._marked('erasing') = 'on' THEN
        RETURN NULL;
    END IF;
    RAISE EXCEPTION 'mneme.memory_events is append-only (% refused)', TG_OP
        USING ERRCODE = '55000', HINT = 'lifecycle events are a record; mneme.erase removes content from them';
END
$$;
COMMENT ON FUNCTION mneme.memory_events_append_only_trg() IS
    'Refuses UPDATE, DELETE and TRUNCATE of mneme.memory_events, except erase clearing reasons.';

DROP TRIGGER IF EXISTS memory_events_append_only ON mneme.memory_events;
DROP TRIGGER IF EXISTS memory_events_append_only_update ON mneme.memory_events;
DROP TRIGGER IF EXISTS memory_events_append_only_columns ON mneme.memory_events;
DROP TRIGGER IF EXISTS memory_events_no_truncate ON mneme.memory_events;
CREATE TRIGGER memory_events_append_only BEFORE DELETE ON mneme.memory_events
    FOR EACH ROW EXECUTE FUNCTION mneme.memory_events_append_only_trg();
CREATE TRIGGER memory_events_append_only_update BEFORE UPDATE ON mneme.memory_events
    FOR EACH STATEMENT EXECUTE FUNCTION mneme.memory_events_append_only_trg();
CREATE TRIGGER memory_events_append_only_columns BEFORE UPDATE ON mneme.memory_events
    FOR EACH ROW WHEN (NEW.reason IS NOT NULL
                       OR (NEW.id, NEW.memory_id, NEW.conversation_id, NEW.event, NEW.actor, NEW.review_log_id, NEW.at, NEW.caller,
                           NEW.tenant_id, NEW.source_ref)
                          IS DISTINCT FROM (OLD.id, OLD.memory_id, OLD.conversation_id, OLD.event, OLD.actor, OLD.review_log_id, OLD.at,
                                            OLD.caller, OLD.tenant_id, OLD.source_ref))
    EXECUTE FUNCTION mneme.memory_events_append_only_trg();
CREATE TRIGGER memory_events_no_truncate BEFORE TRUNCATE ON mneme.memory_events
    FOR EACH STATEMENT EXECUTE FUNCTION mneme.memory_events_append_only_trg();

-- -----------------------------------------------------------------------------
-- A memory's events for people looking into the memory (mneme ui, psql).
-- They outlive the memory (the tombstone of an erased or purged memory), so
-- an id with no memory but events of the tenant is not an error.
-- -----------------------------------------------------------------------------
CREATE OR REPLACE FUNCTION mneme.memory_event_log(memory_id uuid)
RETURNS TABLE (at timestamptz, event text, reason text, actor text, caller name)
LANGUAGE plpgsql STABLE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
SET jit = off
AS $$
#variable_conflict use_column
DECLARE
    v__entered boolean := mneme._enter(NULL);  -- the caller forwarded first (Citus: mneme._enter)
    v_n int := 0;
BEGIN
    IF memory_event_log.memory_id IS NULL THEN
        RAISE EXCEPTION 'memory_id must not be NULL' USING ERRCODE = '22004';
    END IF;
    -- Row security keeps the events to the transaction's tenant (or, for
    -- the sidecar, every tenant).
    RETURN QUERY
    SELECT e.at, e.event, e.reason, e.actor, e.caller
    FROM mneme.memory_events e
    WHERE e.memory_id = memory_event_log.memory_id
      AND (e.tenant_id = mneme._tenant() OR mneme._is_worker())
    ORDER BY e.at, e.id;
    GET DIAGNOSTICS v_n = ROW_COUNT;
    IF v_n = 0 AND mneme._memory_conversation(memory_event_log.memory_id) IS NULL THEN
        RAISE EXCEPTION 'memory % does not exist', memory_event_log.memory_id USING ERRCODE = 'P0002';
    END IF;
END
$$;
COMMENT ON FUNCTION mneme.memory_event_log(uuid) IS
    'A memory''s lifecycle events oldest first (the rows of mneme.memory_events: created, reviewed, pinned, '
    'superseded, forgotten, erased, ...), with the reason, the actor and the login that called. The events of an '
    'erased or purged memory (its tombstone) are returned too. Raises P0002 when the tenant has neither the memory '
    'nor events of it. No side effects.';
GRANT EXECUTE ON FUNCTION mneme.memory_event_log(uuid) TO mneme_app, mneme_worker, mneme_admin;
