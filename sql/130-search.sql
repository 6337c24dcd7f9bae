-- =============================================================================
-- mneme retrieval, part 4: the hybrid ranking (mneme.search), with retrieve
-- (records a pending review) and retrieve_markdown on top. The ranking
-- exists once, in mneme.search.
-- Idempotent: re-applied on every migrate.
-- =============================================================================
-- -----------------------------------------------------------------------------
-- The scope of a search: the conversation, or every conversation of its
-- tenant (an agent remembering a user across chats). Row security keeps
-- another tenant's conversations out either way.
-- -----------------------------------------------------------------------------
CREATE OR REPLACE FUNCTION mneme._scope_conversations(conversation_id uuid, scope text)
RETURNS uuid[]
LANGUAGE plpgsql STABLE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF _scope_conversations.scope IS NULL THEN
        RAISE EXCEPTION 'scope must not be NULL' USING ERRCODE = '22004', HINT = 'conversation (the default) or tenant';
    ELSIF _scope_conversations.scope = 'conversation' THEN
        RETURN ARRAY[_scope_conversations.conversation_id];
    ELSIF _scope_conversations.scope = 'tenant' THEN
        RETURN ARRAY(SELECT q.id FROM mneme.message_queue q
                     WHERE q.tenant_id = (SELECT tq.tenant_id FROM mneme.message_queue tq
                                          WHERE tq.id = _scope_conversations.conversation_id)
                     ORDER BY q.id);
    END IF;
    RAISE EXCEPTION 'scope must be conversation or tenant, got %', mneme._quote_prefix(_scope_conversations.scope)
        USING ERRCODE = '22023', HINT = 'tenant searches every conversation of the conversation''s tenant';
END
$$;
COMMENT ON FUNCTION mneme._scope_conversations(uuid, text) IS
    'Internal: the conversations a search with this scope reads (conversation: itself; tenant: all of its tenant''s).';

-- -----------------------------------------------------------------------------
-- Past beliefs: the candidates of a search with as_of or include_history.
-- The BM25 statistics hold active memories only (current beliefs), so this
-- leg scores the memories believed at as_of (or, with include_history, every
-- memory but the merged duplicates) exactly, as a collection of their own:
-- BM25 with N, df and average length over that set, and exact cosine
-- distance. It reads every such memory of the scope: an opt-in cost
-- (docs/revision.md), never paid by a default search.
-- -----------------------------------------------------------------------------
CREATE OR REPLACE FUNCTION mneme._belief_candidates(
    conversation_ids uuid[],
    query text,
    embedding real[],
    k int,
    since timestamptz,
    until timestamptz,
    as_of timestamptz,
    include_history boolean)
RETURNS TABLE (memory_id uuid, bm25_score float8, bm25_rank int, vector_distance float8, vector_rank int)
LANGUAGE plpgsql STABLE
SECURITY DEFINER
ROWS 100
SET search_path = pg_catalog, pg_temp
SET jit = off
AS $$
#variable_conflict use_column
DECLARE
    v_k1 float8 := mneme.setting('bm25_k1')::float8;
    v_b  float8 := mneme.setting('bm25_b')::float8;
    v_q  text[] := tsvector_to_array(mneme.bm25_tsvector(_belief_candidates.query));
