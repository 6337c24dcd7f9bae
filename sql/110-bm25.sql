-- =============================================================================
-- mneme retrieval, part 2: Okapi BM25 over memory text.
--
-- Tokens are the lexemes of to_tsvector('english', memory_text): Snowball
-- English stemming, stop words removed; a memory's length is its number of
-- lexeme occurrences. Statistics (per conversation: number of memories,
-- total length, document frequency per lexeme; per memory: term
-- frequencies) live in mneme.bm25_* and are kept right by statement-level
-- triggers on mneme.memories as rows are inserted, updated, deleted or change
-- status. Only active memories are counted. valid_until is applied at query
-- time: bm25_search subtracts the conversation's expired memories from N, the
-- total length and each df, so scores are exact at every instant without a
-- job that has to run when a memory expires.
-- Idempotent: re-applied on every migrate.
-- =============================================================================

-- Written once, in _bm25_tsv: plain SQL without SET, so the planner inlines
-- it into _bm25_apply's pass over a statement's memories (a SECURITY
-- DEFINER call per memory cost as much as the tokenising itself).
CREATE OR REPLACE FUNCTION mneme._bm25_tsv(input text)
RETURNS tsvector
LANGUAGE sql IMMUTABLE PARALLEL SAFE
AS $$
SELECT pg_catalog.to_tsvector('pg_catalog.english'::pg_catalog.regconfig, pg_catalog.left(coalesce($1, ''), 100000))
$$;
COMMENT ON FUNCTION mneme._bm25_tsv(text) IS
    'Internal, inlined: the body of mneme.bm25_tsvector.';

CREATE OR REPLACE FUNCTION mneme.bm25_tsvector(input text)
RETURNS tsvector
LANGUAGE sql IMMUTABLE PARALLEL SAFE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
SET jit = off
AS $$
SELECT mneme._bm25_tsv(bm25_tsvector.input)
$$;
COMMENT ON FUNCTION mneme.bm25_tsvector(text) IS
    'The BM25 tokeniser: to_tsvector(''english'', text) over the first 100,000 characters (a tsvector holds at '
    'most 1 MB; an episode of long messages must still be stored). Changing it needs SELECT mneme.bm25_reindex().';
GRANT EXECUTE ON FUNCTION mneme.bm25_tsvector(text) TO mneme_app, mneme_worker, mneme_admin;

-- Okapi BM25's weighting, written once for the BM25 leg, the belief search
-- and the context's turns: a posting scores _bm25_weight(N, df, k1) *
-- _bm25_tf(tf, dl, k1, b, avgdl) = idf * tf * (k1 + 1) / (tf + k1 * (1 - b +
-- b * dl / avgdl)), idf = ln(1 + (N - df + 0.5) / (df + 0.5)). Plain SQL
-- without SET, so the planner inlines them (a posting costs no function
-- call); the length normalisation is written k1 * (1 - b) + k1 * b / avgdl *
-- dl so that the parts without the posting fold into constants.
CREATE OR REPLACE FUNCTION mneme._bm25_weight(n float8, df float8, k1 float8)
RETURNS float8
LANGUAGE sql IMMUTABLE PARALLEL SAFE
AS $$ SELECT ln(1 + ($1 - $2 + 0.5) / ($2 + 0.5)) * ($3 + 1) $$;
COMMENT ON FUNCTION mneme._bm25_weight(float8, float8, float8) IS
    'Internal: a BM25 term''s weight idf * (k1 + 1) among n documents, df of which hold it.';

CREATE OR REPLACE FUNCTION mneme._bm25_tf(tf float8, dl float8, k1 float8, b float8, avgdl float8)
RETURNS float8
LANGUAGE sql IMMUTABLE PARALLEL SAFE
AS $$ SELECT $1 / ($1 + $3 * (1 - $4) + $3 * $4 / $5 * $2) $$;
COMMENT ON FUNCTION mneme._bm25_tf(float8, float8, float8, float8, float8) IS
    'Internal: a BM25 posting''s saturated term frequency tf / (tf + k1 * (1 - b + b * dl / avgdl)).';

-- -----------------------------------------------------------------------------
-- Maintenance
-- -----------------------------------------------------------------------------
CREATE OR REPLACE FUNCTION mneme._bm25_apply(removed uuid[], added uuid[])
RETURNS void
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
SET jit = off
AS $$
#variable_conflict use_column
DECLARE
    v_rm_conv uuid[];
    v_rm_term text[];
    v_rm_doc_conv uuid[];
    v_rm_doc_len int[];
