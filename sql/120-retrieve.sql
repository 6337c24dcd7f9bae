-- =============================================================================
-- mneme retrieval, part 3: the vector leg, the forgetting curve and the
-- hybrid ranking (mneme.search), with retrieve (records a pending review)
-- and retrieve_markdown on top. The ranking exists once, in mneme.search.
-- Idempotent: re-applied on every migrate.
-- =============================================================================

-- -----------------------------------------------------------------------------
-- Forgetting curve
-- -----------------------------------------------------------------------------
-- The formula, unchecked: a plain SQL expression with no SET clause so the
-- planner inlines it into the ranking query (a call with SET costs ~7 us per
-- candidate). Only pg_catalog functions, schema-qualified.
CREATE OR REPLACE FUNCTION mneme._retrievability(p_stability float8, p_last timestamptz, p_at timestamptz)
RETURNS float8
LANGUAGE sql IMMUTABLE PARALLEL SAFE
AS $$
SELECT pg_catalog.power(1 + (pg_catalog.power(0.9::float8, 1 / -0.5::float8) - 1)
                          * greatest(pg_catalog.date_part('epoch', p_at - p_last) / 86400, 0::float8) / p_stability,
                        -0.5::float8)
$$;
COMMENT ON FUNCTION mneme._retrievability(float8, timestamptz, timestamptz) IS
    'Internal: mneme.retrievability without argument checks, inlined into mneme.search.';

CREATE OR REPLACE FUNCTION mneme.retrievability(
    stability float8,
    last_reviewed_at timestamptz,
    at timestamptz DEFAULT now())
RETURNS float8
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF stability IS NULL OR last_reviewed_at IS NULL OR at IS NULL THEN
        RAISE EXCEPTION 'stability, last_reviewed_at and at must not be NULL' USING ERRCODE = '22004';
    END IF;
    IF NOT stability > 0 OR stability = 'Infinity' THEN
        RAISE EXCEPTION 'stability must be a positive number of days, got %', stability
            USING ERRCODE = '22023', HINT = 'FSRS stability is the interval in days at which recall falls to 90%';
    END IF;
    -- go-fsrs v3 (FSRS-5): R = (1 + factor * t / S) ^ decay, decay = -0.5,
    -- factor = 0.9 ^ (1 / decay) - 1 = 19/81, t in fractional days. A review
    -- time in the future counts as t = 0.
    RETURN mneme._retrievability(stability, last_reviewed_at, at);
END
$$;
COMMENT ON FUNCTION mneme.retrievability(float8, timestamptz, timestamptz) IS
    'FSRS-5 retrievability as go-fsrs v3 computes it: (1 + 19/81 * t / stability) ^ -0.5, t = days (fractional) '
    'from last_reviewed_at to at (0 if negative).';

-- -----------------------------------------------------------------------------
-- Query embeddings
-- -----------------------------------------------------------------------------
CREATE OR REPLACE FUNCTION mneme.check_embedding(p_embedding real[])
RETURNS void
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_dim int := mneme.setting('embedding_dim')::int;
BEGIN
    IF array_ndims(p_embedding) IS DISTINCT FROM 1 OR array_length(p_embedding, 1) <> v_dim THEN
        RAISE EXCEPTION 'query embedding has % dimensions, the database uses %',
            coalesce(array_length(p_embedding, 1), 0), v_dim
            USING ERRCODE = '22023',
                  HINT = 'embed the query with the model the memories were embedded with (setting embedding_dim)';
    END IF;
    IF array_position(p_embedding, NULL) IS NOT NULL OR 'NaN' = ANY (p_embedding)
       OR 'Infinity' = ANY (p_embedding) OR '-Infinity' = ANY (p_embedding) THEN
        RAISE EXCEPTION 'query embedding has NULL, NaN or infinite components' USING ERRCODE = '22023';
    END IF;
    IF NOT EXISTS (SELECT 1 FROM unnest(p_embedding) AS x WHERE x <> 0) THEN
        RAISE EXCEPTION 'query embedding is the zero vector: it has no cosine distance' USING ERRCODE = '22023';
    END IF;
END
$$;
COMMENT ON FUNCTION mneme.check_embedding(real[]) IS
    'Raises 22023 unless p_embedding is a usable query embedding: one dimension of length embedding_dim, '
    'finite, not all zero.';

