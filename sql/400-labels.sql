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
-- The functions here tell the event triggers what is happening (who acts,
-- when, the kind of a delete, an erase under way) with marks (mneme._mark,
-- sql/015-invariants.sql); docs/sql-api.md, "Who is writing: marks and
-- session settings", lists every mark and every mneme.* setting.
-- Idempotent: re-applied on every `mneme migrate` (CREATE OR REPLACE only).
-- =============================================================================

-- -----------------------------------------------------------------------------
-- Labels: the one definition of the vocabulary
-- -----------------------------------------------------------------------------
-- Each label with what it means: the LLM segmenter's instructions are
-- written from this (so a label added here reaches the model), and
-- mneme.labels() lists the names.
CREATE OR REPLACE FUNCTION mneme.label_vocabulary()
RETURNS TABLE (label text, meaning text)
LANGUAGE sql IMMUTABLE PARALLEL SAFE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
SET jit = off
AS $$
VALUES ('important'::text, 'decisions, commitments, facts the user stressed'::text),
       ('user_profile', 'stable facts about the user: identity, preferences, relationships'),
       ('general', 'anything worth keeping that no other label fits'),
       ('temporary', 'useful only for a short time, e.g. today''s plans'),
       ('trivial', 'small talk'),
       ('project_<name>', 'work on a named project, e.g. project_website; <name> lower-case letters, digits and _')
$$;
COMMENT ON FUNCTION mneme.label_vocabulary() IS
    'The labels with their meanings, in the order mneme.labels() lists them; the LLM segmenter is told these.';
GRANT EXECUTE ON FUNCTION mneme.label_vocabulary() TO mneme_app, mneme_worker, mneme_admin;

CREATE OR REPLACE FUNCTION mneme.labels()
RETURNS text[]
LANGUAGE sql IMMUTABLE PARALLEL SAFE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
SET jit = off
AS $$ SELECT array_agg(v.label ORDER BY v.ord) FROM mneme.label_vocabulary() WITH ORDINALITY AS v(label, meaning, ord) $$;
COMMENT ON FUNCTION mneme.labels() IS
    'The label vocabulary, the one definition every writer uses (remember, create_episode, the LLM segmenter''s '
    'schema): important, user_profile, general, temporary, trivial, and project_<name> with <name> lower-case '
    'letters, digits and _ (at most 56 characters).';
GRANT EXECUTE ON FUNCTION mneme.labels() TO mneme_app, mneme_worker, mneme_admin;

CREATE OR REPLACE FUNCTION mneme.is_label(label text)
RETURNS boolean
LANGUAGE sql IMMUTABLE PARALLEL SAFE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
SET jit = off
AS $$
SELECT label IS NOT NULL
   AND (label = ANY (array_remove(mneme.labels(), 'project_<name>'))
        OR label ~ '^project_[a-z0-9][a-z0-9_]{0,55}$')
$$;
COMMENT ON FUNCTION mneme.is_label(text) IS
    'Whether a text is a label of the vocabulary (mneme.labels()); NULL is not.';
GRANT EXECUTE ON FUNCTION mneme.is_label(text) TO mneme_app, mneme_worker, mneme_admin;