BEGIN
    -- 0. Lock the conversations' totals first, in key order: writers of one
    -- conversation queue here before touching any term row, so two
    -- transactions that each write several memories of a conversation in
    -- separate statements cannot deadlock on the term rows.
    INSERT INTO mneme.bm25_stats AS s (conversation_id, n, total_len)
    SELECT DISTINCT x.c, 0, 0
    FROM (SELECT d.conversation_id AS c FROM mneme.bm25_docs d WHERE d.memory_id = ANY (_bm25_apply.removed)
          UNION ALL
          SELECT m.conversation_id FROM mneme.memories m WHERE m.id = ANY (_bm25_apply.added) AND m.status = 'active') x
    ORDER BY x.c
    ON CONFLICT (conversation_id) DO UPDATE SET n = s.n;

    -- 1. Take the removed memories out; keep what they counted for.
    IF cardinality(_bm25_apply.removed) > 0 THEN
        WITH del AS (
            DELETE FROM mneme.bm25_postings p WHERE p.memory_id = ANY (_bm25_apply.removed)
            RETURNING p.conversation_id, p.term)
        SELECT array_agg(conversation_id), array_agg(term) INTO v_rm_conv, v_rm_term FROM del;
        WITH del AS (
            DELETE FROM mneme.bm25_docs d WHERE d.memory_id = ANY (_bm25_apply.removed)
            RETURNING d.conversation_id, d.doclen)
        SELECT array_agg(conversation_id), array_agg(doclen) INTO v_rm_doc_conv, v_rm_doc_len FROM del;
    END IF;

    -- 2. Put the added (active) memories in, and 3. apply the deltas: one
    -- upsert of the df deltas, then one of the conversation totals, each in
    -- key order, so concurrent writers lock rows in the same order and
    -- cannot deadlock on the statistics. The added memories' postings and
    -- lengths come from the one tokenising pass (docs), not read back.
    -- The bounds of a term's contribution (max_tf, min_len_per_tf) widen
    -- with every added posting and are left as they are by removals: still
    -- bounds, if looser (bm25_reindex tightens them).
    WITH docs AS MATERIALIZED (
        SELECT m.id, m.conversation_id,
               mneme._bm25_tsv(mneme._memory_text(m.title, m.summary, m.content)) AS tsv
        FROM mneme.memories m
        WHERE m.id = ANY (_bm25_apply.added) AND m.status = 'active'
    ), terms AS MATERIALIZED (
        SELECT d.id, d.conversation_id, u.lexeme AS term, cardinality(u.positions) AS tf
        FROM docs d, unnest(d.tsv) AS u
    ), lens AS MATERIALIZED (
        SELECT d.id, d.conversation_id, coalesce(t.len, 0)::int AS doclen
        FROM docs d LEFT JOIN (SELECT id, sum(tf) AS len FROM terms GROUP BY id) t ON t.id = d.id
    ), postings AS MATERIALIZED (
        SELECT t.conversation_id, t.term, t.id, t.tf, l.doclen
        FROM terms t JOIN lens l ON l.id = t.id
    ), ins_docs AS (
        INSERT INTO mneme.bm25_docs (memory_id, conversation_id, doclen)
        SELECT id, conversation_id, doclen FROM lens
    ), ins_postings AS (
        INSERT INTO mneme.bm25_postings (conversation_id, term, memory_id, tf, doclen)
        SELECT conversation_id, term, id, tf, doclen FROM postings
    ), up_terms AS (
        INSERT INTO mneme.bm25_terms AS t (conversation_id, term, df, max_tf, min_len_per_tf)
        SELECT conversation_id, term, sum(delta), max(tf), min(len_per_tf)
        FROM (SELECT c AS conversation_id, x AS term, -1 AS delta, 0 AS tf, 'Infinity'::float8 AS len_per_tf
              FROM unnest(v_rm_conv, v_rm_term) AS r(c, x)
              UNION ALL
              SELECT p.conversation_id, p.term, 1, p.tf, p.doclen::float8 / p.tf FROM postings p) d
        GROUP BY conversation_id, term
        HAVING sum(delta) <> 0 OR max(tf) > 0
        ORDER BY conversation_id, term
        ON CONFLICT (conversation_id, term) DO UPDATE
            SET df = t.df + EXCLUDED.df,
                max_tf = greatest(t.max_tf, EXCLUDED.max_tf),
                min_len_per_tf = least(t.min_len_per_tf, EXCLUDED.min_len_per_tf)
    )
    INSERT INTO mneme.bm25_stats AS s (conversation_id, n, total_len)
    SELECT conversation_id, sum(dn), sum(dlen)
    FROM (SELECT c AS conversation_id, -1 AS dn, -l::bigint AS dlen FROM unnest(v_rm_doc_conv, v_rm_doc_len) AS r(c, l)
          UNION ALL
          SELECT l.conversation_id, 1, l.doclen FROM lens l) d
    GROUP BY conversation_id
    ORDER BY conversation_id
    ON CONFLICT (conversation_id) DO UPDATE SET n = s.n + EXCLUDED.n, total_len = s.total_len + EXCLUDED.total_len;

    IF v_rm_conv IS NOT NULL THEN
        -- (by the key's two columns: a join with the pairs, estimated at
        -- one row of df <= 0, ran as a nested loop, 3 s for 2,000
        -- memories; a term of df <= 0 is gone whichever pair names it)
        DELETE FROM mneme.bm25_terms t
        WHERE t.conversation_id = ANY (ARRAY(SELECT DISTINCT c FROM unnest(v_rm_conv) c))
          AND t.term = ANY (ARRAY(SELECT DISTINCT x FROM unnest(v_rm_term) x)) AND t.df <= 0;
    END IF;
    IF v_rm_doc_conv IS NOT NULL THEN
        DELETE FROM mneme.bm25_stats s WHERE s.conversation_id = ANY (v_rm_doc_conv) AND s.n <= 0;
    END IF;
