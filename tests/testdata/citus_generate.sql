-- =============================================================================
-- The generator of sql/citus/100-generated.sql (TestCitusGeneratedUpToDate,
-- tests/citus_layer_test.go; `go test ./tests -run TestCitusGeneratedUpToDate
-- -update` rewrites the file). Run on a one-server mneme inside a
-- transaction that is rolled back: it changes the functions below in place,
-- and the test then writes out every function whose definition changed
-- (pg_get_functiondef). Nothing of this runs at migrate time: a migrate of
-- a distributed mneme applies the checked-in file, which a reader can read.
--
-- What it makes, and why (docs/scale.md, "What --citus does"):
--  1. Every SQL-language function of schema mneme that reads or writes a
--     table, as PL/pgSQL with the same body. PostgreSQL inlines a SQL
--     function into the calling query after Citus's planner has looked at
--     it, so the inlined query reads the node's own (empty) copy of a
--     distributed table (measured: bm25_search on the coordinator returned
--     no rows, no error); a SQL function that is not inlined fails
--     ("parameterized queries for SQL functions referencing distributed
--     tables are not supported"). PL/pgSQL's queries are planned by Citus
--     one by one.
--  2. The calls by job id compare the job's conversation with = (Citus
--     routes only an equality; there every job has a conversation, the nil
--     one at least), where one server says IS NOT DISTINCT FROM (a cleanup
--     job has none).
--  3. Nine statements of the context and BM25 in the forms Citus plans
--     (on one server they keep theirs, whose plans
--     TestSmallConversationCostIgnoresTheRest holds).
--  4. Every API function (SECURITY DEFINER, executable by mneme_app,
--     mneme_worker or mneme_admin) that reaches a distributed table calls
--     mneme._enter(conversation_id) in its first declaration.
--  5. citus.allow_nested_distributed_execution = on in every PL/pgSQL
--     function that reaches a table (a reference table too): the temporary
--     table citus_nested lists them, and the file sets it with ALTER
--     FUNCTION after the definitions. Citus pushes a function called in a
--     query on a distributed table into the query on the shard
--     (mneme.setting in search's read of its candidates), and by default
--     refuses that function's own queries there ("cannot execute a
--     distributed query from a query on a shard").
-- Functions written whole in sql/citus/ (the Citus forms of the row
-- triggers' functions, 300-triggers.sql and 310-erase-refs.sql, _tenant, _is_worker, _is_operator, _turn_distances, whose body
-- differs by vector variant) are left out, and vector_index_plan, which
-- reads tables in the pgvector variant only (sql/citus/200-functions.sql
-- sets its nested execution in both).
-- =============================================================================
DO $gen$
DECLARE
    f     record;
    r     record;
    def   text;
    body  text;
    -- the tables sql/citus/distribute.sql distributes, and its reference tables
    v_hash_re  text := 'mneme\.(message_queue|messages|memories|bm25_docs|bm25_postings|bm25_terms|bm25_stats|review_log|jobs|memory_events|llm_calls|job_refs|review_queries)\M';
    v_whole    text[] := ARRAY['memories_bm25_row_trg', 'memories_events_row_trg', 'review_log_events_row_trg',
                               'jobs_set_aside_trg', 'jobs_refs_trg', 'review_log_queries_trg', '_tenant', '_is_worker', '_is_operator', '_turn_distances', 'vector_index_plan'];
    v_reached  oid[];
    v_more     oid[];
BEGIN
    -- 1. SQL functions over tables as PL/pgSQL
    FOR f IN
        SELECT p.oid, p.proretset, p.prosrc, p.prorettype
        FROM pg_catalog.pg_proc p
        WHERE p.pronamespace = 'mneme'::regnamespace
          AND p.prolang = (SELECT l.oid FROM pg_catalog.pg_language l WHERE l.lanname = 'sql')
          AND p.prosrc ~ 'mneme\.(memories|messages|message_queue|jobs|review_log|memory_events|bm25_[a-z]+|settings|tenants|tenant_logins|job_kinds|job_turns|llm_calls|llm_usage_days)\M'
          AND NOT p.proname = ANY (v_whole)
    LOOP
        body := regexp_replace(f.prosrc, ';\s*$', '');
        IF f.proretset THEN
            body := format(E'#variable_conflict use_column\nBEGIN\nRETURN QUERY %s;\nEND', body);
        ELSE
            body := format(E'#variable_conflict use_column\nDECLARE r %s;\nBEGIN\n%s\nINTO r;\nRETURN r;\nEND',
                           f.prorettype::regtype, body);
        END IF;
        def := pg_catalog.pg_get_functiondef(f.oid);
        def := regexp_replace(def, E'\n LANGUAGE sql\n', E'\n LANGUAGE plpgsql\n');
        def := substr(def, 1, strpos(def, 'AS $function$') - 1) || 'AS ' || quote_literal(body);
        EXECUTE def;
    END LOOP;

    -- 2. = for the calls by job id
    FOR f IN
        SELECT p.oid FROM pg_catalog.pg_proc p
        WHERE p.pronamespace = 'mneme'::regnamespace
          AND p.prosrc ~ 'IS NOT DISTINCT FROM v_[a-z]+_conv\M'
          AND NOT p.proname = ANY (v_whole)
    LOOP
        def := pg_catalog.pg_get_functiondef(f.oid);
        EXECUTE regexp_replace(def, 'IS NOT DISTINCT FROM (v_[a-z]+_conv)\M', '= \1', 'g');
    END LOOP;

    -- 3. the statements Citus plans in another form
    FOR r IN
        SELECT * FROM (VALUES
            ('mneme._context_anchors(uuid, text, real[], timestamptz, timestamptz, timestamptz, text, uuid[])'::regprocedure,
             'the idf query', $old$
        SELECT q.term, mneme._bm25_weight(v_n, d.df, v_k1) AS wt
        FROM unnest(v_terms) AS q(term), LATERAL (
            SELECT sum(t.df) AS df FROM unnest(v_convs) AS c(id), LATERAL (
                SELECT t.df FROM mneme.bm25_terms t WHERE t.conversation_id = c.id AND t.term = q.term) t) d
        WHERE d.df > 0$old$, $new$
        SELECT d.term, mneme._bm25_weight(v_n, d.df, v_k1) AS wt
        FROM (SELECT t.term, sum(t.df) AS df FROM mneme.bm25_terms t
              WHERE t.conversation_id = ANY (v_convs) AND t.term = ANY (v_terms)
              GROUP BY t.term) d
        WHERE d.df > 0$new$),
            ('mneme.context_items(uuid, text, int, real[], timestamptz, timestamptz, timestamptz, text)'::regprocedure,
             'the newest-first order', $old$
        v_order := ARRAY(SELECT u.o FROM unnest(v_order) WITH ORDINALITY AS u(o, n)
                         ORDER BY coalesce((SELECT max(msg.created_at) FROM mneme.messages msg
                                            WHERE msg.id = ANY ((v_slots[u.o]).message_ids)),
                                           (SELECT coalesce(m.source_last_at, m.created_at) FROM mneme.memories m
                                            WHERE m.id = (v_slots[u.o]).memory_id)) DESC, u.n);$old$, $new$
        v_order := ARRAY(SELECT u.o FROM unnest(v_order) WITH ORDINALITY AS u(o, n)
                         LEFT JOIN (SELECT x.o, max(msg.created_at) AS at
                                    FROM unnest(v_order) AS x(o)
                                    JOIN mneme.messages msg ON msg.id = ANY ((v_slots[x.o]).message_ids)
                                                           AND msg.conversation_id = ANY (v_convs)
                                    GROUP BY x.o) t ON t.o = u.o
                         LEFT JOIN (SELECT x.o, coalesce(m.source_last_at, m.created_at) AS at
                                    FROM unnest(v_order) AS x(o)
                                    JOIN mneme.memories m ON m.id = (v_slots[x.o]).memory_id
                                                           AND m.conversation_id = ANY (v_convs)) f ON f.o = u.o
                         ORDER BY coalesce(t.at, f.at) DESC, u.n);$new$),
            ('mneme._bm25_sums(uuid[], text[], float8[], float8, float8, float8, uuid[], timestamptz, timestamptz)'::regprocedure,
             'the postings read', $old$
    FROM unnest($2, $3) AS t(term, wt), unnest($1) AS c(id), LATERAL (
        SELECT p.memory_id, p.tf, p.doclen FROM mneme.bm25_postings p
        WHERE p.conversation_id = c.id AND p.term = t.term) p
    WHERE ($7 IS NULL OR p.memory_id <> ALL ($7))
      AND (($8 IS NULL AND $9 IS NULL)
           OR EXISTS (SELECT 1 FROM mneme.memories m WHERE m.id = p.memory_id$old$, $new$
    FROM unnest($2, $3) AS t(term, wt), (
        SELECT p.conversation_id, p.memory_id, p.term, p.tf, p.doclen FROM mneme.bm25_postings p
        WHERE p.conversation_id = ANY ($1) AND p.term = ANY ($2)) p
    WHERE p.term = t.term AND ($7 IS NULL OR p.memory_id <> ALL ($7))
      AND (($8 IS NULL AND $9 IS NULL)
           OR EXISTS (SELECT 1 FROM mneme.memories m WHERE m.id = p.memory_id AND m.conversation_id = p.conversation_id$new$),
            ('mneme._bm25_search(uuid[], text, int, timestamptz, timestamptz)'::regprocedure,
             'the terms'' statistics', $old$
        FROM (SELECT DISTINCT u.term FROM unnest(tsvector_to_array(mneme.bm25_tsvector(_bm25_search.query))) AS u(term)) q,
             unnest(v_ids) AS c(id), LATERAL (
                SELECT t.df, t.max_tf, t.min_len_per_tf FROM mneme.bm25_terms t
                WHERE t.conversation_id = c.id AND t.term = q.term) bt$old$, $new$
        FROM (SELECT DISTINCT u.term FROM unnest(tsvector_to_array(mneme.bm25_tsvector(_bm25_search.query))) AS u(term)) q
        JOIN (SELECT t.term, t.df, t.max_tf, t.min_len_per_tf FROM mneme.bm25_terms t
              WHERE t.conversation_id = ANY (v_ids)
                AND t.term = ANY (tsvector_to_array(mneme.bm25_tsvector(_bm25_search.query)))) bt ON bt.term = q.term$new$),
            -- The expired memories' postings, counted per term in one
            -- read (Citus refuses the subqueries correlated with the term).
            ('mneme._bm25_search(uuid[], text, int, timestamptz, timestamptz)'::regprocedure,
             'the expired memories'' df', $old$
        SELECT d.term, d.max_tf, d.min_len, d.df - CASE
                   WHEN v_expired IS NULL THEN 0
                   WHEN cardinality(v_expired) < d.df THEN
                       (SELECT count(*) FROM unnest(v_ids) AS c2(id), unnest(v_expired) AS e(id), LATERAL (
                            SELECT 1 FROM mneme.bm25_postings p
                            WHERE p.conversation_id = c2.id AND p.term = d.term AND p.memory_id = e.id LIMIT 1) hit)
                   ELSE
                       (SELECT count(*) FROM unnest(v_ids) AS c2(id), mneme.bm25_postings p
                        WHERE p.conversation_id = c2.id AND p.term = d.term AND p.memory_id = ANY (v_expired))
               END AS df
        FROM d$old$, $new$
        SELECT d.term, d.max_tf, d.min_len, d.df - coalesce(ex.n, 0) AS df
        FROM d LEFT JOIN (
            SELECT p.term, count(*) AS n FROM mneme.bm25_postings p
            WHERE v_expired IS NOT NULL AND p.conversation_id = ANY (v_ids)
              AND p.term = ANY (tsvector_to_array(mneme.bm25_tsvector(_bm25_search.query)))
              AND p.memory_id = ANY (v_expired)
            GROUP BY p.term) ex ON ex.term = d.term$new$),
            -- Reads by id name the conversation too, so they go to its
            -- shard only (on one server the primary key on the id is the
            -- plan, which no statistics can flip: a conversation filter
            -- there let the planner scan a conversation's turns instead).
            ('mneme._context_anchors(uuid, text, real[], timestamptz, timestamptz, timestamptz, text, uuid[])'::regprocedure,
             'the candidates'' rows', $old$
        JOIN mneme.memories m ON m.id = s.memory_id
$old$, $new$
        JOIN mneme.memories m ON m.id = s.memory_id AND m.conversation_id = ANY (v_convs)
$new$),
            ('mneme._context_anchors(uuid, text, real[], timestamptz, timestamptz, timestamptz, text, uuid[])'::regprocedure,
             'the candidates'' turns', $old$
        FROM ranked r JOIN mneme.messages msg ON msg.id = ANY (r.msgs)
$old$, $new$
        FROM ranked r JOIN mneme.messages msg ON msg.id = ANY (r.msgs) AND msg.conversation_id = ANY (v_convs)
$new$),
            ('mneme._context_item(int, uuid, text, text, float8, timestamptz, bigint[], int, uuid[])'::regprocedure,
             'the item''s memory', $old$WHERE m.id = _context_item.i_memory_id)$old$,
             $new$WHERE m.id = _context_item.i_memory_id AND m.conversation_id = ANY (_context_item.i_conversation_ids))$new$),
            ('mneme._context_item(int, uuid, text, text, float8, timestamptz, bigint[], int, uuid[])'::regprocedure,
             'the item''s turns', $old$WHERE msg.id = ANY (_context_item.i_message_ids))$old$,
             $new$WHERE msg.id = ANY (_context_item.i_message_ids) AND msg.conversation_id = ANY (_context_item.i_conversation_ids))$new$)
        ) AS x(fn, what, old_text, new_text)
    LOOP
        def := pg_catalog.pg_get_functiondef(r.fn);
        body := replace(def, r.old_text, r.new_text);
        IF body = def THEN
            RAISE EXCEPTION 'tests/testdata/citus_generate.sql: % of % changed; update its Citus form', r.what, r.fn;
        END IF;
        EXECUTE body;
    END LOOP;

    -- 4. _enter first in every API function that reaches a distributed table
    v_reached := ARRAY(SELECT p.oid FROM pg_catalog.pg_proc p
                        WHERE p.pronamespace = 'mneme'::regnamespace AND p.prosrc ~ v_hash_re);
    LOOP
        v_more := ARRAY(
            SELECT DISTINCT p.oid FROM pg_catalog.pg_proc p,
                   regexp_matches(p.prosrc, 'mneme\.([a-z_0-9]+)\s*\(', 'g') AS m(name)
              JOIN pg_catalog.pg_proc q ON q.proname = m.name[1] AND q.pronamespace = 'mneme'::regnamespace
             WHERE p.pronamespace = 'mneme'::regnamespace AND q.oid = ANY (v_reached) AND NOT p.oid = ANY (v_reached));
        EXIT WHEN cardinality(v_more) = 0;
        v_reached := v_reached || v_more;
    END LOOP;
    FOR f IN
        SELECT p.oid, p.prosrc, p.proname, p.proretset, p.prorettype, l.lanname,
               (SELECT a.n FROM unnest(p.proargnames) WITH ORDINALITY AS a(name, n)
                 WHERE a.name = 'conversation_id' AND p.proargtypes[a.n - 1] = 'uuid'::regtype
                   AND (p.proargmodes IS NULL OR p.proargmodes[a.n] = 'i')) AS conv_arg
          FROM pg_catalog.pg_proc p JOIN pg_catalog.pg_language l ON l.oid = p.prolang
         WHERE p.oid = ANY (v_reached) AND p.prosecdef
           AND p.prolang IN (SELECT l.oid FROM pg_catalog.pg_language l WHERE l.lanname IN ('plpgsql', 'sql'))
           AND p.proname NOT IN ('_tenant', '_resolve_tenant', '_enter')
           AND NOT p.proname = ANY (v_whole)
           AND (has_function_privilege('mneme_app', p.oid, 'EXECUTE')
                OR has_function_privilege('mneme_worker', p.oid, 'EXECUTE')
                OR has_function_privilege('mneme_admin', p.oid, 'EXECUTE'))
           AND strpos(p.prosrc, 'mneme._enter(') = 0
    LOOP
        def := format('v__entered boolean := mneme._enter(%s);',
                      CASE WHEN f.conv_arg IS NULL THEN 'NULL' ELSE '$' || f.conv_arg END);
        IF f.lanname = 'sql' THEN
            -- a SQL wrapper of another call (unpin, create_episode): as
            -- PL/pgSQL, which can enter
            body := regexp_replace(f.prosrc, ';\s*$', '');
            body := CASE WHEN f.proretset THEN format(E'BEGIN\nRETURN QUERY %s;\nEND', body)
                         WHEN f.prorettype = 'void'::regtype THEN format(E'BEGIN\nPERFORM * FROM (%s) x;\nEND', body)
                         ELSE format(E'DECLARE r %s;\nBEGIN\n%s\nINTO r;\nRETURN r;\nEND', f.prorettype::regtype, body) END;
            f.prosrc := body;
        END IF;
        body := regexp_replace(f.prosrc, '^(\s*(#[^\n]*\n\s*)*)DECLARE\M', '\1DECLARE' || E'\n    ' || def, 'i');
        IF body = f.prosrc THEN
            body := regexp_replace(f.prosrc, '^(\s*(#[^\n]*\n\s*)*)BEGIN\M', '\1DECLARE' || E'\n    ' || def || E'\nBEGIN', 'i');
        END IF;
        IF body = f.prosrc THEN
            RAISE EXCEPTION 'tests/testdata/citus_generate.sql: cannot find where % begins to make it call mneme._enter', f.oid::regprocedure;
        END IF;
        def := pg_catalog.pg_get_functiondef(f.oid);
        IF f.lanname = 'sql' THEN
            def := regexp_replace(def, E'\n LANGUAGE sql\n', E'\n LANGUAGE plpgsql\n');
        END IF;
        EXECUTE substr(def, 1, strpos(def, 'AS $function$') - 1) || 'AS ' || quote_literal(body);
    END LOOP;

END
$gen$;

-- 5. nested distributed execution (see above)
CREATE TEMPORARY TABLE citus_nested ON COMMIT DROP AS
WITH RECURSIVE reached(oid) AS (
    SELECT p.oid FROM pg_catalog.pg_proc p
     WHERE p.pronamespace = 'mneme'::regnamespace
       AND p.prosrc ~ 'mneme\.(message_queue|messages|memories|bm25_docs|bm25_postings|bm25_terms|bm25_stats|review_log|jobs|memory_events|llm_calls|job_refs|review_queries|tenants|settings|tenant_logins|job_kinds|job_turns|erasures|llm_usage_days)\M'
    UNION
    SELECT p.oid FROM reached r
      JOIN pg_catalog.pg_proc q ON q.oid = r.oid
      JOIN pg_catalog.pg_proc p ON p.pronamespace = 'mneme'::regnamespace
     WHERE p.prosrc ~ ('mneme\.' || q.proname || '\s*\(')
)
SELECT p.oid::regprocedure::text AS sig
  FROM pg_catalog.pg_proc p
 WHERE p.oid IN (SELECT r.oid FROM reached r) AND p.prokind = 'f'
   AND p.prolang = (SELECT l.oid FROM pg_catalog.pg_language l WHERE l.lanname = 'plpgsql')
   AND p.proname NOT IN ('memories_bm25_row_trg', 'memories_events_row_trg', 'review_log_events_row_trg',
                         'jobs_set_aside_trg', 'jobs_refs_trg', 'review_log_queries_trg', '_tenant', '_is_worker', '_turn_distances', 'vector_index_plan');
