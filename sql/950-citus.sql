-- =============================================================================
-- mneme on Citus: nothing on one server. When the tables are distributed
-- (`mneme migrate --citus`, docs/scale.md), every SQL-language function of
-- schema mneme that reads or writes mneme's tables is re-created as
-- PL/pgSQL with the same body.
--
-- Why: PostgreSQL inlines a SQL function into the query that calls it after
-- Citus's planner has looked at that query, so the inlined query reads the
-- node's own (empty) copy of a distributed table: measured, `bm25_search`
-- on the coordinator returned no rows without an error. A SQL function that
-- is not inlined fails instead ("parameterized queries for SQL functions
-- referencing distributed tables are not supported"). A PL/pgSQL function's
-- queries are planned by Citus one by one, with their parameters' values.
-- Re-applied after the files before it on every migrate (they re-create the
-- SQL forms).
--
-- Then two statements of the context get the form Citus can plan (on one
-- server they keep theirs, whose plans TestSmallConversationCostIgnoresTheRest
-- holds): the query terms' idf (a lateral aggregate over unnest: "cannot
-- push down this subquery") as one grouped read of bm25_terms, and the
-- newest-first order (correlated subqueries over two tables: "complex
-- joins are only supported when ...") as two grouped joins. A replacement
-- that finds nothing to replace fails the migrate.
-- =============================================================================
DO $citus$
DECLARE
    f     record;
    r     record;
    def   text;
    body  text;
BEGIN
    IF NOT mneme._distributed('mneme.memories') THEN
        RETURN;
    END IF;
    FOR f IN
        SELECT p.oid, p.proretset, p.prosrc, p.prorettype
        FROM pg_catalog.pg_proc p
        WHERE p.pronamespace = 'mneme'::regnamespace
          AND p.prolang = (SELECT l.oid FROM pg_catalog.pg_language l WHERE l.lanname = 'sql')
          AND p.prosrc ~ 'mneme\.(memories|messages|message_queue|jobs|review_log|memory_events|bm25_[a-z]+|settings|tenants|tenant_logins|job_kinds|job_turns)\M'
    LOOP
        body := regexp_replace(f.prosrc, ';\s*$', '');
        IF f.proretset THEN
            body := format(E'#variable_conflict use_column\nBEGIN\nRETURN QUERY %s;\nEND', body);
        ELSE
            body := format(E'#variable_conflict use_column\nDECLARE r %s;\nBEGIN\n%s\nINTO r;\nRETURN r;\nEND',
                           f.prorettype::regtype, body);
        END IF;
        def := pg_catalog.pg_get_functiondef(f.oid);
        -- pg_get_functiondef puts LANGUAGE on a line of its own and quotes
        -- the body with $function$.
        def := regexp_replace(def, E'\n LANGUAGE sql\n', E'\n LANGUAGE plpgsql\n');
        def := substr(def, 1, strpos(def, 'AS $function$') - 1) || 'AS ' || quote_literal(body);
        EXECUTE def;
    END LOOP;

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
                                    GROUP BY x.o) t ON t.o = u.o
                         LEFT JOIN (SELECT x.o, coalesce(m.source_last_at, m.created_at) AS at
                                    FROM unnest(v_order) AS x(o)
                                    JOIN mneme.memories m ON m.id = (v_slots[x.o]).memory_id) f ON f.o = u.o
                         ORDER BY coalesce(t.at, f.at) DESC, u.n);$new$)
        ) AS x(fn, what, old_text, new_text)
    LOOP
        def := pg_catalog.pg_get_functiondef(r.fn);
        body := replace(def, r.old_text, r.new_text);
        IF body = def THEN
            RAISE EXCEPTION 'sql/950-citus.sql: % of % changed; update its Citus form', r.what, r.fn;
        END IF;
        EXECUTE body;
    END LOOP;
END
$citus$;
