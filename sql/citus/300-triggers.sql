-- =============================================================================
-- mneme on Citus: the BM25 row trigger's apply, written whole, replacing
-- the one-server mneme._bm25_apply_shard (sql/110-bm25.sql). Applied only
-- on a distributed mneme (docs/scale.md).
--
-- Why it differs: on Citus the row triggers (sql/110-bm25.sql,
-- sql/420-events.sql, sql/200-jobs.sql) run on the worker and write the
-- shards of the row's conversation by name (mneme._shard, sql/000-core.sql,
-- says why). The events and the set-aside messages are one statement each,
-- written so in sql/*.sql for both deployments; the BM25 statistics are
-- five, which one server runs as one statement without dynamic SQL
-- (mneme._bm25_apply, over a statement's memories).
-- =============================================================================

-- mneme._bm25_apply (sql/110-bm25.sql) on one conversation's shards, by
-- name: the same changes in the same order (the totals locked first, the
-- removed memories out, the added in, the df deltas, the totals, emptied
-- rows dropped), a statement at a time. TestCitusRowTriggersWriteShards
-- checks that what it keeps equals mneme.bm25_reindex's rebuild.
CREATE OR REPLACE FUNCTION mneme._bm25_apply_shard(conversation_id uuid, removed uuid[], added uuid[])
RETURNS void
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
SET jit = off
AS $$
DECLARE
    v_postings text := mneme._shard('mneme.bm25_postings', _bm25_apply_shard.conversation_id);
    v_docs     text := mneme._shard('mneme.bm25_docs', _bm25_apply_shard.conversation_id);
    v_terms    text := mneme._shard('mneme.bm25_terms', _bm25_apply_shard.conversation_id);
    v_stats    text := mneme._shard('mneme.bm25_stats', _bm25_apply_shard.conversation_id);
    v_memories text := mneme._shard('mneme.memories', _bm25_apply_shard.conversation_id);
    v_rm_conv uuid[];
    v_rm_term text[];
    v_rm_doc_conv uuid[];
    v_rm_doc_len int[];
BEGIN
    -- 0. the conversation's totals locked first
    EXECUTE format($q$
        INSERT INTO %1$s AS s (conversation_id, n, total_len)
        SELECT DISTINCT x.c, 0, 0
        FROM (SELECT d.conversation_id AS c FROM %2$s d WHERE d.memory_id = ANY ($1)
              UNION ALL
              SELECT m.conversation_id FROM %3$s m WHERE m.id = ANY ($2) AND m.status = 'active') x
        ORDER BY x.c
        ON CONFLICT (conversation_id) DO UPDATE SET n = s.n$q$, v_stats, v_docs, v_memories)
        USING _bm25_apply_shard.removed, _bm25_apply_shard.added;

    -- 1. the removed memories out
    IF cardinality(_bm25_apply_shard.removed) > 0 THEN
        EXECUTE format($q$
            WITH del AS (
                DELETE FROM %1$s p WHERE p.memory_id = ANY ($1)
                RETURNING p.conversation_id, p.term)
            SELECT array_agg(conversation_id), array_agg(term) FROM del$q$, v_postings)
            INTO v_rm_conv, v_rm_term USING _bm25_apply_shard.removed;
        EXECUTE format($q$
            WITH del AS (
                DELETE FROM %1$s d WHERE d.memory_id = ANY ($1)
                RETURNING d.conversation_id, d.doclen)
            SELECT array_agg(conversation_id), array_agg(doclen) FROM del$q$, v_docs)
            INTO v_rm_doc_conv, v_rm_doc_len USING _bm25_apply_shard.removed;
    END IF;

    -- 2. the added (active) memories in
    IF cardinality(_bm25_apply_shard.added) > 0 THEN
        EXECUTE format($q$
            WITH docs AS (
                SELECT m.id, m.conversation_id,
                       mneme.bm25_tsvector(mneme.memory_text(m.title, m.summary, m.content)) AS tsv
                FROM %1$s m
                WHERE m.id = ANY ($1) AND m.status = 'active'
            ), terms AS (
                SELECT d.id, d.conversation_id, u.lexeme AS term, cardinality(u.positions) AS tf
                FROM docs d, unnest(d.tsv) AS u
            ), lens AS (
                SELECT d.id, d.conversation_id, coalesce(t.len, 0)::int AS doclen
                FROM docs d LEFT JOIN (SELECT id, sum(tf) AS len FROM terms GROUP BY id) t ON t.id = d.id
            ), ins AS (
                INSERT INTO %2$s (memory_id, conversation_id, doclen)
                SELECT id, conversation_id, doclen FROM lens
            )
            INSERT INTO %3$s (conversation_id, term, memory_id, tf, doclen)
            SELECT t.conversation_id, t.term, t.id, t.tf, l.doclen
            FROM terms t JOIN lens l ON l.id = t.id$q$, v_memories, v_docs, v_postings)
            USING _bm25_apply_shard.added;
    END IF;

    -- 3. the df deltas, then the totals, each in key order
    EXECUTE format($q$
        INSERT INTO %1$s AS t (conversation_id, term, df, max_tf, min_len_per_tf)
        SELECT conversation_id, term, sum(delta), max(tf), min(len_per_tf)
        FROM (SELECT c AS conversation_id, x AS term, -1 AS delta, 0 AS tf, 'Infinity'::float8 AS len_per_tf
              FROM unnest($1::uuid[], $2::text[]) AS r(c, x)
              UNION ALL
              SELECT p.conversation_id, p.term, 1, p.tf, p.doclen::float8 / p.tf
              FROM %2$s p WHERE p.memory_id = ANY ($3)) d
        GROUP BY conversation_id, term
        HAVING sum(delta) <> 0 OR max(tf) > 0
        ORDER BY conversation_id, term
        ON CONFLICT (conversation_id, term) DO UPDATE
            SET df = t.df + EXCLUDED.df,
                max_tf = greatest(t.max_tf, EXCLUDED.max_tf),
                min_len_per_tf = least(t.min_len_per_tf, EXCLUDED.min_len_per_tf)$q$, v_terms, v_postings)
        USING v_rm_conv, v_rm_term, _bm25_apply_shard.added;

    EXECUTE format($q$
        INSERT INTO %1$s AS s (conversation_id, n, total_len)
        SELECT conversation_id, sum(dn), sum(dlen)
        FROM (SELECT c AS conversation_id, -1 AS dn, -l::bigint AS dlen FROM unnest($1::uuid[], $2::int[]) AS r(c, l)
              UNION ALL
              SELECT d.conversation_id, 1, d.doclen FROM %2$s d WHERE d.memory_id = ANY ($3)) d
        GROUP BY conversation_id
        ORDER BY conversation_id
        ON CONFLICT (conversation_id) DO UPDATE SET n = s.n + EXCLUDED.n, total_len = s.total_len + EXCLUDED.total_len$q$,
        v_stats, v_docs)
        USING v_rm_doc_conv, v_rm_doc_len, _bm25_apply_shard.added;

    IF v_rm_conv IS NOT NULL THEN
        EXECUTE format($q$
            DELETE FROM %1$s t
            USING (SELECT DISTINCT c, x FROM unnest($1::uuid[], $2::text[]) AS r(c, x)) r
            WHERE t.conversation_id = r.c AND t.term = r.x AND t.df <= 0$q$, v_terms)
            USING v_rm_conv, v_rm_term;
    END IF;
    IF v_rm_doc_conv IS NOT NULL THEN
        EXECUTE format($q$DELETE FROM %1$s s WHERE s.conversation_id = ANY ($1) AND s.n <= 0$q$, v_stats)
            USING v_rm_doc_conv;
    END IF;
END
$$;
COMMENT ON FUNCTION mneme._bm25_apply_shard(uuid, uuid[], uuid[]) IS
    'Internal: mneme._bm25_apply on the shards that hold the conversation (Citus; called by memories_bm25_row_trg on a shard).';

-- Left by earlier versions, which copied the row triggers' functions per shard with the
-- tables renamed (and called the copies through mneme._shard_local_trg):
-- dropped.
DO $drop$
DECLARE
    f record;
BEGIN
    FOR f IN
        SELECT p.oid::regprocedure AS sig FROM pg_catalog.pg_proc p
         WHERE p.pronamespace = 'mneme'::regnamespace AND p.proname ~ '_[0-9]+$'
           AND EXISTS (SELECT 1 FROM pg_catalog.pg_proc q
                        WHERE q.pronamespace = 'mneme'::regnamespace
                          AND q.proname = regexp_replace(p.proname, '_[0-9]+$', ''))
    LOOP
        EXECUTE format('DROP FUNCTION %s', f.sig);
    END LOOP;
END
$drop$;
DROP FUNCTION IF EXISTS mneme._shard_local_trg();
