-- =============================================================================
-- mneme retrieval, part 1: the built-in "hash" embedder and vector distance.
--
-- mneme.hash_embed(text) is the SQL twin of sidecar/embed.Hash: the same
-- folding (mneme.hash_fold), the same tokens, the same MD5 feature hashing,
-- so a query embedded here matches memories embedded by the sidecar and the
-- other way round (tests/hash_embed_test.go checks equality to 1e-6).
-- Idempotent: re-applied on every migrate.
-- =============================================================================

-- -----------------------------------------------------------------------------
-- Memory text: what is embedded and indexed for BM25
-- -----------------------------------------------------------------------------
-- Written once, in _memory_text: plain SQL without SET, so the planner
-- inlines it where a statement computes many memories' text (BM25
-- maintenance, sql/110-bm25.sql: a SECURITY DEFINER call per memory cost
-- as much as the tokenising). Internal (only mneme's functions, whose
-- search_path puts pg_catalog first, call it); names qualified anyway.
CREATE OR REPLACE FUNCTION mneme._memory_text(title text, summary text, content text)
RETURNS text
LANGUAGE sql STABLE PARALLEL SAFE  -- as concat_ws is: an IMMUTABLE wrapper would not be inlined
AS $$
-- a summary equal to the content (mneme.remember writes both) counts once
SELECT pg_catalog.concat_ws(E'\n', nullif($1, ''), nullif(nullif($2, ''), $3), nullif($3, ''))
$$;
COMMENT ON FUNCTION mneme._memory_text(text, text, text) IS
    'Internal, inlined: the body of mneme.memory_text.';

CREATE OR REPLACE FUNCTION mneme.memory_text(title text, summary text, content text)
RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
SET jit = off
AS $$
SELECT mneme._memory_text(memory_text.title, memory_text.summary, memory_text.content)
$$;
COMMENT ON FUNCTION mneme.memory_text(text, text, text) IS
    'The text of a memory that is embedded and indexed for BM25: title, summary and content, '
    'the non-empty ones joined by newlines, a summary equal to the content once (Go: embed.MemoryText).';
GRANT EXECUTE ON FUNCTION mneme.memory_text(text, text, text) TO mneme_app, mneme_worker, mneme_admin;

-- -----------------------------------------------------------------------------
-- The hash embedder
-- -----------------------------------------------------------------------------
CREATE OR REPLACE FUNCTION mneme.hash_embed(input text, dim int)
RETURNS real[]
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
SET jit = off  -- row estimates of the set-returning functions are far off; JIT costs 20 ms here
-- Its statement reads no table: one plan fits every input. A custom plan
-- (the default, the input folded in as a constant) planned it again at
-- every call: 178 us of planning for 86 us of work per query embedded
-- (pg_stat_statements, track_planning; docs/performance.md, issue 49).
SET plan_cache_mode = force_generic_plan
AS $$
#variable_conflict use_column
DECLARE
    -- Whitespace and separators: the same ranges as isSpace and isSeparator
    -- in sidecar/embed/hash.go. Bracket ranges compare code points.
    c_space constant text := '[\u0001-\u0020\u007f\u0085\u00a0\u1680\u2000-\u200b\u2028\u2029\u202f\u205f\u3000\ufeff]';
    c_sep   constant text := '[\u0001-\u002f\u003a-\u0040\u005b-\u0060\u007b-\u00bf\u00d7\u00f7\u1680'
                             '\u2000-\u206f\u2e00-\u2e7f\u3000-\u303f\ufe10-\ufe1f\ufe30-\ufe4f\ufeff'
                             '\uff00-\uff0f\uff1a-\uff20\uff3b-\uff40\uff5b-\uff65]+';
    v   real[];
    v_i int[];
    v_x float8[];
    v_n float8;
