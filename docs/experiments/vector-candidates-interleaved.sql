-- =============================================================================
-- Experiment (not part of mneme): mneme.search (k 10) on one conversation
-- and with scope tenant, with vector_candidates_per_k 4 and 10 interleaved
-- in one session (the order alternating per query), beside the vector
-- leg's top 10 alone: what the candidate count costs under the same load.
-- Queries: three words of 40 random memories of the conversation, their
-- hash embeddings passed in (as bench scale --embedder external does).
-- It sets vector_candidates_per_k and leaves it at 4 (the default).
--   psql "postgres://.../mneme_bench_scale" -v c=<conversation id> -f docs/experiments/vector-candidates-interleaved.sql
-- =============================================================================
SELECT set_config('vc.conv', :'c', false);
SELECT setseed(0.7);
CREATE TEMP TABLE q AS SELECT row_number() OVER () AS i, x.text, mneme.hash_embed(x.text) AS emb FROM (
  SELECT split_part(content, ' ', 1 + (random() * 4)::int) || ' ' || split_part(content, ' ', 2 + (random() * 4)::int) || ' ' || split_part(content, ' ', 3 + (random() * 4)::int) AS text
  FROM mneme.memories WHERE conversation_id = :'c' ORDER BY random() LIMIT 40) x;
CREATE TEMP TABLE t (i int, what text, ms float8);
DO $$
DECLARE r record; t0 timestamptz; n int; c uuid := (SELECT current_setting('vc.conv')::uuid);
BEGIN
  FOR r IN SELECT * FROM q ORDER BY i LOOP
    FOREACH n IN ARRAY CASE WHEN r.i % 2 = 0 THEN ARRAY[4, 10] ELSE ARRAY[10, 4] END LOOP
      PERFORM mneme.set_setting('vector_candidates_per_k', to_jsonb(n));
      t0 := clock_timestamp();
      PERFORM count(*) FROM mneme.search(c, r.text, 10, query_embedding => r.emb);
      INSERT INTO t VALUES (r.i, 'huge search per_k ' || n, 1000 * extract(epoch FROM clock_timestamp() - t0));
      t0 := clock_timestamp();
      PERFORM count(*) FROM mneme.search(c, r.text, 10, query_embedding => r.emb, scope => 'tenant');
      INSERT INTO t VALUES (r.i, 'tenant search per_k ' || n, 1000 * extract(epoch FROM clock_timestamp() - t0));
    END LOOP;
    t0 := clock_timestamp();
    PERFORM count(*) FROM mneme._vector_search_scope(ARRAY[c], r.emb, 10, NULL, NULL);
    INSERT INTO t VALUES (r.i, 'huge vector top 10 (own index)', 1000 * extract(epoch FROM clock_timestamp() - t0));
  END LOOP;
  PERFORM mneme.set_setting('vector_candidates_per_k', '4');
END $$;
SELECT what, count(*), round((percentile_cont(0.5) WITHIN GROUP (ORDER BY ms))::numeric, 2) AS p50,
       round((percentile_cont(0.9) WITHIN GROUP (ORDER BY ms))::numeric, 2) AS p90
FROM t WHERE i > 4 GROUP BY what ORDER BY what;
