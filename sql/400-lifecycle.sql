-- =============================================================================
-- mneme lifecycle: labels, a new memory's initial FSRS state, the record of
-- every lifecycle change (mneme.memory_events), cleanup (inactive, expired,
-- purge), reactivation and erase (the right to be forgotten).
--
-- Forgetting keeps what matters: a memory starts as a graduated FSRS card
-- whose stability comes from its label (setting initial_stability_days), so
-- memories nobody judged fade slowly and an "again" review (a lapse) makes a
-- memory judged noise fade within days. Cleanup takes memories whose
-- retrievability fell below inactive_below_r out of retrieval (status
-- inactive, kept) and purges them only when the operator set
-- purge_after_days. Pinned and important memories never leave. Erase removes
-- content everywhere it was copied and leaves a tombstone without content.
--
-- Transaction-local settings the functions here use to tell the event
-- triggers what is happening (set with set_config(..., true), reset after):
--   mneme.actor         who acts (default: current_user)
--   mneme.event_at      when (default now(); cleanup runs at a given time)
--   mneme.delete_event  purged | erased (a DELETE without it is recorded as purged)
--   mneme.delete_reason the reason recorded with the deletion
--   mneme.erasing       on while erase removes content from earlier events
-- Idempotent: re-applied on every `mneme migrate` (CREATE OR REPLACE only).
-- =============================================================================

-- -----------------------------------------------------------------------------
-- Labels: the one definition of the vocabulary
-- -----------------------------------------------------------------------------
CREATE OR REPLACE FUNCTION mneme.labels()
RETURNS text[]
LANGUAGE sql IMMUTABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$ SELECT ARRAY['important', 'user_profile', 'general', 'temporary', 'trivial', 'project_<name>']::text[] $$;
COMMENT ON FUNCTION mneme.labels() IS
    'The label vocabulary, the one definition every writer uses (remember, create_episode, the LLM segmenter''s '
    'schema): important, user_profile, general, temporary, trivial, and project_<name> with <name> lower-case '
    'letters, digits and _ (at most 56 characters).';

CREATE OR REPLACE FUNCTION mneme.is_label(label text)
RETURNS boolean
LANGUAGE sql IMMUTABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$
SELECT label IS NOT NULL
   AND (label = ANY (array_remove(mneme.labels(), 'project_<name>'))
        OR label ~ '^project_[a-z0-9][a-z0-9_]{0,55}$')
$$;
COMMENT ON FUNCTION mneme.is_label(text) IS
    'Whether a text is a label of the vocabulary (mneme.labels()); NULL is not.';

CREATE OR REPLACE FUNCTION mneme.check_label(label text)
RETURNS text
LANGUAGE plpgsql IMMUTABLE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF NOT mneme.is_label(check_label.label) THEN
        RAISE EXCEPTION 'unknown label %: want one of %', coalesce(quote_literal(check_label.label), 'NULL'),
            array_to_string(mneme.labels(), ', ')
            USING ERRCODE = '22023',
                  HINT = 'project labels are project_ followed by lower-case letters, digits or _, e.g. project_website; '
                         'leave the label out to have mneme.auto_label choose';
    END IF;
    RETURN check_label.label;
END
$$;
COMMENT ON FUNCTION mneme.check_label(text) IS
    'Returns the label if it is one of mneme.labels(), else raises 22023 naming the vocabulary.';

-- -----------------------------------------------------------------------------
-- The offline labeller
-- -----------------------------------------------------------------------------
-- Deterministic rules over the lower-cased text, in this order:
--   trivial       nothing but greetings, thanks and small talk (at most one
--                 other word, e.g. a name, is left when they are removed)
--   important     an explicit "remember this", "important" (not negated),
--                 a decision or a commitment
--   user_profile  a stable first-person fact: name, home, work, family,
--                 preferences, age
--   temporary     a time-bound plan or state: a near-future or present time
--                 (today, tonight, this week, tomorrow, on Friday, in 3 days)
--                 with a plan or state marker (going to, will, I'm, need to,
--                 appointment ...), or a date 0 to 14 days after `at`
--   general       otherwise
CREATE OR REPLACE FUNCTION mneme.auto_label(content text, at timestamptz DEFAULT NULL)
RETURNS text
LANGUAGE plpgsql STABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    t      text;
    rest   text;
    d      date;
    m      text[];
    months constant text[] := ARRAY['january', 'february', 'march', 'april', 'may', 'june', 'july',
                                    'august', 'september', 'october', 'november', 'december'];
    days   constant text := '(monday|tuesday|wednesday|thursday|friday|saturday|sunday)';
