-- =============================================================================
-- Experiment (not part of mneme): recall and cost of the vector leg through
-- a scope's own HNSW index on the benchmark's kept 1,000,000-memory
-- database, with the built-in hash embedder's vectors (bulk memories and
-- queries alike), against the exact top 100 of the same scope.
-- docs/performance.md quotes its output.
--
-- Run it on the database `mneme-lab bench scale` keeps (pgvector), after a run
-- of this version (which makes the per-scope indexes):
--   psql "postgres://.../mneme_bench_scale" -f docs/experiments/scope-index-recall.sql
-- Scopes: the huge conversation (bench conversation 0, mneme-scale-0 as a
-- name-based UUID in the OID namespace, 50,000 memories) and
-- its tenant (t0: two huge conversations and others, about 100,000), 30
-- queries each (three words of the scope's memories, fixed seed), top 100
-- at hnsw.ef_search 40, 100, 200 and 400 (setting vector_ef_search), and
-- the exact top 100. Timed inside one transaction, as the owner (no row
-- security), p50 ms.
-- =============================================================================
\set ON_ERROR_STOP on
SET client_min_messages = warning;
SELECT setseed(0.7);
CREATE TEMP TABLE sq AS
SELECT row_number() OVER () AS qid, s.scope, s.convs,
       (SELECT string_agg(w, ' ') FROM (SELECT w FROM unnest(string_to_array(m.content, ' ')) w WHERE w ~ '^[a-z]+$' LIMIT 3) x) AS query
FROM (SELECT 'conversation' AS scope, ARRAY['4b9de428-fa54-5da9-bba7-dd4d52b2b726'::uuid] AS convs
      UNION ALL
      SELECT 'tenant', ARRAY(SELECT q.id FROM mneme.message_queue q WHERE q.tenant_id = 't0' ORDER BY q.id)) s,
     LATERAL (SELECT m.content FROM mneme.memories m WHERE m.conversation_id = ANY (s.convs) ORDER BY random() LIMIT 30) m;
CREATE TEMP TABLE sr (scope text, ef int, qid bigint, recall10 float8, recall100 float8, exact_ms float8, ann_ms float8);
DO $$
DECLARE
    q record;
    ef int;
    t0 timestamptz;
    emb real[];
    ex uuid[];
    an uuid[];
    ex_ms float8;
BEGIN
    FOR q IN SELECT * FROM sq ORDER BY qid LOOP
        emb := mneme.hash_embed(q.query);
        t0 := clock_timestamp();
        SELECT array_agg(y.id ORDER BY y.d, y.id) INTO ex FROM (
            SELECT x.id, x.d FROM (SELECT m.id, m.embedding <=> emb::mneme.embedding AS d FROM mneme.memories m
                                   WHERE m.conversation_id = ANY (q.convs) AND m.status = 'active' OFFSET 0) x
            ORDER BY x.d, x.id LIMIT 100) y;
        ex_ms := 1000 * extract(epoch FROM clock_timestamp() - t0);
        FOREACH ef IN ARRAY ARRAY[40, 100, 200, 400] LOOP
            PERFORM mneme.set_setting('vector_ef_search', to_jsonb(ef));
            t0 := clock_timestamp();
            SELECT array_agg(v.memory_id ORDER BY v.rank, v.memory_id) INTO an
            FROM mneme._vector_search_scope(q.convs, emb, 100, NULL, NULL) v;
            INSERT INTO sr VALUES (q.scope, ef, q.qid,
                (SELECT count(*) FROM unnest(an[1:10]) a WHERE a = ANY (ex[1:10]))::float8 / 10,
                (SELECT count(*) FROM unnest(an) a WHERE a = ANY (ex))::float8 / greatest(cardinality(ex), 1),
                ex_ms, 1000 * extract(epoch FROM clock_timestamp() - t0));
        END LOOP;
    END LOOP;
    PERFORM mneme.set_setting('vector_ef_search', '200'::jsonb);
END
$$;
SELECT scope, ef, round(avg(recall10)::numeric, 3) AS recall_at_10, round(avg(recall100)::numeric, 3) AS recall_at_100,
       round(min(recall100)::numeric, 2) AS worst_100,
       round((percentile_cont(0.5) WITHIN GROUP (ORDER BY exact_ms))::numeric, 2) AS exact_p50_ms,
       round((percentile_cont(0.5) WITHIN GROUP (ORDER BY ann_ms))::numeric, 2) AS leg_p50_ms
FROM sr GROUP BY scope, ef ORDER BY scope, ef;
