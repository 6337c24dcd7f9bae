-- =============================================================================
-- mneme retrieval, part 3: the forgetting curve and the vector leg. The
-- ranking that fuses the legs is in 130-search.sql.
-- Idempotent: re-applied on every migrate.
-- =============================================================================

-- -----------------------------------------------------------------------------
-- Forgetting curve
-- -----------------------------------------------------------------------------
-- The formula, unchecked: a plain SQL expression with no SET clause so the
-- planner inlines it into the ranking query (a call with SET costs ~7 us per
-- candidate). Only pg_catalog functions and operators, schema-qualified, so
-- a caller's search_path cannot swap them.
-- Clamped so that no stored row can make it overflow (issue 38: a
-- stability of 1e-308 made t / S overflow, 22003, in every search and
-- cleanup of the tenant): the stability to [1e-6, 1e9] days (NaN counts as
-- 1e9: greatest and least sort it above every number) and both times to
-- years 1 to 9999, so t / S stays below 4e12 and R above 5e-7. The
-- stabilities mneme writes lie inside (mneme._fsrs_ok: at most 36500 days;
-- go-fsrs' smallest initial stability is 0.1 day), so the result equals
-- go-fsrs' there (TestRetrievabilityMatchesGoFSRS).
CREATE OR REPLACE FUNCTION mneme._retrievability(stability float8, last timestamptz, at timestamptz)
RETURNS float8
LANGUAGE sql IMMUTABLE PARALLEL SAFE
AS $$
SELECT pg_catalog.power(
           1::float8 OPERATOR(pg_catalog.+)
               (((pg_catalog.power(0.9::float8, 1::float8 OPERATOR(pg_catalog./) '-0.5'::float8) OPERATOR(pg_catalog.-) 1::float8)
                 OPERATOR(pg_catalog.*) greatest((pg_catalog.date_part('epoch',
                                                      least(greatest(_retrievability.at, '0001-01-01 00:00:00+00'::timestamptz), '9999-12-31 23:59:59+00'::timestamptz)
                                                      OPERATOR(pg_catalog.-)
                                                      least(greatest(_retrievability.last, '0001-01-01 00:00:00+00'::timestamptz), '9999-12-31 23:59:59+00'::timestamptz))
                                                  OPERATOR(pg_catalog./) 86400::float8), 0::float8))
                OPERATOR(pg_catalog./) least(greatest(_retrievability.stability, '1e-6'::float8), '1e9'::float8)),
           '-0.5'::float8)
$$;
COMMENT ON FUNCTION mneme._retrievability(float8, timestamptz, timestamptz) IS
    'Internal: mneme.retrievability without argument checks, inlined into mneme.search.';

CREATE OR REPLACE FUNCTION mneme.retrievability(
    stability float8,
    last_reviewed_at timestamptz,
    at timestamptz DEFAULT now())
RETURNS float8
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
SET jit = off
AS $$
BEGIN
    IF stability IS NULL OR last_reviewed_at IS NULL OR at IS NULL THEN
        RAISE EXCEPTION 'stability, last_reviewed_at and at must not be NULL' USING ERRCODE = '22004';
    END IF;
    IF NOT stability > 0 OR stability IN ('Infinity'::float8, 'NaN'::float8) THEN
        RAISE EXCEPTION 'stability must be a positive number of days, got %', stability
            USING ERRCODE = '22023', HINT = 'FSRS stability is the interval in days at which recall falls to 90%';
    END IF;
    PERFORM mneme._check_time('last_reviewed_at', last_reviewed_at);
    PERFORM mneme._check_time('at', at);
    -- go-fsrs v3 (FSRS-5): R = (1 + factor * t / S) ^ decay, decay = -0.5,
    -- factor = 0.9 ^ (1 / decay) - 1 = 19/81, t in fractional days. A review
    -- time in the future counts as t = 0.
    RETURN mneme._retrievability(stability, last_reviewed_at, at);
END
$$;
COMMENT ON FUNCTION mneme.retrievability(float8, timestamptz, timestamptz) IS
    'FSRS-5 retrievability as go-fsrs v3 computes it: (1 + 19/81 * t / stability) ^ -0.5, t = days (fractional) '
    'from last_reviewed_at to at (0 if negative).';
GRANT EXECUTE ON FUNCTION mneme.retrievability(float8, timestamptz, timestamptz) TO mneme_app, mneme_worker, mneme_admin;

-- -----------------------------------------------------------------------------
-- Query embeddings
-- -----------------------------------------------------------------------------
CREATE OR REPLACE FUNCTION mneme.check_embedding(embedding real[])
RETURNS void
LANGUAGE plpgsql STABLE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
SET jit = off
AS $$
#variable_conflict use_column
DECLARE
    v_dim int := mneme.setting('embedding_dim')::int;
BEGIN
    IF check_embedding.embedding IS NULL THEN
        RAISE EXCEPTION 'embedding must not be NULL' USING ERRCODE = '22004';
    END IF;
    IF array_ndims(check_embedding.embedding) IS DISTINCT FROM 1 OR array_length(check_embedding.embedding, 1) <> v_dim THEN
        RAISE EXCEPTION 'query embedding has % dimensions, the database uses %',
            coalesce(array_length(check_embedding.embedding, 1), 0), v_dim
            USING ERRCODE = '22023',
                  HINT = 'embed the query with the model the memories were embedded with (setting embedding_dim)';
    END IF;
    IF array_position(check_embedding.embedding, NULL) IS NOT NULL OR 'NaN' = ANY (check_embedding.embedding)
       OR 'Infinity' = ANY (check_embedding.embedding) OR '-Infinity' = ANY (check_embedding.embedding) THEN
        RAISE EXCEPTION 'query embedding has NULL, NaN or infinite components' USING ERRCODE = '22023';
    END IF;
    IF NOT EXISTS (SELECT 1 FROM unnest(check_embedding.embedding) AS x WHERE x <> 0) THEN
        RAISE EXCEPTION 'query embedding is the zero vector: it has no cosine distance' USING ERRCODE = '22023';
    END IF;
END
$$;
COMMENT ON FUNCTION mneme.check_embedding(real[]) IS
    'Raises 22023 unless embedding is a usable query embedding: one dimension of length embedding_dim, '
    'finite, not all zero.';
GRANT EXECUTE ON FUNCTION mneme.check_embedding(real[]) TO mneme_app, mneme_worker, mneme_admin;

-- -----------------------------------------------------------------------------
-- Per-scope HNSW indexes (pgvector variant; issue 42). One HNSW index over
-- the whole table, filtered by conversation, walks the graph through every
-- other conversation's rows: on the 50,000-memory conversation of the
-- 1,000,000-memory benchmark its recall of the exact top 100 fell far
-- below 1 and its cost rose with the database (docs/performance.md). A
-- conversation (or a tenant) of at least vector_scope_index_min active
-- memories gets an index of its own instead, a partial HNSW index whose
-- predicate is that scope, so a search walks that scope's graph only.
-- mneme.vector_index_plan lists the statements that create and drop them
-- (CREATE INDEX CONCURRENTLY: run outside a transaction, by the role that
-- migrates, e.g. psql's \gexec or `mneme vector-indexes`); the vector leg
-- uses an index once it is valid.
-- -----------------------------------------------------------------------------
CREATE OR REPLACE FUNCTION mneme._vector_index_name(scope text, scope_id text)
RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE
AS $$
SELECT CASE _vector_index_name.scope
           WHEN 'conversation' THEN 'memories_hnsw_c_' OPERATOR(pg_catalog.||) pg_catalog.replace(_vector_index_name.scope_id, '-', '')
           WHEN 'tenant' THEN 'memories_hnsw_t_' OPERATOR(pg_catalog.||) pg_catalog.md5(_vector_index_name.scope_id)
       END
$$;
COMMENT ON FUNCTION mneme._vector_index_name(text, text) IS
    'Internal: the name of the per-scope HNSW index of a conversation (its id without dashes) or a tenant (md5 of its id).';

CREATE OR REPLACE FUNCTION mneme._vector_index_ready(scope text, scope_id text)
RETURNS boolean
LANGUAGE plpgsql STABLE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    RETURN coalesce((SELECT i.indisvalid AND i.indisready FROM pg_catalog.pg_index i
                     WHERE i.indexrelid = pg_catalog.to_regclass(
                               'mneme.' || mneme._vector_index_name(_vector_index_ready.scope, _vector_index_ready.scope_id))
                       AND i.indrelid = 'mneme.memories'::regclass), false);
END
$$;
COMMENT ON FUNCTION mneme._vector_index_ready(text, text) IS
    'Internal: whether the conversation''s or tenant''s own HNSW index exists and is valid (a CREATE INDEX '
    'CONCURRENTLY that failed leaves an invalid one, never used).';

DO $do$
BEGIN
    IF mneme.setting('vector_variant') #>> '{}' <> 'pgvector' THEN
        -- The array variant has no index to plan: the function says so.
        CREATE OR REPLACE FUNCTION mneme.vector_index_plan()
        RETURNS TABLE (action text, scope text, scope_id text, memories bigint, index_name text, statement text)
        LANGUAGE plpgsql STABLE
        SET search_path = pg_catalog, pg_temp
        SET jit = off
        AS $fn$
        BEGIN
            RAISE EXCEPTION 'per-scope vector indexes need pgvector; this database uses the array variant'
                USING ERRCODE = '0A000', HINT = 'the array variant searches every scope exactly';
        END
        $fn$;
        RETURN;
    END IF;
    CREATE OR REPLACE FUNCTION mneme.vector_index_plan()
    RETURNS TABLE (action text, scope text, scope_id text, memories bigint, index_name text, statement text)
    LANGUAGE plpgsql STABLE
    SET search_path = pg_catalog, pg_temp
    SET jit = off
    AS $fn$
    #variable_conflict use_column
    DECLARE
        v_min  bigint := mneme.setting('vector_scope_index_min')::bigint;
        -- The hash embedder's vectors lose too much through an index (its
        -- recall@10 of the exact top 10 was 0.69 on the benchmark's
        -- 50,000-memory conversation, docs/performance.md): its scopes
        -- stay exact, so it gets no index (and loses those it had).
        v_ext  boolean := mneme.setting('embedder') #>> '{}' <> 'hash';
        v_ops  text;
    BEGIN
        SELECT format('%I.vector_cosine_ops', n.nspname) INTO v_ops
        FROM pg_catalog.pg_extension e JOIN pg_catalog.pg_namespace n ON n.oid = e.extnamespace
        WHERE e.extname = 'vector';
        RETURN QUERY
        WITH conv AS (
            SELECT s.conversation_id::text AS id, q.tenant_id, s.n::bigint AS n
            FROM mneme.bm25_stats s JOIN mneme.message_queue q ON q.id = s.conversation_id
        ), wanted AS (
            SELECT 'conversation'::text AS scope, c.id, c.n, format('conversation_id = %L::uuid', c.id) AS pred
            FROM conv c WHERE c.n >= v_min AND v_ext
            UNION ALL
            -- A tenant of several conversations (one conversation's index
            -- serves a tenant of one).
            SELECT 'tenant', c.tenant_id, sum(c.n)::bigint, format('tenant_id = %L', c.tenant_id)
            FROM conv c WHERE v_ext GROUP BY c.tenant_id HAVING sum(c.n) >= v_min AND count(*) > 1
        ), have AS (
            SELECT ic.relname::text AS name FROM pg_catalog.pg_index i JOIN pg_catalog.pg_class ic ON ic.oid = i.indexrelid
            WHERE i.indrelid = 'mneme.memories'::regclass AND ic.relname ~ '^memories_hnsw_[ct]_'
        ), sizes AS (
            SELECT 'conversation'::text AS scope, c.id, c.n FROM conv c
            UNION ALL
            SELECT 'tenant', c.tenant_id, sum(c.n)::bigint FROM conv c GROUP BY c.tenant_id HAVING count(*) > 1
        )
        SELECT 'create', w.scope, w.id, w.n, mneme._vector_index_name(w.scope, w.id),
               format('CREATE INDEX CONCURRENTLY IF NOT EXISTS %I ON mneme.memories USING hnsw (embedding %s) WHERE %s AND status = %L',
                      mneme._vector_index_name(w.scope, w.id), v_ops, w.pred, 'active')
        FROM wanted w
        WHERE NOT mneme._vector_index_ready(w.scope, w.id)
        UNION ALL
        -- An index whose scope shrank below half the minimum, or is gone,
        -- or that a failed build left invalid (dropped, then made again).
        SELECT 'drop', x.scope, x.id, coalesce(x.n, 0), h.name,
               format('DROP INDEX CONCURRENTLY IF EXISTS mneme.%I', h.name)
        FROM have h
        LEFT JOIN LATERAL (SELECT z.scope, z.id, z.n FROM sizes z WHERE mneme._vector_index_name(z.scope, z.id) = h.name) x ON true
        WHERE x.n IS NULL OR x.n < v_min / 2 OR NOT v_ext
           OR NOT mneme._vector_index_ready(x.scope, x.id)
        ORDER BY 1 DESC, 4 DESC, 5;
    END
    $fn$;
END
$do$;
COMMENT ON FUNCTION mneme.vector_index_plan() IS
    'pgvector with an external embedder: the statements that give every conversation and every tenant of several '
    'conversations with at least vector_scope_index_min active memories an HNSW index of its own (action create), and '
    'drop those whose scope shrank below half of it, is gone, or whose build failed (action drop; drops come first); '
    'with embedder "hash" (whose vectors lose too much through an index) only drops. CREATE and DROP INDEX '
    'CONCURRENTLY: run each statement alone, outside a transaction, as the role that owns the tables (psql: '
    'SELECT statement FROM mneme.vector_index_plan() \gexec; or mneme vector-indexes). Reads every tenant.';
GRANT EXECUTE ON FUNCTION mneme.vector_index_plan() TO mneme_admin;

-- The candidate list (hnsw.ef_search) of a walk through a scope's own
-- index for the top k: the rows asked for, at least pgvector's default
-- 40 (the bare top 10's), at most setting vector_ef_search. The walk's
-- cost follows ef_search: at 40 for the 40 rows of search's top 10 the
-- leg took 1.33 ms of CPU against 2.51 at 80 on the 1,000,000-memory
-- benchmark's tenant (clustered vectors), and its recall@10 against the
-- exact top 10 stayed 1.000 there (docs/performance.md, "Sixth session").
CREATE OR REPLACE FUNCTION mneme._vector_scope_ef(k int)
RETURNS int
LANGUAGE plpgsql STABLE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    RETURN least(mneme.setting('vector_ef_search')::int, greatest(40, coalesce(_vector_scope_ef.k, 100)));
END
$$;
COMMENT ON FUNCTION mneme._vector_scope_ef(int) IS
    'Internal: hnsw.ef_search for the top k through a scope''s own HNSW index: k, at least 40, at most setting vector_ef_search.';

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
        THEN E'SET hnsw.iterative_scan = relaxed_order\nSET hnsw.ef_search = 100\nSET enable_sort = on\n'
        ELSE E'SET extra_float_digits = 3\n' END;
BEGIN
    EXECUTE replace($fn$
CREATE OR REPLACE FUNCTION mneme._vector_search(
    conversation_id uuid,
    embedding real[],
    k int,
    since timestamptz,
    until timestamptz)
RETURNS TABLE (memory_id uuid, distance float8, rank int)
LANGUAGE plpgsql STABLE
SECURITY DEFINER
ROWS 100
SET search_path = pg_catalog, pg_temp
SET jit = off
@@settings@@
AS $$
#variable_conflict use_column
DECLARE
    v_q   mneme.embedding;
    v_n   bigint;
    v_all float8;
    v_ann boolean := false;
    v_dot text;
BEGIN
    IF _vector_search.embedding IS NULL THEN
        RETURN;
    END IF;
    v_q := _vector_search.embedding;

    -- HNSW only where it cannot lose rows to the conversation filter: a
    -- large conversation (exact search over its own rows, through the btree
    -- on conversation_id, is cheap for small ones) that makes up enough of
    -- the table for an iterative scan of hnsw.max_scan_tuples to meet 10x
    -- the candidates wanted. A date range always searches exactly.
    IF mneme.setting('vector_variant') #>> '{}' = 'pgvector' AND _vector_search.since IS NULL AND _vector_search.until IS NULL
       AND mneme.setting('embedder') #>> '{}' <> 'hash'
       AND mneme._vector_index_ready('conversation', _vector_search.conversation_id::text) THEN
        -- The conversation's own HNSW index (vector_index_plan): its graph
        -- holds this conversation's active memories only, so nothing is
        -- filtered out of the walk. The conversation as a literal, so the
        -- planner matches the index's predicate (a parameter would not).
        PERFORM pg_catalog.set_config('hnsw.ef_search', mneme._vector_scope_ef(_vector_search.k)::text, true);
        -- Sorting off for this statement (the function's SET clause
        -- restores it): the planner would rather sort a scope it thinks is
        -- small, read through a btree, than walk the index it was made for.
        PERFORM pg_catalog.set_config('enable_sort', 'off', true);
        RETURN QUERY EXECUTE format($q$
            WITH c AS MATERIALIZED (
                SELECT m.id, m.embedding OPERATOR(@extschema@.<=>) $1 AS d
                FROM mneme.memories m
                WHERE m.conversation_id = %L::uuid AND m.status = 'active'
                  AND (m.valid_until IS NULL OR m.valid_until > now())
                ORDER BY m.embedding OPERATOR(@extschema@.<=>) $1
                LIMIT $2)
            SELECT c.id, c.d::float8, (rank() OVER (ORDER BY c.d))::int FROM c ORDER BY c.d, c.id$q$,
            _vector_search.conversation_id)
        USING v_q, _vector_search.k;
        RETURN;
    END IF;
    IF mneme.setting('vector_variant') #>> '{}' = 'pgvector' AND _vector_search.since IS NULL AND _vector_search.until IS NULL THEN
        SELECT s.n INTO v_n FROM mneme.bm25_stats s WHERE s.conversation_id = _vector_search.conversation_id;
        IF coalesce(v_n, 0) > mneme.setting('vector_exact_max')::bigint THEN
            SELECT greatest(c.reltuples, v_n) INTO v_all FROM pg_catalog.pg_class c
            WHERE c.oid = 'mneme.memories'::regclass;
            v_ann := v_n * coalesce(nullif(current_setting('hnsw.max_scan_tuples', true), '')::float8, 20000)
                     >= 10 * _vector_search.k * v_all;
        END IF;
    END IF;

    IF v_ann THEN
        -- The candidate list as long as the result (pgvector's default 40 at
        -- least): the search then finds k rows in one pass. The
        -- function's SET clause restores the caller's value on exit.
        PERFORM pg_catalog.set_config('hnsw.ef_search', greatest(40, least(_vector_search.k, 1000))::text, true);
        -- relaxed_order iterative scan: re-sort the exact distances after.
        RETURN QUERY
        WITH c AS MATERIALIZED (
            SELECT m.id, m.embedding OPERATOR(@extschema@.<=>) v_q AS d
            FROM mneme.memories m
            WHERE m.conversation_id = _vector_search.conversation_id AND m.status = 'active'
              AND (m.valid_until IS NULL OR m.valid_until > now()) AND m.embedding IS NOT NULL
            ORDER BY m.embedding OPERATOR(@extschema@.<=>) v_q
            LIMIT _vector_search.k)
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
        FROM unnest(_vector_search.embedding) WITH ORDINALITY AS u(x, i),
             (SELECT sqrt(sum(y::float8 * y)) AS norm FROM unnest(_vector_search.embedding) AS y) n
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
        USING _vector_search.conversation_id, _vector_search.since, _vector_search.until, _vector_search.k;
    ELSE
        -- Exact: the distance is computed in a materialized CTE, so the
        -- planner cannot turn the ORDER BY into an index scan that filters
        -- after the fact. The top k first (a top-N heapsort), then their
        -- ranks: the same ranks (a row's rank counts the rows nearer than
        -- it, all of them in the top k), without sorting every row for the
        -- window, which spilled to disk on the 50,000-memory conversation
        -- (93 to 124 ms against 53 to 62, EXPLAIN ANALYZE, issue 42).
        RETURN QUERY
        WITH c AS MATERIALIZED (
            SELECT m.id, m.embedding OPERATOR(@extschema@.<=>) v_q AS d
            FROM mneme.memories m
            WHERE m.conversation_id = _vector_search.conversation_id AND m.status = 'active'
              AND (m.valid_until IS NULL OR m.valid_until > now()) AND m.embedding IS NOT NULL
              AND (_vector_search.since IS NULL OR m.created_at >= _vector_search.since)
              AND (_vector_search.until IS NULL OR m.created_at < _vector_search.until)
        ), t AS (
            SELECT c.id, c.d FROM c WHERE c.d IS NOT NULL ORDER BY c.d, c.id LIMIT _vector_search.k)
        SELECT t.id, t.d::float8, (rank() OVER (ORDER BY t.d))::int
        FROM t ORDER BY t.d, t.id;
    END IF;
END
$$
$fn$, '@@settings@@', v_settings);
END
$do$;
COMMENT ON FUNCTION mneme._vector_search(uuid, real[], int, timestamptz, timestamptz) IS
    'Internal: mneme.vector_search without the argument checks (mneme.search has made them).';

-- The vector leg over a search's scope: one conversation (_vector_search),
-- or several (scope tenant: every conversation of the tenant). Over
-- several, distances are comparable across conversations, so the leg is
-- one ranking of one candidate set: through the tenant's own HNSW index
-- when it has one (vector_index_plan) and no date range is given, else one
-- exact statement over the conversations while they hold at most
-- vector_scope_index_min memories (always in the array variant), else each
-- conversation's leg (exact, or its own index) merged.
DO $do$
DECLARE
    v_settings text := CASE WHEN mneme.setting('vector_variant') #>> '{}' = 'pgvector'
        THEN E'SET hnsw.iterative_scan = relaxed_order\nSET hnsw.ef_search = 100\nSET enable_sort = on\n'
        ELSE E'SET extra_float_digits = 3\n' END;
BEGIN
    EXECUTE replace($fn$
CREATE OR REPLACE FUNCTION mneme._vector_search_scope(
    conversation_ids uuid[],
    embedding real[],
    k int,
    since timestamptz,
    until timestamptz)
RETURNS TABLE (memory_id uuid, distance float8, rank int)
LANGUAGE plpgsql STABLE
SECURITY DEFINER
ROWS 100
SET search_path = pg_catalog, pg_temp
SET jit = off
@@settings@@
AS $$
#variable_conflict use_column
DECLARE
    v_tenant text;
    v_dot    text;
    v_n      bigint;
    v_q      mneme.embedding;
BEGIN
    IF _vector_search_scope.embedding IS NULL OR cardinality(_vector_search_scope.conversation_ids) IS NULL THEN
        RETURN;
    END IF;
    IF cardinality(_vector_search_scope.conversation_ids) = 1 THEN
        RETURN QUERY SELECT * FROM mneme._vector_search(_vector_search_scope.conversation_ids[1], _vector_search_scope.embedding,
                                                        _vector_search_scope.k, _vector_search_scope.since, _vector_search_scope.until);
        RETURN;
    END IF;
    IF mneme.setting('vector_variant') #>> '{}' = 'pgvector' AND _vector_search_scope.since IS NULL AND _vector_search_scope.until IS NULL
       AND mneme.setting('embedder') #>> '{}' <> 'hash' THEN
        -- (the conversations of a scope share their tenant: _scope_conversations)
        SELECT q.tenant_id INTO v_tenant FROM mneme.message_queue q WHERE q.id = _vector_search_scope.conversation_ids[1];
        IF v_tenant IS NOT NULL AND mneme._vector_index_ready('tenant', v_tenant) THEN
            PERFORM pg_catalog.set_config('hnsw.ef_search', mneme._vector_scope_ef(_vector_search_scope.k)::text, true);
            PERFORM pg_catalog.set_config('enable_sort', 'off', true);  -- as in _vector_search
            -- The tenant as a literal, so the planner matches the index's
            -- predicate; the scope's conversations as well (a conversation
            -- created since the scope was read is not searched).
            RETURN QUERY EXECUTE format($q$
                WITH c AS MATERIALIZED (
                    SELECT m.id, m.embedding OPERATOR(@extschema@.<=>) $1 AS d
                    FROM mneme.memories m
                    WHERE m.tenant_id = %L AND m.status = 'active' AND m.conversation_id = ANY ($3)
                      AND (m.valid_until IS NULL OR m.valid_until > now())
                    ORDER BY m.embedding OPERATOR(@extschema@.<=>) $1
                    LIMIT $2)
                SELECT c.id, c.d::float8, (rank() OVER (ORDER BY c.d))::int FROM c ORDER BY c.d, c.id$q$, v_tenant)
            USING _vector_search_scope.embedding::mneme.embedding, _vector_search_scope.k, _vector_search_scope.conversation_ids;
            RETURN;
        END IF;
    END IF;
    IF mneme.setting('vector_variant') #>> '{}' = 'pgvector' THEN
        -- A scope below vector_scope_index_min (with an external embedder
        -- a larger tenant gets an index of its own, above): one exact
        -- statement over all of its conversations, one candidate set
        -- ranked once, as the array variant below. Merging each
        -- conversation's leg planned and ran a statement per conversation
        -- (a tenant of 10 conversations of 100 memories: 10 statements
        -- for 1,000 distances), and took a large conversation's leg
        -- through the table's HNSW index (approximate) where this is exact.
        SELECT coalesce(sum(s.n), 0) INTO v_n FROM mneme.bm25_stats s
        WHERE s.conversation_id = ANY (_vector_search_scope.conversation_ids);
        IF v_n <= mneme.setting('vector_scope_index_min')::bigint THEN
            v_q := _vector_search_scope.embedding;
            RETURN QUERY
            WITH c AS MATERIALIZED (
                SELECT m.id, m.embedding OPERATOR(@extschema@.<=>) v_q AS d
                FROM mneme.memories m
                WHERE m.conversation_id = ANY (_vector_search_scope.conversation_ids) AND m.status = 'active'
                  AND (m.valid_until IS NULL OR m.valid_until > now()) AND m.embedding IS NOT NULL
                  AND (_vector_search_scope.since IS NULL OR m.created_at >= _vector_search_scope.since)
                  AND (_vector_search_scope.until IS NULL OR m.created_at < _vector_search_scope.until)
            ), t AS (
                SELECT c.id, c.d FROM c WHERE c.d IS NOT NULL ORDER BY c.d, c.id LIMIT _vector_search_scope.k)
            SELECT t.id, t.d::float8, (rank() OVER (ORDER BY t.d))::int
            FROM t ORDER BY t.d, t.id;
            RETURN;
        END IF;
    END IF;
    IF mneme.setting('vector_variant') #>> '{}' = 'array' THEN
        -- Exact, array variant, several conversations: _vector_search's
        -- statement over all of them at once (the same distances, so the same
        -- top k and ranks as merging each conversation's). One plan and one
        -- pass: a leg a conversation planned and ran a statement each, 20 of
        -- them took 50 to 140 ms where one over their 10,000 memories took
        -- 12 ms (BenchmarkPages' tenant, docs/ui.md "Speed").
        SELECT string_agg(format('(%s)::float8 * m.e[%s]', u.x / n.norm, u.i), ' + ')
        INTO v_dot
        FROM unnest(_vector_search_scope.embedding) WITH ORDINALITY AS u(x, i),
             (SELECT sqrt(sum(y::float8 * y)) AS norm FROM unnest(_vector_search_scope.embedding) AS y) n
        WHERE u.x <> 0;
        RETURN QUERY EXECUTE format($q$
            SELECT t.id, t.d, (rank() OVER (ORDER BY t.d))::int
            FROM (SELECT c.id, c.d FROM (
                      SELECT m.id, 1 - (%s) AS d
                      FROM (SELECT m.id, m.embedding::real[] AS e
                            FROM mneme.memories m
                            WHERE m.conversation_id = ANY ($1) AND m.status = 'active'
                              AND (m.valid_until IS NULL OR m.valid_until > now()) AND m.embedding IS NOT NULL
                              AND ($2::timestamptz IS NULL OR m.created_at >= $2)
                              AND ($3::timestamptz IS NULL OR m.created_at < $3)) m) c
                  ORDER BY c.d, c.id LIMIT $4) t
            ORDER BY t.d, t.id$q$, v_dot)
        USING _vector_search_scope.conversation_ids, _vector_search_scope.since, _vector_search_scope.until,
              _vector_search_scope.k;
        RETURN;
    END IF;
    RETURN QUERY
    SELECT x.memory_id, x.distance, (rank() OVER (ORDER BY x.distance))::int
    FROM (SELECT y.* FROM unnest(_vector_search_scope.conversation_ids) AS c(id),
                 LATERAL mneme._vector_search(c.id, _vector_search_scope.embedding, _vector_search_scope.k,
                                              _vector_search_scope.since, _vector_search_scope.until) AS y
          ORDER BY y.distance, y.memory_id LIMIT _vector_search_scope.k) x
    ORDER BY x.distance, x.memory_id;
END
$$
$fn$, '@@settings@@', v_settings);
END
$do$;
COMMENT ON FUNCTION mneme._vector_search_scope(uuid[], real[], int, timestamptz, timestamptz) IS
    'Internal: the vector leg over a search''s conversations: _vector_search for one; for several (scope tenant) the '
    'tenant''s own HNSW index when it has one and no date range is given, else one exact statement over them all '
    '(array variant; pgvector while they hold at most vector_scope_index_min memories), else each conversation''s leg '
    'merged; one ranking by distance.';

CREATE OR REPLACE FUNCTION mneme.vector_search(
    conversation_id uuid,
    embedding real[],
    k int DEFAULT 100,
    since timestamptz DEFAULT NULL,
    until timestamptz DEFAULT NULL)
RETURNS TABLE (memory_id uuid, distance float8, rank int)
LANGUAGE plpgsql STABLE
SECURITY DEFINER
ROWS 100
SET search_path = pg_catalog, pg_temp
SET jit = off
AS $$
#variable_conflict use_column
BEGIN
    PERFORM mneme._enter(vector_search.conversation_id);  -- the caller forwarded first (Citus: mneme._enter)
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
$$;
COMMENT ON FUNCTION mneme.vector_search(uuid, real[], int, timestamptz, timestamptz) IS
    'The vector leg of retrieval: top k active, unexpired memories of the conversation by cosine '
    'distance to embedding (empty when embedding is NULL), created in [since, until) when given. '
    'Exact over the conversation''s rows, or through the HNSW index with iterative scans for large '
    'conversations (pgvector variant, setting vector_exact_max). Equal distances share a rank (listed by memory id).';
GRANT EXECUTE ON FUNCTION mneme.vector_search(uuid, real[], int, timestamptz, timestamptz) TO mneme_app, mneme_worker, mneme_admin;

-- -----------------------------------------------------------------------------
-- The per-scope HNSW indexes as they stand, for the UI's jobs page and
-- operators: the sidecar makes and drops them (sidecar/vectorindex, every
-- MNEME_INDEX_INTERVAL, CREATE INDEX CONCURRENTLY through its index
-- login); a build shows here while it runs, not valid yet.
-- -----------------------------------------------------------------------------
CREATE OR REPLACE FUNCTION mneme.vector_index_status()
RETURNS TABLE (index_name text, scope text, state text, bytes bigint, phase text, done bigint, total bigint)
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, pg_temp
SET jit = off
AS $$
BEGIN
    RETURN QUERY
    SELECT ic.relname::text,
           CASE WHEN ic.relname ~ '^memories_hnsw_c_' THEN 'conversation' ELSE 'tenant' END,
           CASE WHEN i.indisvalid AND i.indisready THEN 'ready'
                WHEN p.pid IS NOT NULL THEN 'building'
                -- (a build whose progress this login may not see, or one
                -- that failed: the sidecar's next pass drops and remakes it)
                ELSE 'not valid' END,
           pg_catalog.pg_relation_size(ic.oid),
           p.phase::text,
           CASE WHEN p.blocks_total > 0 THEN p.blocks_done ELSE p.tuples_done END,
           CASE WHEN p.blocks_total > 0 THEN p.blocks_total ELSE p.tuples_total END
    FROM pg_catalog.pg_index i
    JOIN pg_catalog.pg_class ic ON ic.oid = i.indexrelid
    LEFT JOIN pg_catalog.pg_stat_progress_create_index p ON p.index_relid = i.indexrelid
    WHERE i.indrelid = 'mneme.memories'::regclass AND ic.relname ~ '^memories_hnsw_[ct]_'
    ORDER BY 3, 1;
END
$$;
COMMENT ON FUNCTION mneme.vector_index_status() IS
    'The per-scope HNSW indexes of mneme.memories (vector_index_plan; made and dropped by the sidecar): name, scope '
    '(conversation or tenant), state (ready, building, not valid), size in bytes, and while one is built its phase '
    'and the blocks or tuples done of the phase (pg_stat_progress_create_index: shown to the index login''s own role '
    'and to members of pg_read_all_stats, NULL to others). Reads no tenant''s rows.';
GRANT EXECUTE ON FUNCTION mneme.vector_index_status() TO mneme_worker, mneme_admin;
