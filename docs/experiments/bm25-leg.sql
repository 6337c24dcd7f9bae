-- =============================================================================
-- Experiment (not part of mneme): where the BM25 leg's time goes on bench
-- retrieve's kept database (one conversation of 100,000 memories), and
-- what other ways of finding its exact top k cost. docs/performance.md
-- ("The BM25 leg, fifth session") quotes its output.
--
-- Run it as a superuser (it reads /proc/self/schedstat for the backend's
-- CPU time) on a COPY of the kept database:
--   CREATE DATABASE bm_scratch TEMPLATE mneme_bench_a6cf29c3;
--   psql "postgres://.../bm_scratch" -f docs/experiments/bm25-leg.sql
-- Everything it makes is in the schema bm25_leg, dropped at the end.
-- Queries: 60, each three words of a random memory and the first word of
-- another (setseed 0.42: the same queries each run), as bench retrieve's.
--
-- What it prints:
--   1. per query (the first 20): its terms' df and MaxScore bound, largest
--      bound first, and for each split (the first i terms summed, the rest
--      set aside) theta (the k-th best partial sum), the set-aside terms'
--      bounds together and, where theta is above them, the candidates left;
--   2. the ways of finding the top k, timed alternately per query (wall
--      clock p50 and average, backend CPU average), and their recall
--      against mneme._bm25_search;
--   3. mneme.search's parts, timed alternately.
-- It assumes the default bm25_k1 1.2 and bm25_b 0.75.
-- =============================================================================
\set ON_ERROR_STOP on
SET client_min_messages = warning;
DROP SCHEMA IF EXISTS bm25_leg CASCADE;
CREATE SCHEMA bm25_leg;
SELECT setseed(0.42);
CREATE TABLE bm25_leg.q AS
WITH m AS (SELECT id, content, conversation_id, row_number() OVER () AS i
           FROM (SELECT * FROM mneme.memories ORDER BY random() LIMIT 60) x),
     o AS (SELECT content, row_number() OVER () AS i FROM (SELECT content FROM mneme.memories ORDER BY random() LIMIT 60) y)
SELECT m.i, m.conversation_id AS conv,
       (SELECT string_agg(w, ' ') FROM (SELECT w FROM regexp_split_to_table(m.content, ' ') w ORDER BY random() LIMIT 3) z)
       || ' ' || split_part(o.content, ' ', 1) AS text
FROM m JOIN o USING (i);
ALTER TABLE bm25_leg.q ADD COLUMN emb real[];
UPDATE bm25_leg.q SET emb = mneme.hash_embed(text);

CREATE FUNCTION bm25_leg.cpu() RETURNS float8 LANGUAGE sql AS
$$ SELECT split_part(pg_read_file('/proc/self/schedstat'), ' ', 1)::float8 / 1e6 $$;
CREATE FUNCTION bm25_leg.clk() RETURNS float8 LANGUAGE sql AS $$ SELECT extract(epoch FROM clock_timestamp()) * 1000 $$;

-- The query's terms as _bm25_search sees them: largest bound first.
CREATE FUNCTION bm25_leg.terms(ids uuid[], query text,
    OUT terms text[], OUT wts float8[], OUT bounds float8[], OUT dfs float8[], OUT avgdl float8, OUT n float8)
LANGUAGE plpgsql STABLE AS $$
DECLARE v_k1 float8 := mneme.setting('bm25_k1')::float8; v_b float8 := mneme.setting('bm25_b')::float8; v_total float8;
BEGIN
    SELECT sum(s.n), sum(s.total_len) INTO n, v_total FROM mneme.bm25_stats s WHERE s.conversation_id = ANY (ids);
    avgdl := v_total / n;
    SELECT array_agg(w.term), array_agg(w.wt), array_agg(w.bound), array_agg(w.df) INTO terms, wts, bounds, dfs
    FROM (SELECT x.term, x.df, mneme._bm25_weight(n, x.df, v_k1) AS wt,
                 mneme._bm25_weight(n, x.df, v_k1) * (1 + 1e-9)
                   / (1 + v_k1 * (1 - v_b) / greatest(x.max_tf, 1) + v_k1 * v_b / avgdl * x.min_len) AS bound
          FROM mneme._bm25_term_stats(ids, tsvector_to_array(mneme.bm25_tsvector(query)), NULL) x
          WHERE x.df > 0 ORDER BY bound DESC, x.term) w;
