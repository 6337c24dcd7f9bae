-- =============================================================================
-- Changing the embedding dimension (mneme reembed). The dimension is fixed at
-- migrate time; this is the one way to change it afterwards: the column and
-- the domain mneme.embedding take the new dimension, every embedding is
-- recomputed (by SQL with the built-in hash embedder, by the sidecar's
-- embedder otherwise) and the HNSW index is rebuilt, in the caller's
-- transaction. Idempotent file: re-applied on every migrate.
-- =============================================================================

CREATE OR REPLACE FUNCTION mneme.change_embedding_dim(dim int)
RETURNS bigint
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
#variable_conflict use_column
DECLARE
    v_variant text := mneme.setting('vector_variant') #>> '{}';
    v_vector  text;
    v_n       bigint;
    v_defs    text[];
    v_def     text;
    v_name    name;
    v_fn      regprocedure;
    v_cost    real;
BEGIN
    IF change_embedding_dim.dim IS NULL OR change_embedding_dim.dim < 2 OR change_embedding_dim.dim > 2000 THEN
        RAISE EXCEPTION 'embedding dimension must be between 2 and 2000, got %', coalesce(change_embedding_dim.dim::text, 'NULL')
            USING ERRCODE = '22023', HINT = 'pgvector''s HNSW index supports up to 2000 dimensions';
    END IF;
    -- On Citus the column's type cannot be changed under the distributed
    -- tables' triggers and domain (docs/scale.md): refused before any lock.
    IF mneme._distributed('mneme.memories') THEN
        RAISE EXCEPTION 'change_embedding_dim does not run on a distributed mneme (Citus)' USING ERRCODE = '0A000',
            HINT = 'choose the embedding dimension at the first mneme migrate --citus (MNEME_EMBEDDING_DIM)';
    END IF;
    -- Writers wait until the new embeddings are committed.
    LOCK TABLE mneme.memories IN SHARE ROW EXCLUSIVE MODE;
    LOCK TABLE mneme.messages IN SHARE ROW EXCLUSIVE MODE;

    -- Triggers that name the column (UPDATE OF embedding) pin its type:
    -- keep their definitions, drop them, and recreate them as they were.
    v_defs := '{}';
    FOR v_name, v_def IN
        SELECT t.tgname, pg_catalog.pg_get_triggerdef(t.oid)
        FROM pg_catalog.pg_trigger t
        WHERE t.tgrelid = 'mneme.memories'::regclass AND NOT t.tgisinternal
          AND (SELECT a.attnum FROM pg_catalog.pg_attribute a
               WHERE a.attrelid = t.tgrelid AND a.attname = 'embedding') = ANY (t.tgattr::int2[])
        ORDER BY t.tgname
    LOOP
        v_defs := v_defs || v_def;
        EXECUTE format('DROP TRIGGER %I ON mneme.memories', v_name);
    END LOOP;

    IF v_variant = 'pgvector' THEN
        SELECT format('%I.vector', n.nspname) INTO v_vector
        FROM pg_catalog.pg_extension e JOIN pg_catalog.pg_namespace n ON n.oid = e.extnamespace
        WHERE e.extname = 'vector';
        DROP INDEX IF EXISTS mneme.memories_embedding_hnsw;
        EXECUTE format('ALTER TABLE mneme.memories ALTER COLUMN embedding TYPE %s(%s) USING NULL', v_vector, change_embedding_dim.dim);
        -- Messages' embeddings (turns by meaning) take the new type too,
        -- emptied: the external embedder fills those of new episodes.
        EXECUTE format('ALTER TABLE mneme.messages ALTER COLUMN embedding TYPE %s(%s) USING NULL', v_vector, change_embedding_dim.dim);
        DROP DOMAIN mneme.embedding;
        EXECUTE format('CREATE DOMAIN mneme.embedding AS %s(%s)', v_vector, change_embedding_dim.dim);
    ELSE
        ALTER TABLE mneme.memories ALTER COLUMN embedding TYPE real[] USING NULL;
        ALTER TABLE mneme.messages ALTER COLUMN embedding TYPE real[] USING NULL;
        DROP DOMAIN mneme.embedding;
        EXECUTE format('CREATE DOMAIN mneme.embedding AS real[] CHECK (VALUE IS NULL OR (array_ndims(VALUE) = 1 AND array_length(VALUE, 1) = %s))', change_embedding_dim.dim);
        ALTER TABLE mneme.memories ALTER COLUMN embedding TYPE mneme.embedding USING NULL;
        ALTER TABLE mneme.messages ALTER COLUMN embedding TYPE mneme.embedding USING NULL;
    END IF;
    FOREACH v_def IN ARRAY v_defs LOOP
        EXECUTE v_def;
    END LOOP;
    UPDATE mneme.settings SET value = to_jsonb(change_embedding_dim.dim), updated_at = now() WHERE key = 'embedding_dim';
    -- A session that ran a PL/pgSQL function with a mneme.embedding variable
    -- (search's vector leg, the embedding triggers) keeps the function
    -- compiled with the dropped domain's oid, and its next call fails with
    -- "cache lookup failed for type" (an application's pooled connections,
    -- the sidecar's). PL/pgSQL compiles a function again when its pg_proc
    -- row changed: each of mneme's is touched (its cost set to what it is).
    FOR v_fn, v_cost IN
        SELECT p.oid::regprocedure, p.procost
        FROM pg_catalog.pg_proc p JOIN pg_catalog.pg_language l ON l.oid = p.prolang
        WHERE p.pronamespace = 'mneme'::regnamespace AND l.lanname = 'plpgsql'
        ORDER BY p.oid
    LOOP
        EXECUTE format('ALTER FUNCTION %s COST %s', v_fn, v_cost);
    END LOOP;

    -- With embedder = "hash" the BEFORE trigger fills each NULL embedding
    -- at the new dimension; with "external" they stay NULL for the sidecar.
    UPDATE mneme.memories SET embedding = NULL;
    GET DIAGNOSTICS v_n = ROW_COUNT;

    IF v_variant = 'pgvector' THEN
        EXECUTE format('CREATE INDEX memories_embedding_hnsw ON mneme.memories USING hnsw (embedding %s)',
                       replace(v_vector, '.vector', '.vector_cosine_ops'));
    END IF;
    RETURN v_n;
END
$$;
COMMENT ON FUNCTION mneme.change_embedding_dim(int) IS
    'Changes the embedding dimension of the database: column, domain mneme.embedding and setting embedding_dim. '
    'With the built-in hash embedder every memory is re-embedded here; with an external embedder the embeddings '
    'are left NULL for `mneme reembed` to fill in the same transaction. Returns the number of memories.';
GRANT EXECUTE ON FUNCTION mneme.change_embedding_dim(int) TO mneme_admin;

CREATE OR REPLACE FUNCTION mneme.memories_to_embed()
RETURNS TABLE (memory_id uuid, memory_text text)
LANGUAGE plpgsql STABLE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
SET jit = off
AS $$
BEGIN
    PERFORM mneme._enter(NULL);  -- the caller forwarded first (Citus: mneme._enter)
    -- plpgsql: mneme.memory_text is defined by a later file (101-hash-embed.sql).
    RETURN QUERY
    SELECT m.id, mneme.memory_text(m.title, m.summary, m.content)
    FROM mneme.memories m WHERE m.embedding IS NULL ORDER BY m.id;
END
$$;
COMMENT ON FUNCTION mneme.memories_to_embed() IS
    'The memories without an embedding and the text to embed for each (`mneme reembed`).';
GRANT EXECUTE ON FUNCTION mneme.memories_to_embed() TO mneme_worker;

CREATE OR REPLACE FUNCTION mneme.set_embedding(memory_id uuid, embedding real[])
RETURNS void
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
SET jit = off
AS $$
BEGIN
    PERFORM mneme._enter(NULL);  -- the caller forwarded first (Citus: mneme._enter)
    IF set_embedding.memory_id IS NULL OR set_embedding.embedding IS NULL THEN
        RAISE EXCEPTION 'memory_id and embedding must not be NULL' USING ERRCODE = '22004';
    END IF;
    PERFORM mneme.check_embedding(set_embedding.embedding);  -- finite, the database's dimension (22023)
    UPDATE mneme.memories m SET embedding = set_embedding.embedding WHERE m.id = set_embedding.memory_id;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'no memory %', set_embedding.memory_id USING ERRCODE = 'P0002';
    END IF;
END
$$;
COMMENT ON FUNCTION mneme.set_embedding(uuid, real[]) IS
    'Stores a memory''s embedding computed by an external embedder (`mneme reembed`); the column''s type '
    'checks the dimension.';
GRANT EXECUTE ON FUNCTION mneme.set_embedding(uuid, real[]) TO mneme_worker, mneme_admin;
