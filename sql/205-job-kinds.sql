-- Code generated from sidecar/jobs/kinds.go (jobs.Kinds) by
-- go test ./sidecar/jobs -run TestKindsSQL -update. DO NOT EDIT.
--
-- The job kinds the sidecar handles and the payload each handler reads (the
-- table is goose 00056's; its rows are written here, so a release that adds
-- a kind or changes a rule changes them on migrate), and one payload builder
-- per kind: every SQL site that enqueues a kind builds its payload with
-- mneme._<kind>_payload. Each rule is read off the fields of the kind's Go
-- type, each with its type and range: an id is a whole JSON number from 1 to
-- 2^63-1 (bigint), a uuid a uuid string, a time an RFC 3339 string, a flag a
-- boolean. A payload a rule lets through never fails its handler's
-- decoding, nor a cast in SQL that reads it.

WITH kinds (kind, needs_conversation, payload_rule, payload_hint, description) AS (VALUES
    ('segment', true,
     '$.type() == "object" &&
      !exists($.reason.type() ? (@ != "string")) &&
      exists($.check) &&
      !exists($.check.type() ? (@ != "boolean")) &&
      !exists($.through_message_id.type() ? (@ != "number")) &&
      !exists($.through_message_id ? (@ < 1 || @ > 9223372036854775807 || @ != @.floor())) &&
      !exists($.trigger_message_id.type() ? (@ != "number")) &&
      !exists($.trigger_message_id ? (@ < 1 || @ > 9223372036854775807 || @ != @.floor())) &&
      !exists($.next_through_message_id.type() ? (@ != "number")) &&
      !exists($.next_through_message_id ? (@ < 1 || @ > 9223372036854775807 || @ != @.floor())) &&
      ($.check == true || exists($.through_message_id))',
     '$.reason: string (optional); $.check: boolean; $.through_message_id: integer id (1 to 9223372036854775807) (optional); $.trigger_message_id: integer id (1 to 9223372036854775807) (optional); $.next_through_message_id: integer id (1 to 9223372036854775807) (optional); through_message_id is required when check is false',
     'cut the conversation''s queued messages into episodes and store them as memories'),
    ('review', true,
     '$.type() == "object" &&
      exists($.reviews) &&
      !exists($.reviews.type() ? (@ != "array")) &&
      !exists($.reviews[*].type() ? (@ != "object")) &&
      !exists($.reviews[*].query.type() ? (@ != "string")) &&
      !exists($.reviews[*].memory_ids.type() ? (@ != "array")) &&
      !exists($.reviews[*].memory_ids[*].type() ? (@ != "string")) &&
      !exists($.context_message_ids.type() ? (@ != "array")) &&
      !exists($.context_message_ids[*].type() ? (@ != "number")) &&
      !exists($.context_message_ids[*] ? (@ < 1 || @ > 9223372036854775807 || @ != @.floor())) &&
      !exists($.context.type() ? (@ != "array")) &&
      !exists($.context[*].type() ? (@ != "object")) &&
      !exists($.context[*].id.type() ? (@ != "number")) &&
      !exists($.context[*].id ? (@ < 1 || @ > 9223372036854775807 || @ != @.floor())) &&
      !exists($.context[*].role.type() ? (@ != "string")) &&
      !exists($.context[*].content.type() ? (@ != "string")) &&
      !exists($.context[*].at.type() ? (@ != "string")) &&
      !exists($.context[*].at ? (!(@ like_regex "^[0-9]{4}-(0[1-9]|1[0-2])-(0[1-9]|[12][0-9]|3[01])T([01][0-9]|2[0-3]):[0-5][0-9]:[0-5][0-9](\\.[0-9]{1,9})?(Z|[+-]([01][0-9]|2[0-3]):[0-5][0-9])$"))) &&
      exists($.reviewed_at) &&
      !exists($.reviewed_at.type() ? (@ != "string")) &&
      !exists($.reviewed_at ? (!(@ like_regex "^[0-9]{4}-(0[1-9]|1[0-2])-(0[1-9]|[12][0-9]|3[01])T([01][0-9]|2[0-3]):[0-5][0-9]:[0-5][0-9](\\.[0-9]{1,9})?(Z|[+-]([01][0-9]|2[0-3]):[0-5][0-9])$")))',
     '$.reviews: array; $.reviews[*]: object (optional); $.reviews[*].query: string (optional); $.reviews[*].memory_ids: array (optional); $.reviews[*].memory_ids[*]: string (optional); $.context_message_ids: array (optional); $.context_message_ids[*]: integer id (1 to 9223372036854775807) (optional); $.context: array (optional); $.context[*]: object (optional); $.context[*].id: integer id (1 to 9223372036854775807) (optional); $.context[*].role: string (optional); $.context[*].content: string (optional); $.context[*].at: RFC 3339 time (optional); $.reviewed_at: RFC 3339 time',
     'rate the memories a retrieval returned by their use in the conversation since, and move their FSRS state'),
    ('revise', true,
     '$.type() == "object" &&
      exists($.memory_id) &&
      !exists($.memory_id.type() ? (@ != "string")) &&
      !exists($.memory_id ? (!(@ like_regex "^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$" flag "i") || @ == "00000000-0000-0000-0000-000000000000"))',
     '$.memory_id: uuid; not the nil uuid',
     'compare a new fact with what the conversation believes: add, merge, supersede or invalidate'),
    ('consolidate', true,
     '$.type() == "object" &&
      !exists($.reason.type() ? (@ != "string"))',
     '$.reason: string (optional)',
     'look again at the active facts of the conversation''s scope across episodes and time: supersede what a later statement replaced, merge duplicates'),
    ('cleanup', false,
     '$.type() == "object"',
     'any object (the handler reads no field)',
     'the lifecycle policy (mneme.cleanup): inactivate faded memories, record expired ones, purge long-inactive ones and prune done jobs, as the settings say'),
    ('noop', false,
     '$.type() == "object"',
     'any object',
     'nothing: benchmarks and smoke tests')
), gone AS (  -- a kind no longer handled
    DELETE FROM mneme.job_kinds j WHERE j.kind NOT IN (SELECT kinds.kind FROM kinds)
)
INSERT INTO mneme.job_kinds AS k (kind, needs_conversation, payload_rule, payload_hint, description)
SELECT kinds.kind, kinds.needs_conversation, kinds.payload_rule::jsonpath, kinds.payload_hint, kinds.description FROM kinds
ON CONFLICT (kind) DO UPDATE SET needs_conversation = EXCLUDED.needs_conversation, payload_rule = EXCLUDED.payload_rule,
    payload_hint = EXCLUDED.payload_hint, description = EXCLUDED.description
