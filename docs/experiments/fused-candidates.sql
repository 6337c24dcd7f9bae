-- =============================================================================
-- Experiment (not part of mneme): how much of mneme.search's top 10 moves
-- when the vector leg gives fewer candidates (setting
-- vector_candidates_per_k) than the 100 of retrieve_candidates.
-- docs/performance.md ("The vector leg's candidates") quotes its output.
--
-- Run it on a database of `mneme bench retrieve --keep` (one conversation;
-- it changes the settings embedder and vector_candidates_per_k and sets
-- them back to hash and 10 at the end):
--   psql "postgres://.../mneme_bench_xxxxxxxx" -f docs/experiments/fused-candidates.sql
-- Queries: 50, each three words of a memory and the first word of another
-- (random: each run draws others).
-- =============================================================================
\set ON_ERROR_STOP on
SET client_min_messages = warning;
CREATE TEMP TABLE qs AS
SELECT i, (SELECT string_agg(w, ' ') FROM (SELECT w FROM regexp_split_to_table(
               (SELECT content FROM mneme.memories OFFSET (i * 7919 % 99000) LIMIT 1), ' ') w ORDER BY random() LIMIT 3) x)
       || ' ' || (SELECT split_part(content, ' ', 1) FROM mneme.memories OFFSET (i * 104729 % 99000) LIMIT 1) AS q
FROM generate_series(1, 50) i;
CREATE TEMP TABLE res (emb text, per_k int, i int, ids uuid[]);
DO $$
DECLARE e text; pk int; r record; c uuid := (SELECT conversation_id FROM mneme.bm25_stats LIMIT 1);
BEGIN
    FOREACH e IN ARRAY ARRAY['hash', 'external'] LOOP
        PERFORM mneme.set_setting('embedder', to_jsonb(e));
        FOREACH pk IN ARRAY ARRAY[4, 6, 8, 10] LOOP
            PERFORM mneme.set_setting('vector_candidates_per_k', to_jsonb(pk));
            FOR r IN SELECT * FROM qs LOOP
                INSERT INTO res SELECT e, pk, r.i, ARRAY(SELECT memory_id FROM mneme.search(c, r.q, 10, mneme.hash_embed(r.q)));
            END LOOP;
        END LOOP;
    END LOOP;
    PERFORM mneme.set_setting('embedder', '"hash"');
    PERFORM mneme.set_setting('vector_candidates_per_k', '10');
END $$;
SELECT a.emb AS embedder, a.per_k * 10 AS vector_candidates,
       round(avg((SELECT count(*) FROM unnest(a.ids) x WHERE x = ANY (b.ids))::numeric / 10), 3) AS overlap_at_10
FROM res a JOIN res b ON a.emb = b.emb AND a.i = b.i AND b.per_k = 10
GROUP BY 1, 2 ORDER BY 1, 2;