BEGIN
    RETURN QUERY
    WITH e AS MATERIALIZED (
        -- Believed at as_of: created by then and not yet retired (superseded,
        -- invalidated and forgotten rows carry valid_until = when they stopped
        -- being believed). Merged rows are duplicates of what they confirmed.
        SELECT m.id, m.embedding::real[] AS emb
        FROM mneme.memories m
        WHERE m.conversation_id = ANY (_belief_candidates.conversation_ids)
          AND m.status <> 'merged'
          AND (_belief_candidates.as_of IS NULL OR m.created_at <= _belief_candidates.as_of)
          AND (_belief_candidates.include_history
               OR (_belief_candidates.as_of IS NOT NULL
                   AND (m.valid_until IS NULL OR m.valid_until > _belief_candidates.as_of)))
          AND (_belief_candidates.since IS NULL OR m.created_at >= _belief_candidates.since)
          AND (_belief_candidates.until IS NULL OR m.created_at < _belief_candidates.until)
    ), hist AS MATERIALIZED (
        -- Memories outside the BM25 statistics (no longer active) are
        -- tokenised here; active ones are read from their postings.
        -- (Read from memories with the conversation in both conditions:
        -- Citus joins a distributed table to another only on that column.)
        SELECT m.id, mneme.bm25_tsvector(mneme.memory_text(m.title, m.summary, m.content)) AS tsv
        FROM mneme.memories m
        WHERE m.conversation_id = ANY (_belief_candidates.conversation_ids)
          AND m.id IN (SELECT e.id FROM e)
          AND NOT EXISTS (SELECT 1 FROM mneme.bm25_docs bd
                          WHERE bd.memory_id = m.id AND bd.conversation_id = m.conversation_id)
    ), d AS (
        SELECT bd.memory_id AS id, bd.doclen::float8 AS dl FROM mneme.bm25_docs bd WHERE bd.memory_id IN (SELECT e.id FROM e)
        UNION ALL
        SELECT h.id, coalesce((SELECT sum(cardinality(u.positions)) FROM unnest(h.tsv) AS u), 0)::float8 FROM hist h
    ), t AS (  -- the query's terms in each memory
        -- by the whole key, one conversation and term at a time (as _bm25_search)
        SELECT p.memory_id AS id, p.term, p.tf::float8 AS tf
        FROM unnest(_belief_candidates.conversation_ids) AS c(id), unnest(v_q) AS q(term), LATERAL (
            SELECT p.memory_id, p.term, p.tf FROM mneme.bm25_postings p
            WHERE p.conversation_id = c.id AND p.term = q.term) p
        WHERE p.memory_id IN (SELECT e.id FROM e)
        UNION ALL
        SELECT h.id, u.lexeme, cardinality(u.positions)::float8 FROM hist h, unnest(h.tsv) AS u WHERE u.lexeme = ANY (v_q)
    ), st AS (
        SELECT count(*)::float8 AS n, greatest(avg(d.dl), 1) AS avgdl FROM d
    ), df AS (
        SELECT t.term, count(*)::float8 AS df FROM t GROUP BY t.term
    ), b AS (
        SELECT t.id, sum(mneme._bm25_weight(st.n, df.df, v_k1) * mneme._bm25_tf(t.tf, d.dl, v_k1, v_b, st.avgdl)) AS score
        FROM t JOIN df ON df.term = t.term JOIN d ON d.id = t.id CROSS JOIN st
        GROUP BY t.id
        ORDER BY 2 DESC, 1
        LIMIT _belief_candidates.k
    ), br AS (
        SELECT b.id, b.score, (rank() OVER (ORDER BY b.score DESC))::int AS r FROM b
    ), v AS (
        SELECT e.id, mneme.cosine_distance(e.emb, _belief_candidates.embedding)::float8 AS dist
        FROM e
        WHERE _belief_candidates.embedding IS NOT NULL AND e.emb IS NOT NULL
        ORDER BY 2, 1
        LIMIT _belief_candidates.k
    ), vr AS (
        SELECT v.id, v.dist, (rank() OVER (ORDER BY v.dist))::int AS r FROM v
    )
    SELECT coalesce(br.id, vr.id), br.score, br.r, vr.dist, vr.r
    FROM br FULL JOIN vr ON vr.id = br.id;
END
$$;
COMMENT ON FUNCTION mneme._belief_candidates(uuid[], text, real[], int, timestamptz, timestamptz, timestamptz, boolean) IS
    'Internal to mneme.search with as_of or include_history: the top k by BM25 and by exact cosine distance among the '
    'memories believed at as_of (created by then, valid_until after it; merged duplicates never), or with '
    'include_history every non-merged memory, scored as a collection of their own.';

