-- =============================================================================
-- mneme on Citus, after the migrate's transaction (`mneme migrate` on a
-- distributed mneme, every time): what Citus does not propagate, made on
-- every worker. Not in the Citus layer (sql/citus/NNN-*.sql) because
-- run_command_on_workers opens connections of its own, which do not see
-- the migrate's uncommitted objects (the function behind the operator).
--
-- The array variant's operator mneme.<=> (real[], real[]): without it a
-- query on the distributed memories that orders by embedding <=> q (an
-- application's bare vector lookup) fails on the shards with "operator
-- does not exist: real[] mneme.<=> real[]". A worker added later gets it
-- from the next migrate. One row per worker: success and the result.
-- =============================================================================
SELECT w.nodename, w.nodeport, w.success, w.result
FROM run_command_on_workers($op$
    DO $do$
    BEGIN
        IF to_regtype('mneme.embedding') IS NOT NULL
           AND (SELECT t.typbasetype FROM pg_type t WHERE t.oid = 'mneme.embedding'::regtype) = 'real[]'::regtype
           AND NOT EXISTS (SELECT 1 FROM pg_operator o
                           WHERE o.oprnamespace = 'mneme'::regnamespace AND o.oprname = '<=>'
                             AND o.oprleft = 'real[]'::regtype AND o.oprright = 'real[]'::regtype) THEN
            CREATE OPERATOR mneme.<=> (LEFTARG = real[], RIGHTARG = real[],
                FUNCTION = mneme.cosine_distance, COMMUTATOR = OPERATOR(mneme.<=>));
            COMMENT ON OPERATOR mneme.<=> (real[], real[]) IS
                'Cosine distance on real[] (the array variant''s stand-in for pgvector''s <=>).';
        END IF;
    END
    $do$
$op$) w