WHERE (k.needs_conversation, k.payload_rule::text, k.payload_hint, k.description)
      IS DISTINCT FROM (EXCLUDED.needs_conversation, EXCLUDED.payload_rule::text, EXCLUDED.payload_hint, EXCLUDED.description);

CREATE OR REPLACE FUNCTION mneme._segment_payload("reason" text, "check" boolean, "through_message_id" bigint, "trigger_message_id" bigint)
RETURNS jsonb
LANGUAGE plpgsql IMMUTABLE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_payload jsonb;
BEGIN
    IF _segment_payload."check" IS NULL THEN
        RAISE EXCEPTION 'segment payload: check must not be NULL' USING ERRCODE = '22004';
    END IF;
    SELECT coalesce(jsonb_object_agg(f.k, f.v), '{}'::jsonb) INTO v_payload
    FROM (VALUES ('reason', to_jsonb(_segment_payload."reason")),
                 ('check', to_jsonb(_segment_payload."check")),
                 ('through_message_id', to_jsonb(_segment_payload."through_message_id")),
                 ('trigger_message_id', to_jsonb(_segment_payload."trigger_message_id"))) AS f(k, v)
    WHERE f.v IS NOT NULL;
    IF NOT jsonb_path_match(v_payload, '($.check == true || exists($.through_message_id))') THEN
        RAISE EXCEPTION 'segment payload: through_message_id is required when check is false' USING ERRCODE = '22004';
    END IF;
    IF NOT jsonb_path_match(v_payload, '$.type() == "object" &&
         !exists($.reason.type() ? (@ != "string")) &&
         exists($.check) &&
         !exists($.check.type() ? (@ != "boolean")) &&
         !exists($.through_message_id.type() ? (@ != "number")) &&
         !exists($.through_message_id ? (@ < 1 || @ > 9223372036854775807 || @ != @.floor())) &&
         !exists($.trigger_message_id.type() ? (@ != "number")) &&
         !exists($.trigger_message_id ? (@ < 1 || @ > 9223372036854775807 || @ != @.floor())) &&
         !exists($.next_through_message_id.type() ? (@ != "number")) &&
         !exists($.next_through_message_id ? (@ < 1 || @ > 9223372036854775807 || @ != @.floor())) &&
         ($.check == true || exists($.through_message_id))') THEN
        RAISE EXCEPTION 'segment payload does not match its rule: %', left(v_payload::text, 200)
            USING ERRCODE = '22023', HINT = '$.reason: string (optional); $.check: boolean; $.through_message_id: integer id (1 to 9223372036854775807) (optional); $.trigger_message_id: integer id (1 to 9223372036854775807) (optional); $.next_through_message_id: integer id (1 to 9223372036854775807) (optional); through_message_id is required when check is false';
    END IF;
    RETURN v_payload;
END
$$;
COMMENT ON FUNCTION mneme._segment_payload(text, boolean, bigint, bigint) IS
    'Internal: a segment job''s payload {reason, check, through_message_id, trigger_message_id} (Go: jobs.SegmentArgs; generated from sidecar/jobs/kinds.go); an optional field given NULL is left out, the result is checked against the kind''s rule.';

CREATE OR REPLACE FUNCTION mneme._review_payload("reviews" jsonb, "reviewed_at" timestamptz, "context_message_ids" bigint[])
RETURNS jsonb
LANGUAGE plpgsql STABLE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_payload jsonb;
BEGIN
    IF _review_payload."reviews" IS NULL THEN
        RAISE EXCEPTION 'review payload: reviews must not be NULL' USING ERRCODE = '22004';
    END IF;
    IF _review_payload."reviewed_at" IS NULL THEN
        RAISE EXCEPTION 'review payload: reviewed_at must not be NULL' USING ERRCODE = '22004';
    END IF;
    IF array_position(_review_payload."context_message_ids", NULL) IS NOT NULL THEN
        RAISE EXCEPTION 'review payload: context_message_ids must not hold NULL' USING ERRCODE = '22004';
    END IF;
    SELECT coalesce(jsonb_object_agg(f.k, f.v), '{}'::jsonb) INTO v_payload
    FROM (VALUES ('reviews', to_jsonb(_review_payload."reviews")),
                 ('reviewed_at', to_jsonb(_review_payload."reviewed_at")),
                 ('context_message_ids', to_jsonb(_review_payload."context_message_ids"))) AS f(k, v)
    WHERE f.v IS NOT NULL;
    IF NOT jsonb_path_match(v_payload, '$.type() == "object" &&
         exists($.reviews) &&
         !exists($.reviews.type() ? (@ != "array")) &&
         !exists($.reviews[*].type() ? (@ != "object")) &&
         !exists($.reviews[*].query.type() ? (@ != "string")) &&
         !exists($.reviews[*].memory_ids.type() ? (@ != "array")) &&
         !exists($.reviews[*].memory_ids[*].type() ? (@ != "string")) &&
         !exists($.context_message_ids.type() ? (@ != "array")) &&
         !exists($.context_message_ids[*].type() ? (@ != "number")) &&
         !exists($.context_message_ids[*] ? (@ < 1 || @ > 9223372036854775807 || @ != @.floor())) &&
         !exists($.context.type() ? (@ != "array")) &&
         !exists($.context[*].type() ? (@ != "object")) &&
         !exists($.context[*].id.type() ? (@ != "number")) &&
         !exists($.context[*].id ? (@ < 1 || @ > 9223372036854775807 || @ != @.floor())) &&
         !exists($.context[*].role.type() ? (@ != "string")) &&
         !exists($.context[*].content.type() ? (@ != "string")) &&
         !exists($.context[*].at.type() ? (@ != "string")) &&
         !exists($.context[*].at ? (!(@ like_regex "^[0-9]{4}-(0[1-9]|1[0-2])-(0[1-9]|[12][0-9]|3[01])T([01][0-9]|2[0-3]):[0-5][0-9]:[0-5][0-9](\\.[0-9]{1,9})?(Z|[+-]([01][0-9]|2[0-3]):[0-5][0-9])$"))) &&
         exists($.reviewed_at) &&
         !exists($.reviewed_at.type() ? (@ != "string")) &&
         !exists($.reviewed_at ? (!(@ like_regex "^[0-9]{4}-(0[1-9]|1[0-2])-(0[1-9]|[12][0-9]|3[01])T([01][0-9]|2[0-3]):[0-5][0-9]:[0-5][0-9](\\.[0-9]{1,9})?(Z|[+-]([01][0-9]|2[0-3]):[0-5][0-9])$")))') THEN
        RAISE EXCEPTION 'review payload does not match its rule: %', left(v_payload::text, 200)
            USING ERRCODE = '22023', HINT = '$.reviews: array; $.reviews[*]: object (optional); $.reviews[*].query: string (optional); $.reviews[*].memory_ids: array (optional); $.reviews[*].memory_ids[*]: string (optional); $.context_message_ids: array (optional); $.context_message_ids[*]: integer id (1 to 9223372036854775807) (optional); $.context: array (optional); $.context[*]: object (optional); $.context[*].id: integer id (1 to 9223372036854775807) (optional); $.context[*].role: string (optional); $.context[*].content: string (optional); $.context[*].at: RFC 3339 time (optional); $.reviewed_at: RFC 3339 time';
    END IF;
    RETURN v_payload;
END
$$;
COMMENT ON FUNCTION mneme._review_payload(jsonb, timestamptz, bigint[]) IS
    'Internal: a review job''s payload {reviews, reviewed_at, context_message_ids} (Go: jobs.ReviewArgs; generated from sidecar/jobs/kinds.go); an optional field given NULL is left out, the result is checked against the kind''s rule.';

CREATE OR REPLACE FUNCTION mneme._revise_payload("memory_id" uuid)
RETURNS jsonb
LANGUAGE plpgsql IMMUTABLE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_payload jsonb;
BEGIN
    IF _revise_payload."memory_id" IS NULL THEN
        RAISE EXCEPTION 'revise payload: memory_id must not be NULL' USING ERRCODE = '22004';
    END IF;
    SELECT coalesce(jsonb_object_agg(f.k, f.v), '{}'::jsonb) INTO v_payload
    FROM (VALUES ('memory_id', to_jsonb(_revise_payload."memory_id"))) AS f(k, v)
    WHERE f.v IS NOT NULL;
    IF NOT jsonb_path_match(v_payload, '$.type() == "object" &&
         exists($.memory_id) &&
         !exists($.memory_id.type() ? (@ != "string")) &&
         !exists($.memory_id ? (!(@ like_regex "^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$" flag "i") || @ == "00000000-0000-0000-0000-000000000000"))') THEN
        RAISE EXCEPTION 'revise payload does not match its rule: %', left(v_payload::text, 200)
            USING ERRCODE = '22023', HINT = '$.memory_id: uuid; not the nil uuid';
    END IF;
    RETURN v_payload;
END
$$;
COMMENT ON FUNCTION mneme._revise_payload(uuid) IS
    'Internal: a revise job''s payload {memory_id} (Go: jobs.ReviseArgs; generated from sidecar/jobs/kinds.go); an optional field given NULL is left out, the result is checked against the kind''s rule.';

CREATE OR REPLACE FUNCTION mneme._consolidate_payload("reason" text)
RETURNS jsonb
LANGUAGE plpgsql IMMUTABLE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_payload jsonb;
BEGIN
    SELECT coalesce(jsonb_object_agg(f.k, f.v), '{}'::jsonb) INTO v_payload
    FROM (VALUES ('reason', to_jsonb(_consolidate_payload."reason"))) AS f(k, v)
    WHERE f.v IS NOT NULL;
    IF NOT jsonb_path_match(v_payload, '$.type() == "object" &&
         !exists($.reason.type() ? (@ != "string"))') THEN
        RAISE EXCEPTION 'consolidate payload does not match its rule: %', left(v_payload::text, 200)
            USING ERRCODE = '22023', HINT = '$.reason: string (optional)';
    END IF;
    RETURN v_payload;
END
$$;
COMMENT ON FUNCTION mneme._consolidate_payload(text) IS
    'Internal: a consolidate job''s payload {reason} (Go: jobs.ConsolidateArgs; generated from sidecar/jobs/kinds.go); an optional field given NULL is left out, the result is checked against the kind''s rule.';

CREATE OR REPLACE FUNCTION mneme._cleanup_payload()
RETURNS jsonb
LANGUAGE plpgsql IMMUTABLE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    RETURN '{}'::jsonb;
END
$$;
COMMENT ON FUNCTION mneme._cleanup_payload() IS
    'Internal: a cleanup job''s payload {} (Go: jobs.CleanupArgs; generated from sidecar/jobs/kinds.go); the handler reads no field.';

CREATE OR REPLACE FUNCTION mneme._noop_payload()
RETURNS jsonb
LANGUAGE plpgsql IMMUTABLE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    RETURN '{}'::jsonb;
END
$$;
COMMENT ON FUNCTION mneme._noop_payload() IS
    'Internal: a noop job''s payload {} (Go: jobs.NoopArgs; generated from sidecar/jobs/kinds.go); the handler reads no field.';
