-- =============================================================================
-- Experiments (not part of mneme): where the time of a retrieval goes in the
-- benchmark's 100,000-memory conversation, and MaxScore pruning for the BM25
-- leg. docs/retrieval.md ("Benchmark") quotes its output.
--
-- Run it against a database kept by the retrieval benchmark:
--   ./scripts/with-test-db.sh sh -c 'bin/mneme-lab bench retrieve --memories 100000 --keep'
--   psql "postgres://.../mneme_bench_XXXXXXXX" -f docs/experiments/retrieval-profile.sql
-- It creates only temporary objects and a table qs (100 queries drawn like
-- the benchmark's, fixed seed), dropped at the end. Timings are p50/p90 over
-- 200 calls per statement, interleaved, inside one transaction (no client
-- round trip, no commit).
--
-- 1. Postings per query: how many postings the query terms have, and the
--    share of the most common term.
-- 2. BM25 cost: scanning those postings, then aggregating per memory, then
--    the top 100, then mneme.bm25_search itself.
-- 3. HNSW over the whole table: the bare top 10 (ef_search 40), the top 100
--    with ef_search 100 (what the vector leg asks), the top 100 with
--    ef_search 40 and iterative scans, and the vector leg itself.
-- 4. MaxScore for the BM25 leg: score the memories that contain one of the
--    rarer terms ("part"); every other memory scores at most the most common
--    term's upper bound idf * (k1 + 1). If the 100th best partial score beats
--    that bound, the top 100 is among "part", and the common term's postings
--    are only matched against those memories (a hashed subplan over one index
--    scan). Prints how many queries differ from mneme.bm25_search (must be 0)
--    and the timings of both.
--
-- Output of one run on the benchmark's kept 100,000-memory database (idle
-- 2-vCPU machine, 2026-11-21), p50 / p90 ms:
-- 1. 7,786 postings per query on average (median 7,244), 68% of them the
--    most common term's.
-- 2. scan 1.08 / 2.17; + aggregate per memory 3.10 / 6.88; + top 100
--    4.13 / 9.62; mneme.bm25_search 6.57 / 15.91.
-- 3. bare top 10 1.47 / 2.05; top 100 at ef_search 100 2.99 / 3.74; top 100
--    at ef_search 40 with iterative scans 3.62 / 4.79; mneme.vector_search
--    3.37 / 11.06.
-- 4. 0 differing queries; mneme.bm25_search 5.38 / 11.35, MaxScore
--    4.25 / 11.57. Not adopted: about 1 ms off the median and nothing off the
--    tail, for a second scoring path. The postings it skips are cheap to
--    scan; what costs is aggregating and sorting the memories, and "part"
--    still holds thousands of them, since the common term can lift any of
--    them above the threshold.
-- =============================================================================
\set ON_ERROR_STOP on
SELECT setseed(0.42);
DROP TABLE IF EXISTS qs;
CREATE TABLE qs AS
SELECT (SELECT string_agg(w, ' ') FROM (
            SELECT (regexp_split_to_array(m.content, ' '))[1 + floor(random() * array_length(regexp_split_to_array(m.content, ' '), 1))::int] AS w, m.id
            FROM generate_series(1, 4)) x) AS q
FROM (SELECT * FROM mneme.memories ORDER BY id LIMIT 100) m;
ALTER TABLE qs ADD COLUMN e real[];
UPDATE qs SET e = mneme.hash_embed(q);

CREATE OR REPLACE FUNCTION pg_temp.bm25_maxscore(
    p_conversation_id uuid, p_query text, p_limit int DEFAULT 100, p_since timestamptz DEFAULT NULL, p_until timestamptz DEFAULT NULL)
RETURNS TABLE (memory_id uuid, score float8, rank int)
LANGUAGE plpgsql STABLE ROWS 100
SET search_path = pg_catalog, pg_temp
SET jit = off
AS $$
DECLARE
    v_k1      float8 := mneme.setting('bm25_k1')::float8;
    v_b       float8 := mneme.setting('bm25_b')::float8;
    v_expired uuid[];
    v_n       float8;
    v_total   float8;
    v_c0      float8;
    v_c1      float8;
    v_terms   text[];
    v_wt      float8[];
    v_df      float8[];
    v_nt      int;
    v_ok      boolean;
    v_ids     uuid[];
    v_sc      float8[];
