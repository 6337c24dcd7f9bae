-- Turns found by meaning: with an external embedder the sidecar embeds each
-- message of an episode beside the episode, and the context ranks the
-- candidate episodes' turns by cosine as well as by BM25. The column has
-- the type of memories.embedding (pgvector's vector(N) or the domain
-- mneme.embedding), so the two change dimension together
-- (mneme.change_embedding_dim). NULL without an external embedder.
-- Numbered goose migration: applied once, never edited after release.

-- +goose Up
-- +goose StatementBegin
DO $$
DECLARE
    t text;
BEGIN
    SELECT pg_catalog.format_type(a.atttypid, a.atttypmod) INTO t
    FROM pg_catalog.pg_attribute a
    WHERE a.attrelid = 'mneme.memories'::regclass AND a.attname = 'embedding' AND NOT a.attisdropped;
    EXECUTE format('ALTER TABLE mneme.messages ADD COLUMN embedding %s', t);
END
$$;
-- +goose StatementEnd
COMMENT ON COLUMN mneme.messages.embedding IS
    'The message''s embedding by the external embedder (set by the segment job with its episode); NULL with the '
    'built-in hash embedder. The context ranks turns by it beside BM25.';

-- +goose Down
ALTER TABLE mneme.messages DROP COLUMN embedding;
