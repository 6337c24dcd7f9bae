-- =============================================================================
-- GENERATED: do not edit. The Citus forms of mneme's functions, made ahead
-- of time from the one-server functions of sql/*.sql by
-- tests/testdata/citus_generate.sql (which says what it changes and why);
-- rewrite this file after changing a function:
--     go test ./tests -run TestCitusGeneratedUpToDate -update
-- TestCitusGeneratedUpToDate fails while it is stale. Applied only on a
-- distributed mneme (mneme migrate --citus; docs/scale.md), after sql/*.sql,
-- replacing each function by name (CREATE OR REPLACE keeps its owner and
-- grants). @extschema@ is the vector extension's schema, as in sql/.
-- =============================================================================

CREATE OR REPLACE FUNCTION mneme._bm25_search(conversation_ids uuid[], query text, k integer, since timestamp with time zone, until timestamp with time zone)
 RETURNS TABLE(memory_id uuid, score double precision, rank integer)
 LANGUAGE plpgsql
 STABLE SECURITY DEFINER ROWS 100
 SET search_path TO 'pg_catalog', 'pg_temp'
 SET jit TO 'off'
AS $function$
#variable_conflict use_column
DECLARE
    v_ids     uuid[] := _bm25_search.conversation_ids;
    v_k       int := _bm25_search.k;
    v_since   timestamptz := _bm25_search.since;
    v_until   timestamptz := _bm25_search.until;
    v_k1      float8 := mneme.setting('bm25_k1')::float8;
    v_b       float8 := mneme.setting('bm25_b')::float8;
    v_expired uuid[];
    v_n       float8;
    v_total   float8;
    v_avgdl   float8;
    v_terms   text[];    -- the query's terms in the conversations, largest bound first
    v_wts     float8[];  -- their weights idf * (k1 + 1)
    v_bounds  float8[];  -- the most a posting of each can contribute
    v_dfs     float8[];
    v_postings float8;   -- their postings (df) together
    v_last    int;
BEGIN
    SELECT sum(s.n), sum(s.total_len) INTO v_n, v_total FROM mneme.bm25_stats s WHERE s.conversation_id = ANY (v_ids);
    IF v_n IS NULL THEN
        RETURN;  -- unknown conversations, or nothing active in them
    END IF;
    -- Expired memories are still in the statistics: take them out here.
    SELECT array_agg(m.id) INTO v_expired FROM mneme.memories m
    WHERE m.conversation_id = ANY (v_ids) AND m.valid_until IS NOT NULL
      AND m.status = 'active' AND m.valid_until <= now();
    IF v_expired IS NOT NULL THEN
        SELECT v_n - count(*), v_total - coalesce(sum(d.doclen), 0) INTO v_n, v_total
        FROM mneme.bm25_docs d WHERE d.memory_id = ANY (v_expired);
    END IF;
    IF v_n <= 0 OR v_total <= 0 THEN
        RETURN;
    END IF;
    v_avgdl := v_total / v_n;

    WITH d AS (
        SELECT q.term, sum(bt.df)::float8 AS df, max(bt.max_tf) AS max_tf, min(bt.min_len_per_tf) AS min_len
        FROM (SELECT DISTINCT u.term FROM unnest(tsvector_to_array(mneme.bm25_tsvector(_bm25_search.query))) AS u(term)) q
        JOIN (SELECT t.term, t.df, t.max_tf, t.min_len_per_tf FROM mneme.bm25_terms t
              WHERE t.conversation_id = ANY (v_ids)
                AND t.term = ANY (tsvector_to_array(mneme.bm25_tsvector(_bm25_search.query)))) bt ON bt.term = q.term
        GROUP BY q.term
    ), x AS MATERIALIZED (
        -- The expired memories that hold the term leave its df: looked up
        -- one by one by the whole key when they are fewer than its
        -- postings, else counted among its postings.
        SELECT d.term, d.max_tf, d.min_len, d.df - coalesce(ex.n, 0) AS df
        FROM d LEFT JOIN (
            SELECT p.term, count(*) AS n FROM mneme.bm25_postings p
            WHERE v_expired IS NOT NULL AND p.conversation_id = ANY (v_ids)
              AND p.term = ANY (tsvector_to_array(mneme.bm25_tsvector(_bm25_search.query)))
              AND p.memory_id = ANY (v_expired)
            GROUP BY p.term) ex ON ex.term = d.term
    )
    SELECT array_agg(w.term), array_agg(w.wt), array_agg(w.bound), array_agg(w.df), sum(w.df)
    INTO v_terms, v_wts, v_bounds, v_dfs, v_postings
    FROM (SELECT x.term, x.df, mneme._bm25_weight(v_n, x.df, v_k1) AS wt,
                 -- (1 + 1e-9): rounding must not put a bound below a posting's contribution
                 mneme._bm25_weight(v_n, x.df, v_k1) * (1 + 1e-9)
                   / (1 + v_k1 * (1 - v_b) / greatest(x.max_tf, 1) + v_k1 * v_b / v_avgdl * x.min_len) AS bound
          FROM x WHERE x.df > 0
          ORDER BY bound DESC, x.term) w;  -- largest bound first
    IF v_terms IS NULL THEN
        RETURN;
    END IF;
    v_last := cardinality(v_terms);

    -- Skipping pays when the set-aside term holds most of the postings
    -- (measured: where it holds about as many as the others, summing the
    -- others first and joining costs more than summing everything at once).
    IF v_last = 1 OR v_postings < mneme.setting('bm25_skip_min_postings')::float8
       OR v_dfs[v_last] < 2 * (v_postings - v_dfs[v_last]) THEN
        RETURN QUERY
        SELECT top.memory_id, top.score, (rank() OVER (ORDER BY top.score DESC))::int  -- equal scores share a rank
        FROM (SELECT s.memory_id, round(s.score * 1e9) / 1e9 AS score
              FROM mneme._bm25_sums(v_ids, v_terms, v_wts, v_k1, v_b, v_avgdl, v_expired, v_since, v_until) s
              ORDER BY 2 DESC, 1 LIMIT v_k) top
        ORDER BY top.score DESC, top.memory_id;
        RETURN;
    END IF;

    -- One statement: the partial sums without the last term (part), theta
    -- (their k-th best), the candidates that can still reach it, and the
    -- last term's contribution by key lookups for the candidates when they
    -- are few, else by summing its postings (each branch runs only when its
    -- one-time condition holds).
    RETURN QUERY
    WITH part AS MATERIALIZED (
        SELECT s.memory_id AS id, s.score AS ps
        FROM mneme._bm25_sums(v_ids, v_terms[:v_last - 1], v_wts[:v_last - 1], v_k1, v_b, v_avgdl,
                              v_expired, v_since, v_until) s
    ), th AS MATERIALIZED (
        SELECT x.theta, x.theta > v_bounds[v_last] + 1e-6 AS skips
        FROM (SELECT (SELECT part.ps FROM part ORDER BY part.ps DESC OFFSET v_k - 1 LIMIT 1) AS theta) x
    ), cand AS MATERIALIZED (
        SELECT part.id, part.ps FROM part, th WHERE th.skips AND part.ps + v_bounds[v_last] + 1e-6 >= th.theta
    ), lookups AS MATERIALIZED (
        SELECT coalesce((SELECT th.skips FROM th), false) AND (SELECT count(*) FROM cand) * 4 <= v_dfs[v_last] AS yes
    ), scored AS (
        -- (A join, not a subquery correlated with cand: Citus refuses those
        -- when the FROM holds a CTE. The candidates as one array keep the
        -- lookups by the whole key; an IN over cand let the planner read
        -- every posting of the term.)
        SELECT cand.id, round((cand.ps + coalesce(lp.s, 0)) * 1e9) / 1e9 AS score
        FROM cand LEFT JOIN (
            SELECT p.memory_id, sum(v_wts[v_last] * mneme._bm25_tf(p.tf, p.doclen, v_k1, v_b, v_avgdl)) AS s
            FROM unnest(v_ids) AS c(id), mneme.bm25_postings p
            WHERE p.conversation_id = c.id AND p.term = v_terms[v_last] AND p.memory_id = ANY (ARRAY(SELECT cand.id FROM cand))
            GROUP BY p.memory_id) lp ON lp.memory_id = cand.id
        WHERE (SELECT l.yes FROM lookups l)
        UNION ALL
        SELECT coalesce(part.id, l.memory_id), round((coalesce(part.ps, 0) + coalesce(l.score, 0)) * 1e9) / 1e9
        FROM part FULL JOIN mneme._bm25_sums(v_ids, v_terms[v_last:], v_wts[v_last:], v_k1, v_b, v_avgdl,
                                             v_expired, v_since, v_until) l ON l.memory_id = part.id
        WHERE NOT (SELECT l.yes FROM lookups l)
    )
    SELECT top.id, top.score, (rank() OVER (ORDER BY top.score DESC))::int
    FROM (SELECT scored.id, scored.score FROM scored ORDER BY 2 DESC, 1 LIMIT v_k) top
    ORDER BY top.score DESC, top.id;
END
$function$;

CREATE OR REPLACE FUNCTION mneme._bm25_sums(conversation_ids uuid[], terms text[], weights double precision[], k1 double precision, b double precision, avgdl double precision, expired uuid[], since timestamp with time zone, until timestamp with time zone)
 RETURNS TABLE(memory_id uuid, score double precision)
 LANGUAGE plpgsql
 STABLE
AS $function$#variable_conflict use_column
BEGIN
RETURN QUERY 
    SELECT p.memory_id, sum(t.wt * mneme._bm25_tf(p.tf, p.doclen, $4, $5, $6))
    FROM unnest($2, $3) AS t(term, wt), (
        SELECT p.conversation_id, p.memory_id, p.term, p.tf, p.doclen FROM mneme.bm25_postings p
        WHERE p.conversation_id = ANY ($1) AND p.term = ANY ($2)) p
    WHERE p.term = t.term AND ($7 IS NULL OR p.memory_id <> ALL ($7))
      AND (($8 IS NULL AND $9 IS NULL)
           OR EXISTS (SELECT 1 FROM mneme.memories m WHERE m.id = p.memory_id AND m.conversation_id = p.conversation_id
                      AND ($8 IS NULL OR m.created_at >= $8) AND ($9 IS NULL OR m.created_at < $9)))
    GROUP BY p.memory_id
;
END$function$;

CREATE OR REPLACE FUNCTION mneme._context_anchors(conversation_id uuid, query text, query_embedding real[], since timestamp with time zone, until timestamp with time zone, at timestamp with time zone, scope text, conversation_ids uuid[])
 RETURNS TABLE(anchor integer, rank integer, memory_id uuid, kind text, label text, score double precision, first_at timestamp with time zone, msg_id bigint, distance integer, cost integer)
 LANGUAGE plpgsql
 STABLE SECURITY DEFINER ROWS 200
 SET search_path TO 'pg_catalog', 'pg_temp'
 SET jit TO 'off'
AS $function$
#variable_conflict use_column
DECLARE
    v_convs  uuid[] := _context_anchors.conversation_ids;
    v_cand   int := mneme.setting('context_candidates')::int;
    v_win    int := mneme.setting('context_window')::int;
    v_k1     float8 := mneme.setting('bm25_k1')::float8;
    v_b      float8 := mneme.setting('bm25_b')::float8;
    v_rrf    float8 := mneme.setting('rrf_k')::float8;
    v_terms  text[] := tsvector_to_array(mneme.bm25_tsvector(_context_anchors.query));
    v_n      float8;
    -- Turns by meaning: with an external embedder and the query's embedding,
    -- the turns that have embeddings are ranked by cosine too.
    -- (an empty query_embedding asks for BM25 alone)
    v_meaning boolean := coalesce(cardinality(_context_anchors.query_embedding), 0) > 0
                         AND mneme.setting('embedder') #>> '{}' <> 'hash';
BEGIN
    SELECT sum(s.n) INTO v_n FROM mneme.bm25_stats s WHERE s.conversation_id = ANY (v_convs);
    RETURN QUERY
    WITH ranked AS (
        SELECT s.memory_id AS id, s.ordinality::int AS ord, s.score, s.label, s.kind, s.content,
               coalesce(m.source_first_at, m.created_at) AS first_at, m.source_message_ids AS msgs
        FROM mneme.search(_context_anchors.conversation_id, _context_anchors.query, v_cand,
                          _context_anchors.query_embedding, _context_anchors.since, _context_anchors.until,
                          _context_anchors.at, _context_anchors.scope)
             WITH ORDINALITY AS s
        JOIN mneme.memories m ON m.id = s.memory_id AND m.conversation_id = ANY (v_convs)
    ), idf AS (  -- the query's terms weighed by their rarity among the scope's memories
        -- (by the whole key, one conversation and term at a time: a plan
        -- that filters a conversation's terms cannot be chosen)
        SELECT d.term, mneme._bm25_weight(v_n, d.df, v_k1) AS wt
        FROM (SELECT t.term, sum(t.df) AS df FROM mneme.bm25_terms t
              WHERE t.conversation_id = ANY (v_convs) AND t.term = ANY (v_terms)
              GROUP BY t.term) d
        WHERE d.df > 0
    ), turns AS (
        SELECT r.ord, msg.id, msg.words + CASE WHEN msg.role ~ mneme._word_separator()
                                       THEN mneme._words(msg.role) ELSE 1 END AS cost,  -- a one-word role costs 1: no regexp split
               msg.words, msg.terms,
               (row_number() OVER (PARTITION BY r.ord ORDER BY msg.id))::int AS pos
        FROM ranked r JOIN mneme.messages msg ON msg.id = ANY (r.msgs) AND msg.conversation_id = ANY (v_convs)
        WHERE r.kind = 'episodic' AND r.msgs IS NOT NULL
    ), meaning AS (  -- the turns' cosine rank to the query (its top context_candidates)
        SELECT d.message_id AS id, d.vrank
        FROM (SELECT x.message_id, (rank() OVER (ORDER BY x.distance, x.message_id))::int AS vrank
              FROM mneme._turn_distances(CASE WHEN v_meaning THEN ARRAY(SELECT t.id FROM turns t) END,
                                         _context_anchors.query_embedding, v_convs) x
              WHERE x.distance IS NOT NULL) d
        WHERE d.vrank <= v_cand
    ), avglen AS (
        SELECT greatest(avg(t.words), 1)::float8 AS len FROM turns t
    ), scored AS (  -- BM25 of each turn: its term frequencies, the scope's idf
        SELECT t.ord, t.id, t.pos, t.cost, (SELECT v.vrank FROM meaning v WHERE v.id = t.id) AS vrank,
               coalesce((SELECT sum(w.wt * mneme._bm25_tf(x.tf, t.words, v_k1, v_b, a.len))
                         FROM (SELECT u.lexeme, cardinality(u.positions)::float8 AS tf
                               FROM unnest(t.terms) AS u WHERE u.lexeme = ANY (v_terms)) x
                         JOIN idf w ON w.term = x.lexeme), 0) AS score
        FROM turns t, avglen a
    ), ranked_turns AS (
        SELECT s.*, (rank() OVER (ORDER BY s.score DESC))::int AS trank,
               bool_or(s.score > 0 OR s.vrank IS NOT NULL) OVER (PARTITION BY s.ord) AS matched
        FROM scored s
    ), anchors AS (
        -- Each matching turn by the reciprocal ranks of its episode, its
        -- BM25 rank among all the turns and its cosine rank; an episode
        -- with no matching turn on its first turn; a fact on itself.
        SELECT t.ord, t.pos AS apos, 1.0 / (v_rrf + t.ord) + CASE WHEN t.score > 0 THEN 1.0 / (v_rrf + t.trank) ELSE 0 END
                                     + coalesce(1.0 / (v_rrf + t.vrank), 0) AS fused
        FROM ranked_turns t WHERE t.score > 0 OR t.vrank IS NOT NULL
        UNION ALL
        SELECT t.ord, 1, 1.0 / (v_rrf + t.ord) FROM ranked_turns t WHERE NOT t.matched AND t.pos = 1
        UNION ALL
        SELECT r.ord, 0, 1.0 / (v_rrf + r.ord) + 1.0 / (v_rrf + r.ord)
        FROM ranked r WHERE r.kind <> 'episodic' OR r.msgs IS NULL
    ), anchor_order AS (
        SELECT a.*, (row_number() OVER (ORDER BY a.fused DESC, a.ord, a.apos))::int AS an FROM anchors a
    )
    SELECT a.an, a.ord, r.id, r.kind, r.label, r.score, r.first_at,
           s.id, abs(s.pos - a.apos)::int,
           coalesce(s.cost, 1 + mneme._words(r.content))::int
    FROM anchor_order a JOIN ranked r ON r.ord = a.ord
    LEFT JOIN scored s ON s.ord = a.ord AND a.apos > 0 AND abs(s.pos - a.apos) <= v_win
    ORDER BY a.an, abs(s.pos - a.apos), s.pos;
END
$function$;

CREATE OR REPLACE FUNCTION mneme._context_item(i_item integer, i_memory_id uuid, i_kind text, i_label text, i_score double precision, i_first_at timestamp with time zone, i_message_ids bigint[], i_words integer, i_conversation_ids uuid[])
 RETURNS TABLE(item integer, memory_id uuid, kind text, label text, score double precision, first_at timestamp with time zone, message_ids bigint[], words integer, text text)
 LANGUAGE plpgsql
 STABLE SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$#variable_conflict use_column
BEGIN
RETURN QUERY 
SELECT _context_item.i_item, _context_item.i_memory_id, _context_item.i_kind, _context_item.i_label, _context_item.i_score,
       _context_item.i_first_at,
       -- An episode: the turns shown; a fact: the messages it was said in
       -- (its provenance, source_message_ids).
       CASE WHEN cardinality(_context_item.i_message_ids) > 0
            THEN ARRAY(SELECT x FROM unnest(_context_item.i_message_ids) x ORDER BY x)
            ELSE (SELECT m.source_message_ids FROM mneme.memories m WHERE m.id = _context_item.i_memory_id AND m.conversation_id = ANY (_context_item.i_conversation_ids)) END,
       _context_item.i_words,
       CASE WHEN cardinality(_context_item.i_message_ids) > 0 THEN
           '### ' || to_char(_context_item.i_first_at AT TIME ZONE 'UTC', 'YYYY-MM-DD') || E'\n' ||
           (SELECT string_agg(msg.role || ': ' || msg.content, E'\n' ORDER BY msg.id)
            FROM mneme.messages msg WHERE msg.id = ANY (_context_item.i_message_ids) AND msg.conversation_id = ANY (_context_item.i_conversation_ids))
       ELSE '- ' || (SELECT m.content FROM mneme.memories m WHERE m.id = _context_item.i_memory_id AND m.conversation_id = ANY (_context_item.i_conversation_ids)) END
;
END$function$;

CREATE OR REPLACE FUNCTION mneme._equivalent_pending_job(kind text, conversation_id uuid, dedupe_key text, except_id bigint)
 RETURNS bigint
 LANGUAGE plpgsql
 STABLE SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$#variable_conflict use_column
DECLARE r bigint;
BEGIN

SELECT j.id FROM mneme.jobs j
WHERE j.state = 'pending' AND j.id IS DISTINCT FROM _equivalent_pending_job.except_id
  AND ((_equivalent_pending_job.dedupe_key IS NOT NULL AND j.dedupe_key = _equivalent_pending_job.dedupe_key)
       OR (_equivalent_pending_job.kind = 'segment' AND j.kind = 'segment'
           AND j.conversation_id = _equivalent_pending_job.conversation_id))
LIMIT 1

INTO r;
RETURN r;
END$function$;

CREATE OR REPLACE FUNCTION mneme._requeue_job(id bigint, run_at timestamp with time zone, error text, attempts integer)
 RETURNS text
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$
#variable_conflict use_column
DECLARE
    v_other bigint;
    v_job_conv uuid := mneme._job_conversation(_requeue_job.id);
BEGIN
    BEGIN
        UPDATE mneme.jobs
           SET state = 'pending', run_at = _requeue_job.run_at, attempts = _requeue_job.attempts, last_error = _requeue_job.error,
               locked_by = NULL, locked_until = NULL, updated_at = now()
         WHERE conversation_id = v_job_conv AND id = _requeue_job.id;
        RETURN 'pending';
    EXCEPTION WHEN unique_violation THEN
        SELECT mneme._equivalent_pending_job(j.kind, j.conversation_id, j.dedupe_key, j.id) INTO v_other
        FROM mneme.jobs j WHERE j.conversation_id = v_job_conv AND j.id = _requeue_job.id;
        UPDATE mneme.jobs
           SET state = 'done', finished_at = now(), updated_at = now(), locked_by = NULL, locked_until = NULL,
               last_error = format('not retried: equivalent pending job %s does this work; last error: %s',
                                   coalesce(v_other::text, '?'), coalesce(_requeue_job.error, 'none'))
         WHERE conversation_id = v_job_conv AND id = _requeue_job.id;
        RETURN 'done';
    END;
END
$function$;

CREATE OR REPLACE FUNCTION mneme._segment_followup(conversation_id uuid, through_id bigint, next_through_id bigint DEFAULT NULL::bigint)
 RETURNS bigint
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'pg_temp'
 SET jit TO 'off'
AS $function$
#variable_conflict use_column
DECLARE
    v__entered boolean := mneme._enter($1);
    v_last bigint;
BEGIN
    IF _segment_followup.conversation_id IS NULL OR _segment_followup.through_id IS NULL THEN
        RAISE EXCEPTION 'conversation_id and through_id must not be NULL' USING ERRCODE = '22004';
    END IF;
    SELECT max(m.id) INTO v_last FROM mneme.messages m
    WHERE m.conversation_id = _segment_followup.conversation_id AND m.consumed_at IS NULL
      AND m.id > _segment_followup.through_id;
    IF v_last IS NULL THEN
        -- A segment_now committed after the job read the queue: its mark is
        -- on a message the job read as open (the job stores a session it
        -- saw closed whole, so a mark still queued is one it did not see).
        SELECT max(m.id) INTO v_last FROM mneme.messages m
        WHERE m.conversation_id = _segment_followup.conversation_id AND m.consumed_at IS NULL AND m.ends_session;
    END IF;
    IF v_last IS NULL THEN
        RETURN NULL;
    END IF;
    RETURN mneme.enqueue_segment(_segment_followup.conversation_id, mneme._segment_payload('followup', false, v_last, v_last));
END
$function$;

CREATE OR REPLACE FUNCTION mneme.add_fact(conversation_id uuid, content text, message_ids bigint[], episode_id uuid DEFAULT NULL::uuid, label text DEFAULT NULL::text)
 RETURNS uuid
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'pg_temp'
 SET jit TO 'off'
AS $function$
#variable_conflict use_column
DECLARE
    v__entered boolean := mneme._enter($1);
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
$function$;

CREATE OR REPLACE FUNCTION mneme.add_message(conversation_id uuid, role text, content text, at timestamp with time zone DEFAULT NULL::timestamp with time zone)
 RETURNS bigint
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'pg_temp'
 SET jit TO 'off'
AS $function$
#variable_conflict use_column
DECLARE
    v__entered boolean := mneme._enter($1);
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

    -- The queue as it is before this message (the row lock above holds off
    -- other writers and the segment job's consumption): its last message,
    -- and its length as far as the rules below look (up to
    -- segment_max_messages: a backlogged conversation's queue is not
    -- counted whole at every message).
    SELECT max(x.id), count(*) INTO v_prev_id, v_queued
    FROM (SELECT m.id FROM mneme.messages m
          WHERE m.conversation_id = add_message.conversation_id AND m.consumed_at IS NULL
          ORDER BY m.id DESC LIMIT v_max_msgs) x;

    -- The conversation's tenant, read with the queue row above (the row's
    -- tenant trigger would read it again).
    INSERT INTO mneme.messages (conversation_id, role, content, created_at, tenant_id)
    VALUES (add_message.conversation_id, add_message.role, add_message.content, v_at, v_queue.tenant_id)
    RETURNING id INTO v_id;
    UPDATE mneme.message_queue SET last_message_at = v_at, updated_at = now() WHERE id = add_message.conversation_id;

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
$function$;

CREATE OR REPLACE FUNCTION mneme.add_pending_review(conversation_id uuid, memory_ids uuid[], query text)
 RETURNS void
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'pg_temp'
 SET jit TO 'off'
AS $function$
#variable_conflict use_column
DECLARE
    v__entered boolean := mneme._enter($1);
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
    -- serialization failure (40001): retry the call.
    FOR v_conv IN SELECT DISTINCT m.conversation_id FROM mneme.memories m
                  WHERE m.id = ANY (add_pending_review.memory_ids) LOOP
        v_live := v_live + (SELECT count(*) FROM (
            SELECT 1 FROM mneme.memories m
            WHERE m.conversation_id = v_conv AND m.id = ANY (add_pending_review.memory_ids)
            FOR KEY SHARE) x);
    END LOOP;
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
$function$;

CREATE OR REPLACE FUNCTION mneme.apply_review(memory_id uuid, rating text, stability double precision, difficulty double precision, fsrs_state text, reviewed_at timestamp with time zone, reviewer text, matched_queries text[] DEFAULT '{}'::text[], defaulted boolean DEFAULT false, job_id bigint DEFAULT NULL::bigint, evidence jsonb DEFAULT NULL::jsonb)
 RETURNS boolean
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'pg_temp'
 SET jit TO 'off'
AS $function$
#variable_conflict use_column
DECLARE
    v__entered boolean := mneme._enter(NULL);
    m         mneme.memories;
    v_conv    uuid;
    v_job     record;
    v_asked   uuid;
    v_queries text[] := coalesce(apply_review.matched_queries, '{}');
BEGIN
    IF apply_review.memory_id IS NULL OR apply_review.reviewed_at IS NULL THEN
        RAISE EXCEPTION 'memory_id and reviewed_at must not be NULL' USING ERRCODE = '22004';
    END IF;
    PERFORM mneme._check_time('reviewed_at', apply_review.reviewed_at);
    IF apply_review.evidence IS NOT NULL
       AND (jsonb_typeof(apply_review.evidence) <> 'object' OR pg_column_size(apply_review.evidence) > 4096) THEN
        RAISE EXCEPTION 'evidence must be a JSON object of at most 4 kB'
            USING ERRCODE = '22023', HINT = '{"score": ..., "thresholds": {...}} or {"reason": "..."}';
    END IF;
    IF apply_review.reviewed_at > now() + interval '1 day' THEN
        RAISE EXCEPTION 'reviewed_at must be a finite time not in the future, got %', apply_review.reviewed_at
            USING ERRCODE = '22008', HINT = 'the time of the conversation that used the memory';
    END IF;
    IF apply_review.rating IS NULL OR apply_review.rating NOT IN ('again', 'hard', 'good', 'easy') THEN
        RAISE EXCEPTION 'rating must be again, hard, good or easy, got %', mneme._quote_prefix(apply_review.rating)
            USING ERRCODE = '22023';
    END IF;
    IF apply_review.reviewer IS NULL OR apply_review.reviewer NOT IN ('llm', 'heuristic') THEN
        RAISE EXCEPTION 'reviewer must be llm or heuristic, got %', mneme._quote_prefix(apply_review.reviewer)
            USING ERRCODE = '22023';
    END IF;
    IF apply_review.fsrs_state IS NULL OR apply_review.fsrs_state NOT IN ('learning', 'review', 'relearning') THEN
        RAISE EXCEPTION 'fsrs_state must be learning, review or relearning, got %', mneme._quote_prefix(apply_review.fsrs_state)
            USING ERRCODE = '22023';
    END IF;
    IF apply_review.stability IS NULL OR apply_review.difficulty IS NULL
       OR NOT mneme._fsrs_ok(apply_review.stability, apply_review.difficulty) THEN
        RAISE EXCEPTION 'FSRS state out of range: stability % (> 0), difficulty % (1..10)', apply_review.stability, apply_review.difficulty
            USING ERRCODE = '22023';
    END IF;

    v_conv := mneme._memory_conversation(apply_review.memory_id);
    SELECT * INTO m FROM mneme.memories WHERE conversation_id = v_conv AND id = apply_review.memory_id FOR UPDATE;
    IF NOT FOUND OR m.status NOT IN ('active', 'inactive') THEN
        RETURN false;  -- an inactive memory is reviewed and so active again (trigger memories_reactivate)
    END IF;
    IF apply_review.reviewed_at <= m.last_reviewed_at THEN
        RETURN false; -- stale: a newer review (or the creation) is already applied
    END IF;

    IF apply_review.job_id IS NOT NULL THEN
        -- The job as it is now, locked against an erase until this
        -- transaction ends (its conversation first: on Citus a lock names
        -- the shard).
        SELECT j.conversation_id INTO v_asked FROM mneme.jobs j WHERE j.id = apply_review.job_id;
        SELECT j.id, j.kind, j.tenant_id, j.payload INTO v_job FROM mneme.jobs j
        WHERE j.conversation_id = v_asked AND j.id = apply_review.job_id FOR SHARE;
        IF NOT FOUND THEN
            RAISE EXCEPTION 'job % does not exist (its conversation was erased?)', apply_review.job_id USING ERRCODE = 'P0002';
        END IF;
        -- A job touches only rows of its own conversation's tenant.
        IF v_job.tenant_id IS DISTINCT FROM m.tenant_id THEN
            RAISE EXCEPTION 'job % of tenant % may not review memory % of another tenant', apply_review.job_id, v_job.tenant_id, m.id
                USING ERRCODE = '42501', HINT = 'a review job names only memories its conversation''s tenant retrieved';
        END IF;
        -- A review job's handler read its payload before the model call; an
        -- erase since then took the retrievals of an erased memory (and
        -- every copy of their queries) out of it. Only the queries the
        -- payload still records for this memory are kept.
        IF v_job.kind = 'review' THEN
            v_queries := ARRAY(
                SELECT x FROM unnest(v_queries) WITH ORDINALITY AS u(x, o)
                WHERE EXISTS (SELECT 1 FROM jsonb_array_elements(CASE WHEN jsonb_typeof(v_job.payload -> 'reviews') = 'array'
                                                                      THEN v_job.payload -> 'reviews' ELSE '[]' END) e
                              WHERE e ->> 'query' = x AND jsonb_typeof(e -> 'memory_ids') = 'array'
                                AND (e -> 'memory_ids') ? m.id::text)
                ORDER BY o);
        END IF;
    END IF;

    INSERT INTO mneme.review_log (memory_id, conversation_id, job_id, rating, reviewer, defaulted,
        stability_before, stability_after, difficulty_before, difficulty_after,
        state_before, state_after, last_reviewed_before, reviewed_at, matched_queries, asked_in, evidence)
    VALUES (m.id, m.conversation_id, apply_review.job_id, apply_review.rating, apply_review.reviewer, coalesce(apply_review.defaulted, false),
        m.stability, apply_review.stability, m.difficulty, apply_review.difficulty,
        m.fsrs_state, apply_review.fsrs_state, m.last_reviewed_at, apply_review.reviewed_at, v_queries, v_asked, apply_review.evidence);

    UPDATE mneme.memories
    SET stability = apply_review.stability, difficulty = apply_review.difficulty, fsrs_state = apply_review.fsrs_state,
        last_reviewed_at = apply_review.reviewed_at, review_count = review_count + 1, updated_at = now()
    WHERE conversation_id = m.conversation_id AND id = m.id;
    RETURN true;
END
$function$;

CREATE OR REPLACE FUNCTION mneme.apply_revision(memory_id uuid, action text, target_id uuid, reason text, classifier text, slot text DEFAULT NULL::text, force boolean DEFAULT false, job_id bigint DEFAULT NULL::bigint)
 RETURNS text
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'pg_temp'
 SET jit TO 'off'
AS $function$
#variable_conflict use_column
DECLARE
    v__entered boolean := mneme._enter(NULL);
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
    PERFORM mneme._set_local('mneme.actor', 'revise:' || apply_revision.classifier);
    PERFORM mneme._mark('event_reason', left(v_note, 500));
    v_slot := CASE WHEN apply_revision.slot IS NULL OR mneme._is_blank(apply_revision.slot) THEN v_new.slot
                   ELSE lower(btrim(apply_revision.slot)) END;
    IF v_slot IS DISTINCT FROM v_new.slot THEN
        UPDATE mneme.memories m SET slot = v_slot WHERE m.conversation_id = v_new.conversation_id AND m.id = v_new.id;
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
    RETURN v_action;
END
$function$;

CREATE OR REPLACE FUNCTION mneme.bind_login(login text, tenant text)
 RETURNS void
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'pg_temp'
 SET jit TO 'off'
AS $function$
#variable_conflict use_column
DECLARE
    v__entered boolean := mneme._enter(NULL);
    v_now timestamptz := now();
    v_by  name := session_user;
BEGIN
    PERFORM mneme._require_unbound('bind logins');
    IF bind_login.login IS NULL OR bind_login.tenant IS NULL THEN
        RAISE EXCEPTION 'login and tenant must not be NULL' USING ERRCODE = '22004';
    END IF;
    IF NOT EXISTS (SELECT 1 FROM pg_catalog.pg_roles r WHERE r.rolname = bind_login.login AND r.rolcanlogin) THEN
        RAISE EXCEPTION 'no login role %', mneme._quote_prefix(bind_login.login) USING ERRCODE = '22023',
            HINT = 'CREATE ROLE ... LOGIN IN ROLE mneme_app first';
    END IF;
    IF NOT EXISTS (SELECT 1 FROM mneme.tenants t WHERE t.id = bind_login.tenant) THEN
        RAISE EXCEPTION 'unknown tenant %', mneme._quote_prefix(bind_login.tenant) USING ERRCODE = '22023',
            HINT = 'SELECT mneme.create_tenant(...) first';
    END IF;
    IF pg_catalog.pg_has_role(bind_login.login, 'mneme_worker', 'MEMBER') THEN
        RAISE EXCEPTION 'login % is a sidecar login (mneme_worker): it serves every tenant', bind_login.login
            USING ERRCODE = '22023',
                  HINT = format('bind a login of the tenant''s application instead: CREATE ROLE %s_app LOGIN IN ROLE mneme_app; '
                                'SELECT mneme.bind_login(''%s_app'', %L); the sidecar''s login stays unbound',
                                bind_login.tenant, bind_login.tenant, bind_login.tenant);
    END IF;
    -- bound_at and bound_by given as values: Citus refuses functions that
    -- are not IMMUTABLE in the DO UPDATE of a (reference) table's insert
    INSERT INTO mneme.tenant_logins (login, tenant_id, bound_at, bound_by)
    VALUES (bind_login.login, bind_login.tenant, v_now, v_by)
    ON CONFLICT (login) DO UPDATE SET tenant_id = EXCLUDED.tenant_id, bound_at = EXCLUDED.bound_at, bound_by = EXCLUDED.bound_by;
END
$function$;

CREATE OR REPLACE FUNCTION mneme.bm25_reindex()
 RETURNS bigint
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'pg_temp'
 SET jit TO 'off'
AS $function$
DECLARE
    v__entered boolean := mneme._enter(NULL);
    v_ids   uuid[];
    v_convs uuid[];
BEGIN
    LOCK TABLE mneme.memories IN SHARE MODE;  -- no writes while the statistics are rebuilt
    IF mneme._is_worker() THEN
        -- The sidecar's role (or a superuser) sees every tenant's memories:
        -- everything is rebuilt. On Citus by DELETE: a TRUNCATE is DDL on
        -- the shards, which Citus refuses in a transaction that has read
        -- them over several connections (a check that compares before and
        -- after in one transaction).
        IF mneme._distributed('mneme.bm25_postings') THEN
            DELETE FROM mneme.bm25_postings;
            DELETE FROM mneme.bm25_docs;
            DELETE FROM mneme.bm25_terms;
            DELETE FROM mneme.bm25_stats;
        ELSE
            TRUNCATE mneme.bm25_postings, mneme.bm25_docs, mneme.bm25_terms, mneme.bm25_stats;
        END IF;
        SELECT array_agg(id) INTO v_ids FROM mneme.memories WHERE status = 'active';
    ELSE
        -- Anyone else sees one tenant (row security): only its
        -- conversations' statistics are removed, and rebuilt.
        v_convs := ARRAY(SELECT q.id FROM mneme.message_queue q UNION SELECT m.conversation_id FROM mneme.memories m);
        DELETE FROM mneme.bm25_postings p WHERE p.conversation_id = ANY (v_convs);
        DELETE FROM mneme.bm25_docs d WHERE d.conversation_id = ANY (v_convs);
        DELETE FROM mneme.bm25_terms t WHERE t.conversation_id = ANY (v_convs);
        DELETE FROM mneme.bm25_stats s WHERE s.conversation_id = ANY (v_convs);
        SELECT array_agg(id) INTO v_ids FROM mneme.memories WHERE status = 'active' AND conversation_id = ANY (v_convs);
    END IF;
    PERFORM mneme._bm25_apply('{}', coalesce(v_ids, '{}'));
    RETURN coalesce(cardinality(v_ids), 0);
END
$function$;

CREATE OR REPLACE FUNCTION mneme.bm25_search(conversation_id uuid, query text, k integer DEFAULT 100, since timestamp with time zone DEFAULT NULL::timestamp with time zone, until timestamp with time zone DEFAULT NULL::timestamp with time zone)
 RETURNS TABLE(memory_id uuid, score double precision, rank integer)
 LANGUAGE plpgsql
 STABLE SECURITY DEFINER ROWS 100
 SET search_path TO 'pg_catalog', 'pg_temp'
 SET jit TO 'off'
AS $function$
#variable_conflict use_column
DECLARE
    v__entered boolean := mneme._enter($1);
BEGIN
    IF bm25_search.conversation_id IS NULL OR bm25_search.query IS NULL OR bm25_search.k IS NULL THEN
        RAISE EXCEPTION 'conversation_id, query and k must not be NULL' USING ERRCODE = '22004';
    END IF;
    IF bm25_search.k < 1 THEN
        RAISE EXCEPTION 'k must be at least 1' USING ERRCODE = '22023';
    END IF;
    PERFORM mneme._check_time('since', bm25_search.since);
    PERFORM mneme._check_time('until', bm25_search.until);
    IF bm25_search.since > bm25_search.until THEN
        RAISE EXCEPTION 'since (%) is after until (%)', bm25_search.since, bm25_search.until USING ERRCODE = '22023',
            HINT = 'the range is since <= created_at < until';
    END IF;
    IF NOT mneme._readable_conversation(bm25_search.conversation_id) THEN
        RETURN;  -- another tenant's: its statistics are not this session's to see
    END IF;
    RETURN QUERY SELECT * FROM mneme._bm25_search(ARRAY[bm25_search.conversation_id], bm25_search.query, bm25_search.k,
                                                  bm25_search.since, bm25_search.until);
END
$function$;

CREATE OR REPLACE FUNCTION mneme.claim_jobs(worker text, max_jobs integer, lease interval, max_attempts integer DEFAULT NULL::integer)
 RETURNS SETOF mneme.jobs
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'pg_temp'
 SET jit TO 'off'
AS $function$
#variable_conflict use_column
DECLARE
    v__entered boolean := mneme._enter(NULL);
    v_n   bigint;
    v_ids bigint[];
BEGIN
    IF claim_jobs.worker IS NULL OR claim_jobs.worker = '' THEN
        RAISE EXCEPTION 'worker (the worker id) must not be empty' USING ERRCODE = '22023';
    END IF;
    -- Stored in locked_by and quoted in last_error when its lease expires.
    PERFORM mneme._check_length('worker', claim_jobs.worker, 256);
    IF claim_jobs.max_jobs IS NULL OR claim_jobs.max_jobs < 1 THEN
        RAISE EXCEPTION 'max_jobs must be at least 1, got %', coalesce(claim_jobs.max_jobs::text, 'NULL') USING ERRCODE = '22023';
    END IF;
    IF claim_jobs.lease IS NULL OR claim_jobs.lease <= interval '0' THEN
        RAISE EXCEPTION 'lease must be a positive interval, got %', coalesce(claim_jobs.lease::text, 'NULL') USING ERRCODE = '22023';
    END IF;
    IF claim_jobs.max_attempts < 1 THEN
        RAISE EXCEPTION 'max_attempts must be at least 1, got %', claim_jobs.max_attempts USING ERRCODE = '22023';
    END IF;
    IF mneme._distributed('mneme.jobs') THEN
        RETURN QUERY SELECT * FROM mneme._claim_jobs_distributed(claim_jobs.worker, claim_jobs.max_jobs, claim_jobs.lease, claim_jobs.max_attempts);
        RETURN;
    END IF;
    -- A job whose lease expired on its last allowed attempt crashed or hung
    -- its worker every time: fail it instead of handing it out again.
    PERFORM mneme._fail_expired_jobs(claim_jobs.max_attempts);
    -- Expired leases first (their worker is gone), then due pending jobs.
    RETURN QUERY
    WITH c AS (
        SELECT x.id FROM mneme.jobs x
         WHERE x.state = 'running' AND x.locked_until < now()
         ORDER BY x.locked_until, x.id
         LIMIT claim_jobs.max_jobs
           FOR UPDATE SKIP LOCKED)
    UPDATE mneme.jobs j
       SET attempts = j.attempts + 1, locked_by = claim_jobs.worker, locked_until = now() + claim_jobs.lease, updated_at = now()
      FROM c
     WHERE j.id = c.id
    RETURNING j.*;
    GET DIAGNOSTICS v_n = ROW_COUNT;
    IF v_n >= claim_jobs.max_jobs THEN
        RETURN;
    END IF;
    -- Due pending jobs, tenants served in turn: oldest first across
    -- tenants would let one tenant's burst (thousands of revise jobs from one
    -- message) starve every other tenant's segmentation. The candidates are
    -- each tenant's oldest ready jobs (one index probe per tenant with ready
    -- jobs, jobs_ready_tenant_idx; never a scan of the whole queue), taken in
    -- rounds: every tenant's first before anyone's second, and within a
    -- round the tenant served longest ago (mneme.job_turns) first. A few
    -- spare candidates per tenant leave room for claims running at once.
    v_ids := ARRAY(
        WITH RECURSIVE t AS (
            (SELECT x.tenant_id FROM mneme.jobs x
              WHERE x.state = 'pending' AND x.run_at <= now()
              ORDER BY x.tenant_id LIMIT 1)
            UNION ALL
            SELECT (SELECT x.tenant_id FROM mneme.jobs x
                     WHERE x.state = 'pending' AND x.run_at <= now() AND x.tenant_id > t.tenant_id
                     ORDER BY x.tenant_id LIMIT 1)
              FROM t WHERE t.tenant_id IS NOT NULL)
        SELECT y.id
          FROM t
          CROSS JOIN LATERAL (
                SELECT x.id, x.run_at, row_number() OVER (ORDER BY x.run_at, x.id) AS rn
                  FROM (SELECT x.id, x.run_at FROM mneme.jobs x
                         WHERE x.state = 'pending' AND x.run_at <= now() AND x.tenant_id = t.tenant_id
                         ORDER BY x.run_at, x.id
                         LIMIT 2 * (claim_jobs.max_jobs - v_n) + 4) x) y
          LEFT JOIN mneme.job_turns s ON s.tenant_id = t.tenant_id
         WHERE t.tenant_id IS NOT NULL
         ORDER BY y.rn, s.served_at NULLS FIRST, y.run_at, y.id);
    RETURN QUERY
    WITH c AS (
        SELECT x.id FROM unnest(v_ids) WITH ORDINALITY AS u(id, ord)
          JOIN mneme.jobs x ON x.id = u.id
         WHERE x.state = 'pending' AND x.run_at <= now()
         ORDER BY u.ord
         LIMIT claim_jobs.max_jobs - v_n
           FOR UPDATE OF x SKIP LOCKED),
    claimed AS (
        UPDATE mneme.jobs j
           SET state = 'running', attempts = j.attempts + 1,
               locked_by = claim_jobs.worker, locked_until = now() + claim_jobs.lease, updated_at = now()
          FROM c
         WHERE j.id = c.id
        RETURNING j.*),
    served AS (
        INSERT INTO mneme.job_turns AS s (tenant_id, served_at)
        SELECT d.tenant_id, clock_timestamp() FROM (SELECT DISTINCT claimed.tenant_id FROM claimed) d
        ON CONFLICT (tenant_id) DO UPDATE SET served_at = excluded.served_at)
    SELECT * FROM claimed;
END
$function$;

CREATE OR REPLACE FUNCTION mneme.cleanup(dry_run boolean DEFAULT false)
 RETURNS TABLE(action text, count bigint)
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'pg_temp'
 SET jit TO 'off'
AS $function$DECLARE
    v__entered boolean := mneme._enter(NULL);
BEGIN
RETURN QUERY  SELECT * FROM mneme._cleanup(now(), cleanup.dry_run) ;
END$function$;

CREATE OR REPLACE FUNCTION mneme.complete_job(id bigint, worker text, attempt integer)
 RETURNS boolean
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'pg_temp'
 SET jit TO 'off'
AS $function$
#variable_conflict use_column
DECLARE
    v__entered boolean := mneme._enter(NULL);
    v_job_conv uuid := mneme._job_conversation(complete_job.id);
BEGIN
    UPDATE mneme.jobs
       SET state = 'done', finished_at = now(), updated_at = now(),
           locked_by = NULL, locked_until = NULL
     WHERE conversation_id = v_job_conv AND id = complete_job.id AND state = 'running' AND locked_by = complete_job.worker AND attempts = complete_job.attempt;
    RETURN FOUND;
END
$function$;

CREATE OR REPLACE FUNCTION mneme.context(conversation_id uuid, query text, budget integer DEFAULT 1000, query_embedding real[] DEFAULT NULL::real[], since timestamp with time zone DEFAULT NULL::timestamp with time zone, until timestamp with time zone DEFAULT NULL::timestamp with time zone, at timestamp with time zone DEFAULT now(), scope text DEFAULT 'conversation'::text, record boolean DEFAULT true)
 RETURNS text
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'pg_temp'
 SET jit TO 'off'
AS $function$
DECLARE
    v__entered boolean := mneme._enter($1);
    v_md  text;
    v_ids uuid[];
BEGIN
    IF context.record IS NULL THEN
        RAISE EXCEPTION 'record must not be NULL' USING ERRCODE = '22004';
    END IF;
    IF context.record THEN
        PERFORM mneme._require_primary('mneme.context');
    END IF;
    SELECT string_agg(i.text, E'\n\n' ORDER BY i.item), array_agg(i.memory_id ORDER BY i.item)
    INTO v_md, v_ids
    FROM mneme.context_items(context.conversation_id, context.query, context.budget, context.query_embedding,
                             context.since, context.until, context.at, context.scope) i;
    IF context.record AND cardinality(v_ids) > 0 THEN
        PERFORM mneme.add_pending_review(context.conversation_id, v_ids, context.query);
    END IF;
    RETURN coalesce(v_md, '');
END
$function$;

CREATE OR REPLACE FUNCTION mneme.context_items(conversation_id uuid, query text, budget integer DEFAULT 1000, query_embedding real[] DEFAULT NULL::real[], since timestamp with time zone DEFAULT NULL::timestamp with time zone, until timestamp with time zone DEFAULT NULL::timestamp with time zone, at timestamp with time zone DEFAULT now(), scope text DEFAULT 'conversation'::text)
 RETURNS TABLE(item integer, memory_id uuid, kind text, label text, score double precision, first_at timestamp with time zone, message_ids bigint[], words integer, text text)
 LANGUAGE plpgsql
 STABLE SECURITY DEFINER ROWS 20
 SET search_path TO 'pg_catalog', 'pg_temp'
 SET jit TO 'off'
AS $function$
#variable_conflict use_column
DECLARE
    v__entered boolean := mneme._enter($1);
    v_left   int := context_items.budget;
    v_slots  mneme.context_slot[] := '{}';  -- per candidate memory, by rank
    v_slot   mneme.context_slot;
    v_order  int[] := '{}';     -- the ranks in the order their memories got room
    v_used   bigint[] := '{}';  -- every turn taken: no turn twice
    v_convs  uuid[];            -- the scope's conversations
    v_an     int;               -- the anchor being filled, and whether it is in
    v_anchor boolean;
    v_cost   int;
    -- the anchored turns, in the order the budget takes them
    a_an     int[];
    a_rank   int[];
    a_mem    uuid[];
    a_kind   text[];
    a_label  text[];
    a_score  float8[];
    a_first  timestamptz[];
    a_msg    bigint[];
    a_dist   int[];
    a_cost   int[];
    v_stages int[];             -- the budgets filled in turn, smallest first
    v_stage  int;
    v_spent  int := 0;          -- the words taken so far
    v_first  int[] := '{}';     -- per rank, the first anchor it got room by
    v_b      int;
    i        int;
BEGIN
    IF context_items.budget IS NULL THEN
        RAISE EXCEPTION 'budget must not be NULL' USING ERRCODE = '22004';
    END IF;
    IF context_items.budget < 1 OR context_items.budget > mneme._context_budget_max() THEN
        RAISE EXCEPTION 'budget must be 1 to % words, got %', mneme._context_budget_max(), context_items.budget
            USING ERRCODE = '22023',
            HINT = 'the budget is the most words the context holds (whitespace-separated, headings and speakers included)';
    END IF;
    -- search (inside _context_anchors) checks every other argument before
    -- anything is read; the scope first, for the statistics.
    v_convs := mneme._scope_conversations(context_items.conversation_id, context_items.scope);
    SELECT array_agg(x.anchor ORDER BY x.ordinality), array_agg(x.rank ORDER BY x.ordinality), array_agg(x.memory_id ORDER BY x.ordinality),
           array_agg(x.kind ORDER BY x.ordinality), array_agg(x.label ORDER BY x.ordinality), array_agg(x.score ORDER BY x.ordinality),
           array_agg(x.first_at ORDER BY x.ordinality), array_agg(x.msg_id ORDER BY x.ordinality), array_agg(x.distance ORDER BY x.ordinality),
           array_agg(x.cost ORDER BY x.ordinality)
    INTO a_an, a_rank, a_mem, a_kind, a_label, a_score, a_first, a_msg, a_dist, a_cost
    FROM mneme._context_anchors(context_items.conversation_id, context_items.query,
                                context_items.query_embedding, context_items.since, context_items.until,
                                context_items.at, context_items.scope, v_convs) WITH ORDINALITY AS x;
    -- A larger budget never loses what a smaller one had. Filling in
    -- anchor order and leaving out what does not fit (so that a shorter
    -- turn after it may fit) is not monotone by itself: with twice the
    -- budget a long turn fits early and crowds out a short one taken
    -- before. So the budget is filled in stages, budget / 2^k for k = n ..
    -- 0, each stage going on from what the one
    -- before took: the stages of budget 2B are those of B and one more, so
    -- its items hold every turn and fact of B's (TestContextBudgetMonotone).
    -- Stages stop at 100 words (B >= 100 for the guarantee): smaller ones
    -- fill the budget with short turns of low rank first, and cost recall
    -- (LoCoMo at 200 words 0.606 with stages down to 1 word, against 0.627
    -- without stages; docs/eval.md, "Budget monotonicity").
    v_b := context_items.budget;
    WHILE v_b >= 100 OR v_b = context_items.budget LOOP
        v_stages := v_b || v_stages;
        v_b := v_b / 2;
    END LOOP;
    FOREACH v_stage IN ARRAY v_stages LOOP
        v_left := v_stage - v_spent;
        v_an := NULL;
        FOR i IN 1 .. coalesce(cardinality(a_an), 0) LOOP
            v_slot := coalesce(v_slots[a_rank[i]], ROW(a_mem[i], a_kind[i], a_label[i], a_score[i], a_first[i], 0, '{}')::mneme.context_slot);
            IF a_msg[i] IS NULL THEN  -- a fact: whole or not at all ("- " and its words)
                IF v_slot.words = 0 AND a_cost[i] <= v_left THEN
                    v_slot.words := a_cost[i];
                    v_left := v_left - a_cost[i];
                    v_spent := v_spent + a_cost[i];
                    v_order := v_order || a_rank[i];
                    v_first[a_rank[i]] := a_an[i];
                    v_slots[a_rank[i]] := v_slot;
                END IF;
                CONTINUE;
            END IF;
            IF v_an IS DISTINCT FROM a_an[i] THEN
                v_an := a_an[i];
                v_anchor := false;  -- a window's neighbours come only with its matched turn
            END IF;
            IF a_msg[i] = ANY (v_used) THEN
                v_anchor := v_anchor OR a_dist[i] = 0;  -- already in: no turn twice
                CONTINUE;
            END IF;
            -- A turn that does not fit is left out; a shorter one after it may
            -- fit. An episode's first turn brings its "### date" heading (2 words).
            v_cost := a_cost[i] + CASE WHEN v_slot.words = 0 THEN 2 ELSE 0 END;
            IF (a_dist[i] = 0 OR v_anchor) AND v_cost <= v_left THEN
                IF v_slot.words = 0 THEN
                    v_order := v_order || a_rank[i];
                END IF;
                v_slot.words := v_slot.words + v_cost;
                v_slot.message_ids := v_slot.message_ids || a_msg[i];
                v_left := v_left - v_cost;
                v_spent := v_spent + v_cost;
                v_first[a_rank[i]] := least(coalesce(v_first[a_rank[i]], a_an[i]), a_an[i]);
                v_used := v_used || a_msg[i];
                v_anchor := v_anchor OR a_dist[i] = 0;
                v_slots[a_rank[i]] := v_slot;
            END IF;
        END LOOP;
    END LOOP;
    -- In the order of the anchors they got room by (the stages took some
    -- sooner than their anchor's turn came).
    v_order := ARRAY(SELECT u.o FROM unnest(v_order) AS u(o) ORDER BY v_first[u.o], u.o);
    -- The items: each memory once. Chosen by rank; shown (setting
    -- context_order) newest first, by the latest turn shown (a fact: its
    -- time), so where two memories disagree the later one is read first
    -- (docs/revision.md), or in the order each first got room (rank).
    IF mneme.setting('context_order') #>> '{}' = 'newest' THEN
        v_order := ARRAY(SELECT u.o FROM unnest(v_order) WITH ORDINALITY AS u(o, n)
                         LEFT JOIN (SELECT x.o, max(msg.created_at) AS at
                                    FROM unnest(v_order) AS x(o)
                                    JOIN mneme.messages msg ON msg.id = ANY ((v_slots[x.o]).message_ids)
                                                           AND msg.conversation_id = ANY (v_convs)
                                    GROUP BY x.o) t ON t.o = u.o
                         LEFT JOIN (SELECT x.o, coalesce(m.source_last_at, m.created_at) AS at
                                    FROM unnest(v_order) AS x(o)
                                    JOIN mneme.memories m ON m.id = (v_slots[x.o]).memory_id
                                                           AND m.conversation_id = ANY (v_convs)) f ON f.o = u.o
                         ORDER BY coalesce(t.at, f.at) DESC, u.n);
    END IF;
    -- One statement for all the items, not one per item: _context_item (a
    -- SQL function) is then planned once per call of context_items rather
    -- than once per item (0.1 to 0.2 ms each; docs/context.md, Latency).
    RETURN QUERY
    SELECT ci.*
    FROM unnest(v_order) WITH ORDINALITY AS o(ord, i),
         LATERAL mneme._context_item(o.i::int, (v_slots[o.ord]).memory_id, (v_slots[o.ord]).kind,
             (v_slots[o.ord]).label, (v_slots[o.ord]).score, (v_slots[o.ord]).first_at,
             (v_slots[o.ord]).message_ids, (v_slots[o.ord]).words, v_convs) AS ci
    ORDER BY o.i;
END
$function$;

CREATE OR REPLACE FUNCTION mneme.context_messages(conversation_id uuid, message_ids bigint[])
 RETURNS TABLE(id bigint, role text, content text, created_at timestamp with time zone)
 LANGUAGE plpgsql
 STABLE SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'pg_temp'
 SET jit TO 'off'
AS $function$
DECLARE
    v__entered boolean := mneme._enter($1);
BEGIN
    IF context_messages.conversation_id IS NULL OR message_ids IS NULL THEN
        RAISE EXCEPTION 'conversation_id and message_ids must not be NULL' USING ERRCODE = '22004';
    END IF;
    RETURN QUERY
    SELECT m.id, m.role, m.content, m.created_at
    FROM mneme.messages m
    WHERE m.conversation_id = context_messages.conversation_id AND m.id = ANY (message_ids)
    ORDER BY m.id;
END
$function$;

CREATE OR REPLACE FUNCTION mneme.conversation_llm_usage(conversation_id uuid)
 RETURNS TABLE(calls bigint, failed_calls bigint, prompt_tokens bigint, completion_tokens bigint, estimated_cost numeric)
 LANGUAGE plpgsql
 STABLE SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'pg_temp'
 SET jit TO 'off'
AS $function$
DECLARE
    v__entered boolean := mneme._enter($1);
    v_prices jsonb := mneme.setting('llm_prices');
BEGIN
    IF conversation_llm_usage.conversation_id IS NULL THEN
        RAISE EXCEPTION 'conversation_id must not be NULL' USING ERRCODE = '22004';
    END IF;
    RETURN QUERY
    SELECT count(*), count(*) FILTER (WHERE c.outcome <> 'ok'), coalesce(sum(c.prompt_tokens), 0)::bigint,
           coalesce(sum(c.completion_tokens), 0)::bigint,
           coalesce(sum(mneme._llm_cost(v_prices, c.model, c.prompt_tokens, c.completion_tokens)), 0)
    FROM mneme.llm_calls c
    WHERE c.conversation_id = conversation_llm_usage.conversation_id;
END
$function$;

CREATE OR REPLACE FUNCTION mneme.conversation_memories(conversation_id uuid)
 RETURNS TABLE(memory_id uuid, kind text, status text, label text, pinned boolean, title text, summary text, content text, source_message_ids bigint[], source_first_at timestamp with time zone, stability double precision, last_reviewed_at timestamp with time zone, review_count integer, confidence_score real, supersedes_id uuid, created_at timestamp with time zone)
 LANGUAGE plpgsql
 STABLE SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'pg_temp'
 SET jit TO 'off'
AS $function$
#variable_conflict use_column
DECLARE
    v__entered boolean := mneme._enter($1);
BEGIN
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
$function$;

CREATE OR REPLACE FUNCTION mneme.conversation_messages(conversation_id uuid)
 RETURNS TABLE(message_id bigint, role text, content text, created_at timestamp with time zone, consumed_at timestamp with time zone, memory_id uuid, set_aside_job_id bigint)
 LANGUAGE plpgsql
 STABLE SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'pg_temp'
 SET jit TO 'off'
AS $function$
#variable_conflict use_column
DECLARE
    v__entered boolean := mneme._enter($1);
BEGIN
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
$function$;

CREATE OR REPLACE FUNCTION mneme.conversation_titles(conversation_ids uuid[])
 RETURNS TABLE(conversation_id uuid, speakers text[], first_message text, first_message_at timestamp with time zone)
 LANGUAGE plpgsql
 STABLE SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'pg_temp'
 SET jit TO 'off'
AS $function$
#variable_conflict use_column
DECLARE
    v__entered boolean := mneme._enter(NULL);
BEGIN
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
$function$;

CREATE OR REPLACE FUNCTION mneme.conversations(k integer DEFAULT 100)
 RETURNS TABLE(conversation_id uuid, messages bigint, queued_messages bigint, memories bigint, active_memories bigint, last_message_at timestamp with time zone, pending_jobs bigint, failed_jobs bigint, pending_reviews integer)
 LANGUAGE plpgsql
 STABLE SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'pg_temp'
 SET jit TO 'off'
AS $function$
#variable_conflict use_column
DECLARE
    v__entered boolean := mneme._enter(NULL);
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
$function$;

CREATE OR REPLACE FUNCTION mneme.create_episode(conversation_id uuid, message_ids bigint[], content text, summary text, embedding real[], surprise real, label text, pinned boolean, stability double precision, difficulty double precision, fsrs_state text DEFAULT NULL::text)
 RETURNS uuid
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'pg_temp'
 SET jit TO 'off'
AS $function$DECLARE
    v__entered boolean := mneme._enter($1); r uuid;
BEGIN

SELECT e.memory_id
FROM mneme.create_episodes(create_episode.conversation_id, jsonb_build_array(jsonb_strip_nulls(jsonb_build_object(
    'message_ids', to_jsonb(create_episode.message_ids), 'content', create_episode.content,
    'summary', create_episode.summary, 'embedding', to_jsonb(create_episode.embedding),
    'surprise', create_episode.surprise, 'label', create_episode.label, 'pinned', create_episode.pinned,
    'stability', create_episode.stability, 'difficulty', create_episode.difficulty,
    'fsrs_state', create_episode.fsrs_state)))) e

INTO r;
RETURN r;
END$function$;

CREATE OR REPLACE FUNCTION mneme.create_episodes(conversation_id uuid, episodes jsonb)
 RETURNS TABLE(episode integer, memory_id uuid, label text, stability double precision)
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'pg_temp'
 SET jit TO 'off'
AS $function$
#variable_conflict use_column
DECLARE
    v__entered boolean := mneme._enter($1);
    e        record;
    v_src    record;
    v_label  text;
    v_rows   jsonb := '[]';  -- per episode what SQL resolved: its messages, their span, the label
BEGIN
    IF create_episodes.conversation_id IS NULL THEN
        RAISE EXCEPTION 'conversation_id must not be NULL' USING ERRCODE = '22004';
    END IF;
    IF create_episodes.episodes IS NULL OR jsonb_typeof(create_episodes.episodes) <> 'array'
       OR jsonb_array_length(create_episodes.episodes) = 0 THEN
        RAISE EXCEPTION 'episodes must be a non-empty JSON array' USING ERRCODE = '22023',
            HINT = 'one object per episode: message_ids, content, summary, embedding, surprise, label, pinned';
    END IF;
    FOR e IN SELECT x.ep, x.n::int AS n FROM jsonb_array_elements(create_episodes.episodes) WITH ORDINALITY AS x(ep, n) LOOP
        IF jsonb_typeof(e.ep) <> 'object' OR jsonb_typeof(e.ep -> 'message_ids') NOT IN ('array', 'null') THEN
            RAISE EXCEPTION 'episode %: an object with an array message_ids', e.n USING ERRCODE = '22023';
        END IF;
        IF e.ep ->> 'content' IS NULL OR mneme._is_blank(e.ep ->> 'content') THEN
            RAISE EXCEPTION 'episode %: content must not be empty', e.n USING ERRCODE = '22023';
        END IF;
        IF (e.ep ->> 'surprise') IS NULL OR (e.ep ->> 'surprise')::real < 0 OR (e.ep ->> 'surprise')::real > 1 THEN
            RAISE EXCEPTION 'episode %: surprise must be between 0 and 1, got %', e.n, e.ep ->> 'surprise' USING ERRCODE = '22023';
        END IF;
        IF e.ep ->> 'label' IS NOT NULL THEN
            PERFORM mneme.check_label(e.ep ->> 'label');  -- the one vocabulary (sql/400-labels.sql)
        END IF;
        -- NULL FSRS state: the initial state of the label (trigger memories_initial_state).
        IF NOT mneme._fsrs_ok((e.ep ->> 'stability')::float8, (e.ep ->> 'difficulty')::float8) THEN
            RAISE EXCEPTION 'episode %: FSRS state out of range: stability % (> 0), difficulty % (1..10)', e.n,
                e.ep ->> 'stability', e.ep ->> 'difficulty' USING ERRCODE = '22023';
        END IF;
        SELECT x.ids, x.first_at, x.last_at INTO v_src
        FROM mneme._source_messages(create_episodes.conversation_id,
                                    CASE WHEN jsonb_typeof(e.ep -> 'message_ids') = 'array'
                                         THEN ARRAY(SELECT jsonb_array_elements_text(e.ep -> 'message_ids')::bigint) END,
                                    true) x;
        IF EXISTS (SELECT 1 FROM jsonb_array_elements(v_rows) r, jsonb_array_elements_text(r -> 'ids') i
                   WHERE i::bigint = ANY (v_src.ids)) THEN
            RAISE EXCEPTION 'episode %: a message is in two episodes', e.n USING ERRCODE = '22023',
                HINT = 'each queued message goes into one episode';
        END IF;
        v_label := e.ep ->> 'label';
        IF v_label IS NULL THEN  -- the offline segmenter: label by the rules
            v_label := mneme.episode_label(ARRAY(SELECT m.content FROM mneme.messages m
                                                 WHERE m.id = ANY (v_src.ids) ORDER BY m.id), v_src.last_at);
        END IF;
        v_rows := v_rows || jsonb_build_array(jsonb_build_object('n', e.n, 'ids', to_jsonb(v_src.ids),
                                                                 'first_at', v_src.first_at, 'last_at', v_src.last_at,
                                                                 'label', v_label));
    END LOOP;

    -- The episode happened at its last message: creation time, and the
    -- first "review" (retrievability 1 at that moment). An episode is
    -- told from the others by its first message (each message in one).
    RETURN QUERY
    WITH src AS (
        SELECT x.n::int AS n, x.ep, r.value AS r,
               ARRAY(SELECT i::bigint FROM jsonb_array_elements_text(r.value -> 'ids') i ORDER BY 1) AS ids
        FROM jsonb_array_elements(create_episodes.episodes) WITH ORDINALITY AS x(ep, n)
        JOIN jsonb_array_elements(v_rows) r ON (r.value ->> 'n')::int = x.n
    ), ins AS (
        INSERT INTO mneme.memories AS m (conversation_id, kind, content, summary, embedding,
            source_message_ids, source_first_at, source_last_at, surprise, label, pinned,
            stability, difficulty, fsrs_state, last_reviewed_at, source_type, created_at, confidence_score)
        SELECT create_episodes.conversation_id, 'episodic', s.ep ->> 'content', nullif(btrim(s.ep ->> 'summary'), ''),
               -- cast explicitly: Citus fails to plan the implicit cast
               -- to pgvector's type ("not enough default arguments")
               (CASE WHEN jsonb_typeof(s.ep -> 'embedding') = 'array'
                     THEN ARRAY(SELECT v::real FROM jsonb_array_elements_text(s.ep -> 'embedding') v) END)::mneme.embedding,
               s.ids, (s.r ->> 'first_at')::timestamptz, (s.r ->> 'last_at')::timestamptz,
               (s.ep ->> 'surprise')::real, s.r ->> 'label', coalesce((s.ep ->> 'pinned')::boolean, false),
               (s.ep ->> 'stability')::float8, (s.ep ->> 'difficulty')::float8, s.ep ->> 'fsrs_state',
               (s.r ->> 'last_at')::timestamptz, 'conversation', (s.r ->> 'last_at')::timestamptz,
               mneme._source_confidence('conversation')
        FROM src s ORDER BY s.n
        RETURNING m.id, m.source_message_ids, m.label, m.stability
    ), consumed AS (
        UPDATE mneme.messages msg SET consumed_at = now(), memory_id = ins.id
        FROM ins WHERE msg.id = ANY (ins.source_message_ids)
    )
    SELECT s.n, ins.id, ins.label, ins.stability
    FROM src s JOIN ins ON ins.source_message_ids[1] = s.ids[1]
    ORDER BY s.n;
END
$function$;

CREATE OR REPLACE FUNCTION mneme.create_tenant(tenant text)
 RETURNS text
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'pg_temp'
 SET jit TO 'off'
AS $function$
DECLARE
    v__entered boolean := mneme._enter(NULL);
BEGIN
    PERFORM mneme._require_unbound('create tenants');
    IF create_tenant.tenant IS NULL THEN
        RAISE EXCEPTION 'tenant must not be NULL' USING ERRCODE = '22004';
    END IF;
    IF create_tenant.tenant !~ '^[a-z0-9][a-z0-9_-]{0,62}$' THEN
        RAISE EXCEPTION 'tenant id %: want 1 to 63 lower-case letters, digits, _ or -, starting with a letter or digit',
            mneme._quote_prefix(create_tenant.tenant) USING ERRCODE = '22023';
    END IF;
    PERFORM mneme._citus_sequential();
    IF NOT EXISTS (SELECT 1 FROM mneme.tenants t WHERE t.id = create_tenant.tenant)
       AND mneme._tenant_tombstones(create_tenant.tenant) THEN
        RAISE EXCEPTION 'tenant % was dropped (mneme.drop_tenant): its tombstones keep the id', create_tenant.tenant
            USING ERRCODE = '22023', HINT = 'choose another tenant id: a new tenant must not inherit a dropped one''s erase records';
    END IF;
    INSERT INTO mneme.tenants (id) VALUES (create_tenant.tenant) ON CONFLICT (id) DO NOTHING;
    RETURN create_tenant.tenant;
END
$function$;

CREATE OR REPLACE FUNCTION mneme.drop_tenant(tenant text, reason text)
 RETURNS bigint
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'pg_temp'
 SET jit TO 'off'
AS $function$
DECLARE
    v__entered boolean := mneme._enter(NULL);
    v_prev   text := pg_catalog.current_setting('mneme.tenant', true);
    v_logins text;
    v_conv   uuid;
    v_n      bigint := 0;
BEGIN
    PERFORM mneme._require_unbound('drop tenants');
    IF drop_tenant.tenant IS NULL THEN
        RAISE EXCEPTION 'tenant must not be NULL' USING ERRCODE = '22004';
    END IF;
    IF drop_tenant.reason IS NULL OR mneme._is_blank(drop_tenant.reason) THEN
        RAISE EXCEPTION 'drop_tenant needs a reason'
            USING ERRCODE = CASE WHEN drop_tenant.reason IS NULL THEN '22004' ELSE '22023' END,
            HINT = 'the reason stays in the tombstones (mneme.memory_events); do not quote the erased content in it';
    END IF;
    PERFORM mneme._check_length('reason', drop_tenant.reason, 2000);
    PERFORM mneme._citus_sequential();
    IF drop_tenant.tenant = 'default' THEN
        RAISE EXCEPTION 'tenant default cannot be dropped: it is where calls without a tenant go'
            USING ERRCODE = '22023', HINT = 'erase its conversations one by one: mneme.erase_conversation(id, reason)';
    END IF;
    PERFORM 1 FROM mneme.tenants t WHERE t.id = drop_tenant.tenant FOR UPDATE;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'unknown tenant %', mneme._quote_prefix(drop_tenant.tenant) USING ERRCODE = '22023',
            HINT = 'SELECT tenant FROM mneme.tenants() lists them';
    END IF;
    SELECT string_agg(b.login::text, ', ' ORDER BY b.login) INTO v_logins
      FROM mneme.tenant_logins b WHERE b.tenant_id = drop_tenant.tenant;
    IF v_logins IS NOT NULL THEN
        -- unbinding them would let them choose any tenant: the operator decides
        RAISE EXCEPTION 'logins % are bound to tenant %', v_logins, drop_tenant.tenant USING ERRCODE = '55000',
            HINT = 'DROP ROLE them, or SELECT mneme.unbind_login(...) each, first';
    END IF;
    IF mneme._distributed('mneme.memories') THEN
        -- erase_conversation runs on Citus delegated to the worker that
        -- owns the conversation, which a call nested in this one is not
        RAISE EXCEPTION 'drop_tenant does not run on a distributed mneme (Citus) yet'
            USING ERRCODE = '0A000',
                  HINT = 'erase the tenant''s conversations one call each: BEGIN; SELECT mneme.set_tenant(...); '
                         'SELECT mneme.erase_conversation(id, reason) ...; COMMIT (docs/scale.md)';
    END IF;
    -- As the tenant: row security shows its rows to an unbound caller that sets it.
    PERFORM mneme._act_for_tenant(drop_tenant.tenant);
    FOR v_conv IN SELECT q.id FROM mneme.message_queue q WHERE q.tenant_id = drop_tenant.tenant
                  UNION SELECT m.conversation_id FROM mneme.memories m WHERE m.tenant_id = drop_tenant.tenant
                  ORDER BY 1 LOOP
        v_n := v_n + mneme.erase_conversation(v_conv, 'tenant dropped: ' || drop_tenant.reason);
    END LOOP;
    DELETE FROM mneme.jobs j WHERE j.tenant_id = drop_tenant.tenant;
    DELETE FROM mneme.job_turns t WHERE t.tenant_id = drop_tenant.tenant;
    DELETE FROM mneme.tenants t WHERE t.id = drop_tenant.tenant;
    PERFORM mneme._act_for_tenant(v_prev);
    RETURN v_n;
END
$function$;

CREATE OR REPLACE FUNCTION mneme.enqueue_job(kind text, conversation_id uuid, payload jsonb DEFAULT '{}'::jsonb, dedupe_key text DEFAULT NULL::text, run_at timestamp with time zone DEFAULT now())
 RETURNS bigint
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'pg_temp'
 SET jit TO 'off'
AS $function$
#variable_conflict use_column
DECLARE
    v__entered boolean := mneme._enter($2);
    v_id        bigint;
    v_max_bytes bigint;
    v_kind      mneme.job_kinds;
BEGIN
    IF enqueue_job.kind IS NULL OR enqueue_job.kind !~ '^[a-z][a-z0-9_]{0,63}$' THEN
        RAISE EXCEPTION 'job kind must be a lower-case identifier of at most 64 characters, got %', mneme._quote_prefix(enqueue_job.kind)
            USING ERRCODE = '22023';
    END IF;
    -- Only kinds the sidecar handles (mneme.job_kinds): any other would
    -- wait for a handler that never comes. A deployment with handlers of
    -- its own (and the test harness, whose job-queue tests use kinds of
    -- their own) lists them in the setting mneme.job_kinds ('*' for any).
    SELECT * INTO v_kind FROM mneme.job_kinds k WHERE k.kind = enqueue_job.kind;
    IF NOT FOUND
       AND coalesce(current_setting('mneme.job_kinds', true), '') <> '*'
       AND NOT enqueue_job.kind = ANY (string_to_array(replace(coalesce(current_setting('mneme.job_kinds', true), ''), ' ', ''), ',')) THEN
        RAISE EXCEPTION 'job kind % has no handler in the sidecar', mneme._quote_prefix(enqueue_job.kind)
            USING ERRCODE = '22023',
                  HINT = format('kinds: %s; a deployment''s own kinds go in the setting mneme.job_kinds '
                                '(ALTER DATABASE ... SET mneme.job_kinds = ''mykind'')',
                                (SELECT string_agg(k.kind, ', ' ORDER BY k.kind) FROM mneme.job_kinds k));
    END IF;
    PERFORM mneme._check_time('run_at', enqueue_job.run_at);
    IF enqueue_job.payload IS NOT NULL AND jsonb_typeof(enqueue_job.payload) <> 'object' THEN
        RAISE EXCEPTION 'job payload must be a JSON object, got %', left(enqueue_job.payload::text, 80) USING ERRCODE = '22023';
    END IF;
    -- A btree index row holds about 2.7 kB: 256 characters (at most 1 kB of
    -- UTF-8) never reach it.
    PERFORM mneme._check_length('dedupe_key', enqueue_job.dedupe_key, 256);
    -- The sidecar holds a claimed job's payload in memory. A review job
    -- carries up to pending_reviews_max (default 500) pending entries, each a
    -- query of up to 10,000 characters and up to 100 memory ids: about 32 MB
    -- at worst as JSON; the hand-over of reviews must never fail on the cap,
    -- so review jobs get 64 MB, every other kind 1 MB.
    v_max_bytes := (CASE WHEN enqueue_job.kind = 'review' THEN 64 ELSE 1 END) * 1048576;
    IF octet_length(enqueue_job.payload::text) > v_max_bytes THEN
        RAISE EXCEPTION 'payload is % bytes, over the limit of % bytes for a % job', octet_length(enqueue_job.payload::text),
                v_max_bytes, enqueue_job.kind
            USING ERRCODE = '22001', HINT = 'keep large data in tables and put its ids in the payload';
    END IF;
    -- The payload the kind's handler reads (mneme.job_kinds): what it could
    -- only fail on is refused here.
    IF v_kind.kind IS NOT NULL AND ((v_kind.needs_conversation AND enqueue_job.conversation_id IS NULL)
           OR NOT jsonb_path_match(coalesce(enqueue_job.payload, '{}'), v_kind.payload_rule)) THEN
        RAISE EXCEPTION '% job payload %: not what its handler reads', enqueue_job.kind, left(enqueue_job.payload::text, 80)
            USING ERRCODE = '22023',
                  HINT = format('a %s job: %s%s', v_kind.kind, CASE WHEN v_kind.needs_conversation THEN 'a conversation and ' ELSE '' END,
                                v_kind.payload_hint);
    END IF;
    -- A time the rule lets through by its form may still be no date
    -- (February 30) or outside the years the API takes (mneme._check_time).
    IF enqueue_job.kind = 'review' AND v_kind.kind IS NOT NULL THEN
        BEGIN
            PERFORM mneme._check_time('reviewed_at', (enqueue_job.payload ->> 'reviewed_at')::timestamptz);
            -- Go's zero time is an unset one: the review handler refuses it.
            IF (enqueue_job.payload ->> 'reviewed_at')::timestamptz = '0001-01-01 00:00:00+00'::timestamptz THEN
                RAISE EXCEPTION 'the zero time (0001-01-01T00:00:00Z) is an unset time' USING ERRCODE = '22023';
            END IF;
        EXCEPTION WHEN data_exception THEN
            RAISE EXCEPTION 'review job payload: reviewed_at %: %', mneme._quote_prefix(enqueue_job.payload ->> 'reviewed_at'), SQLERRM
                USING ERRCODE = '22023', HINT = format('a review job: %s', v_kind.payload_hint);
        END;
    END IF;
    -- A segment job cuts the conversation's queued messages: with none
    -- queued it has nothing to do, and would only fail.
    IF enqueue_job.kind = 'segment' AND enqueue_job.conversation_id IS NOT NULL
       AND NOT EXISTS (SELECT 1 FROM mneme.messages m
                       WHERE m.conversation_id = enqueue_job.conversation_id AND m.consumed_at IS NULL) THEN
        RAISE EXCEPTION 'conversation % has no queued messages: a segment job would have nothing to segment',
            enqueue_job.conversation_id USING ERRCODE = '22023',
            HINT = 'mneme.add_message queues messages and enqueues the segment job itself';
    END IF;
    -- Distributed by conversation (Citus), a job needs one: a job of no
    -- conversation (cleanup) goes to the nil conversation's shard.
    IF enqueue_job.conversation_id IS NULL AND mneme._distributed('mneme.jobs') THEN
        enqueue_job.conversation_id := '00000000-0000-0000-0000-000000000000';
    END IF;
    INSERT INTO mneme.jobs (kind, conversation_id, payload, dedupe_key, run_at)
    VALUES (enqueue_job.kind, enqueue_job.conversation_id, coalesce(enqueue_job.payload, '{}'), enqueue_job.dedupe_key, coalesce(enqueue_job.run_at, now()))
    ON CONFLICT DO NOTHING
    RETURNING id INTO v_id;
    IF v_id IS NULL THEN
        -- An equivalent job is already pending: keep it, report its id.
        v_id := mneme._equivalent_pending_job(enqueue_job.kind, enqueue_job.conversation_id, enqueue_job.dedupe_key, NULL);
        RETURN v_id;
    END IF;
    -- A wake-up hint only: sidecars also sweep the table and may follow the
    -- WAL instead. Delivered at commit, so never for a rolled-back job.
    -- Empty: any role may LISTEN, and a payload would tell it every
    -- tenant's job ids and kinds.
    PERFORM pg_notify('mneme_jobs', '');
    RETURN v_id;
END
$function$;

CREATE OR REPLACE FUNCTION mneme.enqueue_segment(conversation_id uuid, payload jsonb)
 RETURNS bigint
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'pg_temp'
 SET jit TO 'off'
AS $function$
#variable_conflict use_column
DECLARE
    v__entered boolean := mneme._enter($1);
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
$function$;

CREATE OR REPLACE FUNCTION mneme.erase(memory_id uuid, reason text)
 RETURNS void
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'pg_temp'
 SET jit TO 'off'
AS $function$
DECLARE
    v__entered boolean := mneme._enter(NULL);
    v_conv uuid;
BEGIN
    IF erase.memory_id IS NULL THEN
        RAISE EXCEPTION 'memory_id must not be NULL' USING ERRCODE = '22004';
    END IF;
    IF erase.reason IS NULL OR mneme._is_blank(erase.reason) THEN
        RAISE EXCEPTION 'erase needs a reason' USING ERRCODE = CASE WHEN erase.reason IS NULL THEN '22004' ELSE '22023' END,
            HINT = 'the reason stays in the tombstone (mneme.memory_events); do not quote the erased content in it';
    END IF;
    PERFORM mneme._check_length('reason', erase.reason, 2000);
    v_conv := mneme._memory_conversation(erase.memory_id);
    PERFORM 1 FROM mneme.memories m WHERE m.conversation_id = v_conv AND m.id = erase.memory_id FOR UPDATE;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'memory % does not exist', erase.memory_id USING ERRCODE = 'P0002',
            HINT = 'SELECT * FROM mneme.memory_events WHERE memory_id = ... shows whether it was purged or erased';
    END IF;
    PERFORM 1 FROM mneme.message_queue q WHERE q.id = v_conv FOR UPDATE;  -- no segmentation meanwhile
    -- Earlier events keep their ids and times, not their reasons (a forget
    -- reason may quote the memory).
    PERFORM mneme._mark('erasing', 'on');
    UPDATE mneme.memory_events e SET reason = NULL WHERE e.memory_id = erase.memory_id AND e.reason IS NOT NULL;
    PERFORM mneme._mark('erasing', '');
    PERFORM mneme._remove_memories(ARRAY[erase.memory_id], 'erased', erase.reason);
    PERFORM mneme._note_erase();
END
$function$;

CREATE OR REPLACE FUNCTION mneme.erase_conversation(conversation_id uuid, reason text)
 RETURNS bigint
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'pg_temp'
 SET jit TO 'off'
AS $function$
DECLARE
    v__entered boolean := mneme._enter($1);
    v_ids     uuid[];
    v_n       bigint;
    v_tenant  text;
    v_queries text[];
BEGIN
    IF erase_conversation.conversation_id IS NULL THEN
        RAISE EXCEPTION 'conversation_id must not be NULL' USING ERRCODE = '22004';
    END IF;
    IF erase_conversation.reason IS NULL OR mneme._is_blank(erase_conversation.reason) THEN
        RAISE EXCEPTION 'erase_conversation needs a reason'
            USING ERRCODE = CASE WHEN erase_conversation.reason IS NULL THEN '22004' ELSE '22023' END,
            HINT = 'the reason stays in the tombstone (mneme.memory_events); do not quote the erased content in it';
    END IF;
    PERFORM mneme._check_length('reason', erase_conversation.reason, 2000);
    -- The memories first, then the queue row: the order erase and a
    -- retrieval recording its pending review lock them in, so none of them
    -- deadlocks with another; the memories a segmentation stores meanwhile
    -- are locked below, under the queue row's lock.
    PERFORM 1 FROM mneme.memories m WHERE m.conversation_id = erase_conversation.conversation_id FOR UPDATE;
    PERFORM 1 FROM mneme.message_queue q WHERE q.id = erase_conversation.conversation_id FOR UPDATE;
    IF NOT FOUND AND NOT EXISTS (SELECT 1 FROM mneme.memories m WHERE m.conversation_id = erase_conversation.conversation_id) THEN
        RAISE EXCEPTION 'conversation % does not exist', erase_conversation.conversation_id USING ERRCODE = 'P0002',
            HINT = 'SELECT * FROM mneme.memory_events WHERE conversation_id = ... shows whether it was erased';
    END IF;
    SELECT array_agg(x.id ORDER BY x.id) INTO v_ids FROM (
        SELECT m.id FROM mneme.memories m
        WHERE m.conversation_id = erase_conversation.conversation_id FOR UPDATE) x;

    PERFORM mneme._mark('erasing', 'on');
    UPDATE mneme.memory_events e SET reason = NULL
    WHERE e.conversation_id = erase_conversation.conversation_id AND e.reason IS NOT NULL;
    PERFORM mneme._mark('erasing', '');

    -- Every query typed in the conversation, wherever a copy was recorded:
    -- with scope tenant it retrieved other conversations' memories, whose
    -- review log quotes it (review_log.asked_in is the asking conversation;
    -- its review jobs and pending reviews hold the ones not reviewed yet).
    -- The ratings stay: they hold no text.
    SELECT q.tenant_id INTO v_tenant FROM mneme.message_queue q WHERE q.id = erase_conversation.conversation_id;
    -- Resolved once, into a variable: the statements below compare with a
    -- value (Citus refuses a non-IMMUTABLE function in COALESCE in an
    -- UPDATE over its shards, 0A000).
    v_tenant := coalesce(v_tenant, mneme._tenant());
    v_queries := ARRAY(
        SELECT e ->> 'query'
        FROM mneme.message_queue q,
             jsonb_array_elements(CASE WHEN jsonb_typeof(q.pending_reviews) = 'array' THEN q.pending_reviews ELSE '[]' END) e
        WHERE q.id = erase_conversation.conversation_id AND e ->> 'query' IS NOT NULL
        UNION
        SELECT e ->> 'query'
        FROM mneme.jobs j,
             jsonb_array_elements(CASE WHEN jsonb_typeof(j.payload -> 'reviews') = 'array' THEN j.payload -> 'reviews' ELSE '[]' END) e
        WHERE j.conversation_id = erase_conversation.conversation_id AND e ->> 'query' IS NOT NULL
        UNION
        -- (asked_in is indexed; goose 00070 filled it for the rows written
        -- before it whose review job was still kept)
        SELECT unnest(l.matched_queries) FROM mneme.review_log l
        WHERE l.asked_in = erase_conversation.conversation_id);
    IF cardinality(v_queries) > 0 THEN
        UPDATE mneme.review_log l
        SET matched_queries = ARRAY(SELECT x FROM unnest(l.matched_queries) WITH ORDINALITY AS u(x, o)
                                    WHERE NOT x = ANY (v_queries) ORDER BY o)
        WHERE l.tenant_id = v_tenant AND l.matched_queries && v_queries;
    END IF;
    UPDATE mneme.review_log l SET asked_in = NULL
    WHERE l.asked_in = erase_conversation.conversation_id AND l.tenant_id = v_tenant;

    -- Every job of the conversation: its payload may quote it. A job running
    -- now loses its lease and rolls back when it tries to complete.
    DELETE FROM mneme.jobs j WHERE j.conversation_id = erase_conversation.conversation_id;
    -- The LLM usage ledger names the conversation: its totals stay per day
    -- (mneme.llm_usage_days), its rows go.
    PERFORM mneme._fold_llm_calls(erase_conversation.conversation_id);
    v_n := coalesce(mneme._remove_memories(coalesce(v_ids, '{}'), 'erased', erase_conversation.reason), 0);
    DELETE FROM mneme.review_log l WHERE l.conversation_id = erase_conversation.conversation_id;
    -- Messages (the queued ones too), speakers and pending reviews.
    DELETE FROM mneme.message_queue q WHERE q.id = erase_conversation.conversation_id;
    DELETE FROM mneme.messages g WHERE g.conversation_id = erase_conversation.conversation_id;

    INSERT INTO mneme.memory_events (memory_id, conversation_id, event, reason, actor, at)
    VALUES (NULL, erase_conversation.conversation_id, 'erased',
            format('conversation erased (%s memories): %s', v_n, erase_conversation.reason), mneme._event_actor(), now());
    PERFORM mneme._note_erase();
    RETURN v_n;
END
$function$;

CREATE OR REPLACE FUNCTION mneme.export_conversation(conversation_id uuid, embeddings boolean DEFAULT false)
 RETURNS SETOF jsonb
 LANGUAGE plpgsql
 STABLE SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'pg_temp'
 SET jit TO 'off'
AS $function$
DECLARE
    v__entered boolean := mneme._enter($1);
    v_line jsonb;
    v_n    bigint := 0;
BEGIN
    IF export_conversation.conversation_id IS NULL OR export_conversation.embeddings IS NULL THEN
        RAISE EXCEPTION 'conversation_id and embeddings must not be NULL' USING ERRCODE = '22004';
    END IF;
    RETURN NEXT mneme.export_header(export_conversation.embeddings);
    FOR v_line IN SELECT s FROM mneme.export_settings() s LOOP
        v_n := v_n + 1;
        RETURN NEXT v_line;
    END LOOP;
    FOR v_line IN SELECT l FROM mneme.export_lines(export_conversation.conversation_id, export_conversation.embeddings) l LOOP
        v_n := v_n + 1;
        RETURN NEXT v_line;
    END LOOP;
    RETURN NEXT jsonb_build_object('type', 'end', 'conversations', 1, 'lines', v_n);
END
$function$;

CREATE OR REPLACE FUNCTION mneme.export_conversations(after uuid DEFAULT NULL::uuid, n integer DEFAULT 1000)
 RETURNS SETOF uuid
 LANGUAGE plpgsql
 STABLE SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'pg_temp'
 SET jit TO 'off'
AS $function$
DECLARE
    v__entered boolean := mneme._enter(NULL);
BEGIN
    export_conversations.n := coalesce(export_conversations.n, 1000);  -- NULL: the default
    IF export_conversations.n < 1 OR export_conversations.n > 100000 THEN
        RAISE EXCEPTION 'n must be between 1 and 100000, not %', export_conversations.n USING ERRCODE = '22023';
    END IF;
    -- The tenant's conversations, and those erased whole (a tombstone
    -- event, no queue row), by id: a page after `after`.
    RETURN QUERY
    SELECT c.id FROM (
        SELECT q.id FROM mneme.message_queue q
        WHERE q.tenant_id = mneme._tenant() AND q.id > coalesce(export_conversations.after, '00000000-0000-0000-0000-000000000000')
        UNION
        SELECT e.conversation_id FROM mneme.memory_events e
        WHERE e.tenant_id = mneme._tenant() AND e.event = 'erased' AND e.memory_id IS NULL
          AND e.conversation_id > coalesce(export_conversations.after, '00000000-0000-0000-0000-000000000000')
    ) c
    ORDER BY c.id
    LIMIT export_conversations.n;
END
$function$;

CREATE OR REPLACE FUNCTION mneme.export_lines(conversation_id uuid, embeddings boolean DEFAULT false)
 RETURNS SETOF jsonb
 LANGUAGE plpgsql
 STABLE SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'pg_temp'
 SET extra_float_digits TO '1'
 SET jit TO 'off'
AS $function$
#variable_conflict use_column
DECLARE
    v__entered boolean := mneme._enter($1);
    v_tenant text := mneme._tenant();
    v_q      mneme.message_queue;
BEGIN
    IF export_lines.conversation_id IS NULL OR export_lines.embeddings IS NULL THEN
        RAISE EXCEPTION 'conversation_id and embeddings must not be NULL' USING ERRCODE = '22004';
    END IF;
    SELECT * INTO v_q FROM mneme.message_queue q WHERE q.id = export_lines.conversation_id AND q.tenant_id = v_tenant;
    IF NOT FOUND THEN
        IF EXISTS (SELECT 1 FROM mneme.memory_events e WHERE e.conversation_id = export_lines.conversation_id
                   AND e.tenant_id = v_tenant AND e.event = 'erased' AND e.memory_id IS NULL) THEN
            -- Erased whole: its tombstones only.
            RETURN NEXT jsonb_build_object('type', 'conversation', 'id', export_lines.conversation_id, 'erased', true,
                'lines', jsonb_build_object('messages', 0, 'memories', 0, 'reviews', 0,
                    'events', (SELECT count(*) FROM mneme.memory_events e WHERE e.conversation_id = export_lines.conversation_id
                               AND e.tenant_id = v_tenant)));
        ELSE
            RAISE EXCEPTION 'conversation % does not exist in tenant %', export_lines.conversation_id, v_tenant
                USING ERRCODE = 'P0002', HINT = 'mneme.export_conversations() lists the tenant''s conversations';
        END IF;
    ELSE
        -- jsonb_strip_nulls leaves out the columns that are NULL; values
        -- that are JSON themselves are added after it, their own nulls kept.
        -- The counts of the lines that follow: an importer that misses one
        -- (a lost line) knows before it commits the conversation.
        RETURN NEXT jsonb_strip_nulls(jsonb_build_object(
                   'type', 'conversation', 'id', v_q.id, 'speakers', to_jsonb(v_q.speakers),
                   'lines', jsonb_build_object(
                       'messages', (SELECT count(*) FROM mneme.messages g WHERE g.conversation_id = v_q.id),
                       'memories', (SELECT count(*) FROM mneme.memories m WHERE m.conversation_id = v_q.id),
                       'reviews', (SELECT count(*) FROM mneme.review_log l WHERE l.conversation_id = v_q.id AND l.tenant_id = v_tenant),
                       'events', (SELECT count(*) FROM mneme.memory_events e WHERE e.conversation_id = v_q.id AND e.tenant_id = v_tenant)),
                   'last_message_at', mneme._export_time(v_q.last_message_at),
                   'created_at', mneme._export_time(v_q.created_at), 'updated_at', mneme._export_time(v_q.updated_at)))
            || CASE WHEN v_q.pending_reviews IS NULL THEN '{}'::jsonb
                    ELSE jsonb_build_object('pending_reviews', v_q.pending_reviews) END;

        -- Messages by id; seq is the message's place in the conversation,
        -- which the other lines use instead of the database's ids.
        RETURN QUERY
        SELECT jsonb_strip_nulls(jsonb_build_object(
                   'type', 'message', 'conversation', g.conversation_id, 'seq', row_number() OVER (ORDER BY g.id),
                   'role', g.role, 'content', g.content, 'created_at', mneme._export_time(g.created_at),
                   'consumed_at', mneme._export_time(g.consumed_at), 'episode', g.memory_id,
                   'ends_session', CASE WHEN g.ends_session THEN true END,
                   'embedding', CASE WHEN export_lines.embeddings THEN mneme._export_embedding(g.embedding::real[]) END))
        FROM mneme.messages g
        WHERE g.conversation_id = export_lines.conversation_id
        ORDER BY g.id;

        -- Memories by creation, with every column that defines them; an
        -- erased memory has no row: its tombstone is among the events.
        RETURN QUERY
        WITH seqs AS (
            SELECT g.id, row_number() OVER (ORDER BY g.id) AS seq
            FROM mneme.messages g WHERE g.conversation_id = export_lines.conversation_id
        ), sources AS (
            -- one hash join for the conversation, not a scan per memory
            SELECT m.id, jsonb_agg(s.seq ORDER BY u.ord) AS seqs
            FROM mneme.memories m
            CROSS JOIN LATERAL unnest(m.source_message_ids) WITH ORDINALITY AS u(mid, ord)
            JOIN seqs s ON s.id = u.mid
            WHERE m.conversation_id = export_lines.conversation_id
            GROUP BY m.id
        )
        SELECT jsonb_strip_nulls(jsonb_build_object(
                   'type', 'memory', 'conversation', m.conversation_id, 'id', m.id, 'kind', m.kind, 'title', m.title,
                   'content', m.content, 'summary', m.summary,
                   'source_messages', src.seqs,
                   'source_first_at', mneme._export_time(m.source_first_at), 'source_last_at', mneme._export_time(m.source_last_at),
                   'surprise', m.surprise, 'stability', m.stability, 'difficulty', m.difficulty, 'fsrs_state', m.fsrs_state,
                   'last_reviewed_at', mneme._export_time(m.last_reviewed_at), 'review_count', m.review_count,
                   'label', m.label, 'pinned', m.pinned, 'status', m.status, 'status_reason', m.status_reason,
                   'confidence_score', m.confidence_score, 'valid_until', mneme._export_time(m.valid_until),
                   'last_confirmed_at', mneme._export_time(m.last_confirmed_at), 'source_type', m.source_type,
                   'source_ref', m.source_ref, 'supersedes_id', m.supersedes_id, 'confirms_id', m.confirms_id,
                   'invalidates_id', m.invalidates_id, 'slot', m.slot,
                   'created_at', mneme._export_time(m.created_at), 'updated_at', mneme._export_time(m.updated_at),
                   'embedding', CASE WHEN export_lines.embeddings THEN mneme._export_embedding(m.embedding::real[]) END))
               || jsonb_build_object('metadata', m.metadata)
        FROM mneme.memories m
        LEFT JOIN sources src ON src.id = m.id
        WHERE m.conversation_id = export_lines.conversation_id
        ORDER BY m.created_at, m.id;
    END IF;

    -- The review log by id (seq: its place, which events refer to).
    RETURN QUERY
    SELECT jsonb_strip_nulls(jsonb_build_object(
               'type', 'review', 'conversation', l.conversation_id, 'seq', row_number() OVER (ORDER BY l.id),
               'memory', l.memory_id, 'rating', l.rating, 'reviewer', l.reviewer, 'defaulted', l.defaulted,
               'stability_before', l.stability_before, 'stability_after', l.stability_after,
               'difficulty_before', l.difficulty_before, 'difficulty_after', l.difficulty_after,
               'state_before', l.state_before, 'state_after', l.state_after,
               'last_reviewed_before', mneme._export_time(l.last_reviewed_before),
               'reviewed_at', mneme._export_time(l.reviewed_at), 'matched_queries', to_jsonb(l.matched_queries),
               'asked_in', l.asked_in, 'created_at', mneme._export_time(l.created_at)))
    FROM mneme.review_log l
    WHERE l.conversation_id = export_lines.conversation_id AND l.tenant_id = v_tenant
    ORDER BY l.id;

    -- Lifecycle events by id, tombstones included (no content: erase
    -- cleared their reasons).
    RETURN QUERY
    WITH seqs AS (
        SELECT l.id, row_number() OVER (ORDER BY l.id) AS seq
        FROM mneme.review_log l WHERE l.conversation_id = export_lines.conversation_id AND l.tenant_id = v_tenant
    )
    SELECT jsonb_strip_nulls(jsonb_build_object(
               'type', 'event', 'conversation', e.conversation_id, 'memory', e.memory_id, 'event', e.event,
               'reason', e.reason, 'actor', e.actor, 'caller', e.caller, 'review', s.seq, 'at', mneme._export_time(e.at)))
    FROM mneme.memory_events e
    LEFT JOIN seqs s ON s.id = e.review_log_id
    WHERE e.conversation_id = export_lines.conversation_id AND e.tenant_id = v_tenant
    ORDER BY e.id;
END
$function$;

CREATE OR REPLACE FUNCTION mneme.extend_job_lease(id bigint, worker text, attempt integer, lease interval)
 RETURNS boolean
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'pg_temp'
 SET jit TO 'off'
AS $function$
#variable_conflict use_column
DECLARE
    v__entered boolean := mneme._enter(NULL);
    v_job_conv uuid := mneme._job_conversation(extend_job_lease.id);
BEGIN
    UPDATE mneme.jobs
       SET locked_until = now() + extend_job_lease.lease
     WHERE conversation_id = v_job_conv AND id = extend_job_lease.id
       AND state = 'running' AND locked_by = extend_job_lease.worker AND attempts = extend_job_lease.attempt;
    RETURN CASE WHEN FOUND THEN true END;
END
$function$;

CREATE OR REPLACE FUNCTION mneme.extractive_summary(conversation_id uuid, roles text[], contents text[], k integer DEFAULT NULL::integer)
 RETURNS text
 LANGUAGE plpgsql
 STABLE SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'pg_temp'
 SET jit TO 'off'
AS $function$
#variable_conflict use_column
DECLARE
    v__entered boolean := mneme._enter($1);
    v_k   int := coalesce(extractive_summary.k, mneme.setting('segment_summary_sentences')::int);
    v_k1  float8 := mneme.setting('bm25_k1')::float8;
    v_n   float8;
    v_out text;
BEGIN
    IF extractive_summary.conversation_id IS NULL OR extractive_summary.roles IS NULL OR extractive_summary.contents IS NULL THEN
        RAISE EXCEPTION 'conversation_id, roles and contents must not be NULL' USING ERRCODE = '22004';
    END IF;
    IF cardinality(extractive_summary.roles) <> cardinality(extractive_summary.contents) THEN
        RAISE EXCEPTION 'roles (%) and contents (%) must be as many', cardinality(extractive_summary.roles),
            cardinality(extractive_summary.contents) USING ERRCODE = '22023';
    END IF;
    IF v_k IS NULL OR v_k < 1 OR v_k > 100 THEN
        RAISE EXCEPTION 'k must be from 1 to 100, got %', v_k USING ERRCODE = '22023';
    END IF;
    SELECT coalesce(sum(st.n), 0) INTO v_n FROM mneme.bm25_stats st WHERE st.conversation_id = extractive_summary.conversation_id;
    WITH sen AS (
        SELECT m.ord, x.pos, coalesce(m.role, '?') AS role, btrim(x.sentence) AS sentence,
               tsvector_to_array(mneme.bm25_tsvector(x.sentence)) AS terms  -- tokenised once
        FROM unnest(extractive_summary.roles, extractive_summary.contents) WITH ORDINALITY AS m(role, content, ord),
             regexp_split_to_table(coalesce(m.content, ''), '(?<=[.!?])\s+|\n+') WITH ORDINALITY AS x(sentence, pos)
        WHERE NOT mneme._is_blank(x.sentence)
    ), tf AS (  -- in how many of the episode's messages each term occurs
        SELECT l.term, count(DISTINCT sen.ord)::float8 AS n
        FROM sen, unnest(sen.terms) AS l(term)
        GROUP BY l.term
    ), w AS MATERIALIZED (  -- tf-idf: the episode's own words that the conversation rarely uses
        SELECT tf.term, tf.n * mneme._bm25_weight(v_n + 1, coalesce(t.df, 0), v_k1) AS wt
        FROM tf LEFT JOIN LATERAL (SELECT t.df FROM mneme.bm25_terms t
                                   WHERE t.conversation_id = extractive_summary.conversation_id AND t.term = tf.term) t ON true
    ), scored AS MATERIALIZED (  -- each sentence scored once
        SELECT sen.*,
               (SELECT coalesce(sum(w.wt), 0) / sqrt(count(*) + 2)
                FROM unnest(sen.terms) AS l(term)
                JOIN w ON w.term = l.term) AS score
        FROM sen
    ), best AS (
        SELECT * FROM scored WHERE scored.score > 0 ORDER BY scored.score DESC, scored.ord, scored.pos LIMIT v_k
    )
    SELECT string_agg(b.role || ': ' || CASE WHEN length(b.sentence) <= 200 THEN b.sentence
                                             ELSE regexp_replace(left(b.sentence, 201), '\s*\S*$', '') || ' …' END,
                      ' … ' ORDER BY b.ord, b.pos)
    INTO v_out FROM best b;
    RETURN v_out;
END
$function$;

CREATE OR REPLACE FUNCTION mneme.fail_job(id bigint, worker text, attempt integer, error text, retry_in interval, permanent boolean DEFAULT false, max_attempts integer DEFAULT NULL::integer)
 RETURNS text
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'pg_temp'
 SET jit TO 'off'
AS $function$
#variable_conflict use_column
DECLARE
    v__entered boolean := mneme._enter(NULL);
    j mneme.jobs;
    v_job_conv uuid := mneme._job_conversation(fail_job.id);
    -- A worker's error is always recorded: a long one is cut, never refused
    -- (refusing it would leave the job running until its lease expires).
    v_error text := CASE WHEN length(fail_job.error) > 10000
                         THEN left(fail_job.error, 10000) || format('... (%s characters)', length(fail_job.error))
                         ELSE coalesce(fail_job.error, 'unknown error') END;
BEGIN
    IF fail_job.retry_in IS NULL OR fail_job.retry_in < interval '0' THEN
        RAISE EXCEPTION 'retry_in must be a zero or positive interval, got %', coalesce(fail_job.retry_in::text, 'NULL') USING ERRCODE = '22023';
    END IF;
    SELECT * INTO j FROM mneme.jobs
     WHERE conversation_id = v_job_conv AND id = fail_job.id AND state = 'running' AND locked_by = fail_job.worker AND attempts = fail_job.attempt
       FOR UPDATE;
    IF NOT FOUND THEN
        RETURN NULL; -- lease lost: whoever holds the job now decides
    END IF;
    IF fail_job.permanent OR j.attempts >= coalesce(fail_job.max_attempts, j.max_attempts) THEN
        -- A job its handler rejected (permanent: malformed, no conversation)
        -- failed on itself, not on the messages: a segment job's stay queued
        -- for the next valid segmentation (jobs_set_aside_trg).
        IF fail_job.permanent THEN
            PERFORM mneme._mark('job_rejected', fail_job.id::text);
        END IF;
        UPDATE mneme.jobs
           SET state = 'failed', finished_at = now(), updated_at = now(),
               locked_by = NULL, locked_until = NULL, last_error = v_error
         WHERE conversation_id = v_job_conv AND id = fail_job.id;
        PERFORM mneme._mark('job_rejected', NULL);
        RETURN 'failed';
    END IF;
    RETURN mneme._requeue_job(fail_job.id, now() + fail_job.retry_in, v_error, j.attempts);
END
$function$;

CREATE OR REPLACE FUNCTION mneme.find_memories(conversation uuid DEFAULT NULL::uuid, words text DEFAULT NULL::text, only_label text DEFAULT NULL::text, only_status text DEFAULT NULL::text, only_kind text DEFAULT NULL::text, only_pinned boolean DEFAULT NULL::boolean, r_min double precision DEFAULT NULL::double precision, r_max double precision DEFAULT NULL::double precision, sort text DEFAULT 'created'::text, k integer DEFAULT 50, page integer DEFAULT 1, at timestamp with time zone DEFAULT NULL::timestamp with time zone)
 RETURNS TABLE(memory_id uuid, conversation_id uuid, kind text, status text, label text, pinned boolean, title text, summary text, content text, source_first_at timestamp with time zone, created_at timestamp with time zone, valid_until timestamp with time zone, stability double precision, last_reviewed_at timestamp with time zone, review_count integer, confidence_score real, retrievability double precision, supersedes_id uuid, total bigint)
 LANGUAGE plpgsql
 STABLE SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'pg_temp'
 SET jit TO 'off'
AS $function$
#variable_conflict use_column
DECLARE
    v__entered boolean := mneme._enter(NULL);
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
$function$;

CREATE OR REPLACE FUNCTION mneme.forget(memory_id uuid, reason text)
 RETURNS void
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'pg_temp'
 SET jit TO 'off'
AS $function$
#variable_conflict use_column
DECLARE
    v__entered boolean := mneme._enter(NULL);
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
$function$;

CREATE OR REPLACE FUNCTION mneme.history(id uuid)
 RETURNS TABLE(depth integer, relation text, memory_id uuid, status text, status_reason text, content text, supersedes_id uuid, confidence_score real, source_type text, valid_until timestamp with time zone, created_at timestamp with time zone)
 LANGUAGE plpgsql
 STABLE SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'pg_temp'
 SET jit TO 'off'
AS $function$
#variable_conflict use_column
DECLARE
    v__entered boolean := mneme._enter(NULL);
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
$function$;

CREATE OR REPLACE FUNCTION mneme.import_conversation(line jsonb)
 RETURNS text
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'pg_temp'
 SET jit TO 'off'
AS $function$
DECLARE
    v__entered boolean := mneme._enter(NULL);
    v_id       uuid;
    v_tenant   text := mneme._tenant();
    v_speakers text[];
BEGIN
    IF import_conversation.line IS NULL THEN
        RAISE EXCEPTION 'line must not be NULL' USING ERRCODE = '22004';
    END IF;
    IF import_conversation.line ->> 'type' IS DISTINCT FROM 'conversation' THEN
        RAISE EXCEPTION 'not a conversation line' USING ERRCODE = '22023';
    END IF;
    v_id := (import_conversation.line ->> 'id')::uuid;
    IF coalesce((import_conversation.line ->> 'erased')::boolean, false) THEN
        IF EXISTS (SELECT 1 FROM mneme.memory_events e WHERE e.conversation_id = v_id AND e.tenant_id = v_tenant
                   AND e.event = 'erased' AND e.memory_id IS NULL) THEN
            RETURN 'exists';
        END IF;
        IF EXISTS (SELECT 1 FROM mneme.message_queue q WHERE q.id = v_id) THEN
            RAISE EXCEPTION 'conversation % exists (erased in the file)', v_id USING ERRCODE = '23505';
        END IF;
        RETURN 'erased';
    END IF;
    IF EXISTS (SELECT 1 FROM mneme.message_queue q WHERE q.id = v_id AND q.tenant_id = v_tenant) THEN
        RETURN 'exists';
    END IF;
    -- Erase is final: a conversation the tenant erased does not come back
    -- (its tombstone, an "erased" event without a memory, names it).
    IF EXISTS (SELECT 1 FROM mneme.import_tombstones(ARRAY[v_id]) AS t(id)) THEN
        RAISE EXCEPTION 'conversation % was erased in tenant %: an import does not bring it back', v_id, v_tenant
            USING ERRCODE = '22023',
                  HINT = 'mneme import skips the conversations and memories the tenant erased, saying so (docs/forgetting.md)';
    END IF;
    -- The speakers into a variable first: Citus refuses a subquery in an
    -- INSERT's VALUES ("subqueries are not supported within INSERT queries").
    v_speakers := coalesce(ARRAY(SELECT jsonb_array_elements_text(import_conversation.line -> 'speakers')), '{}');
    INSERT INTO mneme.message_queue (id, tenant_id, speakers, pending_reviews, last_message_at, created_at, updated_at)
    VALUES (v_id, v_tenant,
            v_speakers,
            nullif(import_conversation.line -> 'pending_reviews', 'null'::jsonb),
            ((import_conversation.line -> 'last_message_at') #>> '{}')::timestamptz,
            ((import_conversation.line -> 'created_at') #>> '{}')::timestamptz,
            ((import_conversation.line -> 'updated_at') #>> '{}')::timestamptz)
    ON CONFLICT (id) DO NOTHING;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'conversation % belongs to another tenant', v_id USING ERRCODE = '23505',
            HINT = 'import with --conversations new to give the file''s conversations and memories new ids (what the '
                   'tenant erased stays out either way)';
    END IF;
    RETURN 'created';
END
$function$;

CREATE OR REPLACE FUNCTION mneme.import_events(conversation_id uuid, lines jsonb)
 RETURNS bigint
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'pg_temp'
 SET jit TO 'off'
AS $function$
DECLARE
    v__entered boolean := mneme._enter($1);
    v_n bigint;
BEGIN
    IF import_events.conversation_id IS NULL OR import_events.lines IS NULL THEN
        RAISE EXCEPTION 'conversation_id and lines must not be NULL' USING ERRCODE = '22004';
    END IF;
    IF jsonb_typeof(import_events.lines) <> 'array' THEN
        RAISE EXCEPTION 'lines must be an array of lines' USING ERRCODE = '22023';
    END IF;
    -- RETURNING, as import_reviews: on Citus an INSERT ... SELECT from the
    -- lines without it goes to the shards as COPY, which row security
    -- refuses ("COPY FROM not supported with row-level security").
    WITH ins AS (
        INSERT INTO mneme.memory_events (memory_id, conversation_id, tenant_id, event, reason, actor, caller, review_log_id, at)
        SELECT r.memory, import_events.conversation_id, mneme._tenant(), r.event, r.reason, r.actor, r.caller,
               r.review_log_id, r.at
        FROM ROWS FROM (jsonb_to_recordset(import_events.lines)
                        AS (memory uuid, event text, reason text, actor text, caller name, review_log_id bigint,
                            at timestamptz)) WITH ORDINALITY
             AS r(memory, event, reason, actor, caller, review_log_id, at, ord)
        ORDER BY r.ord
        RETURNING 1
    )
    SELECT count(*) INTO v_n FROM ins;
    RETURN v_n;
END
$function$;

CREATE OR REPLACE FUNCTION mneme.import_fact(conversation_id uuid, content text, at timestamp with time zone, origin jsonb, label text DEFAULT NULL::text)
 RETURNS uuid
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'pg_temp'
 SET jit TO 'off'
AS $function$
#variable_conflict use_column
DECLARE
    v__entered boolean := mneme._enter($1);
    v_id  uuid;
    v_key text;
BEGIN
    IF import_fact.conversation_id IS NULL OR import_fact.content IS NULL OR import_fact.origin IS NULL THEN
        RAISE EXCEPTION 'conversation_id, content and origin must not be NULL' USING ERRCODE = '22004';
    END IF;
    IF jsonb_typeof(import_fact.origin) <> 'object'
       OR (SELECT count(*) FROM jsonb_object_keys(import_fact.origin)) <> 1 THEN
        RAISE EXCEPTION 'origin must be an object of one key, the source system (e.g. {"mem0": {...}})' USING ERRCODE = '22023';
    END IF;
    SELECT k INTO v_key FROM jsonb_object_keys(import_fact.origin) k;
    IF import_fact.origin -> v_key ->> 'id' IS NULL THEN
        RAISE EXCEPTION 'origin.%.id is needed (the source system''s id: an import run again skips it)', v_key USING ERRCODE = '22023';
    END IF;
    -- Imported already (a resumed or repeated import): nothing to do.
    SELECT m.id INTO v_id FROM mneme.memories m
    WHERE m.conversation_id = import_fact.conversation_id AND m.source_type = 'import'
      AND m.metadata -> v_key ->> 'id' = import_fact.origin -> v_key ->> 'id';
    IF FOUND THEN
        RETURN NULL;
    END IF;
    -- remember: the checks, the label, the revise job (duplicates and
    -- contradictions are handled as for any write); then the provenance.
    v_id := mneme.remember(import_fact.conversation_id, import_fact.content, label => import_fact.label,
                           source_ref => left(v_key || ':' || (import_fact.origin -> v_key ->> 'id'), 512),
                           at => import_fact.at);
    UPDATE mneme.memories m
    SET source_type = 'import', confidence_score = mneme._source_confidence('import'), metadata = import_fact.origin
    WHERE m.conversation_id = import_fact.conversation_id AND m.id = v_id;
    RETURN v_id;
END
$function$;

CREATE OR REPLACE FUNCTION mneme.import_links(links jsonb)
 RETURNS TABLE(memory_id uuid, link text, target uuid)
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'pg_temp'
 SET jit TO 'off'
AS $function$
DECLARE
    v__entered boolean := mneme._enter(NULL);
    v_present uuid[];
    v_tenant  text := mneme._tenant();
    x         record;
BEGIN
    IF import_links.links IS NULL THEN
        RAISE EXCEPTION 'links must not be NULL' USING ERRCODE = '22004';
    END IF;
    IF jsonb_typeof(import_links.links) <> 'array' THEN
        RAISE EXCEPTION 'links must be an array of {memory_id, link, target}' USING ERRCODE = '22023';
    END IF;
    -- The targets that are in, read once by their ids; then one update per
    -- link (lineage links are few), by the memory's id. On Citus a memory
    -- and its target may be on two shards: a read of the targets correlated
    -- with the update is a "complex join" there.
    v_present := mneme._present_memories(ARRAY(SELECT (l ->> 'target')::uuid FROM jsonb_array_elements(import_links.links) l));
    FOR x IN SELECT (l ->> 'memory_id')::uuid AS id, l ->> 'link' AS link, (l ->> 'target')::uuid AS target
             FROM jsonb_array_elements(import_links.links) l
             WHERE (l ->> 'target')::uuid = ANY (v_present)
               AND l ->> 'link' IN ('supersedes_id', 'confirms_id', 'invalidates_id') LOOP
        EXECUTE format('UPDATE mneme.memories m SET %I = $1 WHERE m.id = $2 AND m.tenant_id = $3', x.link)
        USING x.target, x.id, v_tenant;
    END LOOP;
    RETURN QUERY
    SELECT (l ->> 'memory_id')::uuid, l ->> 'link', (l ->> 'target')::uuid
    FROM jsonb_array_elements(import_links.links) l
    WHERE NOT (l ->> 'target')::uuid = ANY (v_present);
END
$function$;

CREATE OR REPLACE FUNCTION mneme.import_memories(conversation_id uuid, lines jsonb, normalized boolean DEFAULT false, embeddings real[] DEFAULT NULL::real[])
 RETURNS TABLE(memory_id uuid, link text, target uuid)
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'pg_temp'
 SET jit TO 'off'
AS $function$
DECLARE
    v__entered boolean := mneme._enter($1);
    v_bulk      boolean := NOT mneme._distributed('mneme.memories');
    v_normalize boolean;
    v_erased    uuid;
BEGIN
    IF import_memories.conversation_id IS NULL OR import_memories.lines IS NULL OR import_memories.normalized IS NULL THEN
        RAISE EXCEPTION 'conversation_id, lines and normalized must not be NULL' USING ERRCODE = '22004';
    END IF;
    IF jsonb_typeof(import_memories.lines) <> 'array' THEN
        RAISE EXCEPTION 'lines must be an array of lines' USING ERRCODE = '22023';
    END IF;
    IF NOT EXISTS (SELECT 1 FROM mneme.message_queue q WHERE q.id = import_memories.conversation_id AND q.tenant_id = mneme._tenant()) THEN
        RAISE EXCEPTION 'conversation % does not exist in this tenant', import_memories.conversation_id USING ERRCODE = 'P0002';
    END IF;
    -- Normalised here unless the importer did (array variant; the trigger
    -- does it on Citus).
    v_normalize := v_bulk AND NOT import_memories.normalized AND mneme.setting('vector_variant') #>> '{}' = 'array';
    IF import_memories.embeddings IS NOT NULL
       AND cardinality(import_memories.embeddings) % (mneme.setting('embedding_dim') #>> '{}')::int <> 0 THEN
        RAISE EXCEPTION 'embeddings holds % numbers, not a whole number of embeddings of % dimensions',
            cardinality(import_memories.embeddings), mneme.setting('embedding_dim') #>> '{}' USING ERRCODE = '22023';
    END IF;
    IF EXISTS (SELECT 1 FROM jsonb_array_elements(import_memories.lines) l
               WHERE l ? 'embedding_at'
                 AND (jsonb_typeof(l -> 'embedding_at') <> 'number'
                      OR (l ->> 'embedding_at')::numeric NOT BETWEEN 1
                         AND coalesce(cardinality(import_memories.embeddings), 0) / (mneme.setting('embedding_dim') #>> '{}')::int)) THEN
        RAISE EXCEPTION 'a line''s embedding_at is not the place of an embedding in embeddings (1 to %)',
            coalesce(cardinality(import_memories.embeddings), 0) / (mneme.setting('embedding_dim') #>> '{}')::int
            USING ERRCODE = '22023';
    END IF;
    -- Erase is final: a memory the tenant erased does not come back.
    SELECT t.id INTO v_erased
    FROM mneme.import_tombstones(ARRAY(SELECT (l ->> 'id')::uuid FROM jsonb_array_elements(import_memories.lines) l
                                       WHERE l ->> 'id' IS NOT NULL)) AS t(id)
    LIMIT 1;
    IF v_erased IS NOT NULL THEN
        RAISE EXCEPTION 'memory % was erased in tenant %: an import does not bring it back', v_erased, mneme._tenant()
            USING ERRCODE = '22023',
                  HINT = 'mneme import skips the memories the tenant erased, with their messages, reviews and events (docs/forgetting.md)';
    END IF;
    PERFORM mneme._mark('importing', 'on');
    IF v_bulk THEN
        PERFORM mneme._set_local('mneme.bulk_load', 'on');
    END IF;
    BEGIN
        PERFORM mneme._import_memory_rows(import_memories.conversation_id, import_memories.lines, v_normalize,
                                          import_memories.embeddings);
    EXCEPTION WHEN unique_violation THEN
        -- Row security hides the other row (and the key from the error):
        -- find the id that collides, one probe insert at a time.
        PERFORM mneme._set_local('mneme.bulk_load', '');
        PERFORM mneme._import_collision(import_memories.conversation_id, import_memories.lines);
        RAISE;
    END;
    IF v_bulk THEN
        PERFORM mneme._set_local('mneme.bulk_load', '');
    END IF;
    PERFORM mneme._mark('importing', '');

    -- (the targets read first, as import_links does)
    RETURN QUERY
    WITH links AS (
        SELECT (x.l ->> 'id')::uuid AS id, k, (x.l ->> k)::uuid AS target
        FROM jsonb_array_elements(import_memories.lines) AS x(l), unnest(ARRAY['supersedes_id', 'confirms_id', 'invalidates_id']) k
        WHERE x.l ->> k IS NOT NULL
    )
    SELECT l.id, l.k, l.target FROM links l
    WHERE NOT l.target = ANY (mneme._present_memories(ARRAY(SELECT t.target FROM links t)));
END
$function$;

CREATE OR REPLACE FUNCTION mneme.import_messages(conversation_id uuid, lines jsonb)
 RETURNS SETOF bigint
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'pg_temp'
 SET jit TO 'off'
AS $function$
DECLARE
    v__entered boolean := mneme._enter($1);
BEGIN
    IF import_messages.conversation_id IS NULL OR import_messages.lines IS NULL THEN
        RAISE EXCEPTION 'conversation_id and lines must not be NULL' USING ERRCODE = '22004';
    END IF;
    IF jsonb_typeof(import_messages.lines) <> 'array' THEN
        RAISE EXCEPTION 'lines must be an array of lines' USING ERRCODE = '22023';
    END IF;
    IF NOT EXISTS (SELECT 1 FROM mneme.message_queue q WHERE q.id = import_messages.conversation_id AND q.tenant_id = mneme._tenant()) THEN
        RAISE EXCEPTION 'conversation % does not exist in this tenant', import_messages.conversation_id USING ERRCODE = 'P0002';
    END IF;
    -- Ids in the lines' order (a bigserial: one statement, ordered input).
    RETURN QUERY
    WITH ins AS (
        INSERT INTO mneme.messages (conversation_id, tenant_id, role, content, created_at, consumed_at, memory_id,
                                    ends_session, embedding)
        SELECT import_messages.conversation_id, mneme._tenant(), r.role, r.content, r.created_at, r.consumed_at,
               r.episode, coalesce(r.ends_session, false), r.embedding
        FROM ROWS FROM (jsonb_to_recordset(import_messages.lines)
                        AS (role text, content text, created_at timestamptz, consumed_at timestamptz, episode uuid,
                            ends_session boolean, embedding real[])) WITH ORDINALITY
             AS r(role, content, created_at, consumed_at, episode, ends_session, embedding, ord)
        ORDER BY r.ord
        RETURNING id
    )
    SELECT ins.id FROM ins ORDER BY ins.id;
END
$function$;

CREATE OR REPLACE FUNCTION mneme.import_missing_links(links jsonb)
 RETURNS TABLE(memory_id uuid, link text, target uuid)
 LANGUAGE plpgsql
 STABLE SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'pg_temp'
 SET jit TO 'off'
AS $function$
DECLARE
    v__entered boolean := mneme._enter(NULL);
BEGIN
    IF import_missing_links.links IS NULL THEN
        RAISE EXCEPTION 'links must not be NULL' USING ERRCODE = '22004';
    END IF;
    IF jsonb_typeof(import_missing_links.links) <> 'array' THEN
        RAISE EXCEPTION 'links must be an array of {memory_id, link, target}' USING ERRCODE = '22023';
    END IF;
    -- (the targets read first: on Citus a subquery correlated with the
    -- links is refused)
    RETURN QUERY
    SELECT (l ->> 'memory_id')::uuid, l ->> 'link', (l ->> 'target')::uuid
    FROM jsonb_array_elements(import_missing_links.links) l
    WHERE NOT (l ->> 'target')::uuid = ANY (mneme._present_memories(
        ARRAY(SELECT (t ->> 'target')::uuid FROM jsonb_array_elements(import_missing_links.links) t)));
END
$function$;

CREATE OR REPLACE FUNCTION mneme.import_present(conversation_id uuid, memory_ids uuid[])
 RETURNS bigint
 LANGUAGE plpgsql
 STABLE SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'pg_temp'
 SET jit TO 'off'
AS $function$
DECLARE
    v__entered boolean := mneme._enter($1);
BEGIN
    IF import_present.conversation_id IS NULL OR import_present.memory_ids IS NULL THEN
        RAISE EXCEPTION 'conversation_id and memory_ids must not be NULL' USING ERRCODE = '22004';
    END IF;
    RETURN (SELECT count(*) FROM mneme.memories m
            WHERE m.conversation_id = import_present.conversation_id AND m.tenant_id = mneme._tenant()
              AND m.id = ANY (import_present.memory_ids));
END
$function$;

CREATE OR REPLACE FUNCTION mneme.import_reviews(conversation_id uuid, lines jsonb)
 RETURNS SETOF bigint
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'pg_temp'
 SET jit TO 'off'
AS $function$
DECLARE
    v__entered boolean := mneme._enter($1);
BEGIN
    IF import_reviews.conversation_id IS NULL OR import_reviews.lines IS NULL THEN
        RAISE EXCEPTION 'conversation_id and lines must not be NULL' USING ERRCODE = '22004';
    END IF;
    IF jsonb_typeof(import_reviews.lines) <> 'array' THEN
        RAISE EXCEPTION 'lines must be an array of lines' USING ERRCODE = '22023';
    END IF;
    PERFORM mneme._mark('importing', 'on');
    RETURN QUERY
    WITH ins AS (
        INSERT INTO mneme.review_log (memory_id, conversation_id, tenant_id, rating, reviewer, defaulted,
                                      stability_before, stability_after, difficulty_before, difficulty_after,
                                      state_before, state_after, last_reviewed_before, reviewed_at, matched_queries, asked_in,
                                      created_at)
        SELECT r.memory, import_reviews.conversation_id, mneme._tenant(), r.rating, r.reviewer, r.defaulted,
               r.stability_before, r.stability_after, r.difficulty_before, r.difficulty_after, r.state_before,
               r.state_after, r.last_reviewed_before, r.reviewed_at, coalesce(r.matched_queries, '{}'), r.asked_in,
               r.created_at
        FROM ROWS FROM (jsonb_to_recordset(import_reviews.lines)
                        AS (memory uuid, rating text, reviewer text, defaulted boolean, stability_before float8,
                            stability_after float8, difficulty_before float8, difficulty_after float8, state_before text,
                            state_after text, last_reviewed_before timestamptz, reviewed_at timestamptz,
                            matched_queries text[], asked_in uuid, created_at timestamptz)) WITH ORDINALITY
             AS r(memory, rating, reviewer, defaulted, stability_before, stability_after, difficulty_before,
                  difficulty_after, state_before, state_after, last_reviewed_before, reviewed_at, matched_queries,
                  asked_in, created_at, ord)
        ORDER BY r.ord
        RETURNING id
    )
    SELECT ins.id FROM ins ORDER BY ins.id;
    PERFORM mneme._mark('importing', '');
END
$function$;

CREATE OR REPLACE FUNCTION mneme.import_tombstones(ids uuid[])
 RETURNS SETOF uuid
 LANGUAGE plpgsql
 STABLE SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'pg_temp'
 SET jit TO 'off'
AS $function$
DECLARE
    v__entered boolean := mneme._enter(NULL);
    v_tenant text := mneme._tenant();
BEGIN
    IF import_tombstones.ids IS NULL THEN
        RAISE EXCEPTION 'ids must not be NULL' USING ERRCODE = '22004';
    END IF;
    -- (two reads by value, no correlated subquery: Citus plans each over
    -- the shards)
    RETURN QUERY
    SELECT e.memory_id FROM mneme.memory_events e
    WHERE e.memory_id = ANY (import_tombstones.ids) AND e.event = 'erased' AND e.tenant_id = v_tenant
    UNION
    SELECT e.conversation_id FROM mneme.memory_events e
    WHERE e.conversation_id = ANY (import_tombstones.ids) AND e.memory_id IS NULL AND e.event = 'erased'
      AND e.tenant_id = v_tenant;
END
$function$;

CREATE OR REPLACE FUNCTION mneme.import_unembedded(conversation_id uuid, after uuid DEFAULT NULL::uuid, n integer DEFAULT 64)
 RETURNS TABLE(memory_id uuid, memory_text text)
 LANGUAGE plpgsql
 STABLE SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'pg_temp'
 SET jit TO 'off'
AS $function$
DECLARE
    v__entered boolean := mneme._enter($1);
BEGIN
    IF import_unembedded.conversation_id IS NULL THEN
        RAISE EXCEPTION 'conversation_id must not be NULL' USING ERRCODE = '22004';
    END IF;
    RETURN QUERY
    SELECT m.id, mneme.memory_text(m.title, m.summary, m.content)
    FROM mneme.memories m
    WHERE m.conversation_id = import_unembedded.conversation_id AND m.tenant_id = mneme._tenant()
      AND m.embedding IS NULL AND m.id > coalesce(import_unembedded.after, '00000000-0000-0000-0000-000000000000')
    ORDER BY m.id
    LIMIT greatest(1, least(coalesce(import_unembedded.n, 64), 10000));
END
$function$;

CREATE OR REPLACE FUNCTION mneme.import_unembedded_messages(conversation_id uuid, after bigint DEFAULT NULL::bigint, n integer DEFAULT 64)
 RETURNS TABLE(message_id bigint, content text)
 LANGUAGE plpgsql
 STABLE SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'pg_temp'
 SET jit TO 'off'
AS $function$
DECLARE
    v__entered boolean := mneme._enter($1);
BEGIN
    -- The messages of episodes: the segment job embeds those (external
    -- embedder), the context ranks their turns by them.
    IF import_unembedded_messages.conversation_id IS NULL THEN
        RAISE EXCEPTION 'conversation_id must not be NULL' USING ERRCODE = '22004';
    END IF;
    RETURN QUERY
    SELECT g.id, g.content
    FROM mneme.messages g
    WHERE g.conversation_id = import_unembedded_messages.conversation_id AND g.tenant_id = mneme._tenant()
      AND g.memory_id IS NOT NULL AND g.embedding IS NULL AND g.id > coalesce(import_unembedded_messages.after, 0)
    ORDER BY g.id
    LIMIT greatest(1, least(coalesce(import_unembedded_messages.n, 64), 10000));
END
$function$;

CREATE OR REPLACE FUNCTION mneme.inspect(id uuid)
 RETURNS TABLE(memory_id uuid, conversation_id uuid, kind text, status text, status_reason text, label text, pinned boolean, summary text, content text, stability double precision, difficulty double precision, last_reviewed_at timestamp with time zone, review_count integer, supersedes_id uuid, superseded_by uuid, created_at timestamp with time zone, confidence_score real, source_type text, source_ref text, source_message_ids bigint[], valid_until timestamp with time zone, last_confirmed_at timestamp with time zone, confirms_id uuid, invalidates_id uuid, slot text, revision text)
 LANGUAGE plpgsql
 STABLE SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'pg_temp'
 SET jit TO 'off'
AS $function$
#variable_conflict use_column
DECLARE
    v__entered boolean := mneme._enter(NULL);
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
$function$;

CREATE OR REPLACE FUNCTION mneme.llm_usage(since timestamp with time zone, until timestamp with time zone, group_by text DEFAULT 'day'::text)
 RETURNS TABLE(key text, calls bigint, failed_calls bigint, estimated_calls bigint, prompt_tokens bigint, completion_tokens bigint, avg_latency_ms double precision, estimated_cost numeric)
 LANGUAGE plpgsql
 STABLE SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'pg_temp'
 SET jit TO 'off'
AS $function$
#variable_conflict use_column
DECLARE
    v__entered boolean := mneme._enter(NULL);
    v_prices jsonb := mneme.setting('llm_prices');
BEGIN
    IF llm_usage.since IS NULL OR llm_usage.until IS NULL OR llm_usage.group_by IS NULL THEN
        RAISE EXCEPTION 'since, until and group_by must not be NULL' USING ERRCODE = '22004',
            HINT = 'e.g. mneme.llm_usage(now() - interval ''30 days'', now(), ''tenant'')';
    END IF;
    IF NOT llm_usage.group_by = ANY (ARRAY['tenant', 'kind', 'model', 'day']) THEN
        RAISE EXCEPTION 'group_by must be tenant, kind, model or day, got %', left(llm_usage.group_by, 80)
            USING ERRCODE = '22023';
    END IF;
    IF NOT isfinite(llm_usage.since) OR NOT isfinite(llm_usage.until) OR llm_usage.until < llm_usage.since THEN
        RAISE EXCEPTION 'since (%) and until (%) must be finite times, since first', llm_usage.since, llm_usage.until
            USING ERRCODE = '22008';
    END IF;
    RETURN QUERY
    WITH rows AS (
        SELECT c.tenant_id, c.job_kind, c.model, (c.at AT TIME ZONE 'UTC')::date AS day,
               1::bigint AS calls, (c.outcome <> 'ok')::int::bigint AS failed, (c.usage <> 'reported')::int::bigint AS estimated,
               c.prompt_tokens, c.completion_tokens, c.latency_ms
        FROM mneme.llm_calls c
        WHERE c.at >= llm_usage.since AND c.at < llm_usage.until
        UNION ALL
        -- (a day's totals count when the day starts within the range)
        SELECT d.tenant_id, d.job_kind, d.model, d.day, d.calls, d.failed_calls, d.estimated_calls,
               d.prompt_tokens, d.completion_tokens, d.latency_ms
        FROM mneme.llm_usage_days d
        WHERE (d.day::timestamp AT TIME ZONE 'UTC') >= llm_usage.since AND (d.day::timestamp AT TIME ZONE 'UTC') < llm_usage.until
    )
    SELECT CASE llm_usage.group_by WHEN 'tenant' THEN r.tenant_id WHEN 'kind' THEN r.job_kind
                                   WHEN 'model' THEN r.model ELSE r.day::text END AS key,
           sum(r.calls)::bigint, sum(r.failed)::bigint, sum(r.estimated)::bigint,
           sum(r.prompt_tokens)::bigint, sum(r.completion_tokens)::bigint,
           sum(r.latency_ms) / nullif(sum(r.calls), 0),
           sum(mneme._llm_cost(v_prices, r.model, r.prompt_tokens, r.completion_tokens))
    FROM rows r
    GROUP BY 1
    ORDER BY 1;
END
$function$;

CREATE OR REPLACE FUNCTION mneme.lock_queued(conversation_id uuid, message_ids bigint[])
 RETURNS boolean
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'pg_temp'
 SET jit TO 'off'
AS $function$
#variable_conflict use_column
DECLARE
    v__entered boolean := mneme._enter($1);
BEGIN
    IF lock_queued.conversation_id IS NULL OR lock_queued.message_ids IS NULL THEN
        RAISE EXCEPTION 'conversation_id and message_ids must not be NULL' USING ERRCODE = '22004';
    END IF;
    -- The queue row lock serialises segmentations of one conversation (and
    -- add_message): whoever holds it sees the other's committed drain.
    PERFORM 1 FROM mneme.message_queue q WHERE q.id = lock_queued.conversation_id FOR UPDATE;
    IF NOT FOUND THEN
        RETURN false;
    END IF;
    RETURN (SELECT count(*) FROM mneme.messages m
            WHERE m.id = ANY (lock_queued.message_ids)
              AND m.conversation_id = lock_queued.conversation_id
              AND m.consumed_at IS NULL) = cardinality(ARRAY(SELECT DISTINCT unnest(lock_queued.message_ids)));
END
$function$;

CREATE OR REPLACE FUNCTION mneme.memories_to_embed()
 RETURNS TABLE(memory_id uuid, memory_text text)
 LANGUAGE plpgsql
 STABLE SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'pg_temp'
 SET jit TO 'off'
AS $function$
DECLARE
    v__entered boolean := mneme._enter(NULL);
BEGIN
    -- plpgsql: mneme.memory_text is defined by a later file (101-hash-embed.sql).
    RETURN QUERY
    SELECT m.id, mneme.memory_text(m.title, m.summary, m.content)
    FROM mneme.memories m WHERE m.embedding IS NULL ORDER BY m.id;
END
$function$;

CREATE OR REPLACE FUNCTION mneme.memory_event_log(memory_id uuid)
 RETURNS TABLE(at timestamp with time zone, event text, reason text, actor text, caller name)
 LANGUAGE plpgsql
 STABLE SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'pg_temp'
 SET jit TO 'off'
AS $function$
#variable_conflict use_column
DECLARE
    v__entered boolean := mneme._enter(NULL);
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
$function$;

CREATE OR REPLACE FUNCTION mneme.memory_reviews(memory_id uuid)
 RETURNS TABLE(reviewed_at timestamp with time zone, rating text, reviewer text, defaulted boolean, stability_before double precision, stability_after double precision, difficulty_before double precision, difficulty_after double precision, state_before text, state_after text, last_reviewed_before timestamp with time zone, matched_queries text[], job_id bigint, evidence jsonb)
 LANGUAGE plpgsql
 STABLE SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'pg_temp'
 SET jit TO 'off'
AS $function$
#variable_conflict use_column
DECLARE
    v__entered boolean := mneme._enter(NULL);
    v_conv uuid;
BEGIN
    IF memory_reviews.memory_id IS NULL THEN
        RAISE EXCEPTION 'memory_id must not be NULL' USING ERRCODE = '22004';
    END IF;
    v_conv := mneme._memory_conversation(memory_reviews.memory_id);
    IF v_conv IS NULL THEN
        RAISE EXCEPTION 'memory % does not exist', memory_reviews.memory_id USING ERRCODE = 'P0002',
            HINT = 'the memory is not in this tenant: check the id and mneme.set_tenant (or the login''s tenant); an erased memory leaves only its events: SELECT * FROM mneme.memory_event_log(id)';
    END IF;
    RETURN QUERY
    SELECT l.reviewed_at, l.rating, l.reviewer, l.defaulted, l.stability_before, l.stability_after,
           l.difficulty_before, l.difficulty_after, l.state_before, l.state_after, l.last_reviewed_before,
           l.matched_queries, l.job_id, l.evidence
    FROM mneme.review_log l
    WHERE l.memory_id = memory_reviews.memory_id AND l.conversation_id = v_conv
    ORDER BY l.reviewed_at, l.id;
END
$function$;

CREATE OR REPLACE FUNCTION mneme.pin(memory_id uuid, pinned boolean DEFAULT true)
 RETURNS void
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'pg_temp'
 SET jit TO 'off'
AS $function$
#variable_conflict use_column
DECLARE
    v__entered boolean := mneme._enter(NULL);
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
$function$;

CREATE OR REPLACE FUNCTION mneme.queued_messages(conversation_id uuid, through_id bigint DEFAULT NULL::bigint, before_gap boolean DEFAULT false)
 RETURNS TABLE(id bigint, role text, content text, created_at timestamp with time zone)
 LANGUAGE plpgsql
 STABLE SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'pg_temp'
 SET jit TO 'off'
AS $function$
#variable_conflict use_column
DECLARE
    v__entered boolean := mneme._enter($1);
    v_gap_id bigint;
BEGIN
    IF queued_messages.conversation_id IS NULL THEN
        RAISE EXCEPTION 'conversation_id must not be NULL' USING ERRCODE = '22004';
    END IF;
    IF queued_messages.before_gap THEN
        SELECT min(x.id) INTO v_gap_id FROM (
            SELECT m.id, m.created_at - lag(m.created_at) OVER (ORDER BY m.id) AS since_prev
            FROM mneme.messages m
            WHERE m.conversation_id = queued_messages.conversation_id
              AND m.consumed_at IS NULL
              AND (queued_messages.through_id IS NULL OR m.id <= queued_messages.through_id)) x
        WHERE x.since_prev > make_interval(secs => mneme.setting('segment_gap_seconds')::float8);
    END IF;
    RETURN QUERY
    SELECT m.id, m.role, m.content, m.created_at
    FROM mneme.messages m
    WHERE m.conversation_id = queued_messages.conversation_id
      AND m.consumed_at IS NULL
      AND (queued_messages.through_id IS NULL OR m.id <= queued_messages.through_id)
      AND (v_gap_id IS NULL OR m.id < v_gap_id)
    ORDER BY m.id;
END
$function$;

CREATE OR REPLACE FUNCTION mneme.queued_sessions(conversation_id uuid, max_messages integer)
 RETURNS TABLE(id bigint, role text, content text, created_at timestamp with time zone, session integer, closed boolean)
 LANGUAGE plpgsql
 STABLE SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'pg_temp'
 SET jit TO 'off'
AS $function$
#variable_conflict use_column
DECLARE
    v__entered boolean := mneme._enter($1);
    v_gap interval := make_interval(secs => mneme.setting('segment_gap_seconds')::float8);
BEGIN
    IF queued_sessions.conversation_id IS NULL THEN
        RAISE EXCEPTION 'conversation_id must not be NULL' USING ERRCODE = '22004';
    END IF;
    IF queued_sessions.max_messages IS NULL OR queued_sessions.max_messages < 1 THEN
        RAISE EXCEPTION 'max_messages must be at least 1, got %', coalesce(queued_sessions.max_messages::text, 'NULL')
            USING ERRCODE = '22023';
    END IF;
    RETURN QUERY
    WITH q AS (
        SELECT m.id, m.role, m.content, m.created_at, m.ends_session,
               lag(m.id) OVER w AS prev_id, lag(m.created_at) OVER w AS prev_at, lag(m.ends_session) OVER w AS prev_end
          FROM (SELECT m.id, m.role, m.content, m.created_at, m.ends_session FROM mneme.messages m
                 WHERE m.conversation_id = queued_sessions.conversation_id AND m.consumed_at IS NULL
                 ORDER BY m.id LIMIT queued_sessions.max_messages) m
        WINDOW w AS (ORDER BY m.id)
    ), s AS (
        SELECT q.*, sum(CASE WHEN q.prev_id IS NULL OR q.prev_end OR q.created_at - q.prev_at > v_gap
                                  OR EXISTS (SELECT 1 FROM mneme.messages x
                                              WHERE x.conversation_id = queued_sessions.conversation_id
                                                AND x.id > q.prev_id AND x.id < q.id)
                             THEN 1 ELSE 0 END) OVER (ORDER BY q.id) AS session
          FROM q
    )
    SELECT s.id, s.role, s.content, s.created_at, s.session::int,
           s.session < max(s.session) OVER () OR bool_or(s.ends_session) OVER (PARTITION BY s.session)
           -- the last one read, followed by a message that is not queued
           -- (set-aside messages put back by retry_job): it cannot grow
           OR coalesce((SELECT x.consumed_at IS NOT NULL FROM mneme.messages x
                         WHERE x.conversation_id = queued_sessions.conversation_id
                           AND x.id > (SELECT max(q.id) FROM q)
                         ORDER BY x.id LIMIT 1), false)
      FROM s ORDER BY s.id;
END
$function$;

CREATE OR REPLACE FUNCTION mneme.reactivate(memory_id uuid)
 RETURNS boolean
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'pg_temp'
 SET jit TO 'off'
AS $function$
DECLARE
    v__entered boolean := mneme._enter(NULL);
    v_status text;
    v_conv   uuid;
BEGIN
    IF reactivate.memory_id IS NULL THEN
        RAISE EXCEPTION 'memory_id must not be NULL' USING ERRCODE = '22004';
    END IF;
    v_conv := mneme._memory_conversation(reactivate.memory_id);
    SELECT m.status INTO v_status FROM mneme.memories m WHERE m.conversation_id = v_conv AND m.id = reactivate.memory_id FOR UPDATE;
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
    PERFORM mneme._mark('event_reason', 'reactivated by hand');
    UPDATE mneme.memories m
    SET status = 'active', status_reason = NULL, last_reviewed_at = greatest(m.last_reviewed_at, now()), updated_at = now()
    WHERE m.conversation_id = v_conv AND m.id = reactivate.memory_id;
    PERFORM mneme._mark('event_reason', '');
    RETURN true;
END
$function$;

CREATE OR REPLACE FUNCTION mneme.recent_memories(conversation_id uuid, k integer)
 RETURNS TABLE(memory_id uuid, summary text, content text)
 LANGUAGE plpgsql
 STABLE SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'pg_temp'
 SET jit TO 'off'
AS $function$
DECLARE
    v__entered boolean := mneme._enter($1);
BEGIN
    IF recent_memories.conversation_id IS NULL THEN
        RAISE EXCEPTION 'conversation_id must not be NULL' USING ERRCODE = '22004';
    END IF;
    IF k IS NULL OR k < 0 OR k > 1000 THEN
        RAISE EXCEPTION 'k must be 0 to 1000, got %', coalesce(k::text, 'NULL') USING ERRCODE = '22023';
    END IF;
    RETURN QUERY
    SELECT m.id, coalesce(m.summary, ''), m.content
    FROM mneme.memories m
    WHERE m.conversation_id = recent_memories.conversation_id AND m.status = 'active'
    ORDER BY m.created_at DESC, m.id
    LIMIT k;
END
$function$;

CREATE OR REPLACE FUNCTION mneme.record_llm_calls(job_id bigint, attempt integer, calls jsonb)
 RETURNS integer
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'pg_temp'
 SET jit TO 'off'
AS $function$
DECLARE
    v__entered boolean := mneme._enter(NULL);
    v_job mneme.jobs;
    v_n   int;
    c     record;
BEGIN
    IF record_llm_calls.job_id IS NULL OR record_llm_calls.attempt IS NULL OR record_llm_calls.calls IS NULL THEN
        RAISE EXCEPTION 'job_id, attempt and calls must not be NULL' USING ERRCODE = '22004';
    END IF;
    IF jsonb_typeof(record_llm_calls.calls) <> 'array' THEN
        RAISE EXCEPTION 'calls must be a JSON array, got %', jsonb_typeof(record_llm_calls.calls)
            USING ERRCODE = '22023', HINT = 'one object per model call, with the columns of mneme.llm_calls';
    END IF;
    IF record_llm_calls.attempt < 1 THEN
        RAISE EXCEPTION 'attempt must be at least 1, got %', record_llm_calls.attempt USING ERRCODE = '22023';
    END IF;
    SELECT * INTO v_job FROM mneme.jobs j WHERE j.id = record_llm_calls.job_id;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'job % does not exist', record_llm_calls.job_id USING ERRCODE = 'P0002',
            HINT = 'an erased conversation''s jobs are gone, and with them its usage';
    END IF;
    -- A row at a time: a job makes a few calls, and on Citus an INSERT ...
    -- SELECT into a distributed table under row security is refused
    -- (its COPY is not supported with row-level security).
    v_n := 0;
    FOR c IN SELECT * FROM jsonb_to_recordset(record_llm_calls.calls)
             AS x(call text, purpose text, model text, endpoint text, prompt_tokens bigint, completion_tokens bigint,
                  usage text, latency_ms float8, outcome text, retries int, at timestamptz) LOOP
        INSERT INTO mneme.llm_calls (tenant_id, conversation_id, job_id, job_kind, attempt, call, purpose, model, endpoint,
                                     prompt_tokens, completion_tokens, usage, latency_ms, outcome, retries, at)
        VALUES (v_job.tenant_id, v_job.conversation_id, v_job.id, v_job.kind, record_llm_calls.attempt, c.call, c.purpose,
                c.model, coalesce(c.endpoint, ''), c.prompt_tokens, c.completion_tokens, c.usage, c.latency_ms, c.outcome,
                coalesce(c.retries, 0), coalesce(c.at, now()));
        v_n := v_n + 1;
    END LOOP;
    RETURN v_n;
END
$function$;

CREATE OR REPLACE FUNCTION mneme.record_retrieval(conversation_id uuid, query text, memory_ids uuid[])
 RETURNS void
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'pg_temp'
 SET jit TO 'off'
AS $function$
DECLARE
    v__entered boolean := mneme._enter($1);
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
$function$;

CREATE OR REPLACE FUNCTION mneme.release_job(id bigint, worker text, attempt integer)
 RETURNS text
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'pg_temp'
 SET jit TO 'off'
AS $function$
#variable_conflict use_column
DECLARE
    v__entered boolean := mneme._enter(NULL);
    j mneme.jobs;
    v_job_conv uuid := mneme._job_conversation(release_job.id);
BEGIN
    SELECT * INTO j FROM mneme.jobs
     WHERE conversation_id = v_job_conv AND id = release_job.id AND state = 'running' AND locked_by = release_job.worker AND attempts = release_job.attempt
       FOR UPDATE;
    IF NOT FOUND THEN
        RETURN NULL;
    END IF;
    -- An interrupted run was not the job's fault: it does not count.
    RETURN mneme._requeue_job(release_job.id, now(), j.last_error, greatest(j.attempts - 1, 0));
END
$function$;

CREATE OR REPLACE FUNCTION mneme.remember(conversation_id uuid, content text, label text DEFAULT NULL::text, pinned boolean DEFAULT false, valid_until timestamp with time zone DEFAULT NULL::timestamp with time zone, supersedes uuid DEFAULT NULL::uuid, title text DEFAULT NULL::text, source_ref text DEFAULT NULL::text, at timestamp with time zone DEFAULT NULL::timestamp with time zone)
 RETURNS uuid
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'pg_temp'
 SET jit TO 'off'
AS $function$
#variable_conflict use_column
DECLARE
    v__entered boolean := mneme._enter($1);
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
$function$;

CREATE OR REPLACE FUNCTION mneme.reset_initial_state(conversation_id uuid DEFAULT NULL::uuid, dry_run boolean DEFAULT false)
 RETURNS bigint
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'pg_temp'
 SET jit TO 'off'
AS $function$
DECLARE
    v__entered boolean := mneme._enter($1);
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
$function$;

CREATE OR REPLACE FUNCTION mneme.retrieve(conversation_id uuid, query text, k integer DEFAULT 5, query_embedding real[] DEFAULT NULL::real[], since timestamp with time zone DEFAULT NULL::timestamp with time zone, until timestamp with time zone DEFAULT NULL::timestamp with time zone, at timestamp with time zone DEFAULT now(), scope text DEFAULT 'conversation'::text, as_of timestamp with time zone DEFAULT NULL::timestamp with time zone, include_history boolean DEFAULT false)
 RETURNS SETOF mneme.retrieval
 LANGUAGE plpgsql
 SECURITY DEFINER ROWS 10
 SET search_path TO 'pg_catalog', 'pg_temp'
 SET jit TO 'off'
AS $function$
DECLARE
    v__entered boolean := mneme._enter($1);
    v_rows mneme.retrieval[];
BEGIN
    PERFORM mneme._require_primary('mneme.retrieve');
    v_rows := ARRAY(SELECT s FROM mneme.search(retrieve.conversation_id, retrieve.query, retrieve.k,
                                               retrieve.query_embedding, retrieve.since, retrieve.until,
                                               retrieve.at, retrieve.scope, retrieve.as_of,
                                               retrieve.include_history) AS s);
    IF cardinality(v_rows) > 0 THEN
        PERFORM mneme.add_pending_review(retrieve.conversation_id,
                                         ARRAY(SELECT (x).memory_id FROM unnest(v_rows) WITH ORDINALITY AS x ORDER BY ordinality),
                                         retrieve.query);
    END IF;
    RETURN QUERY SELECT * FROM unnest(v_rows);
END
$function$;

CREATE OR REPLACE FUNCTION mneme.retrieve_markdown(conversation_id uuid, query text, k integer DEFAULT 5, query_embedding real[] DEFAULT NULL::real[], since timestamp with time zone DEFAULT NULL::timestamp with time zone, until timestamp with time zone DEFAULT NULL::timestamp with time zone, at timestamp with time zone DEFAULT now(), scope text DEFAULT 'conversation'::text, as_of timestamp with time zone DEFAULT NULL::timestamp with time zone, include_history boolean DEFAULT false)
 RETURNS text
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'pg_temp'
 SET jit TO 'off'
AS $function$
DECLARE
    v__entered boolean := mneme._enter($1);
    v_md text;
BEGIN
    SELECT string_agg(format(E'%s. %s%s\n   - when: %s; kind: %s; label: %s%s\n   - why: %s; score %s (rrf %s x retrievability %s)',
               n,
               CASE WHEN r.title IS NOT NULL AND r.title <> '' THEN '**' || r.title || '**: ' ELSE '' END,
               replace(coalesce(nullif(r.summary, ''), r.content), E'\n', ' '),
               to_char(r.created_at AT TIME ZONE 'UTC', 'YYYY-MM-DD HH24:MI "UTC"'),
               r.kind, r.label, CASE WHEN r.pinned THEN ', pinned' ELSE '' END
                   || CASE WHEN r.status <> 'active' THEN format(', %s', upper(r.status)) ELSE '' END,
               concat_ws(' and ',
                         CASE WHEN r.bm25_rank IS NOT NULL THEN format('keywords (BM25 #%s)', r.bm25_rank) END,
                         CASE WHEN r.vector_rank IS NOT NULL THEN format('similarity (vector #%s)', r.vector_rank) END),
               round(r.score::numeric, 5), round(r.rrf::numeric, 5), round(r.retrievability::numeric, 3)),
               E'\n' ORDER BY n)
    INTO v_md
    FROM mneme.retrieve(retrieve_markdown.conversation_id, retrieve_markdown.query, retrieve_markdown.k,
                        retrieve_markdown.query_embedding, retrieve_markdown.since, retrieve_markdown.until,
                        retrieve_markdown.at, retrieve_markdown.scope, retrieve_markdown.as_of,
                        retrieve_markdown.include_history)
         WITH ORDINALITY AS r(memory_id, kind, summary, content, created_at, score, rrf, bm25_rank, vector_rank,
                              retrievability, title, label, pinned, bm25_score, vector_distance, status,
                              confidence_score, n);
    RETURN format(E'## Relevant memories for "%s"\n\n%s\n', retrieve_markdown.query,
                  coalesce(v_md, '(none found)'));
END
$function$;

CREATE OR REPLACE FUNCTION mneme.retry_job(id bigint)
 RETURNS void
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'pg_temp'
 SET jit TO 'off'
AS $function$
#variable_conflict use_column
DECLARE
    v__entered boolean := mneme._enter(NULL);
    j mneme.jobs;
    v_job_conv uuid := mneme._job_conversation(retry_job.id);
BEGIN
    IF retry_job.id IS NULL THEN
        RAISE EXCEPTION 'job id must not be NULL' USING ERRCODE = '22004';
    END IF;
    SELECT * INTO j FROM mneme.jobs WHERE conversation_id = v_job_conv AND id = retry_job.id FOR UPDATE;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'job % does not exist', retry_job.id
            USING ERRCODE = 'P0002', HINT = 'SELECT id, kind, state FROM mneme.jobs WHERE state = ''failed'' lists failed jobs';
    END IF;
    IF j.state <> 'failed' THEN
        RAISE EXCEPTION 'job % is %, only a failed job can be retried', retry_job.id, j.state
            USING ERRCODE = '55000', HINT = 'pending and running jobs are retried by the sidecar already';
    END IF;
    -- A segment job's payload only says why it was enqueued (the job reads
    -- the whole queue): one its handler could not read, or that its kind's
    -- rule does not take, is replaced by a plain check, saying so, so the
    -- retry does not fail the same way again.
    IF j.kind = 'segment' AND (NOT coalesce(jsonb_path_match(j.payload, (SELECT k.payload_rule FROM mneme.job_kinds k WHERE k.kind = 'segment')), false)
                               OR j.payload::text ~ '_id": -?[0-9]*[.eE]') THEN
        RAISE NOTICE 'job %: its payload % is not what the segment handler reads; retried as {"check": true}',
            retry_job.id, left(j.payload::text, 200);
        UPDATE mneme.jobs SET payload = '{"check": true, "reason": "retry"}'
         WHERE conversation_id = v_job_conv AND id = retry_job.id;
    END IF;
    BEGIN
        UPDATE mneme.jobs
           SET state = 'pending', attempts = 0, run_at = now(), finished_at = NULL, updated_at = now()
         WHERE conversation_id = v_job_conv AND id = retry_job.id;
    EXCEPTION WHEN unique_violation THEN
        RAISE EXCEPTION 'job % cannot be requeued: an equivalent job is already pending', retry_job.id
            USING ERRCODE = '23505', HINT = 'the pending job does the same work; see SELECT * FROM mneme.jobs WHERE state = ''pending''';
    END;
    -- requeued: the replication transport sees inserts only, so it listens
    -- for these notifications (and only these) as well.
    PERFORM pg_notify('mneme_jobs', 'requeued');  -- no id or kind: any role may LISTEN
END
$function$;

CREATE OR REPLACE FUNCTION mneme.review_targets(memory_ids uuid[], lock boolean DEFAULT false)
 RETURNS TABLE(id uuid, conversation_id uuid, summary text, content text, status text, stability double precision, difficulty double precision, fsrs_state text, last_reviewed_at timestamp with time zone, review_count integer)
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'pg_temp'
 SET jit TO 'off'
AS $function$
#variable_conflict use_column
DECLARE
    v__entered boolean := mneme._enter(NULL);
BEGIN
    IF review_targets.memory_ids IS NULL THEN
        RAISE EXCEPTION 'memory_ids must not be NULL' USING ERRCODE = '22004';
    END IF;
    IF review_targets.lock THEN
        -- In the one lock order (mneme._lock_memories), so concurrent
        -- reviews and revisions of overlapping sets never deadlock.
        PERFORM mneme._lock_memories(review_targets.memory_ids);
    END IF;
    RETURN QUERY
    SELECT m.id, m.conversation_id, m.summary, m.content, m.status, m.stability, m.difficulty,
           m.fsrs_state, m.last_reviewed_at, m.review_count
    FROM mneme.memories m WHERE m.id = ANY (review_targets.memory_ids)
    ORDER BY m.id;
END
$function$;

CREATE OR REPLACE FUNCTION mneme.revision_candidates(memory_id uuid, k integer DEFAULT NULL::integer, same_slot text DEFAULT NULL::text)
 RETURNS TABLE(id uuid, content text, at timestamp with time zone, label text, slot text, score double precision)
 LANGUAGE plpgsql
 STABLE SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'pg_temp'
 SET jit TO 'off'
AS $function$
#variable_conflict use_column
DECLARE
    v__entered boolean := mneme._enter(NULL);
    v_new   mneme.memories;
    v_k     int := coalesce(revision_candidates.k, mneme.setting('revision_candidates')::int);
    v_scope text := mneme.setting('revision_scope') #>> '{}';
    v_convs uuid[];
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
    RETURN QUERY
    WITH s AS (
        SELECT s.memory_id, s.score
        FROM mneme.search(v_new.conversation_id, left(v_new.content, 10000), 100,
                          CASE WHEN mneme.setting('embedder') #>> '{}' = 'hash' THEN NULL ELSE '{}'::real[] END,
                          scope => v_scope) s
        WHERE s.memory_id <> v_new.id AND s.kind = 'semantic'
        ORDER BY s.score DESC, s.memory_id
        LIMIT v_k
    ), sl AS (
        SELECT m.id AS memory_id, 0::float8 AS score
        FROM mneme.memories m
        WHERE revision_candidates.same_slot IS NOT NULL AND m.slot = lower(btrim(revision_candidates.same_slot))
          AND m.conversation_id = ANY (v_convs) AND m.status = 'active' AND m.id <> v_new.id
          AND NOT EXISTS (SELECT 1 FROM s WHERE s.memory_id = m.id)
        ORDER BY m.created_at DESC
        LIMIT mneme.setting('revision_slot_candidates')::int
    )
    SELECT m.id, m.content, m.created_at, m.label, m.slot, c.score
    FROM (SELECT * FROM s UNION ALL SELECT * FROM sl) c JOIN mneme.memories m ON m.id = c.memory_id
    ORDER BY c.score DESC, m.created_at DESC, m.id;
END
$function$;

CREATE OR REPLACE FUNCTION mneme.schedule_cleanup(after interval DEFAULT NULL::interval)
 RETURNS bigint
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'pg_temp'
 SET jit TO 'off'
AS $function$
DECLARE
    v__entered boolean := mneme._enter(NULL);
    v_every interval := mneme._interval_setting('cleanup_interval');
    v_at    timestamptz;
BEGIN
    IF v_every IS NULL THEN
        RETURN NULL;  -- the operator runs mneme.cleanup() (pg_cron) or nothing
    END IF;
    -- At most 100 years: the job's run_at must stay a time the sidecar's Go
    -- times carry (mneme._check_time).
    IF after < interval '0' OR after > interval '100 years' THEN
        RAISE EXCEPTION 'after must be from 0 to 100 years, got %', after USING ERRCODE = '22023';
    END IF;
    IF after IS NOT NULL THEN
        v_at := now() + after;
    ELSE
        SELECT max(j.finished_at) + v_every INTO v_at FROM mneme.jobs j WHERE j.kind = 'cleanup' AND j.state = 'done';
        v_at := greatest(coalesce(v_at, now()), now());
    END IF;
    -- One pending cleanup at a time: the dedupe key returns the pending one.
    RETURN mneme.enqueue_job('cleanup', NULL, mneme._cleanup_payload(), 'cleanup', v_at);
END
$function$;

CREATE OR REPLACE FUNCTION mneme.search(conversation_id uuid, query text, k integer DEFAULT 5, query_embedding real[] DEFAULT NULL::real[], since timestamp with time zone DEFAULT NULL::timestamp with time zone, until timestamp with time zone DEFAULT NULL::timestamp with time zone, at timestamp with time zone DEFAULT now(), scope text DEFAULT 'conversation'::text, as_of timestamp with time zone DEFAULT NULL::timestamp with time zone, include_history boolean DEFAULT false)
 RETURNS SETOF mneme.retrieval
 LANGUAGE plpgsql
 STABLE SECURITY DEFINER ROWS 10
 SET search_path TO 'pg_catalog', 'pg_temp'
 SET jit TO 'off'
AS $function$
DECLARE
    v__entered boolean := mneme._enter($1);
    v_at      timestamptz := search.at;
    v_rrf_k   float8 := mneme.setting('rrf_k')::float8;
    -- The built-in hash embedder's vectors are lexical (hashed words and
    -- trigrams): mostly redundant with BM25 and noisier, so its leg weighs
    -- less in the fusion (setting rrf_hash_vector_weight; docs/eval.md).
    v_vec_w   float8 := CASE WHEN mneme.setting('embedder') #>> '{}' = 'hash'
                             THEN mneme.setting('rrf_hash_vector_weight')::float8 ELSE 1 END;
    v_weights jsonb := mneme.setting('label_weights');
    v_convs   uuid[];
    v_emb     real[];
    v_rw      float8 := mneme.setting('retrievability_weight')::float8;
    v_cw      float8 := mneme.setting('confidence_weight')::float8;
BEGIN
    IF search.include_history IS NULL THEN
        RAISE EXCEPTION 'include_history must not be NULL' USING ERRCODE = '22004';
    END IF;
    PERFORM mneme._check_search_arguments(search.conversation_id, search.query, search.k, search.since, search.until,
                                          v_at, search.as_of);
    IF v_rw IS NULL OR v_rw < 0 OR v_rw = 'Infinity' THEN
        RAISE EXCEPTION 'setting retrievability_weight must be a finite number >= 0, got %', v_rw
            USING ERRCODE = '22023', HINT = 'SELECT mneme.set_setting(''retrievability_weight'', ''1'') restores the default';
    END IF;
    v_convs := mneme._scope_conversations(search.conversation_id, search.scope);
    IF NOT mneme._readable_conversation(search.conversation_id) THEN
        RETURN;  -- another tenant's: not even its statistics are read (no timing side channel)
    END IF;
    v_emb := mneme._search_query_embedding(search.query, search.query_embedding);

    RETURN QUERY
    WITH f AS MATERIALIZED (
        -- The vector leg takes k * vector_candidates_per_k (an HNSW walk
        -- costs its ef_search, 2 per row asked for), the BM25 leg
        -- retrieve_candidates: with rrf_k 60 the fused top 10 moves with
        -- ranks down to 100 (docs/performance.md), hence the default 10.
        SELECT * FROM mneme._search_candidates(v_convs, search.query, v_emb, mneme.setting('retrieve_candidates')::int,
                                               least(mneme.setting('retrieve_candidates')::int,
                                                     search.k * mneme.setting('vector_candidates_per_k')::int),
                                               search.since, search.until, search.as_of,
                                               coalesce(search.include_history, false))
    ), r AS (
        SELECT m.id, m.kind, m.summary, m.content, m.created_at, f.bm25_rank AS br, f.vector_rank AS vr,
               f.bm25_score AS bs, f.vector_distance AS vd,
               m.title, m.label, m.pinned, m.status, m.confidence_score,
               -- clamped: a stored confidence of 1e-300 to the power 10 underflowed (22003)
               power(least(greatest(m.confidence_score::float8, '1e-6'::float8), 1::float8), v_cw) AS cf,
               coalesce(1 / (v_rrf_k + f.bm25_rank), 0) + v_vec_w * coalesce(1 / (v_rrf_k + f.vector_rank), 0) AS rrf,
               CASE WHEN m.pinned THEN 1::float8
                    ELSE mneme._retrievability(m.stability, m.last_reviewed_at, v_at) END AS ret,
               -- (a weight an older release accepted, down to 1e-307, clamped like the rows' values)
               least(greatest(coalesce((v_weights ->> mneme._label_key(m.label, v_weights))::float8, 1::float8),
                              '1e-6'::float8), '1e6'::float8) AS w
        -- The candidates by primary key (= ANY of their ids): joined on f's
        -- ids alone, the planner scanned every memory of every conversation
        -- (95 ms at 100,000 memories, bench retrieve). Their conversations
        -- named too: on Citus that sends the statement to their shards only.
        FROM f JOIN mneme.memories m ON m.id = f.memory_id
        WHERE m.id = ANY (ARRAY(SELECT f2.memory_id FROM f f2)) AND m.conversation_id = ANY (v_convs)
    )
    SELECT r.id, r.kind, r.summary, r.content, r.created_at, r.rrf * power(r.ret, v_rw) * r.w * r.cf, r.rrf, r.br, r.vr, r.ret,
           r.title, r.label, r.pinned, r.bs, r.vd, r.status, r.confidence_score
    FROM r
    ORDER BY r.rrf * power(r.ret, v_rw) * r.w * r.cf DESC, r.id
    LIMIT search.k;
END
$function$;

CREATE OR REPLACE FUNCTION mneme.segment_now(conversation_id uuid)
 RETURNS bigint
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'pg_temp'
 SET jit TO 'off'
AS $function$
#variable_conflict use_column
DECLARE
    v__entered boolean := mneme._enter($1);
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
$function$;

CREATE OR REPLACE FUNCTION mneme.set_embedding(memory_id uuid, embedding real[])
 RETURNS void
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'pg_temp'
 SET jit TO 'off'
AS $function$
DECLARE
    v__entered boolean := mneme._enter(NULL);
BEGIN
    IF set_embedding.memory_id IS NULL OR set_embedding.embedding IS NULL THEN
        RAISE EXCEPTION 'memory_id and embedding must not be NULL' USING ERRCODE = '22004';
    END IF;
    PERFORM mneme.check_embedding(set_embedding.embedding);  -- finite, the database's dimension (22023)
    UPDATE mneme.memories m SET embedding = set_embedding.embedding WHERE m.id = set_embedding.memory_id;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'no memory %', set_embedding.memory_id USING ERRCODE = 'P0002';
    END IF;
END
$function$;

CREATE OR REPLACE FUNCTION mneme.set_message_embedding(message_id bigint, embedding real[])
 RETURNS void
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'pg_temp'
 SET jit TO 'off'
AS $function$
DECLARE
    v__entered boolean := mneme._enter(NULL);
BEGIN
    IF set_message_embedding.message_id IS NULL OR set_message_embedding.embedding IS NULL THEN
        RAISE EXCEPTION 'message_id and embedding must not be NULL' USING ERRCODE = '22004';
    END IF;
    PERFORM mneme.check_embedding(set_message_embedding.embedding);  -- finite, the database's dimension (22023)
    UPDATE mneme.messages m SET embedding = set_message_embedding.embedding WHERE m.id = set_message_embedding.message_id;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'no message %', set_message_embedding.message_id USING ERRCODE = 'P0002';
    END IF;
END
$function$;

CREATE OR REPLACE FUNCTION mneme.set_speakers(conversation_id uuid, speakers text[])
 RETURNS void
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'pg_temp'
 SET jit TO 'off'
AS $function$
#variable_conflict use_column
DECLARE
    v__entered boolean := mneme._enter($1);
BEGIN
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
$function$;

CREATE OR REPLACE FUNCTION mneme.set_tenant(tenant text)
 RETURNS text
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'pg_temp'
 SET jit TO 'off'
AS $function$
DECLARE
    v__entered boolean := mneme._enter(NULL);
BEGIN
    IF set_tenant.tenant IS NULL THEN
        RAISE EXCEPTION 'tenant must not be NULL' USING ERRCODE = '22004';
    END IF;
    IF NOT EXISTS (SELECT 1 FROM mneme.tenants t WHERE t.id = set_tenant.tenant) THEN
        RAISE EXCEPTION 'unknown tenant %', mneme._quote_prefix(set_tenant.tenant)
            USING ERRCODE = '22023', HINT = 'an admin creates tenants: SELECT mneme.create_tenant(''acme'')';
    END IF;
    -- transaction-local; on Citus forwarded to the workers too, so that
    -- reads of the tables and views outside the API (an admin's job_stats)
    -- see the tenant's rows there
    PERFORM mneme._set_local('mneme.tenant', set_tenant.tenant);
    PERFORM mneme._resolve_tenant();  -- a login bound to another tenant: 42501 here, not at its next call
    RETURN set_tenant.tenant;
END
$function$;

CREATE OR REPLACE FUNCTION mneme.take_pending_reviews(conversation_id uuid)
 RETURNS jsonb
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'pg_temp'
 SET jit TO 'off'
AS $function$
#variable_conflict use_column
DECLARE
    v__entered boolean := mneme._enter($1);
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
$function$;

CREATE OR REPLACE FUNCTION mneme.tenants()
 RETURNS TABLE(tenant text, created_at timestamp with time zone, conversations bigint, logins text[])
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'pg_temp'
 SET jit TO 'off'
AS $function$
#variable_conflict use_column
DECLARE
    v__entered boolean := mneme._enter(NULL);
    v_prev  text := pg_catalog.current_setting('mneme.tenant', true);
    v_bound text;
    t       record;
BEGIN
    SELECT b.tenant_id INTO v_bound FROM mneme.tenant_logins b WHERE b.login = mneme._caller();
    FOR t IN SELECT x.id, x.created_at FROM mneme.tenants x
             WHERE v_bound IS NULL OR x.id = v_bound ORDER BY x.id LOOP
        -- row security shows a conversation to its tenant: count as it
        PERFORM mneme._act_for_tenant(t.id);
        tenant := t.id;
        created_at := t.created_at;
        conversations := (SELECT count(*) FROM mneme.message_queue q WHERE q.tenant_id = t.id);
        logins := ARRAY(SELECT b.login::text FROM mneme.tenant_logins b WHERE b.tenant_id = t.id ORDER BY b.login);
        RETURN NEXT;
    END LOOP;
    PERFORM mneme._act_for_tenant(v_prev);
END
$function$;

CREATE OR REPLACE FUNCTION mneme.unhandled_jobs(job_ids bigint[])
 RETURNS SETOF bigint
 LANGUAGE plpgsql
 STABLE SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'pg_temp'
 SET jit TO 'off'
AS $function$#variable_conflict use_column
DECLARE
    v__entered boolean := mneme._enter(NULL);
BEGIN
RETURN QUERY 
    SELECT j.id FROM mneme.jobs j
    WHERE j.id = ANY (job_ids)
      AND (j.state = 'running' OR (j.state = 'pending' AND j.attempts = 0 AND j.run_at <= now()))
;
END$function$;

CREATE OR REPLACE FUNCTION mneme.unpin(memory_id uuid)
 RETURNS void
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'pg_temp'
 SET jit TO 'off'
AS $function$DECLARE
    v__entered boolean := mneme._enter(NULL);
BEGIN
PERFORM * FROM ( SELECT mneme.pin(unpin.memory_id, false) ) x;
END$function$;

CREATE OR REPLACE FUNCTION mneme.vector_search(conversation_id uuid, embedding real[], k integer DEFAULT 100, since timestamp with time zone DEFAULT NULL::timestamp with time zone, until timestamp with time zone DEFAULT NULL::timestamp with time zone)
 RETURNS TABLE(memory_id uuid, distance double precision, rank integer)
 LANGUAGE plpgsql
 STABLE SECURITY DEFINER ROWS 100
 SET search_path TO 'pg_catalog', 'pg_temp'
 SET jit TO 'off'
AS $function$
#variable_conflict use_column
DECLARE
    v__entered boolean := mneme._enter($1);
BEGIN
    IF vector_search.conversation_id IS NULL OR vector_search.embedding IS NULL OR vector_search.k IS NULL THEN
        RAISE EXCEPTION 'conversation_id, embedding and k must not be NULL' USING ERRCODE = '22004',
            HINT = 'mneme.search ranks by the query alone when there is no embedding';
    END IF;
    IF vector_search.k < 1 THEN
        RAISE EXCEPTION 'k must be at least 1' USING ERRCODE = '22023';
    END IF;
    PERFORM mneme._check_time('since', vector_search.since);
    PERFORM mneme._check_time('until', vector_search.until);
    PERFORM mneme.check_embedding(vector_search.embedding);
    IF vector_search.since > vector_search.until THEN
        RAISE EXCEPTION 'since (%) is after until (%)', vector_search.since, vector_search.until USING ERRCODE = '22023',
            HINT = 'the range is since <= created_at < until';
    END IF;
    -- Another tenant's conversation is not searched at all: its size must
    -- not show in how long an empty answer takes.
    IF NOT mneme._readable_conversation(vector_search.conversation_id) THEN
        RETURN;
    END IF;
    RETURN QUERY SELECT * FROM mneme._vector_search(vector_search.conversation_id, vector_search.embedding, vector_search.k, vector_search.since, vector_search.until);
END
$function$;

-- Nested distributed execution allowed (after the definitions above, which
-- would reset it): tests/testdata/citus_generate.sql, step 5, says why.
ALTER FUNCTION mneme._act_for_tenant(text) SET citus.allow_nested_distributed_execution = on;
ALTER FUNCTION mneme._belief_candidates(uuid[],text,real[],integer,timestamp with time zone,timestamp with time zone,timestamp with time zone,boolean) SET citus.allow_nested_distributed_execution = on;
ALTER FUNCTION mneme._bm25_apply(uuid[],uuid[]) SET citus.allow_nested_distributed_execution = on;
ALTER FUNCTION mneme._bm25_search(uuid[],text,integer,timestamp with time zone,timestamp with time zone) SET citus.allow_nested_distributed_execution = on;
ALTER FUNCTION mneme._bm25_sums(uuid[],text[],double precision[],double precision,double precision,double precision,uuid[],timestamp with time zone,timestamp with time zone) SET citus.allow_nested_distributed_execution = on;
ALTER FUNCTION mneme._check_setting(text,jsonb) SET citus.allow_nested_distributed_execution = on;
ALTER FUNCTION mneme._check_setting_pair(text,jsonb) SET citus.allow_nested_distributed_execution = on;
ALTER FUNCTION mneme._citus_sequential() SET citus.allow_nested_distributed_execution = on;
ALTER FUNCTION mneme._claim_conversation(uuid) SET citus.allow_nested_distributed_execution = on;
ALTER FUNCTION mneme._claim_jobs_distributed(text,integer,interval,integer) SET citus.allow_nested_distributed_execution = on;
ALTER FUNCTION mneme._cleanup(timestamp with time zone,boolean,text) SET citus.allow_nested_distributed_execution = on;
ALTER FUNCTION mneme._cleanup_expire(timestamp with time zone,boolean,text) SET citus.allow_nested_distributed_execution = on;
ALTER FUNCTION mneme._cleanup_inactivate(timestamp with time zone,boolean,double precision) SET citus.allow_nested_distributed_execution = on;
ALTER FUNCTION mneme._cleanup_prune_jobs(timestamp with time zone,boolean,interval) SET citus.allow_nested_distributed_execution = on;
ALTER FUNCTION mneme._cleanup_purge(timestamp with time zone,boolean,double precision) SET citus.allow_nested_distributed_execution = on;
ALTER FUNCTION mneme._context_anchors(uuid,text,real[],timestamp with time zone,timestamp with time zone,timestamp with time zone,text,uuid[]) SET citus.allow_nested_distributed_execution = on;
ALTER FUNCTION mneme._context_item(integer,uuid,text,text,double precision,timestamp with time zone,bigint[],integer,uuid[]) SET citus.allow_nested_distributed_execution = on;
ALTER FUNCTION mneme._enter(uuid) SET citus.allow_nested_distributed_execution = on;
ALTER FUNCTION mneme._equivalent_pending_job(text,uuid,text,bigint) SET citus.allow_nested_distributed_execution = on;
ALTER FUNCTION mneme._fail_expired_jobs(integer) SET citus.allow_nested_distributed_execution = on;
ALTER FUNCTION mneme._fold_llm_calls(uuid) SET citus.allow_nested_distributed_execution = on;
ALTER FUNCTION mneme._history_distributed(uuid) SET citus.allow_nested_distributed_execution = on;
ALTER FUNCTION mneme._history_rows(integer[],uuid[],text[]) SET citus.allow_nested_distributed_execution = on;
ALTER FUNCTION mneme._import_collision(uuid,jsonb) SET citus.allow_nested_distributed_execution = on;
ALTER FUNCTION mneme._import_memory_rows(uuid,jsonb,boolean,real[]) SET citus.allow_nested_distributed_execution = on;
ALTER FUNCTION mneme._interval_setting(text) SET citus.allow_nested_distributed_execution = on;
ALTER FUNCTION mneme._job_conversation(bigint) SET citus.allow_nested_distributed_execution = on;
ALTER FUNCTION mneme._limit(text) SET citus.allow_nested_distributed_execution = on;
ALTER FUNCTION mneme._lineage_merge(uuid,uuid) SET citus.allow_nested_distributed_execution = on;
ALTER FUNCTION mneme._lock_memories(uuid[]) SET citus.allow_nested_distributed_execution = on;
ALTER FUNCTION mneme._mark(text,text) SET citus.allow_nested_distributed_execution = on;
ALTER FUNCTION mneme._marked(text) SET citus.allow_nested_distributed_execution = on;
ALTER FUNCTION mneme._memory_conversation(uuid) SET citus.allow_nested_distributed_execution = on;
ALTER FUNCTION mneme._note_erase() SET citus.allow_nested_distributed_execution = on;
ALTER FUNCTION mneme._present_memories(uuid[]) SET citus.allow_nested_distributed_execution = on;
ALTER FUNCTION mneme._readable_conversation(uuid) SET citus.allow_nested_distributed_execution = on;
ALTER FUNCTION mneme._remove_memories(uuid[],text,text) SET citus.allow_nested_distributed_execution = on;
ALTER FUNCTION mneme._requeue_job(bigint,timestamp with time zone,text,integer) SET citus.allow_nested_distributed_execution = on;
ALTER FUNCTION mneme._require_primary(text) SET citus.allow_nested_distributed_execution = on;
ALTER FUNCTION mneme._require_unbound(text) SET citus.allow_nested_distributed_execution = on;
ALTER FUNCTION mneme._resolve_tenant() SET citus.allow_nested_distributed_execution = on;
ALTER FUNCTION mneme._revise_invalidate(mneme.memories,mneme.memories,text) SET citus.allow_nested_distributed_execution = on;
ALTER FUNCTION mneme._revise_noop(mneme.memories,mneme.memories,text) SET citus.allow_nested_distributed_execution = on;
ALTER FUNCTION mneme._revise_supersede(mneme.memories,mneme.memories,text,text) SET citus.allow_nested_distributed_execution = on;
ALTER FUNCTION mneme._scope_conversations(uuid,text) SET citus.allow_nested_distributed_execution = on;
ALTER FUNCTION mneme._search_candidates(uuid[],text,real[],integer,integer,timestamp with time zone,timestamp with time zone,timestamp with time zone,boolean) SET citus.allow_nested_distributed_execution = on;
ALTER FUNCTION mneme._search_query_embedding(text,real[]) SET citus.allow_nested_distributed_execution = on;
ALTER FUNCTION mneme._segment_followup(uuid,bigint,bigint) SET citus.allow_nested_distributed_execution = on;
ALTER FUNCTION mneme._set_local(text,text) SET citus.allow_nested_distributed_execution = on;
ALTER FUNCTION mneme._setting_number(text,jsonb,double precision,double precision,boolean,boolean) SET citus.allow_nested_distributed_execution = on;
ALTER FUNCTION mneme._setting_weights(text,jsonb,text[],text[],double precision,double precision) SET citus.allow_nested_distributed_execution = on;
ALTER FUNCTION mneme._source_messages(uuid,bigint[],boolean) SET citus.allow_nested_distributed_execution = on;
ALTER FUNCTION mneme._tenant_tombstones(text) SET citus.allow_nested_distributed_execution = on;
ALTER FUNCTION mneme._vector_index_ready(text,text) SET citus.allow_nested_distributed_execution = on;
ALTER FUNCTION mneme._vector_scope_ef(integer) SET citus.allow_nested_distributed_execution = on;
ALTER FUNCTION mneme._vector_search(uuid,real[],integer,timestamp with time zone,timestamp with time zone) SET citus.allow_nested_distributed_execution = on;
ALTER FUNCTION mneme._vector_search_scope(uuid[],real[],integer,timestamp with time zone,timestamp with time zone) SET citus.allow_nested_distributed_execution = on;
ALTER FUNCTION mneme.add_fact(uuid,text,bigint[],uuid,text) SET citus.allow_nested_distributed_execution = on;
ALTER FUNCTION mneme.add_message(uuid,text,text,timestamp with time zone) SET citus.allow_nested_distributed_execution = on;
ALTER FUNCTION mneme.add_pending_review(uuid,uuid[],text) SET citus.allow_nested_distributed_execution = on;
ALTER FUNCTION mneme.apply_review(uuid,text,double precision,double precision,text,timestamp with time zone,text,text[],boolean,bigint,jsonb) SET citus.allow_nested_distributed_execution = on;
ALTER FUNCTION mneme.apply_revision(uuid,text,uuid,text,text,text,boolean,bigint) SET citus.allow_nested_distributed_execution = on;
ALTER FUNCTION mneme.bind_login(text,text) SET citus.allow_nested_distributed_execution = on;
ALTER FUNCTION mneme.bm25_reindex() SET citus.allow_nested_distributed_execution = on;
ALTER FUNCTION mneme.bm25_search(uuid,text,integer,timestamp with time zone,timestamp with time zone) SET citus.allow_nested_distributed_execution = on;
ALTER FUNCTION mneme.change_embedding_dim(integer) SET citus.allow_nested_distributed_execution = on;
ALTER FUNCTION mneme.check_embedding(real[]) SET citus.allow_nested_distributed_execution = on;
ALTER FUNCTION mneme.claim_jobs(text,integer,interval,integer) SET citus.allow_nested_distributed_execution = on;
ALTER FUNCTION mneme.cleanup(boolean) SET citus.allow_nested_distributed_execution = on;
ALTER FUNCTION mneme.complete_job(bigint,text,integer) SET citus.allow_nested_distributed_execution = on;
ALTER FUNCTION mneme.context(uuid,text,integer,real[],timestamp with time zone,timestamp with time zone,timestamp with time zone,text,boolean) SET citus.allow_nested_distributed_execution = on;
ALTER FUNCTION mneme.context_items(uuid,text,integer,real[],timestamp with time zone,timestamp with time zone,timestamp with time zone,text) SET citus.allow_nested_distributed_execution = on;
ALTER FUNCTION mneme.context_messages(uuid,bigint[]) SET citus.allow_nested_distributed_execution = on;
ALTER FUNCTION mneme.conversation_llm_usage(uuid) SET citus.allow_nested_distributed_execution = on;
ALTER FUNCTION mneme.conversation_memories(uuid) SET citus.allow_nested_distributed_execution = on;
ALTER FUNCTION mneme.conversation_messages(uuid) SET citus.allow_nested_distributed_execution = on;
ALTER FUNCTION mneme.conversation_titles(uuid[]) SET citus.allow_nested_distributed_execution = on;
ALTER FUNCTION mneme.conversations(integer) SET citus.allow_nested_distributed_execution = on;
ALTER FUNCTION mneme.create_episode(uuid,bigint[],text,text,real[],real,text,boolean,double precision,double precision,text) SET citus.allow_nested_distributed_execution = on;
ALTER FUNCTION mneme.create_episodes(uuid,jsonb) SET citus.allow_nested_distributed_execution = on;
ALTER FUNCTION mneme.create_tenant(text) SET citus.allow_nested_distributed_execution = on;
ALTER FUNCTION mneme.drop_tenant(text,text) SET citus.allow_nested_distributed_execution = on;
ALTER FUNCTION mneme.enqueue_job(text,uuid,jsonb,text,timestamp with time zone) SET citus.allow_nested_distributed_execution = on;
ALTER FUNCTION mneme.enqueue_segment(uuid,jsonb) SET citus.allow_nested_distributed_execution = on;
ALTER FUNCTION mneme.erase(uuid,text) SET citus.allow_nested_distributed_execution = on;
ALTER FUNCTION mneme.erase_conversation(uuid,text) SET citus.allow_nested_distributed_execution = on;
ALTER FUNCTION mneme.export_conversation(uuid,boolean) SET citus.allow_nested_distributed_execution = on;
ALTER FUNCTION mneme.export_conversations(uuid,integer) SET citus.allow_nested_distributed_execution = on;
ALTER FUNCTION mneme.export_header(boolean,text,text) SET citus.allow_nested_distributed_execution = on;
ALTER FUNCTION mneme.export_lines(uuid,boolean) SET citus.allow_nested_distributed_execution = on;
ALTER FUNCTION mneme.export_settings() SET citus.allow_nested_distributed_execution = on;
ALTER FUNCTION mneme.extend_job_lease(bigint,text,integer,interval) SET citus.allow_nested_distributed_execution = on;
ALTER FUNCTION mneme.extractive_summary(uuid,text[],text[],integer) SET citus.allow_nested_distributed_execution = on;
ALTER FUNCTION mneme.fail_job(bigint,text,integer,text,interval,boolean,integer) SET citus.allow_nested_distributed_execution = on;
ALTER FUNCTION mneme.find_memories(uuid,text,text,text,text,boolean,double precision,double precision,text,integer,integer,timestamp with time zone) SET citus.allow_nested_distributed_execution = on;
ALTER FUNCTION mneme.forget(uuid,text) SET citus.allow_nested_distributed_execution = on;
ALTER FUNCTION mneme.hash_embed(text,integer) SET citus.allow_nested_distributed_execution = on;
ALTER FUNCTION mneme.history(uuid) SET citus.allow_nested_distributed_execution = on;
ALTER FUNCTION mneme.import_conversation(jsonb) SET citus.allow_nested_distributed_execution = on;
ALTER FUNCTION mneme.import_events(uuid,jsonb) SET citus.allow_nested_distributed_execution = on;
ALTER FUNCTION mneme.import_fact(uuid,text,timestamp with time zone,jsonb,text) SET citus.allow_nested_distributed_execution = on;
ALTER FUNCTION mneme.import_links(jsonb) SET citus.allow_nested_distributed_execution = on;
ALTER FUNCTION mneme.import_memories(uuid,jsonb,boolean,real[]) SET citus.allow_nested_distributed_execution = on;
ALTER FUNCTION mneme.import_messages(uuid,jsonb) SET citus.allow_nested_distributed_execution = on;
ALTER FUNCTION mneme.import_missing_links(jsonb) SET citus.allow_nested_distributed_execution = on;
ALTER FUNCTION mneme.import_present(uuid,uuid[]) SET citus.allow_nested_distributed_execution = on;
ALTER FUNCTION mneme.import_reviews(uuid,jsonb) SET citus.allow_nested_distributed_execution = on;
ALTER FUNCTION mneme.import_tombstones(uuid[]) SET citus.allow_nested_distributed_execution = on;
ALTER FUNCTION mneme.import_unembedded(uuid,uuid,integer) SET citus.allow_nested_distributed_execution = on;
ALTER FUNCTION mneme.import_unembedded_messages(uuid,bigint,integer) SET citus.allow_nested_distributed_execution = on;
ALTER FUNCTION mneme.initial_state(text,double precision) SET citus.allow_nested_distributed_execution = on;
ALTER FUNCTION mneme.inspect(uuid) SET citus.allow_nested_distributed_execution = on;
ALTER FUNCTION mneme.jobs_invariant_trg() SET citus.allow_nested_distributed_execution = on;
ALTER FUNCTION mneme.llm_usage(timestamp with time zone,timestamp with time zone,text) SET citus.allow_nested_distributed_execution = on;
ALTER FUNCTION mneme.lock_queued(uuid,bigint[]) SET citus.allow_nested_distributed_execution = on;
ALTER FUNCTION mneme.memories_bm25_trg() SET citus.allow_nested_distributed_execution = on;
ALTER FUNCTION mneme.memories_bm25_truncate_trg() SET citus.allow_nested_distributed_execution = on;
ALTER FUNCTION mneme.memories_events_trg() SET citus.allow_nested_distributed_execution = on;
ALTER FUNCTION mneme.memories_hash_embed_trg() SET citus.allow_nested_distributed_execution = on;
ALTER FUNCTION mneme.memories_initial_state_trg() SET citus.allow_nested_distributed_execution = on;
ALTER FUNCTION mneme.memories_invariant_trg() SET citus.allow_nested_distributed_execution = on;
ALTER FUNCTION mneme.memories_limits_trg() SET citus.allow_nested_distributed_execution = on;
ALTER FUNCTION mneme.memories_to_embed() SET citus.allow_nested_distributed_execution = on;
ALTER FUNCTION mneme.memory_event_log(uuid) SET citus.allow_nested_distributed_execution = on;
ALTER FUNCTION mneme.memory_events_append_only_trg() SET citus.allow_nested_distributed_execution = on;
ALTER FUNCTION mneme.memory_events_invariant_trg() SET citus.allow_nested_distributed_execution = on;
ALTER FUNCTION mneme.memory_reviews(uuid) SET citus.allow_nested_distributed_execution = on;
ALTER FUNCTION mneme.message_queue_invariant_trg() SET citus.allow_nested_distributed_execution = on;
ALTER FUNCTION mneme.messages_invariant_trg() SET citus.allow_nested_distributed_execution = on;
ALTER FUNCTION mneme.messages_limits_trg() SET citus.allow_nested_distributed_execution = on;
ALTER FUNCTION mneme.named_conversation(text) SET citus.allow_nested_distributed_execution = on;
ALTER FUNCTION mneme.pin(uuid,boolean) SET citus.allow_nested_distributed_execution = on;
ALTER FUNCTION mneme.queued_messages(uuid,bigint,boolean) SET citus.allow_nested_distributed_execution = on;
ALTER FUNCTION mneme.queued_sessions(uuid,integer) SET citus.allow_nested_distributed_execution = on;
ALTER FUNCTION mneme.reactivate(uuid) SET citus.allow_nested_distributed_execution = on;
ALTER FUNCTION mneme.recent_memories(uuid,integer) SET citus.allow_nested_distributed_execution = on;
ALTER FUNCTION mneme.record_llm_calls(bigint,integer,jsonb) SET citus.allow_nested_distributed_execution = on;
ALTER FUNCTION mneme.record_retrieval(uuid,text,uuid[]) SET citus.allow_nested_distributed_execution = on;
ALTER FUNCTION mneme.release_job(bigint,text,integer) SET citus.allow_nested_distributed_execution = on;
ALTER FUNCTION mneme.remember(uuid,text,text,boolean,timestamp with time zone,uuid,text,text,timestamp with time zone) SET citus.allow_nested_distributed_execution = on;
ALTER FUNCTION mneme.reset_initial_state(uuid,boolean) SET citus.allow_nested_distributed_execution = on;
ALTER FUNCTION mneme.retrieve(uuid,text,integer,real[],timestamp with time zone,timestamp with time zone,timestamp with time zone,text,timestamp with time zone,boolean) SET citus.allow_nested_distributed_execution = on;
ALTER FUNCTION mneme.retrieve_markdown(uuid,text,integer,real[],timestamp with time zone,timestamp with time zone,timestamp with time zone,text,timestamp with time zone,boolean) SET citus.allow_nested_distributed_execution = on;
ALTER FUNCTION mneme.retry_job(bigint) SET citus.allow_nested_distributed_execution = on;
ALTER FUNCTION mneme.review_log_events_trg() SET citus.allow_nested_distributed_execution = on;
ALTER FUNCTION mneme.review_log_invariant_trg() SET citus.allow_nested_distributed_execution = on;
ALTER FUNCTION mneme.review_targets(uuid[],boolean) SET citus.allow_nested_distributed_execution = on;
ALTER FUNCTION mneme.revision_candidates(uuid,integer,text) SET citus.allow_nested_distributed_execution = on;
ALTER FUNCTION mneme.schedule_cleanup(interval) SET citus.allow_nested_distributed_execution = on;
ALTER FUNCTION mneme.search(uuid,text,integer,real[],timestamp with time zone,timestamp with time zone,timestamp with time zone,text,timestamp with time zone,boolean) SET citus.allow_nested_distributed_execution = on;
ALTER FUNCTION mneme.segment_now(uuid) SET citus.allow_nested_distributed_execution = on;
ALTER FUNCTION mneme.set_embedding(uuid,real[]) SET citus.allow_nested_distributed_execution = on;
ALTER FUNCTION mneme.set_message_embedding(bigint,real[]) SET citus.allow_nested_distributed_execution = on;
ALTER FUNCTION mneme.set_setting(text,jsonb) SET citus.allow_nested_distributed_execution = on;
ALTER FUNCTION mneme.set_speakers(uuid,text[]) SET citus.allow_nested_distributed_execution = on;
ALTER FUNCTION mneme.set_tenant(text) SET citus.allow_nested_distributed_execution = on;
ALTER FUNCTION mneme.setting(text) SET citus.allow_nested_distributed_execution = on;
ALTER FUNCTION mneme.take_pending_reviews(uuid) SET citus.allow_nested_distributed_execution = on;
ALTER FUNCTION mneme.tenant_fill_trg() SET citus.allow_nested_distributed_execution = on;
ALTER FUNCTION mneme.tenants() SET citus.allow_nested_distributed_execution = on;
ALTER FUNCTION mneme.unbind_login(text) SET citus.allow_nested_distributed_execution = on;
ALTER FUNCTION mneme.unhandled_jobs(bigint[]) SET citus.allow_nested_distributed_execution = on;
ALTER FUNCTION mneme.unpin(uuid) SET citus.allow_nested_distributed_execution = on;
ALTER FUNCTION mneme.vector_index_status() SET citus.allow_nested_distributed_execution = on;
ALTER FUNCTION mneme.vector_search(uuid,real[],integer,timestamp with time zone,timestamp with time zone) SET citus.allow_nested_distributed_execution = on;