BEGIN
    IF hash_embed.dim IS NULL OR hash_embed.input IS NULL THEN
        RAISE EXCEPTION 'input and dim must not be NULL' USING ERRCODE = '22004';
    END IF;
    IF hash_embed.dim < 2 OR hash_embed.dim > 16000 THEN
        RAISE EXCEPTION 'hash_embed dimension must be 2..16000, got %', hash_embed.dim
            USING ERRCODE = '22023', HINT = 'mneme.hash_embed(text) uses setting embedding_dim';
    END IF;
    IF mneme._is_blank(hash_embed.input) THEN  -- the one blank (embed.IsBlank)
        RAISE EXCEPTION 'cannot embed empty or whitespace-only text'
            USING ERRCODE = '22023', HINT = 'pass text with at least one visible character';
    END IF;
    -- Folding commutes with splitting (no folded pair crosses a separator
    -- range; sidecar/embed tests check it), so split first, lower-case ASCII
    -- with the cheap C lower(), and run the slow translate() of the full
    -- table only over the few tokens that have non-ASCII characters.
    WITH folded AS (
        SELECT lower(hash_embed.input COLLATE "C") AS s
    ), words AS (
        SELECT t FROM folded, regexp_split_to_table(folded.s, c_sep) AS t WHERE t <> ''
    ), raw AS (
        SELECT t FROM words
        UNION ALL
        -- only separators: fall back to whitespace-separated chunks
        SELECT t FROM folded, regexp_split_to_table(folded.s, c_space || '+') AS t
        WHERE t <> '' AND NOT EXISTS (SELECT 1 FROM words)
    ), toks AS (
        -- A token's first 64 characters (embed.MaxTokenRunes): a huge "word"
        -- would make the trigram scan quadratic.
        SELECT left(CASE WHEN octet_length(t) = length(t) THEN t ELSE mneme.hash_fold(t) END, 64) AS t FROM raw
    ), feats AS (
        SELECT decode(md5('w:' || t), 'hex') AS h, 1.0::float8 AS w FROM toks
        UNION ALL
        SELECT decode(md5('g:' || substr(' ' || t || ' ', i, 3)), 'hex'), 0.5::float8
        FROM toks, generate_series(1, length(t)) AS i
    ), comp AS (
        SELECT ((get_byte(h, 0)::bigint << 24) | (get_byte(h, 1) << 16) | (get_byte(h, 2) << 8) | get_byte(h, 3)) % hash_embed.dim AS i,
               sum(CASE WHEN get_byte(h, 4) < 128 THEN w ELSE -w END) AS x
        FROM feats GROUP BY 1
    )
    SELECT array_agg(comp.i::int), array_agg(comp.x), sqrt(sum(comp.x * comp.x)) INTO v_i, v_x, v_n FROM comp;
    IF v_n IS NULL OR v_n = 0 THEN
        RAISE EXCEPTION 'text has no features (they cancelled out)' USING ERRCODE = '22023';
    END IF;
    -- The few components the features hit, set in place in a zero vector
    -- (a join of every dimension with them, sorted, took most of the call).
    v := array_fill(0::real, ARRAY[hash_embed.dim]);
    FOR j IN 1 .. cardinality(v_i) LOOP
        v[v_i[j] + 1] := (v_x[j] / v_n)::real;
    END LOOP;
    RETURN v;
END
$$;
COMMENT ON FUNCTION mneme.hash_embed(text, int) IS
    'The built-in hash embedder: signed feature hashing (MD5) of folded word tokens (weight 1) and their '
    'character trigrams (weight 0.5) into dim components, L2-normalised. Lexical and fuzzy similarity, '
    'no service needed. Identical to the Go embedder sidecar/embed.Hash. Empty or whitespace-only text: 22023.';
GRANT EXECUTE ON FUNCTION mneme.hash_embed(text, int) TO mneme_app, mneme_worker, mneme_admin;