BEGIN
    IF auto_label.content IS NULL OR btrim(auto_label.content) = '' THEN
        RAISE EXCEPTION 'content must not be NULL or empty' USING ERRCODE = '22023',
            HINT = 'pass the text of the memory to label';
    END IF;
    t := lower(translate(auto_label.content, E'\u2019\u2018', ''''''));
    t := regexp_replace(t, '\s+', ' ', 'g');

    -- trivial: remove small talk; a fact leaves words behind.
    rest := regexp_replace(t,
        '\m(hi|hello|hey|hiya|heya|yo|howdy|good (morning|afternoon|evening|night|day)|morning|evening'
        '|thanks( a lot| so much| again| very much)?|thank you( so much| very much| again)?|thx|ty|cheers|much appreciated|appreciate it'
        '|bye|goodbye|bye bye|see (you|ya)( later| soon| tomorrow)?|take care|talk (to you )?(later|soon)|catch you later|later'
        '|have a (good|great|nice|lovely) (day|one|evening|weekend|night|time)|you too|same to you'
        '|how are (you|things)( doing)?( today)?|how is it going|how''s it going|how have you been|what''s up|whats up|sup'
        '|(i''m|i am|doing) (fine|good|great|ok|okay|well|alright)|all good|not bad|pretty good'
        '|ok|okay|k|cool|nice|great|awesome|lovely|perfect|amazing|wonderful|sweet|lol|haha+|hehe|:\)|:d'
        '|sure|of course|no problem|no worries|you''re welcome|your welcome|welcome|np|glad to hear( that)?|good to hear'
        '|sounds good|me too|same here|yes|yeah|yep|yup|no|nope|oh|ah|aw+|wow|hmm+|indeed|right|true|absolutely'
        '|nice to (meet|see|hear from) you|good to (see|hear from) you|great to (see|hear from) you|long time no see'
        '|and|so|well|too|very|really|just|again|you|there|all|everyone|guys|man|dude|buddy|friend|pal|mate|bro|the|a)\M',
        ' ', 'g');
    rest := btrim(regexp_replace(rest, '[^a-z0-9]+', ' ', 'g'));
    IF rest = '' OR rest !~ ' ' AND rest !~ '[0-9]' AND rest <> t THEN
        RETURN 'trivial';
    END IF;

    -- important: "not important" and "unimportant" do not count.
    rest := regexp_replace(t, '\m(not|n''t|never) (that |so |very |really |too )?important\M|\munimportant\M', ' ', 'g');
    IF rest ~ ('\m(please remember|remember this|(don''t|do not) forget|must not forget|keep in mind|make a note|note that|for the record'
               '|this is (really |very |super )?important|(it''s|it is) important (that you|to remember)'
               '|(i|we) (have |''ve |had |finally )?decided (to|that|on)|(made|make) (a|the|my|our) (final )?decision|final decision'
               '|(i|we) promise (to|that|i''ll|we''ll|i will|we will)|(i|we) commit(ted)? to|(i|we) (have |''ve )?agreed (to|that|on)'
               '|deadline is|non-negotiable)\M')
       OR rest ~ '(^|[.!?] )important *[:!]|\mremember that *[:!]' THEN
        RETURN 'important';
    END IF;

    -- user_profile: stable facts in the first person.
    IF t ~ ('\m(my name is|my name''s|i''m called|i am called|call me'
            '|i (live|lived|grew up|was born|was raised) in|i''m (originally )?from|i am (originally )?from'
            '|i moved to|my (home|hometown|house|apartment|flat) is'
            '|i work (as|at|for|in|on)|i''m working as|my job|my (boss|employer|company|profession|career|occupation)'
            '|(i''m|i am) an? (software |)(engineer|developer|programmer|teacher|nurse|doctor|student|designer|lawyer|accountant'
                '|chef|artist|writer|musician|scientist|researcher|manager|consultant|mechanic|electrician|pharmacist'
                '|architect|photographer|counselor|therapist|firefighter|police officer|farmer|dentist|vet|veterinarian)'
            '|my (wife|husband|partner|son|daughter|kids|children|mom|mother|dad|father|sister|brother|parents'
                '|grandma|grandmother|grandpa|grandfather|family|boyfriend|girlfriend|fiance|fiancee|dog|cat|pet)'
                '(''s name)? (is|are|was|were|works|lives|live|has|have|loves|likes|called|named)'
            '|i have (a|an|one|two|three|four|five|[0-9]+) (kids|children|sons?|daughters?|sisters?|brothers?|dogs?|cats?|pets?|grandchildren)'
            '|(i''m|i am) (married|single|divorced|engaged|widowed|a (mom|mother|dad|father|parent|grandmother|grandfather))'
            '|my favou?rite|(i''m|i am) (allergic|vegetarian|vegan|lactose intolerant)'
            '|my birthday is|(i''m|i am) [0-9]+( years old)?\M'
            '|i (really |absolutely |just |truly )?(love|like|prefer|hate|enjoy|dislike|adore|can''t stand) '
                '(?!(it|that|this|those|these|your|the idea|how|what|when)\M))') THEN
        RETURN 'user_profile';
    END IF;

    -- temporary: a near-future or present time with a plan or state marker.
    IF t ~ ('\m(today|tonight|tomorrow|this (morning|afternoon|evening|week|weekend|month)|right now|at the moment'
            '|later today|next (week|weekend|' || days || ')|(on|this|coming) ' || days
            || '|in (a|an|one|two|three|four|five|a few|few|couple of|a couple of|[0-9]+) (hours?|days?))\M')
       AND t ~ ('\m(going to|gonna|will|i''ll|we''ll|shall|plan|plans|planning|planned|about to|have to|has to|need to'
                '|i''m|i am|we''re|we are|meeting|appointment|reminder|remind me|busy|feeling|scheduled|booked|due)\M') THEN
        RETURN 'temporary';
    END IF;

    -- temporary: a date 0 to 14 days after `at` (ISO, or "March 5" / "5 March").
    IF auto_label.at IS NOT NULL THEN
        FOR m IN SELECT regexp_matches(t, '\m([0-9]{4})-([0-9]{2})-([0-9]{2})\M', 'g') LOOP
            BEGIN
                d := make_date(m[1]::int, m[2]::int, m[3]::int);
            EXCEPTION WHEN others THEN
                CONTINUE;
            END;
            IF d - (auto_label.at AT TIME ZONE 'UTC')::date BETWEEN 0 AND 14 THEN
                RETURN 'temporary';
            END IF;
        END LOOP;
        FOR m IN SELECT regexp_matches(t, '\m(?:(january|february|march|april|may|june|july|august|september|october|november|december) ([0-9]{1,2})|([0-9]{1,2}) (january|february|march|april|may|june|july|august|september|october|november|december))\M', 'g') LOOP
            BEGIN
                d := make_date(extract(year FROM auto_label.at AT TIME ZONE 'UTC')::int,
                               array_position(months, coalesce(m[1], m[4])), coalesce(m[2], m[3])::int);
                IF d < (auto_label.at AT TIME ZONE 'UTC')::date THEN
                    d := (d + interval '1 year')::date;  -- "January 3" said in late December
                END IF;
            EXCEPTION WHEN others THEN
                CONTINUE;
            END;
            IF d - (auto_label.at AT TIME ZONE 'UTC')::date BETWEEN 0 AND 14 THEN
                RETURN 'temporary';
            END IF;
        END LOOP;
    END IF;
    RETURN 'general';
END
$$;
COMMENT ON FUNCTION mneme.auto_label(text, timestamptz) IS
    'The offline labeller (deterministic rules): trivial (only greetings, thanks, small talk), important '
    '("remember this", "important", decisions, commitments), user_profile (stable first-person facts: name, home, '
    'work, family, preferences), temporary (time-bound plans and states: today, tonight, this week, tomorrow, or a '
    'date 0 to 14 days after `at`), general otherwise. remember uses it when no label is given, and the offline '
    'segmenter for every episode.';

