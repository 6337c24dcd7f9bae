-- The embedding column, in one of two variants chosen at migrate time:
--   pgvector: vector(N) with an HNSW cosine index (when the extension exists)
--   array:    real[] of length N, exact cosine in SQL (the fallback)
-- `mneme migrate` passes the choice as session settings mneme.vector
-- (auto | pgvector | array) and mneme.embedding_dim (N). The rest of the SQL
-- layer sees only the domain mneme.embedding and the <=> operator.

-- +goose Up
-- +goose StatementBegin
DO $$
DECLARE
    want    text := coalesce(nullif(current_setting('mneme.vector', true), ''), 'auto');
    dim     int  := coalesce(nullif(current_setting('mneme.embedding_dim', true), ''), '256')::int;
    have_pgvector boolean := EXISTS (SELECT 1 FROM pg_catalog.pg_available_extensions WHERE name = 'vector');
    variant text;
BEGIN
    IF want NOT IN ('auto', 'pgvector', 'array') THEN
        RAISE EXCEPTION 'mneme.vector must be auto, pgvector or array, not %', want
            USING ERRCODE = '22023', HINT = 'set MNEME_VECTOR to auto, pgvector or array';
    END IF;
    IF dim < 2 OR dim > 2000 THEN
        RAISE EXCEPTION 'embedding dimension % is out of range 2..2000', dim
            USING ERRCODE = '22023', HINT = 'set MNEME_EMBED_DIM between 2 and 2000';
    END IF;
    IF want = 'pgvector' AND NOT have_pgvector THEN
        RAISE EXCEPTION 'MNEME_VECTOR=pgvector but the vector extension is not installed on this server'
            USING ERRCODE = '58P01', HINT = 'install pgvector, or use MNEME_VECTOR=auto or array';
    END IF;
    variant := CASE WHEN want = 'array' OR NOT have_pgvector THEN 'array' ELSE 'pgvector' END;

    IF variant = 'pgvector' THEN
        CREATE EXTENSION IF NOT EXISTS vector;
        EXECUTE format('CREATE DOMAIN mneme.embedding AS vector(%s)', dim);
        EXECUTE format('ALTER TABLE mneme.memories ADD COLUMN embedding vector(%s)', dim);
        CREATE INDEX memories_embedding_hnsw ON mneme.memories USING hnsw (embedding vector_cosine_ops);
    ELSE
        EXECUTE format('CREATE DOMAIN mneme.embedding AS real[] CHECK (VALUE IS NULL OR (array_ndims(VALUE) = 1 AND array_length(VALUE, 1) = %s))', dim);
        ALTER TABLE mneme.memories ADD COLUMN embedding mneme.embedding;
    END IF;

    INSERT INTO mneme.settings (key, value, description) VALUES
        ('vector_variant', to_jsonb(variant), 'read only: pgvector or array, chosen at migrate time'),
        ('embedding_dim', to_jsonb(dim), 'read only: embedding dimension fixed at migrate time');
END
$$;
-- +goose StatementEnd

-- +goose Down
ALTER TABLE mneme.memories DROP COLUMN embedding;
DROP DOMAIN mneme.embedding;
DELETE FROM mneme.settings WHERE key IN ('vector_variant', 'embedding_dim');
