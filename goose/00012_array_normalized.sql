-- The array variant stores embeddings L2-normalised (cosine distance is
-- scale-invariant, so no result changes): exact search then needs only the
-- dot product over the query's non-zero components. New rows are
-- normalised by the memories_normalize_embedding trigger (sql/101).

-- +goose Up
-- +goose StatementBegin
DO $$
BEGIN
    IF (SELECT value #>> '{}' FROM mneme.settings WHERE key = 'vector_variant') = 'array' THEN
        UPDATE mneme.memories m
        SET embedding = (SELECT array_agg((x / n.norm)::real ORDER BY i)
                         FROM unnest(m.embedding::real[]) WITH ORDINALITY AS u(x, i))
        FROM (SELECT id, sqrt((SELECT sum(x::float8 * x) FROM unnest(embedding::real[]) AS x)) AS norm
              FROM mneme.memories WHERE embedding IS NOT NULL) n
        WHERE m.id = n.id AND n.norm > 0 AND abs(n.norm - 1) > 1e-6;
    END IF;
END
$$;
-- +goose StatementEnd

-- +goose Down
SELECT 1;
