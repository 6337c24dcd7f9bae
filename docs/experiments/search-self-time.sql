-- =============================================================================
-- Experiment (not part of mneme): mneme.search's own statements (its self
-- time, without the functions it calls) over 200 searches (k 10) in one
-- session, with track_functions = all; queries of three words of the
-- first 200 memories (by id), the same each run (setseed). Run it as a
-- superuser on a database with memories (e.g. bench retrieve's kept one):
--   psql "postgres://.../mneme_bench_<id>" -f docs/experiments/search-self-time.sql
-- docs/performance.md quotes search's self time as a share of its total
-- (the share takes most of a loaded machine's slowdown out).
-- =============================================================================
SET track_functions = 'all';
SELECT setseed(0.53);
CREATE TEMP TABLE q AS
SELECT m.conversation_id AS conv,
       (SELECT string_agg(w, ' ') FROM (SELECT w FROM unnest(string_to_array(m.content, ' ')) w ORDER BY random() LIMIT 3) x) AS text
FROM (SELECT id FROM mneme.memories ORDER BY id LIMIT 200) s JOIN mneme.memories m ON m.id = s.id;
BEGIN;
SELECT count(*) FROM q, LATERAL mneme.search(q.conv, q.text, 10) s;
SELECT funcname, calls, round(total_time::numeric, 1) AS total_ms, round(self_time::numeric, 1) AS self_ms,
       round((100 * self_time / nullif(total_time, 0))::numeric, 1) AS self_pct
FROM pg_stat_xact_user_functions WHERE schemaname = 'mneme' ORDER BY funcname;
COMMIT;