END
$$;
COMMENT ON FUNCTION mneme._bm25_apply(uuid[], uuid[]) IS
    'Internal: removes memories from the BM25 statistics and adds the active ones among added '
    '(called by the memories_bm25_* triggers and mneme.bm25_reindex).';

CREATE OR REPLACE FUNCTION mneme.memories_bm25_trg()
RETURNS trigger
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_removed uuid[];
    v_added   uuid[];
BEGIN
    IF TG_OP = 'INSERT' THEN
        SELECT array_agg(n.id) INTO v_added FROM new_rows n WHERE n.status = 'active';
    ELSIF TG_OP = 'DELETE' THEN
        SELECT array_agg(o.id) INTO v_removed FROM old_rows o WHERE o.status = 'active';
    ELSE
        -- Only rows whose counted state or text changed: FSRS updates by
        -- reviews cost one join here and nothing else.
        SELECT array_agg(o.id) FILTER (WHERE o.status = 'active'),
               array_agg(n.id) FILTER (WHERE n.status = 'active')
        INTO v_removed, v_added
        FROM old_rows o FULL JOIN new_rows n ON n.id = o.id
        WHERE o.id IS NULL OR n.id IS NULL
           OR (o.status = 'active') <> (n.status = 'active')
           OR (n.status = 'active'
               AND (o.conversation_id, o.title, o.summary, o.content)
                   IS DISTINCT FROM (n.conversation_id, n.title, n.summary, n.content));
    END IF;
    IF v_removed IS NOT NULL OR v_added IS NOT NULL THEN
        PERFORM mneme._bm25_apply(coalesce(v_removed, '{}'), coalesce(v_added, '{}'));
    END IF;
    RETURN NULL;
END
$$;
COMMENT ON FUNCTION mneme.memories_bm25_trg() IS
    'Statement-level AFTER trigger on mneme.memories: keeps the BM25 statistics right (set-based, so bulk '
    'INSERT and COPY cost one pass).';

CREATE OR REPLACE FUNCTION mneme.memories_bm25_truncate_trg()
RETURNS trigger
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    TRUNCATE mneme.bm25_postings, mneme.bm25_docs, mneme.bm25_terms, mneme.bm25_stats;
    RETURN NULL;
END
$$;
COMMENT ON FUNCTION mneme.memories_bm25_truncate_trg() IS
    'TRUNCATE mneme.memories empties the BM25 statistics too.';

-- The row trigger's apply for one conversation. One server applies by the
-- tables' names (_bm25_apply); on Citus, where the row trigger runs on the
-- worker and must write the conversation's shards by name (mneme._shard
-- says why), sql/citus/300-triggers.sql replaces it with _bm25_apply's
-- statements on those shards.
CREATE OR REPLACE FUNCTION mneme._bm25_apply_shard(conversation_id uuid, removed uuid[], added uuid[])
RETURNS void
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    PERFORM mneme._bm25_apply(_bm25_apply_shard.removed, _bm25_apply_shard.added);
END
$$;
COMMENT ON FUNCTION mneme._bm25_apply_shard(uuid, uuid[], uuid[]) IS
    'Internal: mneme._bm25_apply for the memories of one conversation (called by memories_bm25_row_trg; on Citus '
    'on the shards that hold the conversation).';

CREATE OR REPLACE FUNCTION mneme.memories_bm25_row_trg()
RETURNS trigger
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_removed uuid[] := '{}';
    v_added   uuid[] := '{}';
BEGIN
    IF TG_OP = 'UPDATE' AND (OLD.status = 'active') = (NEW.status = 'active')
       AND (NEW.status <> 'active'
            OR (OLD.conversation_id, OLD.title, OLD.summary, OLD.content)
               IS NOT DISTINCT FROM (NEW.conversation_id, NEW.title, NEW.summary, NEW.content)) THEN
        RETURN NULL;
    END IF;
    IF TG_OP <> 'INSERT' AND OLD.status = 'active' THEN
        v_removed := ARRAY[OLD.id];
    END IF;
    IF TG_OP <> 'DELETE' AND NEW.status = 'active' THEN
        v_added := ARRAY[NEW.id];
    END IF;
    IF v_removed <> '{}' OR v_added <> '{}' THEN
        -- (the distribution column never changes: OLD's conversation is NEW's)
        PERFORM mneme._bm25_apply_shard(CASE WHEN TG_OP = 'DELETE' THEN OLD.conversation_id ELSE NEW.conversation_id END,
                                        v_removed, v_added);
    END IF;
    RETURN NULL;
END
$$;
COMMENT ON FUNCTION mneme.memories_bm25_row_trg() IS
    'Row-level AFTER trigger on mneme.memories when it is distributed by Citus (a statement trigger with '
    'transition tables does not run on a shard): the same changes as memories_bm25_trg, one row at a time.';

