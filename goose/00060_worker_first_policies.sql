-- The row policies test whether the session is the sidecar's before they
-- compute the tenant: the sidecar (and an owner that is a member of
-- mneme_worker) then never runs mneme._tenant(), which reads the login
-- bindings, at every statement (12 calls a message on the ingest path).
-- The same rows pass either way: the two tests are ORed.
-- Numbered goose migration: applied once, never edited after release.

-- +goose Up
-- +goose StatementBegin
DO $$
DECLARE
    t text;
BEGIN
    FOREACH t IN ARRAY ARRAY['message_queue', 'messages', 'memories', 'jobs', 'review_log', 'memory_events'] LOOP
        EXECUTE format('ALTER POLICY tenant_rows ON mneme.%I '
                       'USING ((SELECT mneme._is_worker()) OR tenant_id = (SELECT mneme._tenant())) '
                       'WITH CHECK ((SELECT mneme._is_worker()) OR tenant_id = (SELECT mneme._tenant()))', t);
    END LOOP;
END
$$;
-- +goose StatementEnd

-- +goose Down
-- +goose StatementBegin
DO $$
DECLARE
    t text;
BEGIN
    FOREACH t IN ARRAY ARRAY['message_queue', 'messages', 'memories', 'jobs', 'review_log', 'memory_events'] LOOP
        EXECUTE format('ALTER POLICY tenant_rows ON mneme.%I '
                       'USING (tenant_id = (SELECT mneme._tenant()) OR (SELECT mneme._is_worker())) '
                       'WITH CHECK (tenant_id = (SELECT mneme._tenant()) OR (SELECT mneme._is_worker()))', t);
    END LOOP;
END
$$;
-- +goose StatementEnd