CREATE OR REPLACE FUNCTION mneme.hash_embed(input text)
RETURNS real[]
LANGUAGE sql STABLE PARALLEL SAFE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
SET jit = off
AS $$
SELECT mneme.hash_embed(hash_embed.input, (mneme.setting('embedding_dim') #>> '{}')::int)
$$;
COMMENT ON FUNCTION mneme.hash_embed(text) IS
    'mneme.hash_embed(text, dim) with the database''s embedding dimension (setting embedding_dim).';
GRANT EXECUTE ON FUNCTION mneme.hash_embed(text) TO mneme_app, mneme_worker, mneme_admin;

-- -----------------------------------------------------------------------------
-- Cosine distance on real[]: the array variant's <=> operator. The pgvector
-- variant uses pgvector's own <=> on vector; retrieval SQL writes
-- OPERATOR(@extschema@.<=>), which resolves to one or the other.
-- -----------------------------------------------------------------------------
CREATE OR REPLACE FUNCTION mneme._dimension_mismatch(a int, b int)
RETURNS float8
LANGUAGE plpgsql IMMUTABLE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    RAISE EXCEPTION 'vectors of different dimensions (% and %)', a, b USING ERRCODE = '22023',
        HINT = 'both vectors come from the same embedder, at the database''s embedding_dim';
END
$$;

CREATE OR REPLACE FUNCTION mneme.cosine_distance(a real[], b real[])
RETURNS float8
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
SET jit = off
AS $$
SELECT CASE WHEN cardinality(a) = cardinality(b)
            THEN (SELECT 1 - sum(x::float8 * y) / nullif(sqrt(sum(x::float8 * x) * sum(y::float8 * y)), 0)
                  FROM unnest(a, b) AS u(x, y))
            ELSE mneme._dimension_mismatch(cardinality(a), cardinality(b)) END
$$;
COMMENT ON FUNCTION mneme.cosine_distance(real[], real[]) IS
    'Cosine distance 1 - a.b / (|a| |b|) of two real[] vectors of the same length (NULL for a zero vector); '
    'the function behind mneme.<=> on real[].';
GRANT EXECUTE ON FUNCTION mneme.cosine_distance(real[], real[]) TO mneme_app, mneme_worker, mneme_admin;

DO $$
BEGIN
    IF NOT EXISTS (
        SELECT 1 FROM pg_operator o JOIN pg_namespace n ON n.oid = o.oprnamespace
        WHERE n.nspname = 'mneme' AND o.oprname = '<=>'
          AND o.oprleft = 'real[]'::regtype AND o.oprright = 'real[]'::regtype) THEN
        CREATE OPERATOR mneme.<=> (
            LEFTARG = real[], RIGHTARG = real[],
            FUNCTION = mneme.cosine_distance, COMMUTATOR = OPERATOR(mneme.<=>));
        COMMENT ON OPERATOR mneme.<=> (real[], real[]) IS
            'Cosine distance on real[] (the array variant''s stand-in for pgvector''s <=>).';
    END IF;
END
$$;

-- -----------------------------------------------------------------------------
-- Fill missing embeddings with the hash embedder
-- -----------------------------------------------------------------------------
CREATE OR REPLACE FUNCTION mneme.memories_hash_embed_trg()
RETURNS trigger
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF TG_OP = 'INSERT' AND NEW.embedding IS NOT NULL THEN
        RETURN NEW;  -- an insert that brings its embedding (mneme import): no settings read per row
    END IF;
    IF mneme.setting('embedder') #>> '{}' IS DISTINCT FROM 'hash' THEN
        RETURN NEW;
    END IF;
    IF NEW.embedding IS NULL
       OR (TG_OP = 'UPDATE'
           AND (NEW.title, NEW.summary, NEW.content) IS DISTINCT FROM (OLD.title, OLD.summary, OLD.content)
           AND NEW.embedding::real[] IS NOT DISTINCT FROM OLD.embedding::real[]) THEN  -- pgvector has no = on vector
        NEW.embedding := mneme.hash_embed(mneme.memory_text(NEW.title, NEW.summary, NEW.content));
    END IF;
    RETURN NEW;
END
$$;
COMMENT ON FUNCTION mneme.memories_hash_embed_trg() IS
    'BEFORE INSERT/UPDATE on mneme.memories: with setting embedder = "hash", a NULL embedding (or the old '
    'embedding of a row whose text changed) is replaced by mneme.hash_embed(memory_text), so a plain INSERT '
    'is retrievable by both legs.';

-- (No WHEN on the embedding: mneme reembed alters the column's type, which
-- a trigger's WHEN that names it forbids.)
DROP TRIGGER IF EXISTS memories_hash_embed ON mneme.memories;
CREATE TRIGGER memories_hash_embed
    BEFORE INSERT OR UPDATE OF title, summary, content, embedding ON mneme.memories
    FOR EACH ROW EXECUTE FUNCTION mneme.memories_hash_embed_trg();

-- -----------------------------------------------------------------------------
-- Array variant: embeddings are stored L2-normalised, so exact search is a
-- dot product over the query's non-zero components (mneme.vector_search).
-- Cosine distance is scale-invariant: no result changes.
-- -----------------------------------------------------------------------------
-- Written once, in _l2_normalized: a set-returning plain SQL function
-- without SET, which the planner inlines into a FROM (LATERAL) of the
-- statement that calls it (mneme.import_memories normalises a batch in
-- its insert).
CREATE OR REPLACE FUNCTION mneme._l2_normalized(p real[])
RETURNS TABLE (embedding real[])
LANGUAGE sql IMMUTABLE PARALLEL SAFE
AS $$
SELECT CASE WHEN n.norm > 0 AND abs(n.norm - 1) > 1e-7
            THEN (SELECT pg_catalog.array_agg((u.x / n.norm)::real ORDER BY u.i)
                  FROM pg_catalog.unnest($1) WITH ORDINALITY AS u(x, i))
            ELSE $1 END
FROM (SELECT pg_catalog.sqrt(pg_catalog.sum(x::float8 * x)) AS norm FROM pg_catalog.unnest($1) AS x) n
$$;
COMMENT ON FUNCTION mneme._l2_normalized(real[]) IS
    'Internal, inlined: the body of mneme.l2_normalize, as one row (for a LATERAL in a set-wise insert).';

CREATE OR REPLACE FUNCTION mneme.l2_normalize(p real[])
RETURNS real[]
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
SET jit = off
AS $$
SELECT n.embedding FROM mneme._l2_normalized(l2_normalize.p) n
$$;
COMMENT ON FUNCTION mneme.l2_normalize(real[]) IS
    'p / |p| (p itself when already of unit length or all zero).';
GRANT EXECUTE ON FUNCTION mneme.l2_normalize(real[]) TO mneme_app, mneme_worker, mneme_admin;

CREATE OR REPLACE FUNCTION mneme.memories_normalize_embedding_trg()
RETURNS trigger
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF NEW.embedding IS NOT NULL THEN
        NEW.embedding := mneme.l2_normalize(NEW.embedding::real[]);
    END IF;
    RETURN NEW;
END
$$;
COMMENT ON FUNCTION mneme.memories_normalize_embedding_trg() IS
    'Array variant: stores embeddings L2-normalised (runs after memories_hash_embed: triggers fire in name order).';

-- mneme.import_memories inserts a batch with the rows already normalised
-- (set-wise in its insert, or by the importer, which computes the same
-- floats: TestImportBulkEqualsRowPath): the trigger stands aside while it
-- runs, by a transaction-local setting that counts only in a session of an
-- admin or the owner (mneme._bulk_loading), so an application login that
-- sets it still gets its embeddings normalised. The condition is written
-- out in WHEN (no function call per row; the first test is false outside
-- an import, so the others are not evaluated).
DROP TRIGGER IF EXISTS memories_normalize_embedding ON mneme.memories;
DO $$
BEGIN
    IF mneme.setting('vector_variant') #>> '{}' = 'array' THEN
        CREATE TRIGGER memories_normalize_embedding
            BEFORE INSERT OR UPDATE OF embedding, title, summary, content ON mneme.memories
            FOR EACH ROW
            WHEN (NOT (pg_catalog.current_setting('mneme.bulk_load', true) IS NOT DISTINCT FROM 'on'
                       AND (pg_catalog.pg_has_role(session_user, 'mneme_admin', 'MEMBER')
                            OR pg_catalog.pg_has_role(session_user, 'mneme_owner', 'MEMBER'))))
            EXECUTE FUNCTION mneme.memories_normalize_embedding_trg();
    END IF;
END
$$;
