-- =============================================================================
-- mneme settings: the registry (every key's default and meaning) and the
-- type and range of every key, checked by mneme.set_setting before it
-- writes. One rule per key, in one place; a key without a rule cannot be
-- set (TestSettingRules checks that every key has one). Errors name the key
-- (22023) and give the valid form.
-- Idempotent: re-applied on every `mneme migrate`.
-- =============================================================================

-- -----------------------------------------------------------------------------
-- The registry: every setting's key, default and meaning (its rule is
-- mneme._check_setting below). Re-applied on every migrate: a new key is
-- added with its default; a changed default replaces the value only where
-- the value is still the previous default (settings.default_value), so a
-- value a user set is never touched. vector_variant and embedding_dim are
-- facts of the installation, written by migrate, not defaults.
-- -----------------------------------------------------------------------------
CREATE OR REPLACE FUNCTION mneme._setting_defaults()
RETURNS TABLE (key text, value jsonb, description text)
LANGUAGE sql IMMUTABLE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
VALUES
    ('bm25_b', '0.75'::jsonb,
     'BM25 length normalisation b'),
    ('bm25_k1', '1.2',
     'BM25 term frequency saturation k1'),
    ('bm25_skip_min_postings', '2000',
     'the BM25 leg skips the postings of terms that cannot lift a memory into the top k (exact, MaxScore) when the query''s terms have at least this many postings; below it, scoring every posting is cheaper'),
    ('cleanup_interval', '"1 day"',
     'how often the sidecar runs the cleanup job (a PostgreSQL interval); null = the sidecar never schedules it'),
    ('consolidate_llm_max_calls', '8',
     'a consolidation run (job kind consolidate) asks a configured model about at most this many groups of facts; 0 = rules only'),
    ('consolidate_max_delay', '"1 hour"',
     'a conversation that never goes quiet is still consolidated this long after its first unconsolidated fact (a PostgreSQL interval)'),
    ('consolidate_quiet', '"10 minutes"',
     'the sidecar consolidates a conversation''s facts once no new fact was revised in it for this long (a PostgreSQL interval); null = only mneme.consolidate(conversation) runs it'),
    ('confidence_by_source', '{"import": 0.8, "explicit": 0.9, "extracted": 0.7, "conversation": 0.6}',
     'initial confidence_score of a memory by its source_type; a reconfirmation (NOOP) raises it by revision_reconfirm_boost, up to 1'),
    ('confidence_weight', '0',
     'retrieval multiplies a memory''s score by confidence_score ^ confidence_weight (0 = confidence does not rank; docs/revision.md)'),
    ('context_candidates', '50',
     'mneme.context ranks this many memories with mneme.search (1..100) and fills the budget from them in rank order'),
    ('context_order', '"newest"',
     'the order of mneme.context''s items once chosen by rank: newest (the latest said first, and an episode''s separate passages newest first, so a current value is read before the one it replaced) or rank'),
    ('context_window', '2',
     'mneme.context adds this many neighbouring turns on each side of every turn that matches the query (overlapping windows merge)'),
    ('embedder', '"hash"',
     'query embedder: "hash" (built in, SQL computes query embeddings) or "external" (the sidecar embeds; retrieve without an embedding skips the vector leg)'),
    ('extract_facts', 'true',
     'segmentation also stores the facts an episode states as semantic memories (source_type extracted), each revised like an explicit write'),
    ('extract_facts_max', '20',
     'segmentation stores at most this many extracted facts per episode (the first ones in message order; the episode keeps the whole text)'),
    ('inactive_below_r', '0.5',
     'cleanup: an active memory whose retrievability is below this becomes inactive (kept, out of retrieval); pinned and important memories never do'),
    ('initial_stability_days', '{"general": 900, "project": 900, "trivial": 3, "important": 3650, "temporary": 14, "user_profile": 3650}',
     'FSRS stability (days) a new memory starts with, by label (project_* use "project", unknown labels "general"), times 1 + 0.5 * surprise; the memory starts as a graduated card (state review), so an "again" review is a lapse'),
    ('jobs_retention', '"7 days"',
     'cleanup: done jobs finished longer ago than this are deleted (failed jobs are kept); null = keep all'),
    ('label_weights', '{"general": 1, "project": 1, "trivial": 1, "important": 1, "temporary": 1, "user_profile": 1}',
     'multiplier of a memory''s score by label (project_* use "project"); flat by default: labels act through initial_stability_days (docs/forgetting.md)'),
    ('llm_prices', '{}',
     'estimated cost of LLM use (mneme.llm_usage): per model, the price of 1,000 prompt ("in") and completion ("out") tokens, e.g. {"gpt-4o-mini": {"in": 0.00015, "out": 0.0006}}; an estimate in the currency you write, models not listed cost nothing'),
    ('message_max_chars', '100000',
     'add_message rejects content longer than this many characters'),
    ('message_max_future', '"1 hour"',
     'add_message rejects a message time later than now() plus this (a PostgreSQL interval): one far-future time would make every later message "earlier than the previous one"'),
    ('pending_reviews_max', '500',
     'a conversation keeps at most this many pending review entries: past it, the oldest half go to a review job at once (judged by the messages queued so far), so retrieve never rewrites an unbounded array and no entry is lost'),
    ('purge_after_days', 'null',
     'cleanup: a memory inactive for longer than this many days is purged (deleted, tombstone kept); null = never purge'),
    ('retrievability_weight', '1',
     'exponent on FSRS retrievability in the ranking: score = rrf * R^w * label weight; 1 = the design''s rrf * R, 0 = forgetting ignored'),
    ('retrieve_candidates', '100',
     'candidates taken from each retrieval leg (BM25, vector) before fusion'),
    ('review_default_rating', '"hard"',
     'rating applied when the reviewer gives none, or an unknown one, for a memory (logged; review_log.defaulted)'),
    ('review_heuristic_thresholds', '{"easy": 0.25, "good": 0.09, "hard": 0.04}',
     'offline reviewer: overlap score (content words the later conversation shares with the memory, query words excluded, Ochiai coefficient) below hard = again, below good = hard, below easy = good, else easy'),
    ('revision_candidates', '10',
     'a revise job compares a new memory with this many active facts of its scope closest to it (mneme.search over its text), plus those of the same slot'),
    ('revision_duplicate_similarity', '0.8',
     'the offline reviser calls a new fact a duplicate (NOOP) of a candidate when their normalised word sets overlap this much (Jaccard)'),
    ('revision_reconfirm_boost', '0.1',
     'a reconfirmation (the same fact stated again, NOOP) raises the memory''s confidence_score by this, up to 1'),
    ('revision_scope', '"conversation"',
     'where a revise job looks for the facts a new one may confirm, replace or retract: conversation, or tenant (every conversation of its tenant)'),
    ('revision_slot_candidates', '20',
     'besides the top revision_candidates by search, a new fact is compared with at most this many of the newest active facts of its slot'),
    ('rrf_hash_vector_weight', '0.1',
     'weight of the vector leg in the fusion when the embedder is the built-in hash embedder, whose vectors are lexical and mostly redundant with BM25 (an external embedder''s leg always weighs 1)'),
    ('rrf_k', '60',
     'reciprocal rank fusion constant: rrf = sum(1 / (rrf_k + rank))'),
    ('segment_episode_max', '8',
     'offline segmenter: an episode this long is cut at its weakest boundary, shift or not'),
    ('segment_episode_min', '4',
     'offline segmenter: an episode it cuts has at least this many messages'),
    ('segment_gap_seconds', '900',
     'a gap longer than this since the previous message forces a segment (the late message starts the next episode)'),
    ('segment_max_messages', '30',
     'this many queued messages or more: force a segment'),
    ('segment_min_chars', '5',
     'a latest message shorter than this (characters, trimmed): do not ask the segmenter'),
    ('segment_min_messages', '5',
     'fewer queued messages than this: never segment'),
    ('segment_shift_similarity', '0.10',
     'offline segmenter: cosine similarity of the embedded windows below which a topic shift is declared'),
    ('segment_summary_sentences', '2',
     'offline segmenter: sentences in the extractive summary (the most informative by the search''s term weights, in order; mneme.extractive_summary)'),
    ('segment_window', '2',
     'offline segmenter: messages compared on each side of a candidate topic boundary'),
    ('vector_candidates_per_k', '4',
     'the vector leg of a search for the top k takes k times this many candidates (at most retrieve_candidates) before fusion: 40 for the top 10 (an HNSW walk costs its ef_search, one per row, at least 40); more move the fused top k of a small k toward that of 100 candidates (recall and cost in docs/performance.md)'),
    ('vector_ef_search', '200',
     'pgvector: the largest hnsw.ef_search of a search through a conversation''s or tenant''s own HNSW index (vector_index_plan; iterative scans, relaxed order): the candidates asked for, at least 40, at most this; recall against cost in docs/performance.md'),
    ('vector_exact_max', '2000',
     'pgvector: conversations with at most this many active memories are searched exactly (btree on conversation_id); larger ones through the HNSW index with iterative scans'),
    ('vector_scope_index_min', '20000',
     'pgvector: mneme.vector_index_plan gives a conversation, and a tenant of several conversations, with at least this many active memories an HNSW index of its own (and drops it below half); smaller scopes are searched exactly')