END $$;

-- 1. Could MaxScore skip? Per split: theta, the set-aside bounds, the candidates.
CREATE FUNCTION bm25_leg.trace(k int) RETURNS TABLE (i int, terms text, splits text) LANGUAGE plpgsql AS $$
DECLARE r record; t record; j int; th float8; aside float8; nc bigint; out text;
BEGIN
    FOR r IN SELECT * FROM bm25_leg.q WHERE q.i <= 20 ORDER BY q.i LOOP
        t := bm25_leg.terms(ARRAY[r.conv], r.text);
        out := '';
        FOR j IN 1 .. cardinality(t.terms) - 1 LOOP
            SELECT s.score INTO th FROM mneme._bm25_sums(ARRAY[r.conv], t.terms[:j], t.wts[:j], 1.2, 0.75, t.avgdl, NULL, NULL, NULL) s
            ORDER BY 1 DESC OFFSET k - 1 LIMIT 1;
            SELECT sum(x) INTO aside FROM unnest(t.bounds[j + 1:]) x;
            nc := NULL;
            IF th > aside THEN
                SELECT count(*) INTO nc FROM mneme._bm25_sums(ARRAY[r.conv], t.terms[:j], t.wts[:j], 1.2, 0.75, t.avgdl, NULL, NULL, NULL) s
                WHERE s.score + aside >= th;
            END IF;
            out := out || format('%s: %s postings, theta %s, aside %s%s; ', j,
                                 (SELECT sum(x) FROM unnest(t.dfs[:j]) x), round(coalesce(th, 0)::numeric, 2),
                                 round(aside::numeric, 2), coalesce(', candidates ' || nc, ''));
        END LOOP;
        i := r.i;
        terms := (SELECT string_agg(format('%s (df %s, bound %s)', a.term, a.df, round(a.bd::numeric, 2)), ', ')
                  FROM unnest(t.terms, t.dfs, t.bounds) AS a(term, df, bd));
        splits := out;
        RETURN NEXT;
    END LOOP;
END $$;
SELECT * FROM bm25_leg.trace(100);