-- -----------------------------------------------------------------------------
-- A new memory's FSRS state
-- -----------------------------------------------------------------------------
-- go-fsrs v3's difficulty after a new card's first "good" (FSRS-5 default
-- weights: w4 - exp(w5 * 2) + 1). A Go test checks it against go-fsrs.
CREATE OR REPLACE FUNCTION mneme._initial_difficulty()
RETURNS float8
LANGUAGE sql IMMUTABLE PARALLEL SAFE
AS $$ SELECT 5.282434422319005::float8 $$;
COMMENT ON FUNCTION mneme._initial_difficulty() IS
    'Internal: go-fsrs v3''s difficulty after a new card''s first "good" review (tested against go-fsrs).';

CREATE OR REPLACE FUNCTION mneme._initial_stability(label text, surprise float8)
RETURNS float8
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    s   jsonb := mneme.setting('initial_stability_days');
    key text := CASE WHEN _initial_stability.label LIKE 'project\_%' THEN 'project'
                     WHEN s ? _initial_stability.label THEN _initial_stability.label
                     ELSE 'general' END;
    v   float8;
BEGIN
    IF jsonb_typeof(s) IS DISTINCT FROM 'object' OR jsonb_typeof(s -> key) IS DISTINCT FROM 'number'
       OR NOT (s ->> key)::float8 > 0 THEN
        RAISE EXCEPTION 'setting initial_stability_days has no positive number for label "%" (key "%"): %', _initial_stability.label, key, s
            USING ERRCODE = '22023',
                  HINT = 'a JSON object of days by label, e.g. {"trivial": 3, "temporary": 14, "general": 365, "project": 365, "user_profile": 1825, "important": 3650}';
    END IF;
    v := (s ->> key)::float8;
    -- The seed's surprise rule: up to 1.5 times for an entirely new memory.
    RETURN v * (1 + 0.5 * least(greatest(coalesce(_initial_stability.surprise, 0), 0), 1));
END
$$;
COMMENT ON FUNCTION mneme._initial_stability(text, float8) IS
    'Internal: initial_stability_days for the label (project_* use "project", other unknown labels "general") '
    'times 1 + 0.5 * surprise (clamped to [0, 1]).';

CREATE OR REPLACE FUNCTION mneme.initial_state(label text, surprise float8 DEFAULT 0)
RETURNS TABLE (stability float8, difficulty float8, fsrs_state text)
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    PERFORM mneme.check_label(initial_state.label);
    IF initial_state.surprise IS NULL OR NOT initial_state.surprise BETWEEN 0 AND 1 THEN
        RAISE EXCEPTION 'surprise must be between 0 and 1, got %', coalesce(initial_state.surprise::text, 'NULL')
            USING ERRCODE = '22023', HINT = '0 = repeats what is known, 1 = entirely new';
    END IF;
    RETURN QUERY SELECT mneme._initial_stability(initial_state.label, initial_state.surprise),
                        mneme._initial_difficulty(), 'review'::text;
END
$$;
COMMENT ON FUNCTION mneme.initial_state(text, float8) IS
    'The FSRS state a new memory with this label and surprise starts in: a graduated card (state review), '
    'stability = initial_stability_days[label] * (1 + 0.5 * surprise), difficulty of go-fsrs''s first "good"; '
    'last_reviewed_at is its creation, so retrievability starts at 1. Equal to sidecar/fsrs.Initial (tested).';

-- Inserts that leave the FSRS state out get the initial state of their label.
CREATE OR REPLACE FUNCTION mneme.memories_initial_state_trg()
RETURNS trigger
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF NEW.stability IS NULL THEN
        NEW.stability := mneme._initial_stability(NEW.label, NEW.surprise);
    END IF;
    NEW.difficulty := coalesce(NEW.difficulty, mneme._initial_difficulty());
    NEW.fsrs_state := coalesce(NEW.fsrs_state, 'review');
    RETURN NEW;
END
$$;
COMMENT ON FUNCTION mneme.memories_initial_state_trg() IS
    'BEFORE INSERT on mneme.memories: a row without stability, difficulty or fsrs_state gets mneme.initial_state '
    'of its label and surprise.';

DROP TRIGGER IF EXISTS memories_initial_state ON mneme.memories;
CREATE TRIGGER memories_initial_state BEFORE INSERT ON mneme.memories
    FOR EACH ROW EXECUTE FUNCTION mneme.memories_initial_state_trg();

CREATE OR REPLACE FUNCTION mneme.reset_initial_state(conversation_id uuid DEFAULT NULL, dry_run boolean DEFAULT false)
RETURNS bigint
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    n bigint;
BEGIN
    IF dry_run IS NULL THEN
        RAISE EXCEPTION 'dry_run must not be NULL' USING ERRCODE = '22004';
    END IF;
    IF dry_run THEN
        SELECT count(*) INTO n FROM mneme.memories m
        WHERE (reset_initial_state.conversation_id IS NULL OR m.conversation_id = reset_initial_state.conversation_id)
          AND m.review_count = 0 AND m.status IN ('active', 'inactive')
          AND (m.stability, m.difficulty, m.fsrs_state)
              IS DISTINCT FROM (mneme._initial_stability(m.label, m.surprise), mneme._initial_difficulty(), 'review');
        RETURN n;
    END IF;
    UPDATE mneme.memories m
    SET stability = mneme._initial_stability(m.label, m.surprise), difficulty = mneme._initial_difficulty(),
        fsrs_state = 'review', updated_at = now()
    WHERE (reset_initial_state.conversation_id IS NULL OR m.conversation_id = reset_initial_state.conversation_id)
      AND m.review_count = 0 AND m.status IN ('active', 'inactive')
      AND (m.stability, m.difficulty, m.fsrs_state)
          IS DISTINCT FROM (mneme._initial_stability(m.label, m.surprise), mneme._initial_difficulty(), 'review');
    GET DIAGNOSTICS n = ROW_COUNT;
    RETURN n;