-- -----------------------------------------------------------------------------
-- The vector leg. The one place where the variants differ: the pgvector
-- variant may use the HNSW index (with iterative scans) for large
-- conversations, so the function is created with its hnsw.* settings there
-- and without them in the array variant. Everything else is the same text:
-- mneme.embedding is vector(N) or real[] and OPERATOR(@extschema@.<=>) is
-- pgvector's cosine distance or mneme.<=> on real[].
-- -----------------------------------------------------------------------------
DO $do$
DECLARE
    v_variant text := mneme.setting('vector_variant') #>> '{}';
    v_settings text := CASE WHEN v_variant = 'pgvector'
        THEN E'SET hnsw.iterative_scan = relaxed_order\nSET hnsw.ef_search = 100\n'
        ELSE E'SET extra_float_digits = 3\n' END;
BEGIN
    EXECUTE replace($fn$
CREATE OR REPLACE FUNCTION mneme._vector_search(
    p_conversation_id uuid,
    p_embedding real[],
    p_limit int,
    p_since timestamptz,
    p_until timestamptz)
RETURNS TABLE (memory_id uuid, distance float8, rank int)
LANGUAGE plpgsql STABLE
ROWS 100
SET search_path = pg_catalog, pg_temp
SET jit = off
@@settings@@
AS $$
DECLARE
    v_q   mneme.embedding;
    v_n   bigint;
    v_all float8;
    v_ann boolean := false;
    v_dot text;
BEGIN
    IF p_embedding IS NULL THEN
        RETURN;
    END IF;
    v_q := p_embedding;

    -- HNSW only where it cannot lose rows to the conversation filter: a
    -- large conversation (exact search over its own rows, through the btree
    -- on conversation_id, is cheap for small ones) that makes up enough of
    -- the table for an iterative scan of hnsw.max_scan_tuples to meet 10x
    -- the candidates wanted. A date range always searches exactly.
    IF mneme.setting('vector_variant') #>> '{}' = 'pgvector' AND p_since IS NULL AND p_until IS NULL THEN
        SELECT s.n INTO v_n FROM mneme.bm25_stats s WHERE s.conversation_id = p_conversation_id;
        IF coalesce(v_n, 0) > mneme.setting('vector_exact_max')::bigint THEN
            SELECT greatest(c.reltuples, v_n) INTO v_all FROM pg_catalog.pg_class c
            WHERE c.oid = 'mneme.memories'::regclass;
            v_ann := v_n * coalesce(nullif(current_setting('hnsw.max_scan_tuples', true), '')::float8, 20000)
                     >= 10 * p_limit * v_all;
        END IF;
    END IF;

    IF v_ann THEN
        -- The candidate list as long as the result (pgvector's default 40 at
        -- least): the search then finds p_limit rows in one pass. The
        -- function's SET clause restores the caller's value on exit.
        PERFORM pg_catalog.set_config('hnsw.ef_search', greatest(40, least(p_limit, 1000))::text, true);
        -- relaxed_order iterative scan: re-sort the exact distances after.
        RETURN QUERY
        WITH c AS MATERIALIZED (
            SELECT m.id, m.embedding OPERATOR(@extschema@.<=>) v_q AS d
            FROM mneme.memories m
            WHERE m.conversation_id = p_conversation_id AND m.status = 'active'
              AND (m.valid_until IS NULL OR m.valid_until > now()) AND m.embedding IS NOT NULL
            ORDER BY m.embedding OPERATOR(@extschema@.<=>) v_q
            LIMIT p_limit)
        SELECT c.id, c.d::float8, (rank() OVER (ORDER BY c.d))::int FROM c ORDER BY c.d, c.id;
    ELSIF mneme.setting('vector_variant') #>> '{}' = 'array' THEN
        -- Exact, array variant: stored embeddings are unit length (trigger
        -- memories_normalize_embedding), so cosine distance = 1 - q.m / |q|
        -- over the query's non-zero components. The dot product is written
        -- out as one SQL expression, (q1)*e[i1] + (q2)*e[i2] + ..., which the
        -- executor evaluates ~30x faster than unnest-and-sum per row (floats
        -- print exactly: extra_float_digits = 3 on this function).
        SELECT string_agg(format('(%s)::float8 * m.e[%s]', u.x / n.norm, u.i), ' + ')
        INTO v_dot
        FROM unnest(p_embedding) WITH ORDINALITY AS u(x, i),
             (SELECT sqrt(sum(y::float8 * y)) AS norm FROM unnest(p_embedding) AS y) n
        WHERE u.x <> 0;
        RETURN QUERY EXECUTE format($q$
            SELECT t.id, t.d, (rank() OVER (ORDER BY t.d))::int
            FROM (SELECT c.id, c.d FROM (
                      SELECT m.id, 1 - (%s) AS d
                      FROM (SELECT m.id, m.embedding::real[] AS e
                            FROM mneme.memories m
                            WHERE m.conversation_id = $1 AND m.status = 'active'
                              AND (m.valid_until IS NULL OR m.valid_until > now()) AND m.embedding IS NOT NULL
                              AND ($2::timestamptz IS NULL OR m.created_at >= $2)
                              AND ($3::timestamptz IS NULL OR m.created_at < $3)) m) c
                  ORDER BY c.d, c.id LIMIT $4) t
            ORDER BY t.d, t.id$q$, v_dot)
        USING p_conversation_id, p_since, p_until, p_limit;
    ELSE
        -- Exact: the distance is computed in a materialized CTE, so the
        -- planner cannot turn the ORDER BY into an index scan that filters
        -- after the fact.
        RETURN QUERY
        WITH c AS MATERIALIZED (
            SELECT m.id, m.embedding OPERATOR(@extschema@.<=>) v_q AS d
            FROM mneme.memories m
            WHERE m.conversation_id = p_conversation_id AND m.status = 'active'
              AND (m.valid_until IS NULL OR m.valid_until > now()) AND m.embedding IS NOT NULL
              AND (p_since IS NULL OR m.created_at >= p_since)
              AND (p_until IS NULL OR m.created_at < p_until))
        SELECT c.id, c.d::float8, (rank() OVER (ORDER BY c.d))::int
        FROM c WHERE c.d IS NOT NULL ORDER BY c.d, c.id LIMIT p_limit;
    END IF;
END
$$
$fn$, '@@settings@@', v_settings);
END
$do$;
COMMENT ON FUNCTION mneme._vector_search(uuid, real[], int, timestamptz, timestamptz) IS
    'Internal: mneme.vector_search without the argument checks (mneme.search has made them).';