-- 2. Ways of finding the top k (same arguments as _bm25_search's, one server, no time range).
CREATE FUNCTION bm25_leg.main(ids uuid[], query text, k int, OUT memory_id uuid, OUT score float8, OUT rank int)
RETURNS SETOF record LANGUAGE sql STABLE AS $$ SELECT * FROM mneme._bm25_search(ids, query, k, NULL, NULL) $$;

-- every posting summed, grouped by conversation and memory (_bm25_sums, as _bm25_search's fall-through was)
CREATE FUNCTION bm25_leg.sum_conv_memory(ids uuid[], query text, k int, OUT memory_id uuid, OUT score float8, OUT rank int)
RETURNS SETOF record LANGUAGE plpgsql STABLE AS $$
DECLARE t record := bm25_leg.terms(ids, query);
BEGIN
    RETURN QUERY
    SELECT top.memory_id, top.score, (rank() OVER (ORDER BY top.score DESC))::int
    FROM (SELECT s.memory_id, round(s.score * 1e9) / 1e9 AS score
          FROM mneme._bm25_sums(ids, t.terms, t.wts, 1.2, 0.75, t.avgdl, NULL, NULL, NULL) s
          ORDER BY 2 DESC, 1 LIMIT k) top
    ORDER BY top.score DESC, top.memory_id;
END $$;

-- every posting summed, grouped by memory alone
CREATE FUNCTION bm25_leg.sum_memory(ids uuid[], query text, k int, OUT memory_id uuid, OUT score float8, OUT rank int)
RETURNS SETOF record LANGUAGE plpgsql STABLE AS $$
DECLARE t record := bm25_leg.terms(ids, query);
BEGIN
    RETURN QUERY
    SELECT top.memory_id, top.score, (rank() OVER (ORDER BY top.score DESC))::int
    FROM (SELECT p.memory_id, round(sum(w.wt * mneme._bm25_tf(p.tf, p.doclen, 1.2, 0.75, t.avgdl)) * 1e9) / 1e9 AS score
          FROM unnest(t.terms, t.wts) AS w(term, wt), unnest(ids) AS c(id), LATERAL (
              SELECT p.memory_id, p.tf, p.doclen FROM mneme.bm25_postings p
              WHERE p.conversation_id = c.id AND p.term = w.term) p
          GROUP BY p.memory_id ORDER BY 2 DESC, 1 LIMIT k) top
    ORDER BY top.score DESC, top.memory_id;
END $$;

-- Exact, two passes (a one-shot threshold algorithm): the shortest prefix
-- of terms holding k postings summed (theta0, their k-th best partial sum);
-- each other term cut at theta0 / (their bounds together) times its bound,
-- so that the cuts sum below theta0: a memory with no posting of the
-- prefix and every posting below its term's cut cannot reach the top k.
-- Candidates: the prefix's memories and those with a posting above a cut;
-- their exact sums from a second read of the other terms' postings.
CREATE FUNCTION bm25_leg.cut(ids uuid[], query text, k int, OUT memory_id uuid, OUT score float8, OUT rank int)
RETURNS SETOF record LANGUAGE plpgsql STABLE AS $$
DECLARE t record := bm25_leg.terms(ids, query); p int; acc float8 := 0; rest float8; theta float8; f float8;
        pm uuid[]; ps float8[];
BEGIN
    FOR j IN 1 .. cardinality(t.terms) - 1 LOOP
        acc := acc + t.dfs[j];
        IF acc >= k THEN p := j; EXIT; END IF;
    END LOOP;
    IF p IS NULL THEN RETURN QUERY SELECT * FROM bm25_leg.main(ids, query, k); RETURN; END IF;
    SELECT sum(x) INTO rest FROM unnest(t.bounds[p + 1:]) x;
    SELECT array_agg(s.memory_id), array_agg(s.score) INTO pm, ps
      FROM mneme._bm25_sums(ids, t.terms[:p], t.wts[:p], 1.2, 0.75, t.avgdl, NULL, NULL, NULL) s;
    SELECT x INTO theta FROM unnest(ps) x ORDER BY 1 DESC OFFSET k - 1 LIMIT 1;
    f := (theta - 1e-6) / rest;
    RETURN QUERY
    WITH w AS (SELECT * FROM unnest(t.terms[p + 1:], t.wts[p + 1:], t.bounds[p + 1:]) AS w(term, wt, bd)),
    part AS (SELECT * FROM unnest(pm, ps) AS u(id, ps)),
    hi AS (
        SELECT DISTINCT p.memory_id AS id
        FROM w, unnest(ids) AS c(id), LATERAL (
            SELECT p.memory_id, p.tf, p.doclen FROM mneme.bm25_postings p WHERE p.conversation_id = c.id AND p.term = w.term) p
        WHERE w.wt * mneme._bm25_tf(p.tf, p.doclen, 1.2, 0.75, t.avgdl) >= w.bd * f
    ), cand AS MATERIALIZED (
        SELECT coalesce(part.id, hi.id) AS id, coalesce(part.ps, 0) AS ps FROM part FULL JOIN hi ON hi.id = part.id
    ), r AS (
        SELECT p.memory_id AS id, sum(w.wt * mneme._bm25_tf(p.tf, p.doclen, 1.2, 0.75, t.avgdl)) AS s
        FROM w, unnest(ids) AS c(id), LATERAL (
            SELECT p.memory_id, p.tf, p.doclen FROM mneme.bm25_postings p WHERE p.conversation_id = c.id AND p.term = w.term) p
        WHERE p.memory_id IN (SELECT cand.id FROM cand)
        GROUP BY p.memory_id
    ), scored AS (
        SELECT cand.id, round((cand.ps + coalesce(r.s, 0)) * 1e9) / 1e9 AS score FROM cand LEFT JOIN r ON r.id = cand.id
    )
    SELECT top.id, top.score, (rank() OVER (ORDER BY top.score DESC))::int
    FROM (SELECT scored.id, scored.score FROM scored ORDER BY 2 DESC, 1 LIMIT k) top
    ORDER BY top.score DESC, top.id;
END $$;

-- Not exact: the memories that hold none of the shortest prefix of terms
-- holding k postings are left out (their other terms' postings are read
-- only for the prefix's memories).
CREATE FUNCTION bm25_leg.prefix_only(ids uuid[], query text, k int, OUT memory_id uuid, OUT score float8, OUT rank int)
RETURNS SETOF record LANGUAGE plpgsql STABLE AS $$
DECLARE t record := bm25_leg.terms(ids, query); p int; acc float8 := 0;
BEGIN
    FOR j IN 1 .. cardinality(t.terms) - 1 LOOP
        acc := acc + t.dfs[j];
        IF acc >= k THEN p := j; EXIT; END IF;
    END LOOP;
    IF p IS NULL THEN RETURN QUERY SELECT * FROM bm25_leg.main(ids, query, k); RETURN; END IF;
    RETURN QUERY
    WITH part AS MATERIALIZED (
        SELECT s.memory_id AS id, s.score AS ps
        FROM mneme._bm25_sums(ids, t.terms[:p], t.wts[:p], 1.2, 0.75, t.avgdl, NULL, NULL, NULL) s
    ), r AS (
        SELECT p.memory_id AS id, sum(w.wt * mneme._bm25_tf(p.tf, p.doclen, 1.2, 0.75, t.avgdl)) AS s
        FROM unnest(t.terms[p + 1:], t.wts[p + 1:]) AS w(term, wt), unnest(ids) AS c(id), LATERAL (
            SELECT p.memory_id, p.tf, p.doclen FROM mneme.bm25_postings p WHERE p.conversation_id = c.id AND p.term = w.term) p
        WHERE p.memory_id IN (SELECT part.id FROM part)
        GROUP BY p.memory_id
    ), scored AS (
        SELECT part.id, round((part.ps + coalesce(r.s, 0)) * 1e9) / 1e9 AS score FROM part LEFT JOIN r ON r.id = part.id
    )
    SELECT top.id, top.score, (rank() OVER (ORDER BY top.score DESC))::int
    FROM (SELECT scored.id, scored.score FROM scored ORDER BY 2 DESC, 1 LIMIT k) top
    ORDER BY top.score DESC, top.id;
END $$;

-- Each function once per query and round, in a rotating order.
CREATE FUNCTION bm25_leg.timed(fns text[], k int, reps int)
RETURNS TABLE (fn text, wall_p50_ms numeric, wall_avg_ms numeric, cpu_avg_ms numeric) LANGUAGE plpgsql AS $$
DECLARE r record; t0 float8; c0 float8; n int; f text;
BEGIN
    CREATE TEMP TABLE IF NOT EXISTS tm (i int, fn text, ms float8, cpu float8);
    TRUNCATE tm;
    FOR rep IN 1 .. reps LOOP
        FOR r IN SELECT * FROM bm25_leg.q ORDER BY q.i LOOP
            FOR j IN 0 .. cardinality(fns) - 1 LOOP
                f := fns[1 + (j + rep + r.i) % cardinality(fns)];
                c0 := bm25_leg.cpu(); t0 := bm25_leg.clk();
                EXECUTE format(f, 'ARRAY[$1]', '$2', k) INTO n USING r.conv, r.text, r.emb;
                INSERT INTO tm VALUES (r.i, f, bm25_leg.clk() - t0, bm25_leg.cpu() - c0);
            END LOOP;
        END LOOP;
    END LOOP;
    RETURN QUERY SELECT left(tm.fn, 70), round(percentile_cont(0.5) WITHIN GROUP (ORDER BY ms)::numeric, 2),
                        round(avg(ms)::numeric, 2), round(avg(cpu)::numeric, 2)
                 FROM tm GROUP BY 1 ORDER BY 1;
END $$;

-- recall@at of fn's top k against mneme._bm25_search's
CREATE FUNCTION bm25_leg.recall(fn text, k int, at int) RETURNS numeric LANGUAGE plpgsql AS $$
DECLARE r record; a uuid[]; b uuid[]; tot numeric := 0;
BEGIN
    FOR r IN SELECT * FROM bm25_leg.q LOOP
        SELECT array_agg(s.memory_id) INTO a
          FROM (SELECT * FROM mneme._bm25_search(ARRAY[r.conv], r.text, k, NULL, NULL) ORDER BY score DESC, memory_id LIMIT at) s;
        EXECUTE format('SELECT array_agg(s.memory_id) FROM (SELECT * FROM %s($1, $2, $3) ORDER BY score DESC, memory_id LIMIT $4) s', fn)
          INTO b USING ARRAY[r.conv], r.text, k, at;
        tot := tot + (SELECT count(*) FROM unnest(b) x WHERE x = ANY (a))::numeric / greatest(cardinality(a), 1);
    END LOOP;
    RETURN round(tot / (SELECT count(*) FROM bm25_leg.q), 3);
END $$;

SELECT * FROM bm25_leg.timed(ARRAY[
    'SELECT count(*) FROM bm25_leg.main(%s, %s, %s)',
    'SELECT count(*) FROM bm25_leg.sum_conv_memory(%s, %s, %s)',
    'SELECT count(*) FROM bm25_leg.sum_memory(%s, %s, %s)',
    'SELECT count(*) FROM bm25_leg.cut(%s, %s, %s)',
    'SELECT count(*) FROM bm25_leg.prefix_only(%s, %s, %s)'], 100, 3);
SELECT fn, bm25_leg.recall(fn, 100, 10) AS recall_at_10, bm25_leg.recall(fn, 100, 100) AS recall_at_100
FROM unnest(ARRAY['bm25_leg.sum_memory', 'bm25_leg.cut', 'bm25_leg.prefix_only']) AS fn;
-- the same at k 10 (the cost hardly depends on k)
SELECT * FROM bm25_leg.timed(ARRAY['SELECT count(*) FROM bm25_leg.main(%s, %s, %s)'], 10, 3);

-- 3. mneme.search's parts (k 10: the BM25 leg's 100, the vector leg's 40).
SELECT * FROM bm25_leg.timed(ARRAY[
    'SELECT count(*) FROM mneme.search((%s)[1], %s, 10 + 0 * %s, $3)',
    'SELECT count(*) FROM mneme._search_candidates(%s, %s, $3, 100 + 0 * %s, 40, NULL, NULL, NULL, false)',
    'SELECT count(*) FROM mneme._bm25_search(%s, %s, 100 + 0 * %s, NULL, NULL)',
    'SELECT count(*) FROM mneme._vector_search_scope(%s, $3, 40 + 0 * length(%s) + 0 * %s, NULL, NULL)',
    'SELECT count(*) FROM (SELECT id FROM mneme.memories ORDER BY embedding OPERATOR(public.<=>) $3::real[]::mneme.embedding LIMIT 10 + 0 * cardinality(%s) + 0 * length(%s) + 0 * %s) x'
    ], 10, 3);

DROP SCHEMA bm25_leg CASCADE;

-- 4. One statement's parts, timed with pgbench (not run by this file): the
-- 4 terms of query 3 above (19,973 postings), each statement in a file of
-- its own, `pgbench -n -f x.sql -t 200 postgres://.../bm_scratch`, C the
-- conversation's id:
--   read:        SELECT count(*) FROM (SELECT p.memory_id, p.tf FROM unnest(array['dagutor','elfeemusf','miel','veelgu']) t(term)
--                JOIN mneme.bm25_postings p ON p.conversation_id = C AND p.term = t.term) x;
--   grouped:     SELECT count(*) FROM (SELECT p.memory_id, sum(t.wt * p.tf::float8 / (p.tf::float8 + 0.3::float8 + 0.0346::float8 * p.doclen))
--                FROM unnest(array['dagutor','elfeemusf','miel','veelgu'], array[1.1,2.2,3.3,4.4]::float8[]) t(term, wt)
--                JOIN mneme.bm25_postings p ON p.conversation_id = C AND p.term = t.term GROUP BY 1) x;
--   top 100:     SELECT count(*) FROM (SELECT p.memory_id, round(sum(t.wt * mneme._bm25_tf(p.tf, p.doclen, 1.2, 0.75, 26)) * 1e9) / 1e9 s
--                FROM <the same> GROUP BY 1 ORDER BY 2 DESC, 1 LIMIT 100) x;
--   _bm25_sums:  SELECT count(*) FROM (SELECT s.memory_id, round(s.score * 1e9) / 1e9 AS score FROM mneme._bm25_sums(ARRAY[C],
--                array['dagutor','elfeemusf','miel','veelgu'], array[1.1,2.2,3.3,4.4]::float8[], 1.2, 0.75, 26, null, null, null) s
--                ORDER BY 2 DESC, 1 LIMIT 100) x;
--   lookups:     SELECT count(*) FROM unnest(<1,000 memory ids of 'dagutor'>::uuid[]) c(id), unnest(array['veelgu','barru']) t(term),
--                LATERAL (SELECT p.tf FROM mneme.bm25_postings p WHERE p.conversation_id = C AND p.term = t.term
--                         AND p.memory_id = c.id OFFSET 0) p;