END
$$;
COMMENT ON FUNCTION mneme.reset_initial_state(uuid, boolean) IS
    'Moves memories that were never reviewed (review_count 0, active or inactive) to the initial state of their '
    'label (mneme.initial_state; last_reviewed_at stays their creation), in one conversation or all (NULL). '
    'Reviewed memories keep their state: reviews are evidence. Returns how many changed (would change with dry_run). '
    'Run it once after upgrading, or after changing initial_stability_days; mneme never does it by itself.';

-- -----------------------------------------------------------------------------
-- Lifecycle events
-- -----------------------------------------------------------------------------
CREATE OR REPLACE FUNCTION mneme._event_actor()
RETURNS text
LANGUAGE sql STABLE
SET search_path = pg_catalog, pg_temp
AS $$ SELECT coalesce(nullif(current_setting('mneme.actor', true), ''), current_user::text) $$;
COMMENT ON FUNCTION mneme._event_actor() IS 'Internal: who acts (setting mneme.actor, else current_user).';

CREATE OR REPLACE FUNCTION mneme._event_at()
RETURNS timestamptz
LANGUAGE sql STABLE
SET search_path = pg_catalog, pg_temp
AS $$ SELECT coalesce(nullif(current_setting('mneme.event_at', true), '')::timestamptz, now()) $$;
COMMENT ON FUNCTION mneme._event_at() IS 'Internal: when (setting mneme.event_at, else now()).';

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

CREATE OR REPLACE FUNCTION mneme.memories_events_trg()
RETURNS trigger
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_actor text := mneme._event_actor();
    v_at    timestamptz := mneme._event_at();
BEGIN
    IF TG_OP = 'INSERT' THEN
        INSERT INTO mneme.memory_events (memory_id, conversation_id, event, reason, actor, at)
        SELECT n.id, n.conversation_id, 'created',
               format('%s %s memory, label %s, stability %s days', n.source_type, n.kind, n.label, round(n.stability::numeric, 2)),
               v_actor, n.created_at
        FROM new_rows n ORDER BY n.created_at, n.id;
    ELSIF TG_OP = 'UPDATE' THEN
        INSERT INTO mneme.memory_events (memory_id, conversation_id, event, reason, actor, at)
        SELECT x.id, x.conversation_id, x.event, x.reason, v_actor, v_at
        FROM (
            SELECT n.id, n.conversation_id,
                   CASE n.status WHEN 'superseded' THEN 'superseded' WHEN 'invalidated' THEN 'forgotten'
                                 WHEN 'inactive' THEN 'inactivated' ELSE 'reactivated' END AS event,
                   CASE WHEN n.status <> 'active' THEN n.status_reason
                        WHEN nullif(current_setting('mneme.event_reason', true), '') IS NOT NULL
                            THEN current_setting('mneme.event_reason', true)
                        WHEN n.last_reviewed_at > o.last_reviewed_at THEN 'reviewed'
                        WHEN n.pinned AND NOT o.pinned THEN 'pinned'
                        WHEN n.last_confirmed_at > coalesce(o.last_confirmed_at, '-infinity') THEN 'reconfirmed'
                        ELSE 'status set to active'
                   END AS reason, 1 AS ord
            FROM old_rows o JOIN new_rows n ON n.id = o.id
            WHERE o.status IS DISTINCT FROM n.status
            UNION ALL
            SELECT n.id, n.conversation_id, CASE WHEN n.pinned THEN 'pinned' ELSE 'unpinned' END, NULL, 0
            FROM old_rows o JOIN new_rows n ON n.id = o.id
            WHERE o.pinned IS DISTINCT FROM n.pinned
        ) x
        ORDER BY x.id, x.ord;
    ELSE
        INSERT INTO mneme.memory_events (memory_id, conversation_id, event, reason, actor, at)
        SELECT o.id, o.conversation_id,
               coalesce(nullif(current_setting('mneme.delete_event', true), ''), 'purged'),
               coalesce(nullif(current_setting('mneme.delete_reason', true), ''), 'row deleted'),
               v_actor, v_at
        FROM old_rows o ORDER BY o.id;
    END IF;
    RETURN NULL;
END
$$;
COMMENT ON FUNCTION mneme.memories_events_trg() IS
    'Statement-level AFTER trigger on mneme.memories: one mneme.memory_events row per lifecycle change '
    '(created, pinned, unpinned, forgotten, superseded, inactivated, reactivated, purged, erased). No content.';

DROP TRIGGER IF EXISTS memories_events_insert ON mneme.memories;
DROP TRIGGER IF EXISTS memories_events_update ON mneme.memories;
DROP TRIGGER IF EXISTS memories_events_delete ON mneme.memories;
CREATE TRIGGER memories_events_insert AFTER INSERT ON mneme.memories
    REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION mneme.memories_events_trg();
CREATE TRIGGER memories_events_update AFTER UPDATE ON mneme.memories
    REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION mneme.memories_events_trg();
CREATE TRIGGER memories_events_delete AFTER DELETE ON mneme.memories
    REFERENCING OLD TABLE AS old_rows FOR EACH STATEMENT EXECUTE FUNCTION mneme.memories_events_trg();

CREATE OR REPLACE FUNCTION mneme.review_log_events_trg()
RETURNS trigger
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    INSERT INTO mneme.memory_events (memory_id, conversation_id, event, reason, actor, review_log_id, at)
    SELECT n.memory_id, n.conversation_id, 'reviewed',
           format('%s (%s%s)', n.rating, n.reviewer, CASE WHEN n.defaulted THEN ', defaulted' ELSE '' END),
           'review', n.id, n.reviewed_at
    FROM new_rows n ORDER BY n.id;
    RETURN NULL;
END
$$;
COMMENT ON FUNCTION mneme.review_log_events_trg() IS
    'Statement-level AFTER INSERT trigger on mneme.review_log: a "reviewed" event per rating, with its review_log id.';

DROP TRIGGER IF EXISTS review_log_events ON mneme.review_log;
CREATE TRIGGER review_log_events AFTER INSERT ON mneme.review_log
    REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION mneme.review_log_events_trg();