CREATE OR REPLACE FUNCTION mneme.vector_search(
    p_conversation_id uuid,
    p_embedding real[],
    p_limit int DEFAULT 100,
    p_since timestamptz DEFAULT NULL,
    p_until timestamptz DEFAULT NULL)
RETURNS TABLE (memory_id uuid, distance float8, rank int)
LANGUAGE plpgsql STABLE
ROWS 100
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF p_embedding IS NULL THEN
        RETURN;
    END IF;
    IF p_limit IS NULL OR p_limit < 1 THEN
        RAISE EXCEPTION 'limit must be at least 1' USING ERRCODE = '22023';
    END IF;
    PERFORM mneme.check_embedding(p_embedding);
    RETURN QUERY SELECT * FROM mneme._vector_search(p_conversation_id, p_embedding, p_limit, p_since, p_until);
END
$$;
COMMENT ON FUNCTION mneme.vector_search(uuid, real[], int, timestamptz, timestamptz) IS
    'The vector leg of retrieval: top p_limit active, unexpired memories of the conversation by cosine '
    'distance to p_embedding (empty when p_embedding is NULL), created in [p_since, p_until) when given. '
    'Exact over the conversation''s rows, or through the HNSW index with iterative scans for large '
    'conversations (pgvector variant, setting vector_exact_max). Equal distances share a rank (listed by memory id).';

-- -----------------------------------------------------------------------------
-- The ranking
-- -----------------------------------------------------------------------------
-- The 6-argument form of before `at` was added: replaced, not overloaded
-- (an overload would make every call that omits `at` ambiguous).
DROP FUNCTION IF EXISTS mneme.search(uuid, text, int, real[], timestamptz, timestamptz);
CREATE OR REPLACE FUNCTION mneme.search(
    conversation_id uuid,
    query text,
    k int DEFAULT 5,
    query_embedding real[] DEFAULT NULL,
    since timestamptz DEFAULT NULL,
    until timestamptz DEFAULT NULL,
    at timestamptz DEFAULT now())
RETURNS SETOF mneme.retrieval
LANGUAGE plpgsql STABLE
ROWS 10
SET search_path = pg_catalog, pg_temp
SET jit = off
AS $$
DECLARE
    v_conv    uuid := search.conversation_id;
    v_query   text := search.query;
    v_k       int := search.k;
    v_emb     real[] := search.query_embedding;
    v_since   timestamptz := search.since;
    v_until   timestamptz := search.until;
    v_at      timestamptz := search.at;
    v_cand    int := mneme.setting('retrieve_candidates')::int;
    v_rrf_k   float8 := mneme.setting('rrf_k')::float8;
    -- The built-in hash embedder's vectors are lexical (hashed words and
    -- trigrams): mostly redundant with BM25 and noisier, so its leg weighs
    -- less in the fusion (setting rrf_hash_vector_weight; docs/eval.md).
    v_vec_w   float8 := CASE WHEN mneme.setting('embedder') #>> '{}' = 'hash'
                             THEN mneme.setting('rrf_hash_vector_weight')::float8 ELSE 1 END;
    v_weights jsonb := mneme.setting('label_weights');
    v_rw      float8 := mneme.setting('retrievability_weight')::float8;