-- -----------------------------------------------------------------------------
-- The ranking, in three steps: the arguments checked
-- (_check_search_arguments), the candidates of each leg fused by rank
-- (_search_candidates), and their scores (mneme.search).
-- -----------------------------------------------------------------------------
CREATE OR REPLACE FUNCTION mneme._check_search_arguments(
    conversation_id uuid, query text, k int, since timestamptz, until timestamptz, at timestamptz, as_of timestamptz)
RETURNS void
LANGUAGE plpgsql STABLE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF _check_search_arguments.conversation_id IS NULL THEN
        RAISE EXCEPTION 'conversation_id must not be NULL' USING ERRCODE = '22004';
    END IF;
    -- The rule for every argument of the API: NULL where a value is
    -- needed is 22004; a value that is there but wrong (blank text, out of
    -- range) is 22023 (docs/sql-api.md).
    IF _check_search_arguments.query IS NULL THEN
        RAISE EXCEPTION 'query must not be NULL' USING ERRCODE = '22004',
            HINT = 'pass the text to search for, e.g. the user''s latest message';
    END IF;
    IF mneme._is_blank(_check_search_arguments.query) THEN
        RAISE EXCEPTION 'query must not be empty' USING ERRCODE = '22023',
            HINT = 'pass the text to search for, e.g. the user''s latest message';
    END IF;
    PERFORM mneme._check_length('query', _check_search_arguments.query, 10000);
    IF _check_search_arguments.k IS NULL THEN
        RAISE EXCEPTION 'k must not be NULL' USING ERRCODE = '22004', HINT = 'omit k for the default';
    END IF;
    IF _check_search_arguments.k < 1 OR _check_search_arguments.k > 100 THEN
        RAISE EXCEPTION 'k must be between 1 and 100, got %', _check_search_arguments.k
            USING ERRCODE = '22023';
    END IF;
    IF _check_search_arguments.at IS NULL THEN
        RAISE EXCEPTION 'at must not be NULL' USING ERRCODE = '22004',
            HINT = 'at is the time retrievability is evaluated at; omit it for now()';
    END IF;
    IF _check_search_arguments.since > _check_search_arguments.until THEN
        RAISE EXCEPTION 'since (%) is after until (%)', _check_search_arguments.since, _check_search_arguments.until
            USING ERRCODE = '22023', HINT = 'the range is since <= created_at < until';
    END IF;
    PERFORM mneme._check_time('at', _check_search_arguments.at);
    PERFORM mneme._check_time('as_of', _check_search_arguments.as_of);
    PERFORM mneme._check_time('since', _check_search_arguments.since);  -- ±infinity: 22008, as documented
    PERFORM mneme._check_time('until', _check_search_arguments.until);
END
$$;
COMMENT ON FUNCTION mneme._check_search_arguments(uuid, text, int, timestamptz, timestamptz, timestamptz, timestamptz) IS
    'Internal: the argument checks of mneme.search (and so of retrieve, retrieve_markdown, context_items and context), '
    'each a clear error before anything is read.';

-- The query's embedding for the vector leg: the caller's (checked), or the
-- built-in hash embedder's. An empty array asks for BM25 alone (NULL: no
-- vector leg). Under an external embedder SQL cannot embed the query, and
-- a search without its embedding would quietly lose the vector leg: a
-- NULL query_embedding is refused there (22004, docs/retrieval.md).
CREATE OR REPLACE FUNCTION mneme._search_query_embedding(query text, query_embedding real[])
RETURNS real[]
LANGUAGE plpgsql STABLE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF _search_query_embedding.query_embedding IS NOT NULL THEN
        IF cardinality(_search_query_embedding.query_embedding) = 0 THEN
            RETURN NULL;  -- BM25 only, asked for
        END IF;
        PERFORM mneme.check_embedding(_search_query_embedding.query_embedding);
        RETURN _search_query_embedding.query_embedding;
    END IF;
    IF mneme.setting('embedder') #>> '{}' = 'hash' THEN
        RETURN mneme.hash_embed(_search_query_embedding.query);
    END IF;
    RAISE EXCEPTION 'query_embedding must not be NULL: setting embedder is %, so SQL cannot embed the query',
        mneme.setting('embedder')
        USING ERRCODE = '22004',
              HINT = format('pass the query''s embedding from the external embedder (the sidecar''s MNEME_EMBED_MODEL, %s '
                            'dimensions) as query_embedding; for BM25 alone pass query_embedding => ''{}''',
                            mneme.setting('embedding_dim'));