CREATE OR REPLACE FUNCTION mneme.memory_events_append_only_trg()
RETURNS trigger
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    -- erase may remove content from earlier events' reasons, nothing else.
    IF TG_OP = 'UPDATE' AND current_setting('mneme.erasing', true) = 'on' AND NEW.reason IS NULL
       AND (NEW.id, NEW.memory_id, NEW.conversation_id, NEW.event, NEW.actor, NEW.review_log_id, NEW.at)
           IS NOT DISTINCT FROM (OLD.id, OLD.memory_id, OLD.conversation_id, OLD.event, OLD.actor, OLD.review_log_id, OLD.at) THEN
        RETURN NEW;
    END IF;
    RAISE EXCEPTION 'mneme.memory_events is append-only (% refused)', TG_OP
        USING ERRCODE = '55000', HINT = 'lifecycle events are a record; mneme.erase removes content from them';
END
$$;
COMMENT ON FUNCTION mneme.memory_events_append_only_trg() IS
    'Refuses UPDATE, DELETE and TRUNCATE of mneme.memory_events, except erase clearing reasons.';

DROP TRIGGER IF EXISTS memory_events_append_only ON mneme.memory_events;
DROP TRIGGER IF EXISTS memory_events_no_truncate ON mneme.memory_events;
CREATE TRIGGER memory_events_append_only BEFORE UPDATE OR DELETE ON mneme.memory_events
    FOR EACH ROW EXECUTE FUNCTION mneme.memory_events_append_only_trg();
CREATE TRIGGER memory_events_no_truncate BEFORE TRUNCATE ON mneme.memory_events
    FOR EACH STATEMENT EXECUTE FUNCTION mneme.memory_events_append_only_trg();

-- -----------------------------------------------------------------------------
-- Cleanup
-- -----------------------------------------------------------------------------
CREATE OR REPLACE FUNCTION mneme._interval_setting(key text)
RETURNS interval
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v jsonb := mneme.setting(_interval_setting.key);
    r interval;
