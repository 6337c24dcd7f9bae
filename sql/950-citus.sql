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
-- joins are only supported when ...") as two grouped joins; and BM25's
-- lateral reads of postings and term statistics (one conversation and
-- term at a time) as reads of the conversations' rows, which Citus sends
-- to their shards only. A replacement that finds nothing to replace fails
-- the migrate.
--
-- Also here, on Citus only: the IS NOT DISTINCT FROM of the calls by job
-- id as =, the per-shard copies of the AFTER row triggers' functions
-- (mneme._shard_local_trg), and the delegation of the reads that name one
-- conversation (create_distributed_function). docs/scale.md says why.
-- =============================================================================
-- mneme._enter, which every API call on Citus makes first, is in
-- sql/005-tenants.sql (before the access script, which makes it internal).
DO $citus$
DECLARE
    f     record;
    r     record;
    t     record;
    sh    record;
    def   text;
    body  text;
    v_tables        text[];
    v_table_re      text;
    v_reached       oid[];
    v_trigger_fns   oid[];
    v_copied        oid[];
    v_more          oid[];
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

    -- A statement on one row by its id names the row's conversation too
    -- (read first into a variable v_<table>_conv), compared with IS NOT
    -- DISTINCT FROM on one server, where a job may have no conversation.
    -- Citus routes only an equality, and there every row has a
    -- conversation (the nil one at least): = instead.
    FOR f IN
        SELECT p.oid FROM pg_catalog.pg_proc p
        WHERE p.pronamespace = 'mneme'::regnamespace
          AND p.prosrc ~ 'IS NOT DISTINCT FROM v_[a-z]+_conv\M'
    LOOP
        def := pg_catalog.pg_get_functiondef(f.oid);
        EXECUTE regexp_replace(def, 'IS NOT DISTINCT FROM (v_[a-z]+_conv)\M', '= \1', 'g');
    END LOOP;

    -- AFTER row triggers write on the shard (mneme._shard_local_trg): for
    -- every shard of a table with such a trigger, a copy of the trigger's
    -- function (as a plain function of TG_OP, NEW and OLD) and of every
    -- function it reaches that reads or writes a table, each table named
    -- by its shard colocated with that shard (a reference table by its one
    -- shard), each such function called by its copy for the same shard.
    -- Then the trigger calls the dispatcher. Re-made on every migrate (the
    -- files before re-create the triggers); a shard split makes new shards:
    -- migrate again after one.
    SELECT array_agg(p.logicalrelid::regclass::text),
           'mneme\.(' || string_agg(c.relname, '|') || ')\M'
      INTO v_tables, v_table_re
      FROM pg_dist_partition p JOIN pg_catalog.pg_class c ON c.oid = p.logicalrelid
     WHERE c.relnamespace = 'mneme'::regnamespace;
    -- the functions reached from the triggers' functions, and which of
    -- them touch a table (themselves or through a function they call)
    v_reached := ARRAY(
        SELECT DISTINCT tg.tgfoid FROM pg_catalog.pg_trigger tg
         WHERE NOT tg.tgisinternal AND tg.tgrelid::regclass::text = ANY (v_tables)
           AND (tg.tgtype & 1) = 1 AND (tg.tgtype & 2) = 0   -- ROW, not BEFORE
           AND tg.tgfoid <> 'mneme._shard_local_trg'::regproc);
    v_trigger_fns := v_reached;
    LOOP
        v_more := ARRAY(
            SELECT DISTINCT q.oid FROM pg_catalog.pg_proc p,
                   regexp_matches(p.prosrc, 'mneme\.([a-z_0-9]+)\s*\(', 'g') AS m(name)
              JOIN pg_catalog.pg_proc q ON q.proname = m.name[1] AND q.pronamespace = 'mneme'::regnamespace
             WHERE p.oid = ANY (v_reached) AND NOT q.oid = ANY (v_reached));
        EXIT WHEN cardinality(v_more) = 0;
        v_reached := v_reached || v_more;
    END LOOP;
    v_copied := ARRAY(SELECT p.oid FROM pg_catalog.pg_proc p WHERE p.oid = ANY (v_reached) AND p.prosrc ~ v_table_re);
    LOOP
        v_more := ARRAY(
            SELECT DISTINCT p.oid FROM pg_catalog.pg_proc p,
                   regexp_matches(p.prosrc, 'mneme\.([a-z_0-9]+)\s*\(', 'g') AS m(name)
              JOIN pg_catalog.pg_proc q ON q.proname = m.name[1] AND q.pronamespace = 'mneme'::regnamespace
             WHERE p.oid = ANY (v_reached) AND NOT p.oid = ANY (v_copied) AND q.oid = ANY (v_copied));
        EXIT WHEN cardinality(v_more) = 0;
        v_copied := v_copied || v_more;
    END LOOP;
    FOR t IN
        SELECT tg.oid, tg.tgname, tg.tgrelid, tg.tgfoid, p.proname
          FROM pg_catalog.pg_trigger tg JOIN pg_catalog.pg_proc p ON p.oid = tg.tgfoid
         WHERE tg.tgfoid = ANY (v_trigger_fns) AND tg.tgfoid = ANY (v_copied)
           AND NOT tg.tgisinternal AND tg.tgrelid::regclass::text = ANY (v_tables)
    LOOP
        FOR sh IN SELECT d.shardid, d.shardminvalue FROM pg_dist_shard d WHERE d.logicalrelid = t.tgrelid LOOP
            FOR f IN SELECT p.oid, p.proname, p.prosrc FROM pg_catalog.pg_proc p WHERE p.oid = ANY (v_copied) LOOP
                IF f.oid = ANY (v_trigger_fns) AND f.oid <> t.tgfoid THEN
                    CONTINUE;  -- another trigger's function
                END IF;
                IF f.oid = t.tgfoid THEN
                    def := format(E'CREATE OR REPLACE FUNCTION mneme.%I(tg_op text, new anyelement, old anyelement)\n'
                                  || E' RETURNS void\n LANGUAGE plpgsql\n SET search_path TO pg_catalog, pg_temp\nAS %s',
                                  f.proname || '_' || sh.shardid,
                                  quote_literal(regexp_replace(f.prosrc, '\mRETURN\s+(NULL|NEW|OLD)\s*;', 'RETURN;', 'gi')));
                ELSE
                    def := pg_catalog.pg_get_functiondef(f.oid);
                    -- its parameters qualified by its name
                    def := regexp_replace(def, '\m' || f.proname || '\.', f.proname || '_' || sh.shardid || '.', 'g');
                END IF;
                -- the copied functions it calls: their copies for this shard
                FOR r IN SELECT DISTINCT p.proname FROM pg_catalog.pg_proc p WHERE p.oid = ANY (v_copied) LOOP
                    def := regexp_replace(def, 'mneme\.' || r.proname || '(\s*\()', 'mneme.' || r.proname || '_' || sh.shardid || '\1', 'g');
                END LOOP;
                -- every table by its shard colocated with this one
                -- (mneme.<table> as a whole word; no mneme function is
                -- named like a table)
                FOR r IN
                    SELECT c.relname, d.shardid FROM pg_dist_partition p
                      JOIN pg_catalog.pg_class c ON c.oid = p.logicalrelid
                      JOIN pg_dist_shard d ON d.logicalrelid = p.logicalrelid
                     WHERE c.relnamespace = 'mneme'::regnamespace
                       AND (p.partmethod = 'n' OR d.shardminvalue = sh.shardminvalue)
                LOOP
                    def := regexp_replace(def, 'mneme\.' || r.relname || '\M', 'mneme.' || r.relname || '_' || r.shardid, 'g');
                END LOOP;
                EXECUTE def;
            END LOOP;
        END LOOP;
        def := pg_catalog.pg_get_triggerdef(t.oid);
        body := replace(def, format('EXECUTE FUNCTION mneme.%s()', t.proname),
                        format('EXECUTE FUNCTION mneme._shard_local_trg(%L)', t.proname));
        IF body = def THEN
            RAISE EXCEPTION 'sql/950-citus.sql: trigger % does not call mneme.%()', t.tgname, t.proname;
        END IF;
        EXECUTE format('DROP TRIGGER %I ON %s', t.tgname, t.tgrelid::regclass);
        EXECUTE body;
    END LOOP;
    -- The copies as the originals are: owned by mneme_owner, executable by
    -- no one else (a new function is executable by PUBLIC, and a copy of a
    -- SECURITY DEFINER function would run as the role that migrates). The
    -- triggers run them as whoever writes: mneme_owner inside the API.
    FOR f IN
        SELECT p.oid::regprocedure AS sig FROM pg_catalog.pg_proc p
         WHERE p.pronamespace = 'mneme'::regnamespace
           AND p.proname ~ ('^(' || (SELECT string_agg(q.proname, '|') FROM pg_catalog.pg_proc q WHERE q.oid = ANY (v_copied)) || ')_[0-9]+$')
    LOOP
        EXECUTE format('REVOKE ALL ON FUNCTION %s FROM PUBLIC', f.sig);
        EXECUTE format('ALTER FUNCTION %s OWNER TO mneme_owner', f.sig);
    END LOOP;

    -- Delegation: a read that names one conversation runs on the worker
    -- that holds it (create_distributed_function, routed by its first
    -- argument), its statements there on local shards; with scope tenant or
    -- inside a transaction block Citus runs it on the coordinator instead.
    -- retrieve and the context record their pending review in the
    -- conversation's queue row, on the same worker: one round trip too.
    FOR r IN
        SELECT p.oid::regprocedure AS fn FROM pg_catalog.pg_proc p
         WHERE p.pronamespace = 'mneme'::regnamespace
           AND p.proname IN ('search', 'bm25_search', 'vector_search', 'context_items',
                             'retrieve', 'retrieve_markdown', 'context')
    LOOP
        PERFORM create_distributed_function(r.fn, '$1', colocate_with := 'mneme.memories');
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
            ('mneme._turn_distances(bigint[], real[], uuid[])'::regprocedure,
             'the turns'' embeddings', $old$WHERE m.id = ANY (_turn_distances.message_ids)$old$,
             $new$WHERE m.id = ANY (_turn_distances.message_ids) AND m.conversation_id = ANY (_turn_distances.conversation_ids)$new$),
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
            RAISE EXCEPTION 'sql/950-citus.sql: % of % changed; update its Citus form', r.what, r.fn;
        END IF;
        EXECUTE body;
    END LOOP;
    -- The row policies' functions (mneme._enter says why): inside the API
    -- the tenant is the one the call resolved (none, if it was not
    -- forwarded: no tenant's rows); the sidecar's calls are the sidecar's
    -- on the owner's connections.
    CREATE OR REPLACE FUNCTION mneme._tenant()
    RETURNS text
    LANGUAGE sql STABLE PARALLEL SAFE
    AS $f$ SELECT CASE WHEN current_user = 'mneme_owner'::name
                       THEN coalesce(pg_catalog.current_setting('mneme.call_tenant', true), '')
                       ELSE mneme._resolve_tenant() END $f$;
    CREATE OR REPLACE FUNCTION mneme._is_worker()
    RETURNS boolean
    LANGUAGE sql STABLE PARALLEL SAFE
    AS $f$ SELECT pg_catalog.pg_has_role(session_user, 'mneme_worker', 'MEMBER')
               OR (session_user = 'mneme_owner'::name
                   AND pg_catalog.current_setting('mneme.caller_worker', true) = 'on') $f$;

    -- Every API function (SECURITY DEFINER, executable by mneme_app,
    -- mneme_worker or mneme_admin) that reaches a distributed table, by
    -- itself or through the functions it calls, enters first: its first
    -- declaration calls mneme._enter with its conversation_id argument, if
    -- it has one (so the transaction opens on the shard the call reads).
    SELECT 'mneme\.(' || string_agg(c.relname, '|') || ')\M' INTO v_table_re
      FROM pg_dist_partition p JOIN pg_catalog.pg_class c ON c.oid = p.logicalrelid
     WHERE c.relnamespace = 'mneme'::regnamespace AND p.partmethod = 'h';
    v_reached := mneme._functions_reaching(v_table_re);
    FOR f IN
        SELECT p.oid, p.prosrc, p.proname, p.proretset, p.prorettype, l.lanname,
               (SELECT a.n FROM unnest(p.proargnames) WITH ORDINALITY AS a(name, n)
                 WHERE a.name = 'conversation_id' AND p.proargtypes[a.n - 1] = 'uuid'::regtype
                   AND (p.proargmodes IS NULL OR p.proargmodes[a.n] = 'i')) AS conv_arg
          FROM pg_catalog.pg_proc p JOIN pg_catalog.pg_language l ON l.oid = p.prolang
         WHERE p.oid = ANY (v_reached) AND p.prosecdef
           AND p.prolang IN (SELECT l.oid FROM pg_catalog.pg_language l WHERE l.lanname IN ('plpgsql', 'sql'))
           AND p.proname NOT IN ('_tenant', '_resolve_tenant', '_enter')
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
            RAISE EXCEPTION 'sql/950-citus.sql: cannot find where % begins to make it call mneme._enter', f.oid::regprocedure;
        END IF;
        def := pg_catalog.pg_get_functiondef(f.oid);
        IF f.lanname = 'sql' THEN
            def := regexp_replace(def, E'\n LANGUAGE sql\n', E'\n LANGUAGE plpgsql\n');
        END IF;
        EXECUTE substr(def, 1, strpos(def, 'AS $function$') - 1) || 'AS ' || quote_literal(body);
    END LOOP;

    -- Nested distributed execution allowed in every PL/pgSQL function that
    -- reads or writes a table, by itself or through what it calls. Citus
    -- pushes a function called in a query on a distributed table into the
    -- query on the shard (mneme.setting in search's candidates read,
    -- mneme.search joined with mneme.memories in the context), and by
    -- default refuses the function's own queries there ("cannot execute a
    -- distributed query from a query on a shard"). What they read there is
    -- a reference table (a copy on every node) or the shards of the
    -- conversation the outer query is on, colocated with it on that node.
    SELECT 'mneme\.(' || string_agg(c.relname, '|') || ')\M' INTO v_table_re
      FROM pg_dist_partition p JOIN pg_catalog.pg_class c ON c.oid = p.logicalrelid
     WHERE c.relnamespace = 'mneme'::regnamespace;
    v_reached := mneme._functions_reaching(v_table_re);
    FOR f IN
        SELECT p.oid FROM pg_catalog.pg_proc p
         WHERE p.oid = ANY (v_reached) AND p.prokind = 'f'
           AND p.prolang = (SELECT l.oid FROM pg_catalog.pg_language l WHERE l.lanname = 'plpgsql')
           AND NOT coalesce('citus.allow_nested_distributed_execution=on' = ANY (p.proconfig), false)
    LOOP
        EXECUTE format('ALTER FUNCTION %s SET citus.allow_nested_distributed_execution = on', f.oid::regprocedure);
    END LOOP;

    -- The array variant's cosine distance on every worker (by itself Citus
    -- does not propagate it; made a distributed function without a
    -- distribution argument, it is). Its operator mneme.<=>, which Citus
    -- does not propagate at all, is made on the workers after the
    -- migrate's transaction (sql/citus/workers.sql).
    IF mneme.setting('vector_variant') #>> '{}' = 'array' THEN
        PERFORM create_distributed_function('mneme.cosine_distance(real[], real[])');
    END IF;
END
$citus$;