BEGIN
    IF v_conv IS NULL THEN
        RAISE EXCEPTION 'conversation_id must not be NULL' USING ERRCODE = '22004';
    END IF;
    IF v_query IS NULL OR v_query ~ '^[[:space:]]*$' THEN
        RAISE EXCEPTION 'query must not be NULL or empty' USING ERRCODE = '22023',
            HINT = 'pass the text to search for, e.g. the user''s latest message';
    END IF;
    IF v_rw IS NULL OR v_rw < 0 OR v_rw = 'Infinity' THEN
        RAISE EXCEPTION 'setting retrievability_weight must be a finite number >= 0, got %', v_rw
            USING ERRCODE = '22023', HINT = 'SELECT mneme.set_setting(''retrievability_weight'', ''1'') restores the default';
    END IF;
    IF v_k IS NULL OR v_k < 1 OR v_k > 100 THEN
        RAISE EXCEPTION 'k must be between 1 and 100, got %', coalesce(v_k::text, 'NULL') USING ERRCODE = '22023';
    END IF;
    IF v_at IS NULL THEN
        RAISE EXCEPTION 'at must not be NULL' USING ERRCODE = '22004',
            HINT = 'at is the time retrievability is evaluated at; omit it for now()';
    END IF;
    IF v_since > v_until THEN
        RAISE EXCEPTION 'since (%) is after until (%)', v_since, v_until USING ERRCODE = '22023',
            HINT = 'the range is since <= created_at < until';
    END IF;
    IF v_emb IS NOT NULL THEN
        PERFORM mneme.check_embedding(v_emb);
    ELSE
        IF mneme.setting('embedder') #>> '{}' = 'hash' THEN
            v_emb := mneme.hash_embed(v_query);
        ELSE
            RAISE NOTICE 'mneme: no query_embedding and setting embedder is %: vector leg skipped, BM25 only',
                mneme.setting('embedder')
                USING HINT = 'pass query_embedding from the external embedder for hybrid retrieval';
        END IF;
    END IF;

    RETURN QUERY
    WITH b AS (
        SELECT * FROM mneme.bm25_search(v_conv, v_query, v_cand, v_since, v_until)
    ), v AS (
        SELECT * FROM mneme._vector_search(v_conv, v_emb, v_cand, v_since, v_until)
    ), f AS (
        SELECT coalesce(b.memory_id, v.memory_id) AS id, b.rank AS br, v.rank AS vr,
               b.score AS bs, v.distance AS vd
        FROM b FULL JOIN v ON v.memory_id = b.memory_id
    ), r AS (
        SELECT m.id, m.kind, m.summary, m.content, m.created_at, f.br, f.vr, f.bs, f.vd,
               m.title, m.label, m.pinned,
               coalesce(1 / (v_rrf_k + f.br), 0) + v_vec_w * coalesce(1 / (v_rrf_k + f.vr), 0) AS rrf,
               CASE WHEN m.pinned THEN 1::float8
                    ELSE mneme._retrievability(m.stability, m.last_reviewed_at, v_at) END AS ret,
               coalesce((v_weights ->> m.label)::float8,
                        CASE WHEN m.label LIKE 'project\_%' THEN (v_weights ->> 'project')::float8 END,
                        1::float8) AS w
        FROM f JOIN mneme.memories m ON m.id = f.id
    )
    SELECT r.id, r.kind, r.summary, r.content, r.created_at, r.rrf * power(r.ret, v_rw) * r.w, r.rrf, r.br, r.vr, r.ret,
           r.title, r.label, r.pinned, r.bs, r.vd
    FROM r
    ORDER BY r.rrf * power(r.ret, v_rw) * r.w DESC, r.id
    LIMIT v_k;
END
$$;
COMMENT ON FUNCTION mneme.search(uuid, text, int, real[], timestamptz, timestamptz, timestamptz) IS
    'Hybrid retrieval with no side effects: the top retrieve_candidates by BM25 and by cosine distance among '
    'the conversation''s active, unexpired memories (created in [since, until) when given), fused by '
    'reciprocal rank (rrf = sum 1 / (rrf_k + rank); the vector leg times rrf_hash_vector_weight with embedder "hash"), '
    'score = rrf * retrievability at `at` (default now(); 1 if pinned) * label weight; '
    'top k (1..100) by score, ties by id. Without query_embedding, embedder "hash" embeds the query in SQL; '
    'embedder "external" skips the vector leg (vector_rank NULL, NOTICE). Unknown conversation: no rows.';