DROP TRIGGER IF EXISTS memories_bm25_insert ON mneme.memories;
DROP TRIGGER IF EXISTS memories_bm25_update ON mneme.memories;
DROP TRIGGER IF EXISTS memories_bm25_delete ON mneme.memories;
DROP TRIGGER IF EXISTS memories_bm25_row ON mneme.memories;
DROP TRIGGER IF EXISTS memories_bm25_truncate ON mneme.memories;
DO $trg$
BEGIN
    IF mneme._distributed('mneme.memories') THEN
        CREATE TRIGGER memories_bm25_row AFTER INSERT OR UPDATE OR DELETE ON mneme.memories
            FOR EACH ROW EXECUTE FUNCTION mneme.memories_bm25_row_trg();
    ELSE
        CREATE TRIGGER memories_bm25_insert AFTER INSERT ON mneme.memories
            REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION mneme.memories_bm25_trg();
        CREATE TRIGGER memories_bm25_update AFTER UPDATE ON mneme.memories
            REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION mneme.memories_bm25_trg();
        CREATE TRIGGER memories_bm25_delete AFTER DELETE ON mneme.memories
            REFERENCING OLD TABLE AS old_rows FOR EACH STATEMENT EXECUTE FUNCTION mneme.memories_bm25_trg();
        CREATE TRIGGER memories_bm25_truncate AFTER TRUNCATE ON mneme.memories
            FOR EACH STATEMENT EXECUTE FUNCTION mneme.memories_bm25_truncate_trg();
    END IF;
END
$trg$;

CREATE OR REPLACE FUNCTION mneme.bm25_reindex()
RETURNS bigint
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
SET jit = off
AS $$
DECLARE
    v__entered boolean := mneme._enter(NULL);  -- the caller forwarded first (Citus: mneme._enter)
    v_ids   uuid[];
    v_convs uuid[];
BEGIN
    LOCK TABLE mneme.memories IN SHARE MODE;  -- no writes while the statistics are rebuilt
    IF mneme._is_worker() THEN
        -- The sidecar's role (or a superuser) sees every tenant's memories:
        -- everything is rebuilt. On Citus by DELETE: a TRUNCATE is DDL on
        -- the shards, which Citus refuses in a transaction that has read
        -- them over several connections (a check that compares before and
        -- after in one transaction).
        IF mneme._distributed('mneme.bm25_postings') THEN
            DELETE FROM mneme.bm25_postings;
            DELETE FROM mneme.bm25_docs;
            DELETE FROM mneme.bm25_terms;
            DELETE FROM mneme.bm25_stats;
        ELSE
            TRUNCATE mneme.bm25_postings, mneme.bm25_docs, mneme.bm25_terms, mneme.bm25_stats;
        END IF;
        SELECT array_agg(id) INTO v_ids FROM mneme.memories WHERE status = 'active';
    ELSE
        -- Anyone else sees one tenant (row security): only its
        -- conversations' statistics are removed, and rebuilt.
        v_convs := ARRAY(SELECT q.id FROM mneme.message_queue q UNION SELECT m.conversation_id FROM mneme.memories m);
        DELETE FROM mneme.bm25_postings p WHERE p.conversation_id = ANY (v_convs);
        DELETE FROM mneme.bm25_docs d WHERE d.conversation_id = ANY (v_convs);
        DELETE FROM mneme.bm25_terms t WHERE t.conversation_id = ANY (v_convs);
        DELETE FROM mneme.bm25_stats s WHERE s.conversation_id = ANY (v_convs);
        SELECT array_agg(id) INTO v_ids FROM mneme.memories WHERE status = 'active' AND conversation_id = ANY (v_convs);
    END IF;
    PERFORM mneme._bm25_apply('{}', coalesce(v_ids, '{}'));
    RETURN coalesce(cardinality(v_ids), 0);
END
$$;
COMMENT ON FUNCTION mneme.bm25_reindex() IS
    'Rebuilds the BM25 statistics from mneme.memories (after changing the tokeniser, or to check them); '
    'returns the number of memories indexed. Run by the sidecar''s role or a superuser it rebuilds every '
    'tenant''s; run by an admin under a tenant, that tenant''s conversations only (it removes only what it '
    'rebuilds).';
GRANT EXECUTE ON FUNCTION mneme.bm25_reindex() TO mneme_admin;

-- A database that had memories before the BM25 tables existed gets them indexed once.
DO $$
BEGIN
    IF NOT EXISTS (SELECT 1 FROM mneme.bm25_docs)
       AND EXISTS (SELECT 1 FROM mneme.memories WHERE status = 'active') THEN
        PERFORM mneme.bm25_reindex();
    END IF;
END
$$;

-- -----------------------------------------------------------------------------
-- Query
-- -----------------------------------------------------------------------------
-- The BM25 sums of the given terms' postings, per memory, over the given
-- conversations (each lookup by the whole primary key, one conversation and
-- one term at a time: the plan cannot turn into a scan of a conversation's
-- postings filtered by term, whatever the statistics say; a conversation
-- the statistics had not seen was estimated at one row and its 73,000
-- postings were read per term: 86 ms). Expired memories and those created
-- outside [since, until) are left out. Plain SQL: inlined into its caller.
-- On Citus another form (sql/citus/200-functions.sql says why).
CREATE OR REPLACE FUNCTION mneme._bm25_sums(
    conversation_ids uuid[], terms text[], weights float8[], k1 float8, b float8, avgdl float8,
    expired uuid[], since timestamptz, until timestamptz)
