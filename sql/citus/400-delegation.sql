-- =============================================================================
-- mneme on Citus: the calls Citus runs on a worker. Applied only on a
-- distributed mneme, last (docs/scale.md).
-- =============================================================================

-- Delegation: a read that names one conversation runs on the worker that
-- holds it (create_distributed_function, routed by its first argument),
-- its statements there on local shards; with scope tenant or inside a
-- transaction block Citus runs it on the coordinator instead. retrieve and
-- the context record their pending review in the conversation's queue row,
-- on the same worker: one round trip too.
SELECT create_distributed_function(p.oid::regprocedure, '$1', colocate_with := 'mneme.memories')
FROM pg_catalog.pg_proc p
WHERE p.pronamespace = 'mneme'::regnamespace
  AND p.proname IN ('search', 'bm25_search', 'vector_search', 'context_items', 'context_candidates', 'retrieve', 'retrieve_markdown', 'context');

-- The array variant's cosine distance on every worker (by itself Citus does
-- not propagate it; made a distributed function without a distribution
-- argument, it is). Its operator mneme.<=>, which Citus does not propagate
-- at all, is made on the workers after the migrate's transaction
-- (sql/citus/workers.sql).
SELECT create_distributed_function('mneme.cosine_distance(real[], real[])')
WHERE mneme.setting('vector_variant') #>> '{}' = 'array';
