-- The queries a review row quotes move from review_log.matched_queries
-- into mneme.review_queries (goose 00180), beside their keys: each key
-- row gains the query's text and its place in the row's list (ord), and
-- the review row holds no query any more (issue 47). Erasing a query is
-- then deleting its key rows; no review row is rewritten. In the bench
-- tenant (100,000 memories, 200,000 review rows) erase_conversation of
-- 10,000 memories rewrote the 180,000 review rows of other memories that
-- quoted one of its 21,000 queries: 2.1 s of its 4.0 to 4.5 s.
-- A row's list: its distinct texts in the order they first appear (NULL
-- elements quote nothing and go); ord is the place of that first
-- appearance (1-based). Writers insert the rows themselves
-- (mneme.apply_review, import); readers order by ord
-- (mneme.memory_reviews, export).
-- On a distributed mneme (Citus) both tables are distributed by
-- conversation, colocated: the fill is an INSERT ... SELECT grouped by
-- the distribution column, which Citus pushes down to each shard; on a
-- database an older release distributed, review_queries is still local
-- here (goose 00180 made it in the same run) and Citus reads review_log
-- into it through the coordinator.
-- Numbered goose migration: applied once, never edited after release.

-- +goose Up
-- The triggers that derived the keys from matched_queries (sql/435-erase-
-- refs.sql creates what is still needed); the update trigger's WHEN names
-- the column.
DROP TRIGGER IF EXISTS review_log_queries_update ON mneme.review_log;
DROP TRIGGER IF EXISTS review_log_queries_insert ON mneme.review_log;
DROP TRIGGER IF EXISTS review_log_queries ON mneme.review_log;
-- The erase helper that rewrote review rows (sql/435-erase-refs.sql makes
-- its successor, which takes no excepted memories: it rewrites nothing).
DROP FUNCTION IF EXISTS mneme._strip_review_queries(text[], text[], uuid[]);
ALTER TABLE mneme.review_queries ADD COLUMN query text;
ALTER TABLE mneme.review_queries ADD COLUMN ord int;
ALTER TABLE mneme.review_queries NO FORCE ROW LEVEL SECURITY;
ALTER TABLE mneme.review_log NO FORCE ROW LEVEL SECURITY;
DELETE FROM mneme.review_queries;
INSERT INTO mneme.review_queries (conversation_id, review_log_id, tenant_id, query_key, query, ord)
SELECT l.conversation_id, l.id, l.tenant_id, md5(u.q)::uuid, u.q, min(u.o)::int
FROM mneme.review_log l, unnest(l.matched_queries) WITH ORDINALITY AS u(q, o)
WHERE u.q IS NOT NULL
GROUP BY l.conversation_id, l.id, l.tenant_id, u.q;
ALTER TABLE mneme.review_queries ALTER COLUMN query SET NOT NULL;
ALTER TABLE mneme.review_queries ALTER COLUMN ord SET NOT NULL;
ALTER TABLE mneme.review_queries ADD CONSTRAINT review_queries_key_is_md5 CHECK (query_key = md5(query)::uuid);
ALTER TABLE mneme.review_queries ADD CONSTRAINT review_queries_ord_positive CHECK (ord > 0);
ALTER TABLE mneme.review_log DROP COLUMN matched_queries;
ALTER TABLE mneme.review_queries FORCE ROW LEVEL SECURITY;
ALTER TABLE mneme.review_log FORCE ROW LEVEL SECURITY;

-- +goose Down
-- (the SQL layer of the release rolled back to creates its triggers and
-- mneme._strip_review_queries(text[], text[], uuid[]) again)
DROP FUNCTION IF EXISTS mneme._strip_review_queries(text[], text[]);
ALTER TABLE mneme.review_log ADD COLUMN matched_queries text[] NOT NULL DEFAULT '{}';
ALTER TABLE mneme.review_queries NO FORCE ROW LEVEL SECURITY;
ALTER TABLE mneme.review_log NO FORCE ROW LEVEL SECURITY;
UPDATE mneme.review_log l
SET matched_queries = s.queries
FROM (SELECT r.conversation_id, r.review_log_id, array_agg(r.query ORDER BY r.ord) AS queries
      FROM mneme.review_queries r GROUP BY r.conversation_id, r.review_log_id) s
WHERE l.conversation_id = s.conversation_id AND l.id = s.review_log_id;
ALTER TABLE mneme.review_queries DROP CONSTRAINT review_queries_ord_positive;
ALTER TABLE mneme.review_queries DROP CONSTRAINT review_queries_key_is_md5;
ALTER TABLE mneme.review_queries DROP COLUMN ord;
ALTER TABLE mneme.review_queries DROP COLUMN query;
ALTER TABLE mneme.review_queries FORCE ROW LEVEL SECURITY;
ALTER TABLE mneme.review_log FORCE ROW LEVEL SECURITY;