RETURNS TABLE (conversation_id uuid, memory_id uuid, score float8)
LANGUAGE sql STABLE
AS $$
    SELECT c.id, p.memory_id, sum(t.wt * mneme._bm25_tf(p.tf, p.doclen, $4, $5, $6))
    FROM unnest($2, $3) AS t(term, wt), unnest($1) AS c(id), LATERAL (
        SELECT p.memory_id, p.tf, p.doclen FROM mneme.bm25_postings p
        WHERE p.conversation_id = c.id AND p.term = t.term) p
    WHERE ($7 IS NULL OR p.memory_id <> ALL ($7))
      AND (($8 IS NULL AND $9 IS NULL)
           OR EXISTS (SELECT 1 FROM mneme.memories m WHERE m.id = p.memory_id
                      AND ($8 IS NULL OR m.created_at >= $8) AND ($9 IS NULL OR m.created_at < $9)))
    GROUP BY c.id, p.memory_id
$$;
COMMENT ON FUNCTION mneme._bm25_sums(uuid[], text[], float8[], float8, float8, float8, uuid[], timestamptz, timestamptz) IS
    'Internal to _bm25_search: per memory (with its conversation), the BM25 sum over the given terms'' postings '
    '(eligible memories only).';

-- The statistics of the given terms over the given conversations: per term
-- its df (less the postings of the expired memories given), its largest tf
-- and its smallest doclen per tf (MaxScore's bounds, _bm25_search). Each
-- read by the whole key, one conversation and term at a time: the plan
-- cannot turn into a scan of a conversation's terms filtered by term,
-- whatever the statistics say (TestSmallConversationCostIgnoresTheRest).
-- The expired memories that hold a term are looked up one by one by the
-- whole key when they are fewer than its postings, else counted among its
-- postings. On Citus another form (sql/citus/200-functions.sql says why).
--
-- One plan for every call (issue 49): as plain SQL it was inlined into
-- _bm25_search's statement and the context's anchors, and parsed and
-- planned again inside each at every call (345 us of planning for 43 us of
-- work in _bm25_search's statement alone; pg_stat_statements with
-- track_planning). Its one generic plan is the lookups by the whole key
-- whatever the arguments: the planner's other joins are off here (with
-- arrays of unknown length it chose a scan of every term, 3 ms, on a
-- database of 20,000 memories). A context call took 5.5 to 6.4 ms of CPU
-- instead of 7.5 to 7.9 (docs/performance.md).
CREATE OR REPLACE FUNCTION mneme._bm25_term_stats(conversation_ids uuid[], terms text[], expired uuid[])
RETURNS TABLE (term text, df float8, max_tf int, min_len float8)
LANGUAGE plpgsql STABLE
SECURITY DEFINER
ROWS 4
SET search_path = pg_catalog, pg_temp
SET jit = off
SET plan_cache_mode = force_generic_plan
SET enable_hashjoin = off
SET enable_mergejoin = off
SET enable_seqscan = off
AS $$
BEGIN
    RETURN QUERY
    SELECT d.term, d.df - CASE
               WHEN $3 IS NULL THEN 0
               WHEN cardinality($3) < d.df THEN
                   (SELECT count(*) FROM unnest($1) AS c2(id), unnest($3) AS e(id), LATERAL (
                        SELECT 1 FROM mneme.bm25_postings p
                        WHERE p.conversation_id = c2.id AND p.term = d.term AND p.memory_id = e.id LIMIT 1) hit)
               ELSE
                   (SELECT count(*) FROM unnest($1) AS c2(id), mneme.bm25_postings p
                    WHERE p.conversation_id = c2.id AND p.term = d.term AND p.memory_id = ANY ($3))
           END,
           d.max_tf, d.min_len
    FROM (SELECT q.term, sum(bt.df)::float8 AS df, max(bt.max_tf) AS max_tf, min(bt.min_len_per_tf) AS min_len
          FROM (SELECT DISTINCT u.term FROM unnest($2) AS u(term)) q,
               unnest($1) AS c(id), LATERAL (
                  SELECT t.df, t.max_tf, t.min_len_per_tf FROM mneme.bm25_terms t
                  WHERE t.conversation_id = c.id AND t.term = q.term) bt
          GROUP BY q.term) d;
END
$$;
COMMENT ON FUNCTION mneme._bm25_term_stats(uuid[], text[], uuid[]) IS
    'Internal to _bm25_search and the context: per term, its df over the conversations (expired memories left out), '
    'its largest tf and smallest doclen per tf.';