$$;
COMMENT ON FUNCTION mneme._setting_defaults() IS
    'Internal: the registry of settings (key, default, meaning), applied by migrate without touching values users set.';

INSERT INTO mneme.settings AS s (key, value, description, default_value)
SELECT r.key, r.value, r.description, r.value FROM mneme._setting_defaults() r
ON CONFLICT (key) DO UPDATE
SET value = CASE WHEN s.value IS NOT DISTINCT FROM s.default_value THEN EXCLUDED.value ELSE s.value END,
    default_value = EXCLUDED.default_value, description = EXCLUDED.description
WHERE (s.default_value, s.description) IS DISTINCT FROM (EXCLUDED.default_value, EXCLUDED.description);

-- A number (integer when asked) in [lo, hi]; lo exclusive when asked.
CREATE OR REPLACE FUNCTION mneme._setting_number(key text, value jsonb, lo float8, hi float8,
                                                 integer_only boolean DEFAULT false, lo_exclusive boolean DEFAULT false)
RETURNS void
LANGUAGE plpgsql IMMUTABLE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v float8;
BEGIN
    IF jsonb_typeof(_setting_number.value) IS DISTINCT FROM 'number' THEN
        RAISE EXCEPTION 'setting "%" must be a number, got %', _setting_number.key, left(_setting_number.value::text, 80)
            USING ERRCODE = '22023', HINT = format('a JSON number from %s to %s', _setting_number.lo, _setting_number.hi);
    END IF;
    BEGIN
        v := (_setting_number.value #>> '{}')::float8;
    EXCEPTION WHEN numeric_value_out_of_range THEN
        v := 'NaN';  -- under- or overflows a float8: out of every range below
    END;
    IF v = 'NaN' OR (_setting_number.integer_only AND v <> trunc(v))
       OR v < _setting_number.lo OR (_setting_number.lo_exclusive AND v = _setting_number.lo) OR v > _setting_number.hi THEN
        RAISE EXCEPTION 'setting "%" must be % % % to %, got %', _setting_number.key,
            CASE WHEN _setting_number.integer_only THEN 'an integer' ELSE 'a number' END,
            CASE WHEN _setting_number.lo_exclusive THEN 'above' ELSE 'from' END, _setting_number.lo, _setting_number.hi,
            left(_setting_number.value::text, 80)
            USING ERRCODE = '22023', HINT = 'SELECT key, value, description FROM mneme.settings shows the default and meaning';
    END IF;
END
$$;

-- An interval given as a JSON string (null when allowed), at least lo.
CREATE OR REPLACE FUNCTION mneme._setting_interval(key text, value jsonb, lo interval, hi interval, nullable boolean)
RETURNS void
LANGUAGE plpgsql STABLE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v interval;
BEGIN
    IF jsonb_typeof(_setting_interval.value) = 'null' AND _setting_interval.nullable THEN
        RETURN;
    END IF;
    BEGIN
        IF jsonb_typeof(_setting_interval.value) IS DISTINCT FROM 'string' THEN
            RAISE invalid_parameter_value;
        END IF;
        v := (_setting_interval.value #>> '{}')::interval;
    EXCEPTION WHEN others THEN
        RAISE EXCEPTION 'setting "%" must be an interval as a JSON string%, got %', _setting_interval.key,
            CASE WHEN _setting_interval.nullable THEN ' or null' ELSE '' END, left(_setting_interval.value::text, 80)
            USING ERRCODE = '22023', HINT = 'e.g. ''"1 day"'' or ''"30 minutes"''';
    END;
    IF v < _setting_interval.lo OR v > _setting_interval.hi THEN
        RAISE EXCEPTION 'setting "%" must be from % to %, got %', _setting_interval.key, _setting_interval.lo, _setting_interval.hi, v
            USING ERRCODE = '22023';
    END IF;
END
$$;

-- An object whose members are among keys (all of required present), each a
-- number in (lo, hi].
CREATE OR REPLACE FUNCTION mneme._setting_weights(key text, value jsonb, keys text[], required text[], lo float8, hi float8)
RETURNS void
LANGUAGE plpgsql IMMUTABLE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    k text;
BEGIN
    IF jsonb_typeof(_setting_weights.value) IS DISTINCT FROM 'object' THEN
        RAISE EXCEPTION 'setting "%" must be a JSON object, got %', _setting_weights.key, left(_setting_weights.value::text, 80)
            USING ERRCODE = '22023', HINT = format('members among %s, each a number above %s up to %s',
                                                   array_to_string(_setting_weights.keys, ', '), _setting_weights.lo, _setting_weights.hi);
    END IF;
    FOR k IN SELECT jsonb_object_keys(_setting_weights.value) LOOP
        IF NOT k = ANY (_setting_weights.keys) THEN
            RAISE EXCEPTION 'setting "%" has an unknown member %', _setting_weights.key, mneme._quote_prefix(k)
                USING ERRCODE = '22023', HINT = format('members are %s', array_to_string(_setting_weights.keys, ', '));
        END IF;
        PERFORM mneme._setting_number(_setting_weights.key || '.' || k, _setting_weights.value -> k,
                                      _setting_weights.lo, _setting_weights.hi, false, true);
    END LOOP;
    FOREACH k IN ARRAY _setting_weights.required LOOP
        IF NOT _setting_weights.value ? k THEN
            RAISE EXCEPTION 'setting "%" needs the member "%"', _setting_weights.key, k USING ERRCODE = '22023';
        END IF;
    END LOOP;
END
$$;

CREATE OR REPLACE FUNCTION mneme._setting_enum(key text, value jsonb, allowed text[])
RETURNS void
LANGUAGE plpgsql IMMUTABLE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF jsonb_typeof(_setting_enum.value) IS DISTINCT FROM 'string' OR NOT (_setting_enum.value #>> '{}') = ANY (_setting_enum.allowed) THEN
        RAISE EXCEPTION 'setting "%" must be one of %, got %', _setting_enum.key, array_to_string(_setting_enum.allowed, ', '),
            left(_setting_enum.value::text, 80)
            USING ERRCODE = '22023', HINT = format('a JSON string, e.g. ''"%s"''', _setting_enum.allowed[1]);
    END IF;
END
$$;

-- The rules. Raises 22023 naming the key when value breaks its rule; 42704
-- for a key without a rule.
CREATE OR REPLACE FUNCTION mneme._check_setting(key text, value jsonb)
RETURNS void
LANGUAGE plpgsql STABLE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
#variable_conflict use_column
DECLARE
    k     text := _check_setting.key;
    v     jsonb := _check_setting.value;
    units constant text[] := ARRAY['important', 'user_profile', 'project', 'general', 'temporary', 'trivial'];
    model text;
BEGIN
    CASE k
    WHEN 'bm25_b' THEN PERFORM mneme._setting_number(k, v, 0, 1);
    WHEN 'revision_candidates' THEN PERFORM mneme._setting_number(k, v, 1, 99, true);
    WHEN 'revision_reconfirm_boost' THEN PERFORM mneme._setting_number(k, v, 0, 1);
    WHEN 'revision_slot_candidates' THEN PERFORM mneme._setting_number(k, v, 0, 1000, true);
    WHEN 'revision_duplicate_similarity' THEN PERFORM mneme._setting_number(k, v, 0.5, 1);
    WHEN 'confidence_weight' THEN PERFORM mneme._setting_number(k, v, 0, 10);
    WHEN 'extract_facts' THEN
        IF jsonb_typeof(v) IS DISTINCT FROM 'boolean' THEN
            RAISE EXCEPTION 'setting "%" must be true or false, got %', k, left(v::text, 80)
                USING ERRCODE = '22023', HINT = 'a JSON boolean, e.g. ''false''';
        END IF;
    WHEN 'extract_facts_max' THEN PERFORM mneme._setting_number(k, v, 1, 1000, true);
    WHEN 'consolidate_llm_max_calls' THEN PERFORM mneme._setting_number(k, v, 0, 100, true);
    WHEN 'context_candidates' THEN PERFORM mneme._setting_number(k, v, 1, 100, true);
    WHEN 'context_window' THEN PERFORM mneme._setting_number(k, v, 0, 1000, true);
    WHEN 'bm25_k1' THEN PERFORM mneme._setting_number(k, v, 0, 10);
    WHEN 'bm25_skip_min_postings' THEN PERFORM mneme._setting_number(k, v, 0, 2147483647, true);
    WHEN 'inactive_below_r' THEN PERFORM mneme._setting_number(k, v, 0, 0.99);
    WHEN 'retrievability_weight' THEN PERFORM mneme._setting_number(k, v, 0, 10);
    WHEN 'rrf_hash_vector_weight' THEN PERFORM mneme._setting_number(k, v, 0, 10);
    WHEN 'rrf_k' THEN PERFORM mneme._setting_number(k, v, 0, 10000, false, true);
    WHEN 'segment_gap_seconds' THEN PERFORM mneme._setting_number(k, v, 0, 31536000, false, true);
    WHEN 'segment_shift_similarity' THEN PERFORM mneme._setting_number(k, v, -1, 1);
    WHEN 'message_max_chars' THEN PERFORM mneme._setting_number(k, v, 1, 10000000, true);
    WHEN 'pending_reviews_max' THEN PERFORM mneme._setting_number(k, v, 2, 1000000, true);
    WHEN 'retrieve_candidates' THEN PERFORM mneme._setting_number(k, v, 1, 1000, true);
    WHEN 'segment_episode_max' THEN PERFORM mneme._setting_number(k, v, 1, 10000, true);
    WHEN 'segment_episode_min' THEN PERFORM mneme._setting_number(k, v, 1, 10000, true);
    WHEN 'segment_max_messages' THEN PERFORM mneme._setting_number(k, v, 1, 100000, true);
    WHEN 'segment_min_messages' THEN PERFORM mneme._setting_number(k, v, 1, 100000, true);
    WHEN 'segment_min_chars' THEN PERFORM mneme._setting_number(k, v, 0, 100000, true);
    WHEN 'segment_summary_sentences' THEN PERFORM mneme._setting_number(k, v, 1, 100, true);
    WHEN 'segment_window' THEN PERFORM mneme._setting_number(k, v, 1, 100, true);
    WHEN 'vector_exact_max' THEN PERFORM mneme._setting_number(k, v, 0, 1000000000, true);
    WHEN 'vector_candidates_per_k' THEN PERFORM mneme._setting_number(k, v, 1, 1000, true);
    WHEN 'vector_ef_search' THEN PERFORM mneme._setting_number(k, v, 1, 1000, true);
    WHEN 'vector_scope_index_min' THEN PERFORM mneme._setting_number(k, v, 1, 1000000000, true);
    WHEN 'purge_after_days' THEN
        IF jsonb_typeof(v) <> 'null' THEN
            PERFORM mneme._setting_number(k, v, 0, 36500, false, true);
        END IF;
    WHEN 'cleanup_interval' THEN PERFORM mneme._setting_interval(k, v, interval '1 minute', interval '366 days', true);
    WHEN 'consolidate_quiet' THEN PERFORM mneme._setting_interval(k, v, interval '0', interval '366 days', true);
    WHEN 'consolidate_max_delay' THEN PERFORM mneme._setting_interval(k, v, interval '0', interval '366 days', false);
    -- (at least a second: cleanup deletes done jobs older than it, and
    -- refuses a retention of zero, which "0", "P0D", "1 day -24 hours" and
    -- "0.0000001 seconds" all are; issue 47)
    WHEN 'jobs_retention' THEN PERFORM mneme._setting_interval(k, v, interval '1 second', interval '100 years', true);
    WHEN 'message_max_future' THEN PERFORM mneme._setting_interval(k, v, interval '0', interval '366 days', false);
    WHEN 'embedder' THEN PERFORM mneme._setting_enum(k, v, ARRAY['hash', 'external']);
    WHEN 'revision_scope' THEN PERFORM mneme._setting_enum(k, v, ARRAY['conversation', 'tenant']);
    WHEN 'context_order' THEN PERFORM mneme._setting_enum(k, v, ARRAY['newest', 'rank']);
    WHEN 'review_default_rating' THEN PERFORM mneme._setting_enum(k, v, ARRAY['again', 'hard', 'good', 'easy']);
    -- Lower bounds above 0, not 0: the ranking multiplies these (and
    -- stability divides time), and a weight or stability of 1e-307 made
    -- the products underflow or the quotients overflow (22003) in every
    -- search and cleanup (issue 38). The clamps in the ranking
    -- (mneme._retrievability) hold for stored rows whatever was set.
    WHEN 'confidence_by_source' THEN PERFORM mneme._setting_weights(k, v, ARRAY['explicit', 'import', 'extracted', 'conversation'], ARRAY['explicit', 'import', 'extracted', 'conversation'], 0.001, 1);
    WHEN 'llm_prices' THEN
        IF jsonb_typeof(v) IS DISTINCT FROM 'object' THEN
            RAISE EXCEPTION 'setting "%" must be a JSON object of models, got %', k, left(v::text, 80)
                USING ERRCODE = '22023', HINT = 'e.g. ''{"gpt-4o-mini": {"in": 0.00015, "out": 0.0006}}'' (price per 1,000 tokens)';
        END IF;
        FOR model IN SELECT jsonb_object_keys(v) LOOP
            IF length(model) NOT BETWEEN 1 AND 200 THEN
                RAISE EXCEPTION 'setting "%" has a model name of % characters', k, length(model)
                    USING ERRCODE = '22023', HINT = 'model names have 1 to 200 characters';
            END IF;
            PERFORM mneme._setting_weights(k || '.' || model, v -> model, ARRAY['in', 'out'], ARRAY['in', 'out'], 0, 1000);
        END LOOP;
    WHEN 'label_weights' THEN PERFORM mneme._setting_weights(k, v, units, '{}', 0.001, 100);
    WHEN 'initial_stability_days' THEN PERFORM mneme._setting_weights(k, v, units, ARRAY['general'], 0.01, 36500);
    WHEN 'review_heuristic_thresholds' THEN
        PERFORM mneme._setting_weights(k, v, ARRAY['hard', 'good', 'easy'], ARRAY['hard', 'good', 'easy'], 0, 1);
        IF NOT ((v ->> 'hard')::float8 <= (v ->> 'good')::float8 AND (v ->> 'good')::float8 <= (v ->> 'easy')::float8) THEN
            RAISE EXCEPTION 'setting "%" needs hard <= good <= easy, got %', k, v USING ERRCODE = '22023';
        END IF;
    ELSE
        RAISE EXCEPTION 'setting "%" has no rule', k USING ERRCODE = '42704';
    END CASE;
END
$$;
COMMENT ON FUNCTION mneme._check_setting(text, jsonb) IS
    'Internal to set_setting: the type and range of every setting (22023 naming the key when broken).';

-- Pairs of settings that bound one thing from both sides: (lower, upper).
-- The lower one above the upper one contradicts itself (segment_min_messages
-- 100 with segment_max_messages 1 would force every segment; an offline
-- segmenter with segment_episode_min above segment_episode_max cannot cut),
-- so set_setting refuses a value on either side that crosses the other's
-- current value.
CREATE OR REPLACE FUNCTION mneme._setting_pairs()
RETURNS TABLE (lower_key text, upper_key text)
LANGUAGE sql IMMUTABLE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
VALUES ('segment_min_messages', 'segment_max_messages'),
       ('segment_episode_min', 'segment_episode_max')
$$;
COMMENT ON FUNCTION mneme._setting_pairs() IS
    'Internal to set_setting: the settings that bound one quantity from below and above (lower <= upper).';

-- Raises 22023 naming both keys when value for key crosses the current
-- value of its pair. Numbers only: each key's own rule ran first.
CREATE OR REPLACE FUNCTION mneme._check_setting_pair(key text, value jsonb)
RETURNS void
LANGUAGE plpgsql STABLE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
#variable_conflict use_column
DECLARE
    p     record;
    other jsonb;
BEGIN
    FOR p IN SELECT * FROM mneme._setting_pairs() x
             WHERE x.lower_key = _check_setting_pair.key OR x.upper_key = _check_setting_pair.key LOOP
        IF p.lower_key = _check_setting_pair.key THEN
            SELECT s.value INTO other FROM mneme.settings s WHERE s.key = p.upper_key;
            IF (_check_setting_pair.value #>> '{}')::float8 > (other #>> '{}')::float8 THEN
                RAISE EXCEPTION 'setting "%" (%) must not be above setting "%" (%)', p.lower_key, _check_setting_pair.value,
                    p.upper_key, other
                    USING ERRCODE = '22023', HINT = format('raise %s first, or choose at most %s', p.upper_key, other);
            END IF;
        ELSE
            SELECT s.value INTO other FROM mneme.settings s WHERE s.key = p.lower_key;
            IF (_check_setting_pair.value #>> '{}')::float8 < (other #>> '{}')::float8 THEN
                RAISE EXCEPTION 'setting "%" (%) must not be below setting "%" (%)', p.upper_key, _check_setting_pair.value,
                    p.lower_key, other
                    USING ERRCODE = '22023', HINT = format('lower %s first, or choose at least %s', p.lower_key, other);
            END IF;
        END IF;
    END LOOP;
END
$$;
COMMENT ON FUNCTION mneme._check_setting_pair(text, jsonb) IS
    'Internal to set_setting: refuses (22023, naming both keys) a value that crosses the current value of the '
    'setting bounding the same quantity from the other side (mneme._setting_pairs).';

-- The key a label reads in a setting keyed by label (label_weights,
-- initial_stability_days): its own key if the setting has one, "project"
-- for a project_* label, "general" otherwise. Plain SQL without SET, so the
-- ranking inlines it per row.
CREATE OR REPLACE FUNCTION mneme._label_key(label text, by_label jsonb)
RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE
AS $$ SELECT CASE WHEN $2 ? $1 THEN $1 WHEN $1 LIKE 'project\_%' THEN 'project' ELSE 'general' END $$;
COMMENT ON FUNCTION mneme._label_key(text, jsonb) IS
    'Internal: the key of a setting keyed by label that a label reads (its own, "project" for project_*, else "general").';