END
$$;
COMMENT ON FUNCTION mneme._search_query_embedding(text, real[]) IS
    'Internal: the query embedding of a search: the given one (checked; an empty array: none, BM25 only), the hash '
    'embedder''s, or, under an external embedder with none given, 22004.';

-- The candidates of a search: the top `candidates` of the BM25 leg and of
-- the vector leg over the scope's conversations (or, with as_of or
-- include_history, over past beliefs), joined by memory, each with its rank
-- in each leg (NULL where a leg did not return it).
-- (Its form of before vector_candidates is dropped by goose 00200.)
CREATE OR REPLACE FUNCTION mneme._search_candidates(
    conversation_ids uuid[],
    query text,
    embedding real[],
    candidates int,
    vector_candidates int,
    since timestamptz,
    until timestamptz,
    as_of timestamptz,
    include_history boolean)
RETURNS TABLE (memory_id uuid, bm25_rank int, vector_rank int, bm25_score float8, vector_distance float8)
LANGUAGE plpgsql STABLE
SECURITY DEFINER
ROWS 100
SET search_path = pg_catalog, pg_temp
SET jit = off
AS $$
#variable_conflict use_column
DECLARE
    v_convs uuid[] := _search_candidates.conversation_ids;
    v_query text := _search_candidates.query;
    v_emb   real[] := _search_candidates.embedding;
    v_cand  int := _search_candidates.candidates;
    v_vcand int := _search_candidates.vector_candidates;
    v_since timestamptz := _search_candidates.since;
    v_until timestamptz := _search_candidates.until;
    v_hist  boolean := _search_candidates.as_of IS NOT NULL OR _search_candidates.include_history;
BEGIN
    RETURN QUERY
    WITH h AS MATERIALIZED (
        -- Past beliefs (as_of, include_history): their own candidates.
        SELECT * FROM mneme._belief_candidates(v_convs, v_query, v_emb, greatest(v_cand, v_vcand), v_since, v_until,
                                               _search_candidates.as_of, _search_candidates.include_history)
        WHERE v_hist
    ), b AS (
        SELECT * FROM mneme._bm25_search(v_convs, v_query, v_cand, v_since, v_until) WHERE NOT v_hist
        UNION ALL
        SELECT h.memory_id, h.bm25_score, h.bm25_rank FROM h WHERE h.bm25_rank IS NOT NULL
    ), v AS (
        -- One conversation, or several in one ranking (scope tenant).
        SELECT * FROM mneme._vector_search_scope(v_convs, v_emb, v_vcand, v_since, v_until) WHERE NOT v_hist
        UNION ALL
        SELECT h.memory_id, h.vector_distance, h.vector_rank FROM h WHERE h.vector_rank IS NOT NULL
    )
    SELECT coalesce(b.memory_id, v.memory_id), b.rank, v.rank, b.score, v.distance
    FROM b FULL JOIN v ON v.memory_id = b.memory_id;
END
$$;
COMMENT ON FUNCTION mneme._search_candidates(uuid[], text, real[], int, int, timestamptz, timestamptz, timestamptz, boolean) IS
    'Internal to mneme.search: the top `candidates` of the BM25 leg and the top `vector_candidates` of the vector leg '
    '(or of past beliefs with as_of or include_history, the larger of the two), one row per memory with its rank and '
    'score in each leg.';

