-- =============================================================================
-- mneme on Citus: nested distributed execution allowed in every PL/pgSQL
-- function of schema mneme, chosen by language. Applied only on a
-- distributed mneme, last of sql/citus/NNN-*.sql (a CREATE OR REPLACE
-- after it would reset the setting).
--
-- Citus pushes a function called in a query on a distributed table into
-- the query on the shard (mneme.setting in search's read of its
-- candidates, the row policies' functions), and by default refuses that
-- function's own queries there ("cannot execute a distributed query from a
-- query on a shard"). PL/pgSQL is where mneme's queries are (its SQL
-- functions that read tables are PL/pgSQL on Citus: sql/citus/200-*.sql).
-- =============================================================================
DO $nested$
DECLARE
    f regprocedure;
BEGIN
    FOR f IN
        SELECT p.oid::regprocedure FROM pg_catalog.pg_proc p
        WHERE p.pronamespace = 'mneme'::regnamespace AND p.prokind = 'f'
          AND p.prolang = (SELECT l.oid FROM pg_catalog.pg_language l WHERE l.lanname = 'plpgsql')
    LOOP
        EXECUTE format('ALTER FUNCTION %s SET citus.allow_nested_distributed_execution = on', f);
    END LOOP;
END
$nested$;