BEGIN
    IF v = 'null'::jsonb THEN
        RETURN NULL;
    END IF;
    BEGIN
        r := (v #>> '{}')::interval;
    EXCEPTION WHEN others THEN
        r := NULL;
    END;
    IF jsonb_typeof(v) <> 'string' OR r IS NULL OR r <= interval '0' THEN
        RAISE EXCEPTION 'setting % must be a positive interval as a JSON string, or null; got %', _interval_setting.key, v
            USING ERRCODE = '22023', HINT = format('SELECT mneme.set_setting(%L, %L)', _interval_setting.key, '"1 day"');
    END IF;
    RETURN r;
END
$$;
COMMENT ON FUNCTION mneme._interval_setting(text) IS
    'Internal: a setting holding a PostgreSQL interval as a JSON string, or null; raises 22023 otherwise.';

CREATE OR REPLACE FUNCTION mneme._cleanup(at timestamptz, dry_run boolean, actor text DEFAULT 'cleanup')
RETURNS TABLE (action text, count bigint)
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_at        timestamptz := _cleanup.at;
    v_thr       jsonb := mneme.setting('inactive_below_r');
    v_purge     jsonb := mneme.setting('purge_after_days');
    v_retention interval := mneme._interval_setting('jobs_retention');
    v_r         float8;
    v_days      float8;
    v_n         bigint;
    v_ids       uuid[];
BEGIN
    IF v_at IS NULL OR NOT isfinite(v_at) THEN
        RAISE EXCEPTION 'at must be a finite timestamp' USING ERRCODE = '22004';
    END IF;
    IF dry_run IS NULL THEN
        RAISE EXCEPTION 'dry_run must not be NULL' USING ERRCODE = '22004', HINT = 'true reports, false acts';
    END IF;
    IF jsonb_typeof(v_thr) IS DISTINCT FROM 'number' OR NOT (v_thr::float8 >= 0 AND v_thr::float8 < 1) THEN
        RAISE EXCEPTION 'setting inactive_below_r must be a number in [0, 1), got %', v_thr
            USING ERRCODE = '22023', HINT = 'SELECT mneme.set_setting(''inactive_below_r'', ''0.5'') restores the default; 0 never inactivates';
    END IF;
    v_r := v_thr::float8;
    IF v_purge <> 'null'::jsonb AND (jsonb_typeof(v_purge) <> 'number' OR NOT v_purge::float8 > 0 OR v_purge::float8 = 'Infinity') THEN
        RAISE EXCEPTION 'setting purge_after_days must be a positive number of days or null (never purge), got %', v_purge
            USING ERRCODE = '22023', HINT = 'SELECT mneme.set_setting(''purge_after_days'', ''null'') turns purging off';
    END IF;
    v_days := CASE WHEN v_purge = 'null'::jsonb THEN NULL ELSE v_purge::float8 END;

    PERFORM set_config('mneme.actor', coalesce(_cleanup.actor, 'cleanup'), true);
    PERFORM set_config('mneme.event_at', v_at::text, true);

    -- 1. Inactive: active, not pinned, not important, R below the threshold.
    -- The row lock re-checks R on the row as it is now (a review that
    -- committed meanwhile raised it: the row no longer qualifies); a row a
    -- review holds locked is skipped until the next run.
    IF dry_run THEN
        SELECT count(*) INTO v_n FROM mneme.memories m
        WHERE m.status = 'active' AND NOT m.pinned AND m.label <> 'important'
          AND mneme._retrievability(m.stability, m.last_reviewed_at, v_at) < v_r;
    ELSE
        WITH c AS (
            SELECT m.id FROM mneme.memories m
            WHERE m.status = 'active' AND NOT m.pinned AND m.label <> 'important'
              AND mneme._retrievability(m.stability, m.last_reviewed_at, v_at) < v_r
            ORDER BY m.id
            FOR UPDATE SKIP LOCKED
        ), u AS (
            UPDATE mneme.memories m
            SET status = 'inactive',
                status_reason = format('retrievability %s at %s is below inactive_below_r %s',
                                       round(mneme._retrievability(m.stability, m.last_reviewed_at, v_at)::numeric, 4),
                                       to_char(v_at AT TIME ZONE 'UTC', 'YYYY-MM-DD HH24:MI "UTC"'), v_r),
                updated_at = now()
            FROM c
            WHERE m.id = c.id AND m.status = 'active' AND NOT m.pinned AND m.label <> 'important'
              AND mneme._retrievability(m.stability, m.last_reviewed_at, v_at) < v_r
            RETURNING m.id)
        SELECT count(*) INTO v_n FROM u;
    END IF;
    action := 'inactivated'; count := v_n; RETURN NEXT;

    -- 2. Expired (valid_until passed): recorded once, the memory is kept
    -- (retrieval already leaves it out, and `as of` a past time still sees it).
    SELECT array_agg(m.id ORDER BY m.id) INTO v_ids FROM mneme.memories m
    WHERE m.valid_until <= v_at AND m.status = 'active'
      AND NOT EXISTS (SELECT 1 FROM mneme.memory_events e WHERE e.memory_id = m.id AND e.event = 'expired');
    IF NOT dry_run AND v_ids IS NOT NULL THEN
        INSERT INTO mneme.memory_events (memory_id, conversation_id, event, reason, actor, at)
        SELECT m.id, m.conversation_id, 'expired',
               format('valid_until %s passed', to_char(m.valid_until AT TIME ZONE 'UTC', 'YYYY-MM-DD HH24:MI "UTC"')),
               coalesce(_cleanup.actor, 'cleanup'), v_at
        FROM mneme.memories m WHERE m.id = ANY (v_ids) ORDER BY m.id;
    END IF;
    action := 'expired'; count := coalesce(cardinality(v_ids), 0); RETURN NEXT;

    -- 3. Purge, only when the operator set purge_after_days: inactive for
    -- longer than that (since its last inactivated event), never pinned or
    -- important. The memory, its source messages and its review log go; the
    -- events stay (a tombstone: ids, time, reason).
    v_ids := NULL;
    IF v_days IS NOT NULL THEN
        SELECT array_agg(x.id ORDER BY x.id) INTO v_ids FROM (
            SELECT m.id FROM mneme.memories m
            WHERE m.status = 'inactive' AND NOT m.pinned AND m.label <> 'important'
              AND coalesce((SELECT max(e.at) FROM mneme.memory_events e
                            WHERE e.memory_id = m.id AND e.event = 'inactivated'), m.updated_at)
                  < v_at - make_interval(secs => v_days * 86400)
            ORDER BY m.id
            FOR UPDATE SKIP LOCKED) x;
        IF NOT dry_run AND v_ids IS NOT NULL THEN
            PERFORM mneme._remove_memories(v_ids, 'purged',
                format('inactive for more than purge_after_days %s', v_days));
        END IF;
    END IF;
    action := 'purged'; count := coalesce(cardinality(v_ids), 0); RETURN NEXT;

    -- 4. Done jobs past their retention (failed jobs stay for an operator).
    IF v_retention IS NULL THEN
        v_n := 0;
    ELSIF dry_run THEN
        SELECT count(*) INTO v_n FROM mneme.jobs j WHERE j.state = 'done' AND j.finished_at < v_at - v_retention;
    ELSE
        DELETE FROM mneme.jobs j WHERE j.state = 'done' AND j.finished_at < v_at - v_retention;
        GET DIAGNOSTICS v_n = ROW_COUNT;
    END IF;
    action := 'jobs_pruned'; count := v_n; RETURN NEXT;

    PERFORM set_config('mneme.actor', '', true);
    PERFORM set_config('mneme.event_at', '', true);
END
$$;
COMMENT ON FUNCTION mneme._cleanup(timestamptz, boolean, text) IS
    'Internal: mneme.cleanup evaluated at a given time (the lifecycle simulation runs a year in minutes).';

CREATE OR REPLACE FUNCTION mneme.cleanup(dry_run boolean DEFAULT false)
RETURNS TABLE (action text, count bigint)
LANGUAGE sql
SET search_path = pg_catalog, pg_temp
AS $$ SELECT * FROM mneme._cleanup(now(), cleanup.dry_run) $$;
COMMENT ON FUNCTION mneme.cleanup(boolean) IS
    'The lifecycle policy, callable from psql or pg_cron (the sidecar runs it as the cleanup job every '
    'cleanup_interval): active memories with retrievability below inactive_below_r become inactive (kept, out of '
    'retrieval, status_reason says why); memories past valid_until are recorded as expired; memories inactive '
    'longer than purge_after_days are purged (only when that setting is not null); done jobs older than '
    'jobs_retention are deleted. Pinned and important memories are never inactivated or purged. Every change is a '
    'mneme.memory_events row. dry_run: count only. Returns one row per action with its count.';

-- Deletes memories for real (purge and erase): their source messages,
-- references in pending reviews and job payloads, then the rows (BM25
-- statistics follow by trigger, review_log by cascade). The delete trigger
-- records one event per memory with the given event and reason.
CREATE OR REPLACE FUNCTION mneme._remove_memories(ids uuid[], event text, reason text)
RETURNS bigint
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_msgs  bigint[];
    v_convs uuid[];
    v_keys  text[];
    v_n     bigint;
BEGIN
    SELECT array_agg(DISTINCT s.id), array_agg(DISTINCT s.c) INTO v_msgs, v_convs FROM (
        SELECT unnest(m.source_message_ids) AS id, m.conversation_id AS c FROM mneme.memories m WHERE m.id = ANY (ids)
        UNION
        SELECT g.id, g.conversation_id FROM mneme.messages g WHERE g.memory_id = ANY (ids)) s;
    v_keys := ARRAY(SELECT unnest(ids)::text);

    -- A retrieval that returned one of them is not reviewed any more: its
    -- query may quote what is removed.
    UPDATE mneme.message_queue q
    SET pending_reviews = nullif((SELECT coalesce(jsonb_agg(e ORDER BY o), '[]'::jsonb)
                                  FROM jsonb_array_elements(q.pending_reviews) WITH ORDINALITY AS x(e, o)
                                  WHERE NOT (e -> 'memory_ids') ?| v_keys), '[]'::jsonb),
        updated_at = now()
    WHERE q.id = ANY (v_convs) AND q.pending_reviews IS NOT NULL
      AND EXISTS (SELECT 1 FROM jsonb_array_elements(q.pending_reviews) e WHERE (e -> 'memory_ids') ?| v_keys);

    UPDATE mneme.jobs j SET payload = mneme._scrub_payload(j.payload, v_keys, v_msgs), updated_at = now()
    WHERE j.conversation_id = ANY (v_convs)
      AND j.payload IS DISTINCT FROM mneme._scrub_payload(j.payload, v_keys, v_msgs);

    DELETE FROM mneme.messages g WHERE g.id = ANY (v_msgs);
    -- The lineage link of a successor goes with the memory (the events keep the ids).
    UPDATE mneme.memories m SET supersedes_id = NULL WHERE m.supersedes_id = ANY (ids) AND NOT m.id = ANY (ids);

    PERFORM set_config('mneme.delete_event', _remove_memories.event, true);
    PERFORM set_config('mneme.delete_reason', coalesce(_remove_memories.reason, ''), true);
    DELETE FROM mneme.memories m WHERE m.id = ANY (ids);
    GET DIAGNOSTICS v_n = ROW_COUNT;
    PERFORM set_config('mneme.delete_event', '', true);
    PERFORM set_config('mneme.delete_reason', '', true);
    RETURN v_n;
END
$$;
COMMENT ON FUNCTION mneme._remove_memories(uuid[], text, text) IS
    'Internal (purge, erase): deletes memories with their source messages, pending reviews and job payload '
    'entries that refer to them; the delete trigger records the event.';

-- A job payload without what refers to removed memories or messages: review
-- entries naming a memory, context messages and message ids.
CREATE OR REPLACE FUNCTION mneme._scrub_payload(payload jsonb, memory_ids text[], message_ids bigint[])
RETURNS jsonb
LANGUAGE sql IMMUTABLE
SET search_path = pg_catalog, pg_temp
AS $$
SELECT CASE WHEN jsonb_typeof(payload) <> 'object' THEN payload ELSE
    payload
    || CASE WHEN jsonb_typeof(payload -> 'reviews') = 'array' THEN jsonb_build_object('reviews',
           (SELECT coalesce(jsonb_agg(e ORDER BY o), '[]') FROM jsonb_array_elements(payload -> 'reviews') WITH ORDINALITY x(e, o)
            WHERE NOT coalesce((e -> 'memory_ids') ?| memory_ids, false))) ELSE '{}' END
    || CASE WHEN jsonb_typeof(payload -> 'context') = 'array' THEN jsonb_build_object('context',
           (SELECT coalesce(jsonb_agg(e ORDER BY o), '[]') FROM jsonb_array_elements(payload -> 'context') WITH ORDINALITY x(e, o)
            WHERE NOT (jsonb_typeof(e -> 'id') = 'number' AND (e ->> 'id')::numeric = ANY (coalesce(message_ids, '{}')::numeric[]))))
       ELSE '{}' END
    || CASE WHEN jsonb_typeof(payload -> 'message_ids') = 'array' THEN jsonb_build_object('message_ids',
           (SELECT coalesce(jsonb_agg(e ORDER BY o), '[]') FROM jsonb_array_elements(payload -> 'message_ids') WITH ORDINALITY x(e, o)
            WHERE NOT (jsonb_typeof(e) = 'number' AND e::text::numeric = ANY (coalesce(message_ids, '{}')::numeric[]))))
       ELSE '{}' END
    || CASE WHEN jsonb_typeof(payload -> 'memory_ids') = 'array' THEN jsonb_build_object('memory_ids',
           (SELECT coalesce(jsonb_agg(e ORDER BY o), '[]') FROM jsonb_array_elements(payload -> 'memory_ids') WITH ORDINALITY x(e, o)
            WHERE NOT (e #>> '{}') = ANY (memory_ids)))
       ELSE '{}' END
END
$$;
COMMENT ON FUNCTION mneme._scrub_payload(jsonb, text[], bigint[]) IS
    'Internal: a job payload without review entries naming the given memories and without the given messages '
    '(context entries, message_ids).';

-- -----------------------------------------------------------------------------
-- The cleanup job's schedule
-- -----------------------------------------------------------------------------
CREATE OR REPLACE FUNCTION mneme.schedule_cleanup(after interval DEFAULT NULL)
RETURNS bigint
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_every interval := mneme._interval_setting('cleanup_interval');
    v_at    timestamptz;
BEGIN
    IF v_every IS NULL THEN
        RETURN NULL;  -- the operator runs mneme.cleanup() (pg_cron) or nothing
    END IF;
    IF after < interval '0' THEN
        RAISE EXCEPTION 'after must not be negative, got %', after USING ERRCODE = '22023';
    END IF;
    IF after IS NOT NULL THEN
        v_at := now() + after;
    ELSE
        SELECT max(j.finished_at) + v_every INTO v_at FROM mneme.jobs j WHERE j.kind = 'cleanup' AND j.state = 'done';
        v_at := greatest(coalesce(v_at, now()), now());
    END IF;
    -- One pending cleanup at a time: the dedupe key returns the pending one.
    RETURN mneme.enqueue_job('cleanup', NULL, '{}', 'cleanup', v_at);
END
$$;
COMMENT ON FUNCTION mneme.schedule_cleanup(interval) IS
    'Enqueues the cleanup job (dedupe key "cleanup": one pending at a time; returns the pending one''s id if there '
    'is one), due `after` from now, or cleanup_interval after the last cleanup finished (now if none did). NULL when '
    'cleanup_interval is null. The sidecar calls it at start and after each cleanup job.';

-- -----------------------------------------------------------------------------
-- Reactivation
-- -----------------------------------------------------------------------------
CREATE OR REPLACE FUNCTION mneme.reactivate(memory_id uuid)
RETURNS boolean
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_status text;
BEGIN
    IF reactivate.memory_id IS NULL THEN
        RAISE EXCEPTION 'memory_id must not be NULL' USING ERRCODE = '22004';
    END IF;
    SELECT m.status INTO v_status FROM mneme.memories m WHERE m.id = reactivate.memory_id FOR UPDATE;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'memory % does not exist', reactivate.memory_id USING ERRCODE = 'P0002',
            HINT = 'a purged or erased memory cannot come back; SELECT * FROM mneme.memory_events WHERE memory_id = ... shows what happened';
    END IF;
    IF v_status = 'active' THEN
        RETURN false;
    END IF;
    IF v_status <> 'inactive' THEN
        RAISE EXCEPTION 'memory % is %, only an inactive memory can be reactivated', reactivate.memory_id, v_status
            USING ERRCODE = '55000', HINT = 'superseded and forgotten memories stay out of retrieval; mneme.history(id) shows the lineage';
    END IF;
    -- A fresh start of its forgetting curve (stability kept): otherwise the
    -- next cleanup would take it out again at once.
    PERFORM set_config('mneme.event_reason', 'reactivated by hand', true);
    UPDATE mneme.memories m
    SET status = 'active', status_reason = NULL, last_reviewed_at = greatest(m.last_reviewed_at, now()), updated_at = now()
    WHERE m.id = reactivate.memory_id;
    PERFORM set_config('mneme.event_reason', '', true);
    RETURN true;
END
$$;
COMMENT ON FUNCTION mneme.reactivate(uuid) IS
    'Makes an inactive memory active again, its forgetting curve restarted now (stability kept). Returns false for '
    'a memory that is active already; raises P0002 for an unknown id and 55000 for a superseded or forgotten one.';

-- -----------------------------------------------------------------------------
-- Erase: the right to be forgotten
-- -----------------------------------------------------------------------------
CREATE OR REPLACE FUNCTION mneme.erase(memory_id uuid, reason text)
RETURNS void
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_conv uuid;
BEGIN
    IF erase.memory_id IS NULL THEN
        RAISE EXCEPTION 'memory_id must not be NULL' USING ERRCODE = '22004';
    END IF;
    IF erase.reason IS NULL OR erase.reason ~ '^[[:space:]]*$' THEN
        RAISE EXCEPTION 'erase needs a reason' USING ERRCODE = '22023',
            HINT = 'the reason stays in the tombstone (mneme.memory_events); do not quote the erased content in it';
    END IF;
    SELECT m.conversation_id INTO v_conv FROM mneme.memories m WHERE m.id = erase.memory_id FOR UPDATE;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'memory % does not exist', erase.memory_id USING ERRCODE = 'P0002',
            HINT = 'SELECT * FROM mneme.memory_events WHERE memory_id = ... shows whether it was purged or erased';
    END IF;
    PERFORM 1 FROM mneme.message_queue q WHERE q.id = v_conv FOR UPDATE;  -- no segmentation meanwhile
    -- Earlier events keep their ids and times, not their reasons (a forget
    -- reason may quote the memory).
    PERFORM set_config('mneme.erasing', 'on', true);
    UPDATE mneme.memory_events e SET reason = NULL WHERE e.memory_id = erase.memory_id AND e.reason IS NOT NULL;
    PERFORM set_config('mneme.erasing', '', true);
    PERFORM mneme._remove_memories(ARRAY[erase.memory_id], 'erased', erase.reason);
END
$$;
COMMENT ON FUNCTION mneme.erase(uuid, text) IS
    'Removes a memory''s content for real (the right to be forgotten): the row with its embedding, its BM25 '
    'postings and statistics, its source messages, its review_log rows, pending reviews and job payload entries '
    'that refer to it, and the reasons of its earlier events. A tombstone remains: an "erased" event with the ids, '
    'the time and the reason. mneme.forget, by contrast, only invalidates.';

CREATE OR REPLACE FUNCTION mneme.erase_conversation(conversation_id uuid, reason text)
RETURNS bigint
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_ids uuid[];
    v_n   bigint;
BEGIN
    IF erase_conversation.conversation_id IS NULL THEN
        RAISE EXCEPTION 'conversation_id must not be NULL' USING ERRCODE = '22004';
    END IF;
    IF erase_conversation.reason IS NULL OR erase_conversation.reason ~ '^[[:space:]]*$' THEN
        RAISE EXCEPTION 'erase_conversation needs a reason' USING ERRCODE = '22023',
            HINT = 'the reason stays in the tombstone (mneme.memory_events); do not quote the erased content in it';
    END IF;
    PERFORM 1 FROM mneme.message_queue q WHERE q.id = erase_conversation.conversation_id FOR UPDATE;
    IF NOT FOUND AND NOT EXISTS (SELECT 1 FROM mneme.memories m WHERE m.conversation_id = erase_conversation.conversation_id) THEN
        RAISE EXCEPTION 'conversation % does not exist', erase_conversation.conversation_id USING ERRCODE = 'P0002',
            HINT = 'SELECT * FROM mneme.memory_events WHERE conversation_id = ... shows whether it was erased';
    END IF;
    SELECT array_agg(x.id ORDER BY x.id) INTO v_ids FROM (
        SELECT m.id FROM mneme.memories m
        WHERE m.conversation_id = erase_conversation.conversation_id FOR UPDATE) x;

    PERFORM set_config('mneme.erasing', 'on', true);
    UPDATE mneme.memory_events e SET reason = NULL
    WHERE e.conversation_id = erase_conversation.conversation_id AND e.reason IS NOT NULL;
    PERFORM set_config('mneme.erasing', '', true);

    -- Every job of the conversation: its payload may quote it. A job running
    -- now loses its lease and rolls back when it tries to complete.
    DELETE FROM mneme.jobs j WHERE j.conversation_id = erase_conversation.conversation_id;
    v_n := coalesce(mneme._remove_memories(coalesce(v_ids, '{}'), 'erased', erase_conversation.reason), 0);
    DELETE FROM mneme.review_log l WHERE l.conversation_id = erase_conversation.conversation_id;
    -- Messages (the queued ones too), speakers and pending reviews.
    DELETE FROM mneme.message_queue q WHERE q.id = erase_conversation.conversation_id;
    DELETE FROM mneme.messages g WHERE g.conversation_id = erase_conversation.conversation_id;

    INSERT INTO mneme.memory_events (memory_id, conversation_id, event, reason, actor, at)
    VALUES (NULL, erase_conversation.conversation_id, 'erased',
            format('conversation erased (%s memories): %s', v_n, erase_conversation.reason), mneme._event_actor(), now());
    RETURN v_n;
END
$$;
COMMENT ON FUNCTION mneme.erase_conversation(uuid, text) IS
    'mneme.erase for a whole conversation: every memory, message (queued ones too), job, review log row, pending '
    'review and the speakers; tombstones remain (an "erased" event per memory and one for the conversation, '
    'memory_id NULL). Returns the number of memories erased.';