-- The column takes only labels of the vocabulary: its CHECK calls
-- mneme.is_label (the table's first CHECK was a looser pattern). Replaced
-- once; rows written before are validated when they all pass, and kept with
-- a warning naming the query that lists them when some do not.
DO $$
BEGIN
    IF NOT EXISTS (SELECT 1 FROM pg_catalog.pg_constraint c
                   WHERE c.conrelid = 'mneme.memories'::regclass AND c.conname = 'memories_label_check'
                     AND pg_catalog.pg_get_constraintdef(c.oid) LIKE '%is_label%') THEN
        ALTER TABLE mneme.memories DROP CONSTRAINT IF EXISTS memories_label_check;
        ALTER TABLE mneme.memories ADD CONSTRAINT memories_label_check CHECK (mneme.is_label(label)) NOT VALID;
        BEGIN
            ALTER TABLE mneme.memories VALIDATE CONSTRAINT memories_label_check;
        EXCEPTION WHEN check_violation THEN
            RAISE WARNING 'memories with a label outside the vocabulary exist: new rows are checked, these are not: '
                          'SELECT id, label FROM mneme.memories WHERE NOT mneme.is_label(label)';
        END;
    END IF;
END
$$;

CREATE OR REPLACE FUNCTION mneme.check_label(label text)
RETURNS text
LANGUAGE plpgsql IMMUTABLE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
SET jit = off
AS $$
BEGIN
    IF check_label.label IS NULL THEN
        RAISE EXCEPTION 'label must not be NULL' USING ERRCODE = '22004',
            HINT = 'leave the label out of remember to have mneme.auto_label choose';
    END IF;
    IF NOT mneme.is_label(check_label.label) THEN
        RAISE EXCEPTION 'unknown label %: want one of %', mneme._quote_prefix(check_label.label),
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
GRANT EXECUTE ON FUNCTION mneme.check_label(text) TO mneme_app, mneme_worker, mneme_admin;

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
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
SET jit = off
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
    IF auto_label.content IS NULL THEN
        RAISE EXCEPTION 'content must not be NULL' USING ERRCODE = '22004', HINT = 'pass the text of the memory to label';
    END IF;
    IF mneme._is_blank(auto_label.content) THEN
        RAISE EXCEPTION 'content must not be empty' USING ERRCODE = '22023',
            HINT = 'pass the text of the memory to label';
    END IF;
    PERFORM mneme._check_time('at', auto_label.at);
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
GRANT EXECUTE ON FUNCTION mneme.auto_label(text, timestamptz) TO mneme_app, mneme_worker, mneme_admin;

-- An episode is labelled from its messages, not from its text as a whole:
-- one "tonight" in a conversation about other things does not make the
-- episode fade in weeks (on LoCoMo, whole-text labelling made 24 of 442
-- episodes temporary and cost 0.048 recall at 1,000 words: docs/forgetting.md).
CREATE OR REPLACE FUNCTION mneme.episode_label(contents text[], at timestamptz DEFAULT NULL)
RETURNS text
LANGUAGE plpgsql STABLE PARALLEL SAFE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
SET jit = off
AS $$
DECLARE
    labels text[];
    facts  int;
BEGIN
    IF episode_label.contents IS NULL THEN
        RAISE EXCEPTION 'contents must not be NULL' USING ERRCODE = '22004';
    END IF;
    IF cardinality(episode_label.contents) = 0 THEN
        RAISE EXCEPTION 'contents must hold at least one message' USING ERRCODE = '22023';
    END IF;
    PERFORM mneme._check_time('at', episode_label.at);
    SELECT array_agg(mneme.auto_label(c, episode_label.at)) INTO labels
    FROM unnest(episode_label.contents) AS c WHERE NOT mneme._is_blank(c);
    IF labels IS NULL THEN
        RETURN 'trivial';
    END IF;
    IF 'important' = ANY (labels) THEN
        RETURN 'important';
    END IF;
    IF 'user_profile' = ANY (labels) THEN
        RETURN 'user_profile';
    END IF;
    facts := cardinality(array_remove(labels, 'trivial'));
    IF facts = 0 THEN
        RETURN 'trivial';
    END IF;
    IF 2 * cardinality(array_remove(array_remove(labels, 'trivial'), 'general')) > facts THEN
        RETURN 'temporary';  -- most of what the episode says is time-bound
    END IF;
    RETURN 'general';
END
$$;
COMMENT ON FUNCTION mneme.episode_label(text[], timestamptz) IS
    'The offline label of an episode from its messages'' mneme.auto_label: important if any message is, else '
    'user_profile if any is, trivial if all are, temporary if most of the others are, general otherwise.';
GRANT EXECUTE ON FUNCTION mneme.episode_label(text[], timestamptz) TO mneme_app, mneme_worker, mneme_admin;