-- The forms of before `at` and `scope` were added: replaced, not
-- overloaded (an overload would make every call that omits them ambiguous).
CREATE OR REPLACE FUNCTION mneme.search(
    conversation_id uuid,
    query text,
    k int DEFAULT 5,
    query_embedding real[] DEFAULT NULL,
    since timestamptz DEFAULT NULL,
    until timestamptz DEFAULT NULL,
    at timestamptz DEFAULT now(),
    scope text DEFAULT 'conversation',
    as_of timestamptz DEFAULT NULL,
    include_history boolean DEFAULT false)
RETURNS SETOF mneme.retrieval
LANGUAGE plpgsql STABLE
SECURITY DEFINER
ROWS 10
SET search_path = pg_catalog, pg_temp
SET jit = off
AS $$
DECLARE
    v__entered boolean := mneme._enter(search.conversation_id);  -- the caller forwarded first (Citus: mneme._enter)
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

    -- Where the scope holds no active memory with a slot (no fact says a
    -- value of a subject's attribute), the newest-of-slot ranking below
    -- changes nothing: the same candidates and scores, ranked by score
    -- alone, without the statement's slot ranking (its windows, the
    -- candidates materialized and joined: 0.25 to 0.35 ms of a search of
    -- k 50, issue 49; docs/performance.md). TestSearchWithoutSlotsRanksAlike
    -- holds the two statements to the same candidates and scores.
    IF NOT EXISTS (SELECT 1 FROM mneme.memories m
                   WHERE m.conversation_id = ANY (v_convs) AND m.slot IS NOT NULL AND m.status = 'active') THEN
        RETURN QUERY
        WITH f AS MATERIALIZED (  -- f and r: the statement's below, word for word
            SELECT * FROM mneme._search_candidates(v_convs, search.query, v_emb, mneme.setting('retrieve_candidates')::int,
                                                   least(mneme.setting('retrieve_candidates')::int,
                                                         search.k * mneme.setting('vector_candidates_per_k')::int),
                                                   search.since, search.until, search.as_of,
                                                   coalesce(search.include_history, false))
        ), r AS (
            SELECT m.id, m.kind, m.summary, m.content, m.created_at, f.bm25_rank AS br, f.vector_rank AS vr,
                   f.bm25_score AS bs, f.vector_distance AS vd,
                   m.title, m.label, m.pinned, m.status, m.confidence_score, m.conversation_id AS cv, m.slot, m.invalidates_id,
                   power(least(greatest(m.confidence_score::float8, '1e-6'::float8), 1::float8), v_cw) AS cf,
                   coalesce(1 / (v_rrf_k + f.bm25_rank), 0) + v_vec_w * coalesce(1 / (v_rrf_k + f.vector_rank), 0) AS rrf,
                   CASE WHEN m.pinned THEN 1::float8
                        ELSE mneme._retrievability(m.stability, m.last_reviewed_at, v_at) END AS ret,
                   least(greatest(coalesce((v_weights ->> mneme._label_key(m.label, v_weights))::float8, 1::float8),
                                  '1e-6'::float8), '1e6'::float8) AS w
            FROM f JOIN mneme.memories m ON m.id = f.memory_id
            WHERE m.id = ANY (ARRAY(SELECT f2.memory_id FROM f f2)) AND m.conversation_id = ANY (v_convs)
        )
        SELECT r.id, r.kind, r.summary, r.content, r.created_at, r.rrf * power(r.ret, v_rw) * r.w * r.cf, r.rrf, r.br, r.vr,
               r.ret, r.title, r.label, r.pinned, r.bs, r.vd, r.status, r.confidence_score
        FROM r
        ORDER BY r.rrf * power(r.ret, v_rw) * r.w * r.cf DESC, r.id
        LIMIT search.k;
        RETURN;
    END IF;
    RETURN QUERY
    WITH f AS MATERIALIZED (
        -- The vector leg takes k * vector_candidates_per_k (an HNSW walk
        -- costs its ef_search, 1 per row asked for, at least 40), at most
        -- retrieve_candidates, the BM25 leg retrieve_candidates (exact, and
        -- cheaper per row). Its top 10 through a scope's index had recall
        -- 1.000 at 40 rows on clustered vectors, and its ranks past 10 are
        -- an HNSW walk's either way (docs/performance.md, issue 53).
        SELECT * FROM mneme._search_candidates(v_convs, search.query, v_emb, mneme.setting('retrieve_candidates')::int,
                                               least(mneme.setting('retrieve_candidates')::int,
                                                     search.k * mneme.setting('vector_candidates_per_k')::int),
                                               search.since, search.until, search.as_of,
                                               coalesce(search.include_history, false))
    ), r AS (
        SELECT m.id, m.kind, m.summary, m.content, m.created_at, f.bm25_rank AS br, f.vector_rank AS vr,
               f.bm25_score AS bs, f.vector_distance AS vd,
               m.title, m.label, m.pinned, m.status, m.confidence_score, m.conversation_id AS cv, m.slot, m.invalidates_id,
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
    ), s AS MATERIALIZED (
        SELECT r.*, r.rrf * power(r.ret, v_rw) * r.w * r.cf AS sc,
               (r.status = 'active' AND r.slot IS NOT NULL AND r.invalidates_id IS NULL) AS slotted
        FROM r
    ), o AS (
        -- The current belief first (issue 52): active facts of one slot
        -- (subject and attribute) that consolidation has not yet reconciled
        -- take the slot's scores in the order they were said, newest first
        -- (created_at is when it was said): the i-th said takes the slot's
        -- i-th best score. A retraction (invalidates_id) states no value:
        -- it keeps its own score, as does every memory without a slot. Only
        -- the slotted candidates are ranked by the window functions (most
        -- candidates have no slot: each alone, its own score and rank 1;
        -- sorting them all twice was most of search's own time).
        SELECT x.id, (array_agg(x.sc) OVER (PARTITION BY x.cv, x.slot ORDER BY x.sc DESC, x.id
                                            ROWS BETWEEN UNBOUNDED PRECEDING AND UNBOUNDED FOLLOWING))[x.said_rank] AS fs,
               x.said_rank
        FROM (SELECT s.id, s.cv, s.slot, s.sc,
                     row_number() OVER (PARTITION BY s.cv, s.slot ORDER BY s.created_at DESC, s.id) AS said_rank
              FROM s WHERE s.slotted) x
    ), t AS (
        SELECT s.*, coalesce(o.fs, s.sc) AS fs, coalesce(o.said_rank, 1) AS said_rank
        FROM s LEFT JOIN o ON o.id = s.id AND s.slotted
    )
    SELECT t.id, t.kind, t.summary, t.content, t.created_at, t.fs, t.rrf, t.br, t.vr, t.ret,
           t.title, t.label, t.pinned, t.bs, t.vd, t.status, t.confidence_score
    FROM t
    ORDER BY t.fs DESC, t.said_rank, t.id
    LIMIT search.k;
END
$$;
COMMENT ON FUNCTION mneme.search(uuid, text, int, real[], timestamptz, timestamptz, timestamptz, text, timestamptz, boolean) IS
    'Hybrid retrieval with no side effects: the top retrieve_candidates by BM25 and the top k * vector_candidates_per_k '
    '(at most retrieve_candidates) by cosine distance among '
    'the conversation''s active, unexpired memories (created in [since, until) when given), fused by '
    'reciprocal rank (rrf = sum 1 / (rrf_k + rank); the vector leg times rrf_hash_vector_weight with embedder "hash"), '
    'score = rrf * retrievability at `at` (default now(); 1 if pinned) * label weight * confidence_score ^ confidence_weight; '
    'as_of => time searches what was believed then (created by then, not yet superseded, invalidated or expired), '
    'include_history => true also returns superseded and invalidated memories (column status says which); '
    'top k (1..100) by score, ties by id; active facts of one slot that disagree take their slot''s scores newest '
    'first (by when they were said: the current belief ranks first until consolidation reconciles them). Without query_embedding, embedder "hash" embeds the query in SQL; '
    'embedder "external" refuses a NULL one (22004: pass the query''s embedding); an empty one means BM25 alone '
    '(vector_rank NULL). Unknown conversation: no rows. '
    'scope ''tenant'' searches every conversation of the conversation''s tenant (BM25 over their statistics together).';
GRANT EXECUTE ON FUNCTION mneme.search(uuid, text, int, real[], timestamptz, timestamptz, timestamptz, text, timestamptz, boolean) TO mneme_app, mneme_worker, mneme_admin;

-- The 6-argument form of before `at` was added: replaced, not overloaded
-- (an overload would make every call that omits `at` ambiguous).
CREATE OR REPLACE FUNCTION mneme.retrieve(
    conversation_id uuid,
    query text,
    k int DEFAULT 5,
    query_embedding real[] DEFAULT NULL,
    since timestamptz DEFAULT NULL,
    until timestamptz DEFAULT NULL,
    at timestamptz DEFAULT now(),
    scope text DEFAULT 'conversation',
    as_of timestamptz DEFAULT NULL,
    include_history boolean DEFAULT false)
RETURNS SETOF mneme.retrieval
LANGUAGE plpgsql
SECURITY DEFINER
ROWS 10
SET search_path = pg_catalog, pg_temp
SET jit = off
AS $$
DECLARE
    v__entered boolean := mneme._enter(retrieve.conversation_id);  -- the caller forwarded first (Citus: mneme._enter)
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
$$;
COMMENT ON FUNCTION mneme.retrieve(uuid, text, int, real[], timestamptz, timestamptz, timestamptz, text, timestamptz, boolean) IS
    'mneme.search, and when it returns memories, appends {query, memory_ids} to the conversation''s '
    'pending_reviews in the same transaction, for the review job to rate later. Never changes FSRS state.';
GRANT EXECUTE ON FUNCTION mneme.retrieve(uuid, text, int, real[], timestamptz, timestamptz, timestamptz, text, timestamptz, boolean) TO mneme_app, mneme_worker, mneme_admin;

-- The 6-argument form of before `at` was added: replaced, not overloaded
-- (an overload would make every call that omits `at` ambiguous).
CREATE OR REPLACE FUNCTION mneme.retrieve_markdown(
    conversation_id uuid,
    query text,
    k int DEFAULT 5,
    query_embedding real[] DEFAULT NULL,
    since timestamptz DEFAULT NULL,
    until timestamptz DEFAULT NULL,
    at timestamptz DEFAULT now(),
    scope text DEFAULT 'conversation',
    as_of timestamptz DEFAULT NULL,
    include_history boolean DEFAULT false)
RETURNS text
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
SET jit = off
AS $$
DECLARE
    v__entered boolean := mneme._enter(retrieve_markdown.conversation_id);  -- the caller forwarded first (Citus: mneme._enter)
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
$$;
COMMENT ON FUNCTION mneme.retrieve_markdown(uuid, text, int, real[], timestamptz, timestamptz, timestamptz, text, timestamptz, boolean) IS
    'mneme.retrieve rendered as markdown for a prompt: per memory its summary, when, kind, label, and why it '
    'matched (BM25 and/or vector rank, score). Records the pending review like retrieve.';
GRANT EXECUTE ON FUNCTION mneme.retrieve_markdown(uuid, text, int, real[], timestamptz, timestamptz, timestamptz, text, timestamptz, boolean) TO mneme_app, mneme_worker, mneme_admin;
