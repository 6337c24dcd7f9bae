-- One parameter naming style for the SQL API: parameters carry
-- their bare names (conversation_id, memory_id, k, at), no p_ prefix, and
-- internal functions start with an underscore (requeue_job_ became
-- _requeue_job). PostgreSQL cannot rename a parameter with CREATE OR
-- REPLACE, so the functions with the old names are dropped here; the SQL
-- layer, re-applied right after the migrations, creates them with the new
-- names (and the view job_stats, dropped with them where it depends on one).
-- Numbered goose migration: applied once, never edited after release.

-- +goose Up
-- +goose StatementBegin
DO $$
DECLARE
    f regprocedure;
BEGIN
    FOR f IN
        SELECT p.oid::regprocedure FROM pg_proc p
        WHERE p.pronamespace = 'mneme'::regnamespace
          AND (p.proname = 'requeue_job_'
               OR EXISTS (SELECT 1 FROM unnest(p.proargnames) AS a(n) WHERE a.n LIKE 'p\_%'))
    LOOP
        EXECUTE format('DROP FUNCTION %s CASCADE', f);
    END LOOP;
END
$$;
-- +goose StatementEnd

-- +goose Down
-- The previous release's SQL layer re-creates its functions with its names.
SELECT 1;