BEGIN
    IF p_limit IS NULL OR p_limit < 1 THEN
        RAISE EXCEPTION 'limit must be at least 1' USING ERRCODE = '22023';
    END IF;
    SELECT s.n, s.total_len INTO v_n, v_total FROM mneme.bm25_stats s WHERE s.conversation_id = p_conversation_id;
    IF NOT FOUND THEN
        RETURN;
    END IF;
    SELECT array_agg(m.id) INTO v_expired FROM mneme.memories m
    WHERE m.conversation_id = p_conversation_id AND m.valid_until IS NOT NULL
      AND m.status = 'active' AND m.valid_until <= now();
    IF v_expired IS NOT NULL THEN
        SELECT v_n - count(*), v_total - coalesce(sum(d.doclen), 0) INTO v_n, v_total
        FROM mneme.bm25_docs d WHERE d.memory_id = ANY (v_expired);
    END IF;
    IF v_n <= 0 OR v_total <= 0 THEN
        RETURN;
    END IF;
    v_c0 := v_k1 * (1 - v_b);
    v_c1 := v_k1 * v_b / (v_total / v_n);
    SELECT array_agg(t.term ORDER BY t.df, t.term), array_agg(ln(1 + (v_n - t.df + 0.5) / (t.df + 0.5)) * (v_k1 + 1) ORDER BY t.df, t.term),
           array_agg(t.df ORDER BY t.df, t.term)
    INTO v_terms, v_wt, v_df
    FROM (SELECT bt.term,
                 bt.df - CASE WHEN v_expired IS NULL THEN 0 ELSE
                     (SELECT count(*) FROM mneme.bm25_postings p
                      WHERE p.conversation_id = p_conversation_id AND p.term = bt.term
                        AND p.memory_id = ANY (v_expired)) END::float8 AS df
          FROM mneme.bm25_terms bt
          WHERE bt.conversation_id = p_conversation_id
            AND bt.term = ANY (tsvector_to_array(mneme.bm25_tsvector(p_query)))) t
    WHERE t.df > 0;
    IF v_terms IS NULL THEN
        RETURN;
    END IF;
    v_nt := cardinality(v_terms);

    IF v_nt > 1 AND p_since IS NULL AND p_until IS NULL AND v_df[v_nt] > 2 * p_limit THEN
        WITH part AS MATERIALIZED (
            SELECT p.memory_id AS id, sum(w.wt * p.tf / (p.tf + v_c0 + v_c1 * p.doclen)) AS sc
            FROM unnest(v_terms[1:v_nt - 1], v_wt[1:v_nt - 1]) AS w(term, wt)
            JOIN mneme.bm25_postings p ON p.conversation_id = p_conversation_id AND p.term = w.term
            WHERE v_expired IS NULL OR p.memory_id <> ALL (v_expired)
            GROUP BY p.memory_id
        ), theta AS MATERIALIZED (
            SELECT part.sc FROM part ORDER BY part.sc DESC OFFSET p_limit - 1 LIMIT 1
        ), more AS MATERIALIZED (
            SELECT p.memory_id AS id, v_wt[v_nt] * p.tf / (p.tf + v_c0 + v_c1 * p.doclen) AS sc
            FROM mneme.bm25_postings p
            WHERE p.conversation_id = p_conversation_id AND p.term = v_terms[v_nt]
              AND (SELECT theta.sc > v_wt[v_nt] FROM theta)
              AND (p.memory_id IN (SELECT part.id FROM part) OR false)  -- a hashed subplan, not a join
        ), top AS (
            SELECT part.id, part.sc + coalesce(more.sc, 0) AS sc FROM part LEFT JOIN more ON more.id = part.id
            ORDER BY 2 DESC, 1 LIMIT p_limit
        )
        SELECT coalesce((SELECT theta.sc > v_wt[v_nt] FROM theta), false),
               array_agg(top.id ORDER BY top.sc DESC, top.id), array_agg(top.sc ORDER BY top.sc DESC, top.id)
        INTO v_ok, v_ids, v_sc FROM top;
        IF v_ok THEN
            RETURN QUERY SELECT x.id, x.sc, (rank() OVER (ORDER BY x.sc DESC))::int
                         FROM unnest(v_ids, v_sc) WITH ORDINALITY AS x(id, sc, o) ORDER BY x.o;
            RETURN;
        END IF;
    END IF;

    RETURN QUERY
    WITH top AS (
        SELECT p.memory_id AS id, sum(w.wt * p.tf / (p.tf + v_c0 + v_c1 * p.doclen)) AS sc
        FROM unnest(v_terms, v_wt) AS w(term, wt)
        JOIN mneme.bm25_postings p ON p.conversation_id = p_conversation_id AND p.term = w.term
        WHERE (v_expired IS NULL OR p.memory_id <> ALL (v_expired))
          AND ((p_since IS NULL AND p_until IS NULL)
               OR EXISTS (SELECT 1 FROM mneme.memories m WHERE m.id = p.memory_id
                          AND (p_since IS NULL OR m.created_at >= p_since)
                          AND (p_until IS NULL OR m.created_at < p_until)))
        GROUP BY p.memory_id
        ORDER BY 2 DESC, 1
        LIMIT p_limit
    )
    SELECT top.id, top.sc, (rank() OVER (ORDER BY top.sc DESC))::int FROM top ORDER BY top.sc DESC, top.id;
END
$$;

-- t4(conversation, statements): p50 and p90 in ms of each statement over 200
-- rounds ($1 = conversation, $2 = query text, $3 = query embedding). In a
-- round each statement gets a different query of qs, so none runs on pages
-- another statement has just brought into the CPU caches (as in
-- mneme-lab bench retrieve).
CREATE FUNCTION pg_temp.t4(c uuid, sqls text[]) RETURNS TABLE (statement text, p50 numeric, p90 numeric)
LANGUAGE plpgsql AS $$
DECLARE
    t0 timestamptz;
    n  int;
    qq text[] := ARRAY(SELECT q FROM qs ORDER BY q);
    qe real[];
    ts float8[] := array_fill(0::float8, ARRAY[cardinality(sqls), 200]);
    k  int;
