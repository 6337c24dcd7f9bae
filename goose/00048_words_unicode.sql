-- mneme.context counts its budget in words separated by Unicode White_Space
-- (as Go's strings.Fields, which the evaluations count with), not ASCII
-- whitespace only: "alpha<U+00A0>beta gamma" is 3 words, not 2. The
-- generated column mneme.messages.words (goose 00046) is recomputed with
-- that rule. A generated column's expression cannot be altered before
-- PostgreSQL 17, so the column is dropped and added again (one rewrite of
-- the table).
-- Numbered goose migration: applied once, never edited after release.

-- +goose Up
-- The rule is mneme._words's (sql/140-context.sql), written out: a
-- generated column may call built-in immutable functions only, and goose
-- runs before the SQL layer exists. TestContextTermsMatchTokeniser keeps
-- the two equal, and equal to Go's count.
ALTER TABLE mneme.messages DROP COLUMN words;
ALTER TABLE mneme.messages
    ADD COLUMN words int GENERATED ALWAYS AS (cardinality(array_remove(regexp_split_to_array(content,
        '[\t\n\u000b\f\r \u0085\u00a0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000]+'), ''))) STORED;

-- +goose Down
ALTER TABLE mneme.messages DROP COLUMN words;
ALTER TABLE mneme.messages
    ADD COLUMN words int GENERATED ALWAYS AS (coalesce(array_length(regexp_split_to_array(btrim(content, E' \t\n\r\f\v'), E'\\s+'), 1), 0)) STORED;
