-- =============================================================================
-- mneme lifecycle, a new memory's FSRS state: the graduated initial state of its label
-- (the lifecycle is introduced in 400-labels.sql).
-- Idempotent: re-applied on every `mneme migrate` (CREATE OR REPLACE only).
-- =============================================================================

-- -----------------------------------------------------------------------------
-- A new memory's FSRS state
-- -----------------------------------------------------------------------------
-- go-fsrs v3's difficulty after a new card's first "good" (FSRS-5 default
-- weights: w4 - exp(w5 * 2) + 1). A Go test checks it against go-fsrs.
CREATE OR REPLACE FUNCTION mneme._initial_difficulty()
RETURNS float8
LANGUAGE sql IMMUTABLE PARALLEL SAFE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$ SELECT 5.282434422319005::float8 $$;
COMMENT ON FUNCTION mneme._initial_difficulty() IS
    'Internal: go-fsrs v3''s difficulty after a new card''s first "good" review (tested against go-fsrs).';

-- The initial stability of a label from the value of initial_stability_days
-- passed in: immutable, so a statement over many rows (reset_initial_state's
-- UPDATE) reads the setting once and calls only immutable functions on its
-- columns (Citus refuses STABLE functions over columns in an UPDATE).
CREATE OR REPLACE FUNCTION mneme._initial_stability_of(days jsonb, label text, surprise float8)
RETURNS float8
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    key text := mneme._label_key(_initial_stability_of.label, _initial_stability_of.days);
    v   float8;
BEGIN
    IF jsonb_typeof(days) IS DISTINCT FROM 'object' OR jsonb_typeof(days -> key) IS DISTINCT FROM 'number'
       OR NOT (days ->> key)::float8 > 0 THEN
        RAISE EXCEPTION 'setting initial_stability_days has no positive number for label "%" (key "%"): %', _initial_stability_of.label, key, days
            USING ERRCODE = '22023',
                  HINT = 'a JSON object of days by label, e.g. {"trivial": 3, "temporary": 14, "general": 900, "project": 900, "user_profile": 3650, "important": 3650}';
    END IF;
    v := (days ->> key)::float8;
    -- A surprising memory starts stronger: up to 1.5 times for an entirely new one.
    RETURN v * (1 + 0.5 * least(greatest(coalesce(_initial_stability_of.surprise, 0), 0), 1));
END
$$;
COMMENT ON FUNCTION mneme._initial_stability_of(jsonb, text, float8) IS
    'Internal: the initial stability of a label given the value of initial_stability_days (its own key, else '
    '"project" for project_*, else "general") times 1 + 0.5 * surprise (clamped to [0, 1]); immutable.';

CREATE OR REPLACE FUNCTION mneme._initial_stability(label text, surprise float8)
RETURNS float8
LANGUAGE sql STABLE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$ SELECT mneme._initial_stability_of(mneme.setting('initial_stability_days'), label, surprise) $$;
COMMENT ON FUNCTION mneme._initial_stability(text, float8) IS
    'Internal: initial_stability_days for the label (its own key, else "project" for project_*, else "general") '
    'times 1 + 0.5 * surprise (clamped to [0, 1]).';

CREATE OR REPLACE FUNCTION mneme.initial_state(label text, surprise float8 DEFAULT 0)
RETURNS TABLE (stability float8, difficulty float8, fsrs_state text)
LANGUAGE plpgsql STABLE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
SET jit = off
AS $$
BEGIN
    PERFORM mneme.check_label(initial_state.label);
    IF initial_state.surprise IS NULL THEN
        RAISE EXCEPTION 'surprise must not be NULL' USING ERRCODE = '22004', HINT = 'leave it out for 0';
    END IF;
    IF NOT initial_state.surprise BETWEEN 0 AND 1 THEN
        RAISE EXCEPTION 'surprise must be between 0 and 1, got %', initial_state.surprise
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
GRANT EXECUTE ON FUNCTION mneme.initial_state(text, float8) TO mneme_app, mneme_worker, mneme_admin;

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

-- WHEN: a row that brings its state (mneme import) costs no call.
DROP TRIGGER IF EXISTS memories_initial_state ON mneme.memories;
CREATE TRIGGER memories_initial_state BEFORE INSERT ON mneme.memories
    FOR EACH ROW WHEN (NEW.stability IS NULL OR NEW.difficulty IS NULL OR NEW.fsrs_state IS NULL)
    EXECUTE FUNCTION mneme.memories_initial_state_trg();

CREATE OR REPLACE FUNCTION mneme.reset_initial_state(conversation_id uuid DEFAULT NULL, dry_run boolean DEFAULT false)
RETURNS bigint
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
SET jit = off
AS $$
DECLARE
    v__entered boolean := mneme._enter(reset_initial_state.conversation_id);  -- the caller forwarded first (Citus: mneme._enter)
    n    bigint;
    -- The setting is read once: the statements below call only immutable
    -- functions on the rows (Citus refuses STABLE ones over columns in an
    -- UPDATE).
    days jsonb := mneme.setting('initial_stability_days');
    d    float8 := mneme._initial_difficulty();
BEGIN
    IF dry_run IS NULL THEN
        RAISE EXCEPTION 'dry_run must not be NULL' USING ERRCODE = '22004';
    END IF;
    IF dry_run THEN
        SELECT count(*) INTO n FROM mneme.memories m
        WHERE (reset_initial_state.conversation_id IS NULL OR m.conversation_id = reset_initial_state.conversation_id)
          AND m.review_count = 0 AND m.status IN ('active', 'inactive')
          AND (m.stability, m.difficulty, m.fsrs_state)
              IS DISTINCT FROM (mneme._initial_stability_of(days, m.label, m.surprise), d, 'review');
        RETURN n;
    END IF;
    UPDATE mneme.memories m
    SET stability = mneme._initial_stability_of(days, m.label, m.surprise), difficulty = d,
        fsrs_state = 'review', updated_at = now()
    WHERE (reset_initial_state.conversation_id IS NULL OR m.conversation_id = reset_initial_state.conversation_id)
      AND m.review_count = 0 AND m.status IN ('active', 'inactive')
      AND (m.stability, m.difficulty, m.fsrs_state)
          IS DISTINCT FROM (mneme._initial_stability_of(days, m.label, m.surprise), d, 'review');
    GET DIAGNOSTICS n = ROW_COUNT;
    RETURN n;
END
$$;
COMMENT ON FUNCTION mneme.reset_initial_state(uuid, boolean) IS
    'Moves memories that were never reviewed (review_count 0, active or inactive) to the initial state of their '
    'label (mneme.initial_state; last_reviewed_at stays their creation), in one conversation or all (NULL). '
    'Reviewed memories keep their state: reviews are evidence. Returns how many changed (would change with dry_run). '
    'Run it once after upgrading, or after changing initial_stability_days; mneme never does it by itself.';
GRANT EXECUTE ON FUNCTION mneme.reset_initial_state(uuid, boolean) TO mneme_admin;