BEGIN
    FOR r IN 1 .. 200 LOOP
        UPDATE mneme.message_queue SET pending_reviews = NULL WHERE pending_reviews IS NOT NULL;
        FOR i IN 1 .. cardinality(sqls) LOOP
            k := (r + i * 7) % cardinality(qq) + 1;
            SELECT e INTO qe FROM qs WHERE q = qq[k] LIMIT 1;
            t0 := clock_timestamp();
            EXECUTE sqls[i] INTO n USING c, qq[k], qe;
            ts[i][r] := extract(epoch FROM clock_timestamp() - t0) * 1000;
        END LOOP;
    END LOOP;
    FOR i IN 1 .. cardinality(sqls) LOOP
        statement := sqls[i];
        SELECT round(percentile_cont(0.5) WITHIN GROUP (ORDER BY x)::numeric, 2),
               round(percentile_cont(0.9) WITHIN GROUP (ORDER BY x)::numeric, 2)
        INTO p50, p90 FROM unnest(ts[i:i][1:200]) AS x;
        RETURN NEXT;
    END LOOP;
END
$$;

SELECT conversation_id AS c FROM mneme.bm25_stats ORDER BY n DESC LIMIT 1 \gset
-- 1. Postings per query
WITH x AS (
    SELECT qs.q, t.df, row_number() OVER (PARTITION BY qs.q ORDER BY t.df DESC) AS rn
    FROM qs JOIN mneme.bm25_terms t ON t.conversation_id = :'c'
     AND t.term = ANY (tsvector_to_array(mneme.bm25_tsvector(qs.q))))
SELECT round(avg(tot)) AS avg_postings, percentile_cont(0.5) WITHIN GROUP (ORDER BY tot) AS median_postings,
       round(avg(top1::float8 / tot)::numeric, 2) AS most_common_term_share
FROM (SELECT q, sum(df) AS tot, sum(df) FILTER (WHERE rn = 1) AS top1 FROM x GROUP BY q) y;

-- 2. BM25 cost
SELECT * FROM pg_temp.t4(:'c', ARRAY[
  $q$select count(*) from mneme.bm25_postings p where p.conversation_id = $1 and p.term = any (tsvector_to_array(mneme.bm25_tsvector($2)))$q$,
  $q$select count(*) from (select p.memory_id, sum(p.tf / (p.tf + 0.3::float8 + 0.035::float8 * p.doclen)) from mneme.bm25_postings p where p.conversation_id = $1 and p.term = any (tsvector_to_array(mneme.bm25_tsvector($2))) group by 1) x$q$,
  $q$select count(*) from (select p.memory_id, sum(p.tf / (p.tf + 0.3::float8 + 0.035::float8 * p.doclen)) from mneme.bm25_postings p where p.conversation_id = $1 and p.term = any (tsvector_to_array(mneme.bm25_tsvector($2))) group by 1 order by 2 desc, 1 limit 100) x$q$,
  'select count(*) from mneme.bm25_search($1, $2, 100)']);

-- 3. HNSW (the vector variant must be pgvector)
CREATE FUNCTION pg_temp.hnsw_top(q real[], n int) RETURNS SETOF uuid LANGUAGE sql STABLE
SET hnsw.ef_search = 40 SET hnsw.iterative_scan = relaxed_order
AS $f$ SELECT id FROM mneme.memories ORDER BY embedding OPERATOR(public.<=>) q::public.vector LIMIT n $f$;
CREATE FUNCTION pg_temp.hnsw_top_ef100(q real[], n int) RETURNS SETOF uuid LANGUAGE sql STABLE
SET hnsw.ef_search = 100 SET hnsw.iterative_scan = relaxed_order
AS $f$ SELECT id FROM mneme.memories ORDER BY embedding OPERATOR(public.<=>) q::public.vector LIMIT n $f$;
SELECT * FROM pg_temp.t4(:'c', ARRAY[
  'select count(*) from pg_temp.hnsw_top($3, 10)',
  'select count(*) from pg_temp.hnsw_top_ef100($3, 100)',
  'select count(*) from pg_temp.hnsw_top($3, 100)',
  'select count(*) from mneme.vector_search($1, $3, 100)']);

-- 4. MaxScore
SELECT count(*) AS differing_queries FROM qs WHERE
  (SELECT array_agg(row(memory_id, round(score::numeric, 9), rank) ORDER BY rank, memory_id) FROM mneme.bm25_search(:'c', q, 100))
  IS DISTINCT FROM (SELECT array_agg(row(memory_id, round(score::numeric, 9), rank) ORDER BY rank, memory_id) FROM pg_temp.bm25_maxscore(:'c', q, 100));
SELECT * FROM pg_temp.t4(:'c', ARRAY[
  'select count(*) from mneme.bm25_search($1, $2, 100)',
  'select count(*) from pg_temp.bm25_maxscore($1, $2, 100)']);
DROP TABLE qs;