-- Over one conversation (bm25_search) or several (a tenant's, search with
-- scope 'tenant'): the statistics of the conversations together.
--
-- Top k without scoring every posting (MaxScore). A posting's contribution
-- is wt * tf / (tf + A + B * doclen) (A = k1 (1 - b), B = k1 b / avgdl), at
-- most wt / (1 + A / max_tf + B * min_len_per_tf) by its term's bounds in
-- bm25_terms. The terms with the smallest bounds (the most common, as a
-- rule: a speaker's name in every memory, "user" and "like" in every fact
-- of a tenant) are set aside, as many as hold most of the postings; the
-- others' postings are summed, and the k-th best of those partial sums,
-- theta, is a score the k-th result reaches at least. When the set-aside
-- terms' bounds together are below theta, a memory that holds only those
-- terms cannot reach the top k, and neither can one whose partial sum plus
-- the bounds stays below theta: only the remaining candidates get the
-- set-aside terms' contributions, looked up by the whole key (the
-- candidate's conversation, the term, the memory), and their postings are
-- never read. Otherwise (or when the candidates are too many for lookups
-- to pay) their postings are summed too. Exact either way: the same top k,
-- scores and ranks as scoring every posting (a randomized test compares
-- them). Scores are rounded to 1e-9, so that the order in which a memory's
-- contributions were added (which differs between the plans, and changes
-- the last bit of a sum) cannot reorder memories of equal score; theta is
-- compared with a slack of 1e-6 above that. Queries whose terms have fewer
-- than bm25_skip_min_postings postings are scored at once.
CREATE OR REPLACE FUNCTION mneme._bm25_search(
    conversation_ids uuid[],
    query text,
    k int,
    since timestamptz,
    until timestamptz)
RETURNS TABLE (memory_id uuid, score float8, rank int)
LANGUAGE plpgsql STABLE
SECURITY DEFINER
ROWS 100
SET search_path = pg_catalog, pg_temp
SET jit = off
AS $$
#variable_conflict use_column
DECLARE
    v_ids     uuid[] := _bm25_search.conversation_ids;
    v_k       int := _bm25_search.k;
    v_since   timestamptz := _bm25_search.since;
    v_until   timestamptz := _bm25_search.until;
    v_k1      float8 := mneme.setting('bm25_k1')::float8;
    v_b       float8 := mneme.setting('bm25_b')::float8;
    v_expired uuid[];
    v_n       float8;
    v_total   float8;
    v_avgdl   float8;
    v_terms   text[];    -- the query's terms in the conversations, largest bound first
    v_wts     float8[];  -- their weights idf * (k1 + 1)
    v_bounds  float8[];  -- the most a posting of each can contribute
    v_dfs     float8[];
    v_postings float8;   -- their postings (df) together
    v_last    int;
    v_split   int;       -- terms 1 .. v_split are summed, the rest set aside
    v_kept    float8;    -- the summed terms' postings
    v_aside   float8;    -- the set-aside terms' bounds together
    v_pc      uuid[];    -- the partial sums: conversation, memory, sum
    v_pm      uuid[];
    v_ps      float8[];
    v_theta   float8;
    v_cc      uuid[];    -- the candidates: conversation, memory, partial sum
    v_cm      uuid[];
    v_cp      float8[];
    v_lm      uuid[];    -- the candidates' sums of the set-aside terms: memory, sum
    v_ls      float8[];
