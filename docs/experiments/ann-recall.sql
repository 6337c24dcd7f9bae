-- =============================================================================
-- Experiment (not part of mneme): recall and cost of pgvector's HNSW index
-- with iterative scans for a scope that is a share of the table (a large
-- conversation, or a tenant), on vectors shaped like a real embedding
-- model's, not the hash embedder's. docs/performance.md quotes its output
-- and sets the vector leg's settings (vector_ann_min, vector_ef_search)
-- from it.
--
-- Run it in an empty database of a server with pgvector:
--   psql "$DATABASE_URL" -c 'CREATE DATABASE ann_recall'
--   psql "postgres://.../ann_recall" -v n=200000 -f docs/experiments/ann-recall.sql
--
-- The vectors (dimension 256, unit length): 2,000 cluster centres, each a
-- Gaussian direction plus a share of one direction common to all (real
-- embeddings are anisotropic: two unrelated texts have a cosine similarity
-- of about 0.1 to 0.3, not 0); a point is its centre plus Gaussian noise
-- (relative norm 0.8: about 0.6 cosine similarity between two points of a
-- cluster, 0.8 to its centre), normalised. Scopes are scattered: every
-- scope draws its points from every cluster, so a filtered scan meets the
-- other scopes' points everywhere in the graph (the hard case for a filter;
-- a conversation about a few topics is easier). The scopes' shares of the
-- table: 0.5%, 1%, 5% (the 50,000-memory conversation at 1,000,000), 10%
-- (a 100,000-memory tenant); the rest in 1,000 small scopes. Queries: 30 per
-- scope, each a new noisy point around the centre of one of the scope's
-- points.
--
-- For each scope and ef_search in 40, 100, 200 and 400: recall@100 of the
-- filtered HNSW query (iterative scan relaxed_order, max_scan_tuples
-- 20,000 and 100,000, results re-sorted by distance) against the exact top
-- 100 of the scope, and p50 ms of both, measured in one transaction (no
-- client round trip). (The approximate query filters on scope + 0 with sequential scans off,
-- so the planner answers it through the HNSW index.)
-- =============================================================================
\set ON_ERROR_STOP on
\timing off
SET client_min_messages = warning;
CREATE EXTENSION IF NOT EXISTS vector;
DROP TABLE IF EXISTS ann_pts, ann_centres, ann_queries, ann_result;
SELECT setseed(0.42);

-- Standard Gaussian (Box-Muller).
CREATE OR REPLACE FUNCTION pg_temp.gauss() RETURNS float8 LANGUAGE sql VOLATILE AS
$$ SELECT sqrt(-2 * ln(1 - random())) * cos(2 * pi() * random()) $$;
CREATE OR REPLACE FUNCTION pg_temp.unit(v float8[]) RETURNS vector LANGUAGE sql IMMUTABLE AS
$$ SELECT (SELECT array_agg(x / sqrt((SELECT sum(y * y) FROM unnest(v) y)) ORDER BY i) FROM unnest(v) WITH ORDINALITY u(x, i))::real[]::vector $$;

