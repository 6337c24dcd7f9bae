-- =============================================================================
-- Experiment (not part of mneme): how many rows the vector leg of a search
-- for the top 10 asks a scope's own HNSW index for, and at which
-- hnsw.ef_search, against its recall and its cost (issue 53). The scope is
-- the whole table here, as a conversation's or a tenant's partial index is
-- (vector_index_plan), on clustered vectors shaped like a real embedding
-- model's (the generator of docs/experiments/ann-recall.sql: 2,000 cluster
-- centres with a common direction, points at about 0.6 cosine similarity
-- within a cluster).
--
-- Run it in an empty database of a server with pgvector:
--   psql "$DATABASE_URL" -c 'CREATE DATABASE vector_candidates'
--   psql "postgres://.../vector_candidates" -v n=50000 -f docs/experiments/vector-candidates.sql
--
-- For each (rows, ef_search), with iterative scans in relaxed order as
-- mneme's vector leg runs them (results re-sorted by distance): recall@10
-- of its top 10 against the exact top 10, recall of all its rows against
-- the exact top `rows` (the ranks fusion reads), and p50 / p90 ms, in one
-- transaction per query (no client round trip). 50 queries, each a new
-- noisy point around the centre of one of the points' clusters.
-- =============================================================================
\set ON_ERROR_STOP on
\timing off
SET client_min_messages = warning;
CREATE EXTENSION IF NOT EXISTS vector;
DROP TABLE IF EXISTS vc_pts, vc_centres, vc_queries, vc_result;
SELECT setseed(0.53);

CREATE OR REPLACE FUNCTION pg_temp.gauss() RETURNS float8 LANGUAGE sql VOLATILE AS
$$ SELECT sqrt(-2 * ln(1 - random())) * cos(2 * pi() * random()) $$;
CREATE OR REPLACE FUNCTION pg_temp.unit(v float8[]) RETURNS vector LANGUAGE sql IMMUTABLE AS
$$ SELECT (SELECT array_agg(x / sqrt((SELECT sum(y * y) FROM unnest(v) y)) ORDER BY i) FROM unnest(v) WITH ORDINALITY u(x, i))::real[]::vector $$;

CREATE TEMP TABLE common AS SELECT array_agg(pg_temp.gauss() / 16) AS g FROM generate_series(1, 256);
CREATE TABLE vc_centres AS
SELECT c AS id, (SELECT array_agg(x.v + 0.5 * common.g[x.i]) FROM (SELECT i, pg_temp.gauss() / 16 AS v FROM generate_series(1, 256 + 0 * c) i) x) AS c0
FROM generate_series(0, 1999) c, common;
UPDATE vc_centres SET c0 = (SELECT array_agg(x / sqrt((SELECT sum(y * y) FROM unnest(c0) y)) ORDER BY i) FROM unnest(c0) WITH ORDINALITY u(x, i));

CREATE TABLE vc_pts (id bigint PRIMARY KEY, cluster int NOT NULL, emb vector(256) NOT NULL);
INSERT INTO vc_pts
SELECT j, cl, pg_temp.unit((SELECT array_agg(c.c0[i] + 0.8 * pg_temp.gauss() / 16 ORDER BY i) FROM generate_series(1, 256) i))
FROM (SELECT j, (random() * 2000)::int % 2000 AS cl FROM generate_series(1, :n) j) p
JOIN vc_centres c ON c.id = p.cl;
SET maintenance_work_mem = '1GB';
CREATE INDEX vc_pts_hnsw ON vc_pts USING hnsw (emb vector_cosine_ops);
VACUUM ANALYZE vc_pts;

CREATE TABLE vc_queries AS
SELECT row_number() OVER () AS qid,
       pg_temp.unit((SELECT array_agg(c.c0[i] + 0.8 * pg_temp.gauss() / 16 ORDER BY i) FROM generate_series(1, 256) i)) AS q
FROM (SELECT p.cluster FROM vc_pts p ORDER BY random() LIMIT 50) pick
JOIN vc_centres c ON c.id = pick.cluster;

CREATE TABLE vc_result (rows_asked int, ef int, qid bigint, recall10 float8, recall_rows float8, exact_ms float8, ann_ms float8);
DO $$
DECLARE
    q record;
    c record;
    t0 timestamptz;
    ex bigint[];
    an bigint[];
    ex_ms float8;
    an_ms float8;
BEGIN
    SET LOCAL hnsw.iterative_scan = relaxed_order;
    FOR q IN SELECT * FROM vc_queries ORDER BY qid LOOP
        PERFORM set_config('enable_indexscan', 'off', true);
        t0 := clock_timestamp();
        SELECT array_agg(x.id ORDER BY x.d, x.id) INTO ex FROM (
            SELECT p.id, p.emb <=> q.q AS d FROM vc_pts p ORDER BY 2, 1 LIMIT 100) x;
        ex_ms := 1000 * extract(epoch FROM clock_timestamp() - t0);
        PERFORM set_config('enable_indexscan', 'on', true);
        -- the bare top 10 (pgvector's default ef_search 40), mneme's leg
        -- before (100 rows at 2 x 100), and the candidates from k.
        FOR c IN SELECT * FROM (VALUES (10, 40), (20, 40), (30, 40), (40, 40), (40, 80), (50, 50), (100, 100), (100, 200)) v(r, ef) LOOP
            PERFORM set_config('hnsw.ef_search', c.ef::text, true);
            t0 := clock_timestamp();
            SELECT array_agg(y.id ORDER BY y.d, y.id) INTO an FROM (
                SELECT p.id, p.emb <=> q.q AS d FROM vc_pts p ORDER BY p.emb <=> q.q LIMIT c.r) y;
            an_ms := 1000 * extract(epoch FROM clock_timestamp() - t0);
            INSERT INTO vc_result VALUES (c.r, c.ef, q.qid,
                (SELECT count(*) FROM unnest(an[1:10]) a WHERE a = ANY (ex[1:10]))::float8 / 10,
                (SELECT count(*) FROM unnest(an) a WHERE a = ANY (ex[1:c.r]))::float8 / c.r, ex_ms, an_ms);
        END LOOP;
    END LOOP;
END
$$;

SELECT (SELECT count(*) FROM vc_pts) AS points, r.rows_asked, r.ef,
       round(avg(r.recall10)::numeric, 3) AS recall_at_10, round(min(r.recall10)::numeric, 2) AS worst_10,
       round(avg(r.recall_rows)::numeric, 3) AS recall_of_rows,
       round((percentile_cont(0.5) WITHIN GROUP (ORDER BY r.exact_ms))::numeric, 2) AS exact_p50_ms,
       round((percentile_cont(0.5) WITHIN GROUP (ORDER BY r.ann_ms))::numeric, 2) AS ann_p50_ms,
       round((percentile_cont(0.9) WITHIN GROUP (ORDER BY r.ann_ms))::numeric, 2) AS ann_p90_ms
FROM vc_result r GROUP BY r.rows_asked, r.ef ORDER BY r.rows_asked, r.ef;
