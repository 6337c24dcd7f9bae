-- mneme._is_worker(), which every row policy calls first since goose
-- 00060, without SET search_path: plain SQL without SET is inlined into the
-- policy, so a session that is not the sidecar's pays a catalog lookup per
-- statement rather than a function call (measured: add_message as a
-- mneme_app login 249 to 274 us of CPU a call with the function, 214 to
-- 232 inlined, 212 to 229 with the tenant tested first). Its body names
-- pg_catalog explicitly; session_user is a keyword.
-- Numbered goose migration: applied once, never edited after release.

-- +goose Up
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION mneme._is_worker()
RETURNS boolean
LANGUAGE sql STABLE PARALLEL SAFE
AS $$ SELECT pg_catalog.pg_has_role(session_user, 'mneme_worker', 'MEMBER') $$;
-- +goose StatementEnd

-- +goose Down
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION mneme._is_worker()
RETURNS boolean
LANGUAGE sql STABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$ SELECT pg_catalog.pg_has_role(session_user, 'mneme_worker', 'MEMBER') $$;
-- +goose StatementEnd