CREATE TEMP TABLE common AS SELECT array_agg(pg_temp.gauss() / 16) AS g FROM generate_series(1, 256);
CREATE TABLE ann_centres AS
SELECT c AS id, (SELECT array_agg(x.v + 0.5 * common.g[x.i]) FROM (SELECT i, pg_temp.gauss() / 16 AS v FROM generate_series(1, 256 + 0 * c) i) x) AS c0
FROM generate_series(0, 1999) c, common;
-- Unit length (the common direction's weight 0.5 against a unit Gaussian).
UPDATE ann_centres SET c0 = (SELECT array_agg(x / sqrt((SELECT sum(y * y) FROM unnest(c0) y)) ORDER BY i) FROM unnest(c0) WITH ORDINALITY u(x, i));

-- Points: scope 1 0.5%, 2 1%, 3 5%, 4 10%, the rest in scopes 100..1099.
CREATE TABLE ann_pts (id bigint PRIMARY KEY, scope int NOT NULL, cluster int NOT NULL, emb vector(256) NOT NULL);
INSERT INTO ann_pts
SELECT j,
       CASE WHEN u < 0.005 THEN 1 WHEN u < 0.015 THEN 2 WHEN u < 0.065 THEN 3 WHEN u < 0.165 THEN 4
            ELSE 100 + (j % 1000)::int END,
       cl,
       pg_temp.unit((SELECT array_agg(c.c0[i] + 0.8 * pg_temp.gauss() / 16 ORDER BY i) FROM generate_series(1, 256) i))
FROM (SELECT j, random() AS u, (random() * 2000)::int % 2000 AS cl FROM generate_series(1, :n) j) p
JOIN ann_centres c ON c.id = p.cl;
CREATE INDEX ON ann_pts (scope);
SET maintenance_work_mem = '2GB';
CREATE INDEX ann_pts_hnsw ON ann_pts USING hnsw (emb vector_cosine_ops);
VACUUM ANALYZE ann_pts;

-- 30 queries per scope of interest, around the centres of its points.
CREATE TABLE ann_queries AS
SELECT row_number() OVER () AS qid, s.scope,
       pg_temp.unit((SELECT array_agg(c.c0[i] + 0.8 * pg_temp.gauss() / 16 ORDER BY i) FROM generate_series(1, 256) i)) AS q
FROM (VALUES (1), (2), (3), (4)) s(scope), LATERAL (
    SELECT p.cluster FROM ann_pts p WHERE p.scope = s.scope ORDER BY random() LIMIT 30) pick
JOIN ann_centres c ON c.id = pick.cluster;

SELECT scope, count(*) AS points, round(100.0 * count(*) / sum(count(*)) OVER (), 2) AS pct
FROM ann_pts WHERE scope < 100 GROUP BY scope ORDER BY scope;
SELECT round(avg(1 - (a.emb <=> b.emb))::numeric, 3) AS same_cluster_cos
FROM ann_pts a JOIN LATERAL (SELECT emb FROM ann_pts b WHERE b.cluster = a.cluster AND b.id <> a.id LIMIT 1) b ON true
WHERE a.id <= 500;
SELECT round(avg(1 - (a.emb <=> b.emb))::numeric, 3) AS random_pair_cos
FROM ann_pts a JOIN ann_pts b ON b.id = a.id + 7919 WHERE a.id <= 500;

-- Per-scope partial HNSW indexes for the two large scopes (the
-- alternative to filtering one index over the whole table).
CREATE INDEX ann_pts_hnsw_s3 ON ann_pts USING hnsw (emb vector_cosine_ops) WHERE scope = 3;
CREATE INDEX ann_pts_hnsw_s4 ON ann_pts USING hnsw (emb vector_cosine_ops) WHERE scope = 4;
ANALYZE ann_pts;

-- One measurement: exact and approximate top 100 of each query, timed.
-- filtered: the index over the whole table, WHERE scope + 0 = s (iterative
-- scan, relaxed order, max_scan_tuples 20,000 or 100,000); partial: the
-- scope's own partial index (scopes 3 and 4), WHERE scope = s as a
-- literal, so the planner matches the index's predicate.
CREATE TABLE ann_result (scope int, method text, ef int, max_tuples int, qid bigint,
                         recall10 float8, recall100 float8, exact_ms float8, ann_ms float8);
DO $$
DECLARE
    q record;
    m text;
    ef int;
    mt int;
    t0 timestamptz;
    ex bigint[];
    an bigint[];
    ex_ms float8;
    an_ms float8;
BEGIN
    SET LOCAL hnsw.iterative_scan = relaxed_order;
    SET LOCAL enable_seqscan = off;  -- the approximate query through an HNSW index, whatever the estimates
    FOR q IN SELECT * FROM ann_queries ORDER BY qid LOOP
        t0 := clock_timestamp();
        SELECT array_agg(x.id ORDER BY x.d, x.id) INTO ex FROM (
            SELECT y.id, y.d FROM (SELECT p.id, p.emb <=> q.q AS d FROM ann_pts p WHERE p.scope = q.scope OFFSET 0) y
            ORDER BY y.d, y.id LIMIT 100) x;
        ex_ms := 1000 * extract(epoch FROM clock_timestamp() - t0);
        FOREACH m IN ARRAY ARRAY['filtered', 'partial'] LOOP
            CONTINUE WHEN m = 'partial' AND q.scope NOT IN (3, 4);
            FOREACH mt IN ARRAY CASE WHEN m = 'filtered' THEN ARRAY[20000, 100000] ELSE ARRAY[20000] END LOOP
                PERFORM set_config('hnsw.max_scan_tuples', mt::text, true);
                FOREACH ef IN ARRAY ARRAY[40, 100, 200, 400] LOOP
                    PERFORM set_config('hnsw.ef_search', ef::text, true);
                    t0 := clock_timestamp();
                    EXECUTE format($q$SELECT array_agg(c.id ORDER BY c.d, c.id) FROM (
                            SELECT p.id, p.emb <=> $1 AS d FROM ann_pts p WHERE %s
                            ORDER BY p.emb <=> $1 LIMIT 100) c$q$,
                        CASE WHEN m = 'filtered' THEN format('p.scope + 0 = %s', q.scope) ELSE format('p.scope = %s', q.scope) END)
                    INTO an USING q.q;
                    an_ms := 1000 * extract(epoch FROM clock_timestamp() - t0);
                    INSERT INTO ann_result VALUES (q.scope, m, ef, mt, q.qid,
                        (SELECT count(*) FROM unnest(an[1:10]) a WHERE a = ANY (ex[1:10]))::float8 / 10,
                        (SELECT count(*) FROM unnest(an) a WHERE a = ANY (ex))::float8 / greatest(cardinality(ex), 1), ex_ms, an_ms);
                END LOOP;
            END LOOP;
        END LOOP;
    END LOOP;
END
$$;

SELECT r.scope, round(100.0 * (SELECT count(*) FROM ann_pts p WHERE p.scope = r.scope) / (SELECT count(*) FROM ann_pts), 1) AS pct,
       r.method, r.max_tuples, r.ef,
       round(avg(r.recall10)::numeric, 3) AS recall_at_10, round(avg(r.recall100)::numeric, 3) AS recall_at_100,
       round(min(r.recall100)::numeric, 2) AS worst_100,
       round((percentile_cont(0.5) WITHIN GROUP (ORDER BY r.exact_ms))::numeric, 2) AS exact_p50_ms,
       round((percentile_cont(0.5) WITHIN GROUP (ORDER BY r.ann_ms))::numeric, 2) AS ann_p50_ms,
       round((percentile_cont(0.9) WITHIN GROUP (ORDER BY r.ann_ms))::numeric, 2) AS ann_p90_ms
FROM ann_result r GROUP BY r.scope, r.method, r.max_tuples, r.ef ORDER BY r.scope, r.method, r.max_tuples, r.ef;