-- The 6-argument form of before `at` was added: replaced, not overloaded
-- (an overload would make every call that omits `at` ambiguous).
DROP FUNCTION IF EXISTS mneme.retrieve(uuid, text, int, real[], timestamptz, timestamptz);
CREATE OR REPLACE FUNCTION mneme.retrieve(
    conversation_id uuid,
    query text,
    k int DEFAULT 5,
    query_embedding real[] DEFAULT NULL,
    since timestamptz DEFAULT NULL,
    until timestamptz DEFAULT NULL,
    at timestamptz DEFAULT now())
RETURNS SETOF mneme.retrieval
LANGUAGE plpgsql
ROWS 10
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_rows mneme.retrieval[];
BEGIN
    v_rows := ARRAY(SELECT s FROM mneme.search(retrieve.conversation_id, retrieve.query, retrieve.k,
                                               retrieve.query_embedding, retrieve.since, retrieve.until,
                                               retrieve.at) AS s);
    IF cardinality(v_rows) > 0 THEN
        PERFORM mneme.add_pending_review(retrieve.conversation_id,
                                         ARRAY(SELECT (x).memory_id FROM unnest(v_rows) WITH ORDINALITY AS x ORDER BY ordinality),
                                         retrieve.query);
    END IF;
    RETURN QUERY SELECT * FROM unnest(v_rows);
END
$$;
COMMENT ON FUNCTION mneme.retrieve(uuid, text, int, real[], timestamptz, timestamptz, timestamptz) IS
    'mneme.search, and when it returns memories, appends {query, memory_ids} to the conversation''s '
    'pending_reviews in the same transaction, for the review job to rate later. Never changes FSRS state.';

-- The 6-argument form of before `at` was added: replaced, not overloaded
-- (an overload would make every call that omits `at` ambiguous).
DROP FUNCTION IF EXISTS mneme.retrieve_markdown(uuid, text, int, real[], timestamptz, timestamptz);
CREATE OR REPLACE FUNCTION mneme.retrieve_markdown(
    conversation_id uuid,
    query text,
    k int DEFAULT 5,
    query_embedding real[] DEFAULT NULL,
    since timestamptz DEFAULT NULL,
    until timestamptz DEFAULT NULL,
    at timestamptz DEFAULT now())
RETURNS text
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_md text;
BEGIN
    SELECT string_agg(format(E'%s. %s%s\n   - when: %s; kind: %s; label: %s%s\n   - why: %s; score %s (rrf %s x retrievability %s)',
               n,
               CASE WHEN r.title IS NOT NULL AND r.title <> '' THEN '**' || r.title || '**: ' ELSE '' END,
               replace(coalesce(nullif(r.summary, ''), r.content), E'\n', ' '),
               to_char(r.created_at AT TIME ZONE 'UTC', 'YYYY-MM-DD HH24:MI "UTC"'),
               r.kind, r.label, CASE WHEN r.pinned THEN ', pinned' ELSE '' END,
               concat_ws(' and ',
                         CASE WHEN r.bm25_rank IS NOT NULL THEN format('keywords (BM25 #%s)', r.bm25_rank) END,
                         CASE WHEN r.vector_rank IS NOT NULL THEN format('similarity (vector #%s)', r.vector_rank) END),
               round(r.score::numeric, 5), round(r.rrf::numeric, 5), round(r.retrievability::numeric, 3)),
               E'\n' ORDER BY n)
    INTO v_md
    FROM mneme.retrieve(retrieve_markdown.conversation_id, retrieve_markdown.query, retrieve_markdown.k,
                        retrieve_markdown.query_embedding, retrieve_markdown.since, retrieve_markdown.until,
                        retrieve_markdown.at)
         WITH ORDINALITY AS r(memory_id, kind, summary, content, created_at, score, rrf, bm25_rank, vector_rank,
                              retrievability, title, label, pinned, bm25_score, vector_distance, n);
    RETURN format(E'## Relevant memories for "%s"\n\n%s\n', retrieve_markdown.query,
                  coalesce(v_md, '(none found)'));
END
$$;
COMMENT ON FUNCTION mneme.retrieve_markdown(uuid, text, int, real[], timestamptz, timestamptz, timestamptz) IS
    'mneme.retrieve rendered as markdown for a prompt: per memory its summary, when, kind, label, and why it '
    'matched (BM25 and/or vector rank, score). Records the pending review like retrieve.';