BEGIN
    SELECT sum(s.n), sum(s.total_len) INTO v_n, v_total FROM mneme.bm25_stats s WHERE s.conversation_id = ANY (v_ids);
    IF v_n IS NULL THEN
        RETURN;  -- unknown conversations, or nothing active in them
    END IF;
    -- Expired memories are still in the statistics: take them out here.
    SELECT array_agg(m.id) INTO v_expired FROM mneme.memories m
    WHERE m.conversation_id = ANY (v_ids) AND m.valid_until IS NOT NULL
      AND m.status = 'active' AND m.valid_until <= now();
    IF v_expired IS NOT NULL THEN
        SELECT v_n - count(*), v_total - coalesce(sum(d.doclen), 0) INTO v_n, v_total
        FROM mneme.bm25_docs d WHERE d.memory_id = ANY (v_expired);
    END IF;
    IF v_n <= 0 OR v_total <= 0 THEN
        RETURN;
    END IF;
    v_avgdl := v_total / v_n;

    WITH x AS MATERIALIZED (
        SELECT s.term, s.max_tf, s.min_len, s.df
        FROM mneme._bm25_term_stats(v_ids, tsvector_to_array(mneme.bm25_tsvector(_bm25_search.query)), v_expired) s
    )
    SELECT array_agg(w.term), array_agg(w.wt), array_agg(w.bound), array_agg(w.df), sum(w.df)
    INTO v_terms, v_wts, v_bounds, v_dfs, v_postings
    FROM (SELECT x.term, x.df, mneme._bm25_weight(v_n, x.df, v_k1) AS wt,
                 -- (1 + 1e-9): rounding must not put a bound below a posting's contribution
                 mneme._bm25_weight(v_n, x.df, v_k1) * (1 + 1e-9)
                   / (1 + v_k1 * (1 - v_b) / greatest(x.max_tf, 1) + v_k1 * v_b / v_avgdl * x.min_len) AS bound
          FROM x WHERE x.df > 0
          ORDER BY bound DESC, x.term) w;  -- largest bound first
    IF v_terms IS NULL THEN
        RETURN;
    END IF;
    v_last := cardinality(v_terms);

    -- Skipping pays when the set-aside terms hold most of the postings
    -- (measured: where they hold about as many as the others, summing the
    -- others first and joining costs more than summing everything at once),
    -- and when the summed terms hold at least k postings (else there is no
    -- theta). The most terms summed that meet both: each one more summed
    -- raises theta, and each one fewer set aside lowers their bounds. More
    -- than one term is set aside only where their bounds together are below
    -- half the smallest bound summed: where the bounds are close (a query
    -- of three words of 1% to 5% of the memories), theta stayed below the
    -- set-aside bounds, nothing was skipped and the split cost a second
    -- pass (docs/performance.md, "The BM25 leg").
    v_kept := v_postings;
    v_aside := 0;
    FOR i IN REVERSE v_last - 1 .. 1 LOOP
        v_kept := v_kept - v_dfs[i + 1];
        v_aside := v_aside + v_bounds[i + 1];
        EXIT WHEN v_kept < v_k;
        IF v_postings - v_kept >= 2 * v_kept AND (i = v_last - 1 OR v_aside < 0.5 * v_bounds[i]) THEN
            v_split := i;
            EXIT;
        END IF;
    END LOOP;
    -- The partial sums of the summed terms, theta (their k-th best), the
    -- candidates that can still reach it, as arrays; then, when theta is
    -- above the set-aside terms' bounds and the candidates are few, only
    -- the candidates' postings of the set-aside terms are read (one lookup
    -- of the whole key per candidate and term), else every posting is
    -- summed below. Separate statements: theta is known before anything
    -- else is read, so a split that cannot skip costs its partial sums (at
    -- most a third of the postings) and nothing more (one statement that
    -- summed the rest and joined it to the partial sums cost up to 1.8
    -- times summing everything: docs/performance.md, "The BM25 leg, fifth
    -- session"); and on Citus one statement fails ("cannot handle unplanned
    -- sub-select"). The same rounding as summing everything, so the same
    -- top k, scores and ranks.
    IF v_split IS NOT NULL AND v_postings >= mneme.setting('bm25_skip_min_postings')::float8 THEN
        SELECT array_agg(s.conversation_id), array_agg(s.memory_id), array_agg(s.score)
          INTO v_pc, v_pm, v_ps
          FROM mneme._bm25_sums(v_ids, v_terms[:v_split], v_wts[:v_split], v_k1, v_b, v_avgdl,
                                v_expired, v_since, v_until) s;
        SELECT x.ps INTO v_theta FROM unnest(v_ps) AS x(ps) ORDER BY 1 DESC OFFSET v_k - 1 LIMIT 1;
        IF v_theta > v_aside + 1e-6 THEN
            SELECT array_agg(u.c), array_agg(u.m), array_agg(u.ps) INTO v_cc, v_cm, v_cp
              FROM unnest(v_pc, v_pm, v_ps) AS u(c, m, ps) WHERE u.ps + v_aside + 1e-6 >= v_theta;
            IF cardinality(v_cm) * 4 * (v_last - v_split) <= v_postings - v_kept THEN
                -- The candidates' sums of the set-aside terms (lm, ls), by
                -- the whole key: on Citus one read on each shard, by
                -- conversation, term and memory, each term's weight by its
                -- position; on one server each candidate's key with its own
                -- conversation, not every conversation's.
                IF mneme._distributed('mneme.bm25_postings') THEN
                    SELECT array_agg(x.memory_id), array_agg(x.s) INTO v_lm, v_ls
                    FROM (SELECT p.memory_id,
                                 sum(v_wts[v_split + array_position(v_terms[v_split + 1:], p.term)]
                                     * mneme._bm25_tf(p.tf, p.doclen, v_k1, v_b, v_avgdl)) AS s
                          FROM mneme.bm25_postings p
                          WHERE p.conversation_id = ANY (v_cc) AND p.term = ANY (v_terms[v_split + 1:])
                            AND p.memory_id = ANY (v_cm)
                          GROUP BY p.memory_id) x;
                ELSE
                    SELECT array_agg(x.memory_id), array_agg(x.s) INTO v_lm, v_ls
                    FROM (SELECT p.memory_id, sum(t.wt * mneme._bm25_tf(p.tf, p.doclen, v_k1, v_b, v_avgdl)) AS s
                          FROM unnest(v_cc, v_cm) AS c(conv, id)
                          CROSS JOIN unnest(v_terms[v_split + 1:], v_wts[v_split + 1:]) AS t(term, wt)
                          JOIN mneme.bm25_postings p ON p.conversation_id = c.conv AND p.term = t.term AND p.memory_id = c.id
                          GROUP BY p.memory_id) x;
                END IF;
                RETURN QUERY
                WITH scored AS (
                    SELECT c.id, round((c.ps + coalesce(lp.s, 0)) * 1e9) / 1e9 AS score
                    FROM unnest(v_cm, v_cp) AS c(id, ps)
                    LEFT JOIN unnest(v_lm, v_ls) AS lp(memory_id, s) ON lp.memory_id = c.id
                )
                SELECT top.id, top.score, (rank() OVER (ORDER BY top.score DESC))::int
                FROM (SELECT scored.id, scored.score FROM scored ORDER BY 2 DESC, 1 LIMIT v_k) top
                ORDER BY top.score DESC, top.id;
                RETURN;
            END IF;
        END IF;
    END IF;
    IF mneme._distributed('mneme.bm25_postings') THEN
        RETURN QUERY
        SELECT top.memory_id, top.score, (rank() OVER (ORDER BY top.score DESC))::int  -- equal scores share a rank
        FROM (SELECT s.memory_id, round(s.score * 1e9) / 1e9 AS score
              FROM mneme._bm25_sums(v_ids, v_terms, v_wts, v_k1, v_b, v_avgdl, v_expired, v_since, v_until) s
              ORDER BY 2 DESC, 1 LIMIT v_k) top
        ORDER BY top.score DESC, top.memory_id;
        RETURN;
    END IF;
    -- Every posting summed, grouped by memory alone (a memory is in one
    -- conversation; _bm25_sums groups by conversation and memory for the
    -- lookups above, and hashing both ids cost about a tenth more here).
    -- The lookups of _bm25_sums: by the whole key, one conversation and
    -- term at a time (TestSmallConversationCostIgnoresTheRest).
    RETURN QUERY
    SELECT top.memory_id, top.score, (rank() OVER (ORDER BY top.score DESC))::int  -- equal scores share a rank
    FROM (SELECT p.memory_id, round(sum(t.wt * mneme._bm25_tf(p.tf, p.doclen, v_k1, v_b, v_avgdl)) * 1e9) / 1e9 AS score
          FROM unnest(v_terms, v_wts) AS t(term, wt), unnest(v_ids) AS c(id), LATERAL (
              SELECT p.memory_id, p.tf, p.doclen FROM mneme.bm25_postings p
              WHERE p.conversation_id = c.id AND p.term = t.term) p
          WHERE (v_expired IS NULL OR p.memory_id <> ALL (v_expired))
            AND ((v_since IS NULL AND v_until IS NULL)
                 OR EXISTS (SELECT 1 FROM mneme.memories m WHERE m.id = p.memory_id
                            AND (v_since IS NULL OR m.created_at >= v_since) AND (v_until IS NULL OR m.created_at < v_until)))
          GROUP BY p.memory_id
          ORDER BY 2 DESC, 1 LIMIT v_k) top
    ORDER BY top.score DESC, top.memory_id;
END
$$;
COMMENT ON FUNCTION mneme._bm25_search(uuid[], text, int, timestamptz, timestamptz) IS
    'Internal: bm25_search over the conversations together (their statistics summed); no argument checks. '
    'Skips the postings of the most common terms when they cannot lift a memory into the top k (MaxScore); exact.';

CREATE OR REPLACE FUNCTION mneme.bm25_search(
    conversation_id uuid,
    query text,
    k int DEFAULT 100,
    since timestamptz DEFAULT NULL,
    until timestamptz DEFAULT NULL)
RETURNS TABLE (memory_id uuid, score float8, rank int)
LANGUAGE plpgsql STABLE
SECURITY DEFINER
ROWS 100
SET search_path = pg_catalog, pg_temp
SET jit = off
AS $$
#variable_conflict use_column
BEGIN
    PERFORM mneme._enter(bm25_search.conversation_id);  -- the caller forwarded first (Citus: mneme._enter)
    IF bm25_search.conversation_id IS NULL OR bm25_search.query IS NULL OR bm25_search.k IS NULL THEN
        RAISE EXCEPTION 'conversation_id, query and k must not be NULL' USING ERRCODE = '22004';
    END IF;
    IF bm25_search.k < 1 THEN
        RAISE EXCEPTION 'k must be at least 1' USING ERRCODE = '22023';
    END IF;
    PERFORM mneme._check_time('since', bm25_search.since);
    PERFORM mneme._check_time('until', bm25_search.until);
    IF bm25_search.since > bm25_search.until THEN
        RAISE EXCEPTION 'since (%) is after until (%)', bm25_search.since, bm25_search.until USING ERRCODE = '22023',
            HINT = 'the range is since <= created_at < until';
    END IF;
    IF NOT mneme._readable_conversation(bm25_search.conversation_id) THEN
        RETURN;  -- another tenant's: its statistics are not this session's to see
    END IF;
    RETURN QUERY SELECT * FROM mneme._bm25_search(ARRAY[bm25_search.conversation_id], bm25_search.query, bm25_search.k,
                                                  bm25_search.since, bm25_search.until);
END
$$;
COMMENT ON FUNCTION mneme.bm25_search(uuid, text, int, timestamptz, timestamptz) IS
    'The BM25 leg of retrieval: top k active, unexpired memories of the conversation by Okapi BM25 '
    '(k1, b from settings bm25_k1, bm25_b; idf = ln(1 + (N - df + 0.5) / (df + 0.5)); N, df and the average '
    'length over the conversation''s active, unexpired memories), created in [since, until) when given. '
    'Equal scores share a rank (and are listed by memory id).';
GRANT EXECUTE ON FUNCTION mneme.bm25_search(uuid, text, int, timestamptz, timestamptz) TO mneme_app, mneme_worker, mneme_admin;
