-- =============================================================================
-- mneme retrieval, part 5: the context for a prompt within a word budget
-- (mneme.context, mneme.context_items). The memories mneme.search ranks
-- first; of their episodes, the turns that match the query (placed by the
-- episode's rank and the turn's own BM25 rank, fused), each with its
-- neighbours; facts whole; the budget filled in that order and never
-- exceeded. docs/context.md has the why and the measurements.
-- Idempotent: re-applied on every migrate.
-- =============================================================================

-- Words as the budget counts them: runs of characters other than the word
-- separators (mneme._word_separator, Unicode White_Space as Go's
-- strings.Fields); the same rule as the generated column
-- mneme.messages.words (goose 00048).
CREATE OR REPLACE FUNCTION mneme._words(input text)
RETURNS int
LANGUAGE sql IMMUTABLE PARALLEL SAFE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
SELECT cardinality(array_remove(regexp_split_to_array(_words.input, mneme._word_separator() || '+'), ''))
$$;
COMMENT ON FUNCTION mneme._words(text) IS
    'Internal: the number of words of a text (separated by Unicode White_Space, as Go''s strings.Fields), '
    'as the context budget counts them.';

-- The largest budget a context takes: far above any prompt, small enough
-- that a typo (10^9) is an error rather than a scan of every memory.
CREATE OR REPLACE FUNCTION mneme._context_budget_max()
RETURNS int
LANGUAGE sql IMMUTABLE PARALLEL SAFE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$ SELECT 100000 $$;

-- The anchored turns of a context, in the order the budget takes them: of
-- the top `candidates` memories of mneme.search, every episode turn that
-- matches the query is an anchor (by BM25 of the turn, idf of the scope's
-- memories, and by cosine when turns are found by meaning), placed by its
-- episode's rank and its own ranks fused; each anchor brings its
-- neighbours within `window` turns. An episode none of whose turns match
-- anchors on its first turn; a fact is its own anchor (msg_id NULL).
-- The memories are `hits` when given (mneme.context_candidates ranked them
-- already), else mneme.search's.
CREATE OR REPLACE FUNCTION mneme._context_anchors(
    conversation_id uuid,
    query text,
    query_embedding real[],
    since timestamptz,
    until timestamptz,
    at timestamptz,
    scope text,
    conversation_ids uuid[],
    hits mneme.retrieval[])
RETURNS TABLE (anchor int, rank int, memory_id uuid, kind text, label text, score float8, first_at timestamptz,
               msg_id bigint, distance int, cost int)
LANGUAGE plpgsql STABLE
SECURITY DEFINER
ROWS 200
SET search_path = pg_catalog, pg_temp
SET jit = off
AS $$
#variable_conflict use_column
DECLARE
    v_convs  uuid[] := _context_anchors.conversation_ids;
    v_hits   mneme.retrieval[] := _context_anchors.hits;
    v_cand   int := mneme.setting('context_candidates')::int;
    v_win    int := mneme.setting('context_window')::int;
    v_k1     float8 := mneme.setting('bm25_k1')::float8;
    v_b      float8 := mneme.setting('bm25_b')::float8;
    v_rrf    float8 := mneme.setting('rrf_k')::float8;
    v_terms  text[] := tsvector_to_array(mneme.bm25_tsvector(_context_anchors.query));
    v_n      float8;
    -- Turns by meaning: with an external embedder and the query's embedding,
    -- the turns that have embeddings are ranked by cosine too.
    -- (an empty query_embedding asks for BM25 alone)
    v_meaning boolean := coalesce(cardinality(_context_anchors.query_embedding), 0) > 0
                         AND mneme.setting('embedder') #>> '{}' <> 'hash';
    -- The candidates' rows and turns are read by id. On Citus the read
    -- names the conversations too, so that it goes to their shards only; on
    -- one server the primary key on the id is the plan, and a conversation
    -- filter there let the planner scan a conversation's turns instead
    -- (TestSmallConversationCostIgnoresTheRest: 2.4 times the buffers).
    -- v_one_server is a constant of the call: the planner folds the filter
    -- away there, and to the conversation filter on Citus.
    v_one_server boolean := NOT mneme._distributed('mneme.memories');
BEGIN
    -- The search first, by itself, in rank order: joined with
    -- mneme.memories in one statement, Citus pushed the call into the query
    -- on every shard, where it ran once per shard and, with scope tenant,
    -- found only the memories of that shard's worker (the context of a
    -- delegated call left out the tenant's other conversations:
    -- TestCitusDelegatedTenantScope; issue 47).
    IF v_hits IS NULL THEN
        v_hits := ARRAY(SELECT s FROM mneme.search(_context_anchors.conversation_id, _context_anchors.query, v_cand,
                                                   _context_anchors.query_embedding, _context_anchors.since,
                                                   _context_anchors.until, _context_anchors.at, _context_anchors.scope) s);
    END IF;
    SELECT sum(s.n) INTO v_n FROM mneme.bm25_stats s WHERE s.conversation_id = ANY (v_convs);
    RETURN QUERY
    WITH ranked AS (
        SELECT s.memory_id AS id, s.ordinality::int AS ord, s.score, s.label, s.kind, s.content,
               coalesce(m.source_first_at, m.created_at) AS first_at, m.source_message_ids AS msgs
        FROM unnest(v_hits) WITH ORDINALITY AS s
        JOIN mneme.memories m ON m.id = s.memory_id AND (v_one_server OR m.conversation_id = ANY (v_convs))
    ), idf AS MATERIALIZED (  -- the query's terms weighed by their rarity among the scope's memories, read once (not once per turn)
        SELECT d.term, mneme._bm25_weight(v_n, d.df, v_k1) AS wt
        FROM mneme._bm25_term_stats(v_convs, v_terms, NULL) d
        WHERE d.df > 0
    ), turns AS (
        SELECT r.ord, msg.id, msg.words + CASE WHEN msg.role ~ mneme._word_separator()
                                       THEN mneme._words(msg.role) ELSE 1 END AS cost,  -- a one-word role costs 1: no regexp split
               msg.words, msg.terms,
               (row_number() OVER (PARTITION BY r.ord ORDER BY msg.id))::int AS pos
        FROM ranked r JOIN mneme.messages msg ON msg.id = ANY (r.msgs) AND (v_one_server OR msg.conversation_id = ANY (v_convs))
        WHERE r.kind = 'episodic' AND r.msgs IS NOT NULL
    ), meaning AS MATERIALIZED (  -- the turns' cosine rank to the query (its top context_candidates), ranked once (not once per turn)
        SELECT d.message_id AS id, d.vrank
        FROM (SELECT x.message_id, (rank() OVER (ORDER BY x.distance, x.message_id))::int AS vrank
              FROM mneme._turn_distances(CASE WHEN v_meaning THEN ARRAY(SELECT t.id FROM turns t) END,
                                         _context_anchors.query_embedding, v_convs) x
              WHERE x.distance IS NOT NULL) d
        WHERE d.vrank <= v_cand
    ), avglen AS (
        SELECT greatest(avg(t.words), 1)::float8 AS len FROM turns t
    ), scored AS (  -- BM25 of each turn: its term frequencies, the scope's idf
        SELECT t.ord, t.id, t.pos, t.cost, (SELECT v.vrank FROM meaning v WHERE v.id = t.id) AS vrank,
               coalesce((SELECT sum(w.wt * mneme._bm25_tf(x.tf, t.words, v_k1, v_b, a.len))
                         FROM (SELECT u.lexeme, cardinality(u.positions)::float8 AS tf
                               FROM unnest(t.terms) AS u WHERE u.lexeme = ANY (v_terms)) x
                         JOIN idf w ON w.term = x.lexeme), 0) AS score
        FROM turns t, avglen a
    ), ranked_turns AS (
        SELECT s.*, (rank() OVER (ORDER BY s.score DESC))::int AS trank,
               bool_or(s.score > 0 OR s.vrank IS NOT NULL) OVER (PARTITION BY s.ord) AS matched
        FROM scored s
    ), anchors AS (
        -- Each matching turn by the reciprocal ranks of its episode, its
        -- BM25 rank among all the turns and its cosine rank; an episode
        -- with no matching turn on its first turn; a fact on itself.
        SELECT t.ord, t.pos AS apos, 1.0 / (v_rrf + t.ord) + CASE WHEN t.score > 0 THEN 1.0 / (v_rrf + t.trank) ELSE 0 END
                                     + coalesce(1.0 / (v_rrf + t.vrank), 0) AS fused
        FROM ranked_turns t WHERE t.score > 0 OR t.vrank IS NOT NULL
        UNION ALL
        SELECT t.ord, 1, 1.0 / (v_rrf + t.ord) FROM ranked_turns t WHERE NOT t.matched AND t.pos = 1
        UNION ALL
        SELECT r.ord, 0, 1.0 / (v_rrf + r.ord) + 1.0 / (v_rrf + r.ord)
        FROM ranked r WHERE r.kind <> 'episodic' OR r.msgs IS NULL
    ), anchor_order AS (
        SELECT a.*, (row_number() OVER (ORDER BY a.fused DESC, a.ord, a.apos))::int AS an FROM anchors a
    )
    SELECT a.an, a.ord, r.id, r.kind, r.label, r.score, r.first_at,
           s.id, abs(s.pos - a.apos)::int,
           coalesce(s.cost, 1 + mneme._words(r.content))::int
    FROM anchor_order a JOIN ranked r ON r.ord = a.ord
    LEFT JOIN scored s ON s.ord = a.ord AND a.apos > 0 AND abs(s.pos - a.apos) <= v_win
    ORDER BY a.an, abs(s.pos - a.apos), s.pos;
END
$$;
COMMENT ON FUNCTION mneme._context_anchors(uuid, text, real[], timestamptz, timestamptz, timestamptz, text, uuid[], mneme.retrieval[]) IS
    'Internal to mneme.context_items: the anchored turns (and facts) of the top context_candidates memories of '
    'mneme.search (or of hits, when given) with their context_window neighbours, in the order the budget takes them.';

-- The body of mneme.context_items, on the memories `hits` when given
-- (mneme.context_candidates ranked them already; NULL: mneme.search's).
CREATE OR REPLACE FUNCTION mneme._context_fill(
    conversation_id uuid,
    query text,
    budget int,
    query_embedding real[],
    since timestamptz,
    until timestamptz,
    at timestamptz,
    scope text,
    hits mneme.retrieval[])
RETURNS TABLE (item int, memory_id uuid, kind text, label text, score float8, first_at timestamptz,
               message_ids bigint[], words int, text text)
LANGUAGE plpgsql STABLE
SECURITY DEFINER
ROWS 20
SET search_path = pg_catalog, pg_temp
SET jit = off
AS $$
#variable_conflict use_column
DECLARE
    v_left   int := _context_fill.budget;
    -- per candidate memory, by rank: the words it got (NULL: none yet) and
    -- the anchor row it first got room by (its memory, kind, label, ...)
    v_words  int[] := '{}';
    v_row    int[] := '{}';
    v_k      int;
    v_order  int[] := '{}';     -- the ranks in the order their memories got room
    v_newest boolean := mneme.setting('context_order') #>> '{}' = 'newest';
    v_used   bigint[] := '{}';  -- every turn taken: no turn twice
    v_used_k int[] := '{}';     -- and the rank it was taken for
    v_mems   uuid[];            -- the memories chosen
    v_convs  uuid[];            -- the scope's conversations
    v_an     int;               -- the anchor being filled, and whether it is in
    v_anchor boolean;
    v_cost   int;
    -- the anchored turns, in the order the budget takes them
    a_an     int[];
    a_rank   int[];
    a_mem    uuid[];
    a_kind   text[];
    a_label  text[];
    a_score  float8[];
    a_first  timestamptz[];
    a_msg    bigint[];
    a_dist   int[];
    a_cost   int[];
    v_stages int[];             -- the budgets filled in turn, smallest first
    v_stage  int;
    v_spent  int := 0;          -- the words taken so far
    v_first  int[] := '{}';     -- per rank, the first anchor it got room by
    v_b      int;
    i        int;
BEGIN
    IF _context_fill.budget IS NULL THEN
        RAISE EXCEPTION 'budget must not be NULL' USING ERRCODE = '22004';
    END IF;
    IF _context_fill.budget < 1 OR _context_fill.budget > mneme._context_budget_max() THEN
        RAISE EXCEPTION 'budget must be 1 to % words, got %', mneme._context_budget_max(), _context_fill.budget
            USING ERRCODE = '22023',
            HINT = 'the budget is the most words the context holds (whitespace-separated, headings and speakers included)';
    END IF;
    -- search (inside _context_anchors) checks every other argument before
    -- anything is read; the scope first, for the statistics.
    v_convs := mneme._scope_conversations(_context_fill.conversation_id, _context_fill.scope);
    SELECT array_agg(x.anchor ORDER BY x.ordinality), array_agg(x.rank ORDER BY x.ordinality), array_agg(x.memory_id ORDER BY x.ordinality),
           array_agg(x.kind ORDER BY x.ordinality), array_agg(x.label ORDER BY x.ordinality), array_agg(x.score ORDER BY x.ordinality),
           array_agg(x.first_at ORDER BY x.ordinality), array_agg(x.msg_id ORDER BY x.ordinality), array_agg(x.distance ORDER BY x.ordinality),
           array_agg(x.cost ORDER BY x.ordinality)
    INTO a_an, a_rank, a_mem, a_kind, a_label, a_score, a_first, a_msg, a_dist, a_cost
    FROM mneme._context_anchors(_context_fill.conversation_id, _context_fill.query,
                                _context_fill.query_embedding, _context_fill.since, _context_fill.until,
                                _context_fill.at, _context_fill.scope, v_convs, _context_fill.hits) WITH ORDINALITY AS x;
    -- A larger budget never loses what a smaller one had. Filling in
    -- anchor order and leaving out what does not fit (so that a shorter
    -- turn after it may fit) is not monotone by itself: with twice the
    -- budget a long turn fits early and crowds out a short one taken
    -- before. So the budget is filled in stages, budget / 2^k for k = n ..
    -- 0, each stage going on from what the one
    -- before took: the stages of budget 2B are those of B and one more, so
    -- its items hold every turn and fact of B's (TestContextBudgetMonotone).
    -- Stages stop at 100 words (B >= 100 for the guarantee): smaller ones
    -- fill the budget with short turns of low rank first, and cost recall
    -- (LoCoMo at 200 words 0.606 with stages down to 1 word, against 0.627
    -- without stages; docs/eval.md, "Budget monotonicity").
    v_b := _context_fill.budget;
    WHILE v_b >= 100 OR v_b = _context_fill.budget LOOP
        v_stages := v_b || v_stages;
        v_b := v_b / 2;
    END LOOP;
    FOREACH v_stage IN ARRAY v_stages LOOP
        v_left := v_stage - v_spent;
        v_an := NULL;
        FOR i IN 1 .. coalesce(cardinality(a_an), 0) LOOP
            v_k := a_rank[i];
            IF a_msg[i] IS NULL THEN  -- a fact: whole or not at all ("- " and its words)
                IF v_words[v_k] IS NULL AND a_cost[i] <= v_left THEN
                    v_words[v_k] := a_cost[i];
                    v_row[v_k] := i;
                    v_left := v_left - a_cost[i];
                    v_spent := v_spent + a_cost[i];
                    v_order := v_order || v_k;
                    v_first[v_k] := a_an[i];
                END IF;
                CONTINUE;
            END IF;
            IF v_an IS DISTINCT FROM a_an[i] THEN
                v_an := a_an[i];
                v_anchor := false;  -- a window's neighbours come only with its matched turn
            END IF;
            IF a_msg[i] = ANY (v_used) THEN
                v_anchor := v_anchor OR a_dist[i] = 0;  -- already in: no turn twice
                CONTINUE;
            END IF;
            IF a_dist[i] = 0 OR v_anchor THEN
                -- A turn that does not fit is left out; a shorter one after it may
                -- fit. An episode's first turn brings its "### date" heading (2 words).
                v_cost := a_cost[i] + CASE WHEN v_words[v_k] IS NULL THEN 2 ELSE 0 END;
                IF v_cost <= v_left THEN
                    IF v_words[v_k] IS NULL THEN
                        v_order := v_order || v_k;
                        v_row[v_k] := i;
                    END IF;
                    v_words[v_k] := coalesce(v_words[v_k], 0) + v_cost;
                    v_left := v_left - v_cost;
                    v_spent := v_spent + v_cost;
                    v_first[v_k] := least(coalesce(v_first[v_k], a_an[i]), a_an[i]);
                    v_used := v_used || a_msg[i];
                    v_used_k := v_used_k || v_k;
                    v_anchor := v_anchor OR a_dist[i] = 0;
                END IF;
            END IF;
        END LOOP;
    END LOOP;
    -- In the order of the anchors they got room by (the stages took some
    -- sooner than their anchor's turn came).
    v_order := ARRAY(SELECT u.o FROM unnest(v_order) AS u(o) ORDER BY v_first[u.o], u.o);
    -- The items, in one statement (not one per item): each memory once,
    -- its row read once. Chosen by rank; shown (setting context_order)
    -- newest first, by the latest turn shown (a fact: its time), so where
    -- two memories disagree the later one is read first (docs/revision.md),
    -- or in the order each first got room (rank). An episode's turns under
    -- its "### date" heading, "speaker: text" per line, in conversation
    -- order; with newest, its separate passages (runs of turns adjacent in
    -- the episode's source_message_ids) newest first, each in conversation
    -- order, a blank line (no word) where a passage ends and an older one
    -- follows (issue 52): the rule that lists items newest first, one level
    -- down, so that where an update was said a few turns after the value it
    -- replaced, in the same episode but not in the same passage, the update
    -- is read first. A fact: "- " and its content, with the messages it was
    -- said in (source_message_ids) as its message_ids. Reads by id name the
    -- conversations too (on Citus: their shards only), each table in a
    -- materialized CTE of its own that joins nothing (on Citus: a
    -- distributed subplan whose rows the rest of the statement, on the
    -- coordinator, joins).
    v_mems := ARRAY(SELECT a_mem[v_row[u.o]] FROM unnest(v_order) AS u(o));
    RETURN QUERY
    WITH mems AS MATERIALIZED (
        SELECT m.id, m.source_message_ids AS src, m.content, coalesce(m.source_last_at, m.created_at) AS mem_at
        FROM mneme.memories m
        WHERE m.id = ANY (v_mems) AND m.conversation_id = ANY (v_convs)
    ), turns AS MATERIALIZED (
        SELECT msg.id, msg.role || ': ' || msg.content AS line, msg.created_at
        FROM mneme.messages msg
        WHERE msg.id = ANY (v_used) AND msg.conversation_id = ANY (v_convs)
    ), chosen AS (  -- in the order each got room (n)
        SELECT u.n, u.o, a_mem[v_row[u.o]] AS memory_id, a_kind[v_row[u.o]] AS kind, a_label[v_row[u.o]] AS label,
               a_score[v_row[u.o]] AS score, a_first[v_row[u.o]] AS first_at, v_words[u.o] AS words,
               m.src, m.content, m.mem_at
        FROM unnest(v_order) WITH ORDINALITY AS u(o, n)
        LEFT JOIN mems m ON m.id = a_mem[v_row[u.o]]
    ), placed AS (  -- each turn shown, by its place in the episode; k counts them in that order
        SELECT c.n, x.id, coalesce(array_position(c.src, x.id), 0)::bigint AS pos,
               row_number() OVER (PARTITION BY c.n ORDER BY coalesce(array_position(c.src, x.id), 0), x.id) AS k
        FROM chosen c JOIN unnest(v_used, v_used_k) AS x(id, o) ON x.o = c.o
    ), passages AS (  -- adjacent turns (pos - k constant) are one passage; it ends at its largest pos
        SELECT p.n, p.id, p.pos, max(p.pos) OVER (PARTITION BY p.n, p.pos - p.k) AS passage_end
        FROM placed p
    ), ordered AS (  -- the order shown: passages newest first (newest), else by id
        SELECT p.n, p.id,
               row_number() OVER (PARTITION BY p.n ORDER BY CASE WHEN v_newest THEN p.passage_end END DESC,
                                                           CASE WHEN v_newest THEN p.pos END, p.id) AS r
        FROM passages p
    ), lines AS (
        SELECT o.n, o.r, t.line, t.created_at,
               CASE WHEN o.id < lag(o.id) OVER (PARTITION BY o.n ORDER BY o.r) THEN E'\n\n' ELSE E'\n' END AS sep
        FROM ordered o JOIN turns t ON t.id = o.id
    ), shown AS (
        SELECT o.n, array_agg(o.id ORDER BY o.r) AS ids FROM ordered o GROUP BY o.n
    ), bodies AS (
        SELECT l.n, string_agg(l.line, l.sep ORDER BY l.r) AS body, max(l.created_at) AS turn_at FROM lines l GROUP BY l.n
    )
    SELECT (row_number() OVER (ORDER BY CASE WHEN v_newest THEN coalesce(b.turn_at, c.mem_at) END DESC, c.n))::int,
           c.memory_id, c.kind, c.label, c.score, c.first_at,
           CASE WHEN s.ids IS NOT NULL THEN s.ids ELSE c.src END,
           c.words,
           CASE WHEN s.ids IS NOT NULL
                THEN '### ' || to_char(c.first_at AT TIME ZONE 'UTC', 'YYYY-MM-DD') || E'\n' || b.body
                ELSE '- ' || c.content END
    FROM chosen c LEFT JOIN shown s ON s.n = c.n LEFT JOIN bodies b ON b.n = c.n
    ORDER BY 1;
END
$$;
COMMENT ON FUNCTION mneme._context_fill(uuid, text, int, real[], timestamptz, timestamptz, timestamptz, text, mneme.retrieval[]) IS
    'Internal: the body of mneme.context_items, on the given hits (NULL: mneme.search''s top context_candidates).';

CREATE OR REPLACE FUNCTION mneme.context_items(
    conversation_id uuid,
    query text,
    budget int DEFAULT 1000,
    query_embedding real[] DEFAULT NULL,
    since timestamptz DEFAULT NULL,
    until timestamptz DEFAULT NULL,
    at timestamptz DEFAULT now(),
    scope text DEFAULT 'conversation')
RETURNS TABLE (item int, memory_id uuid, kind text, label text, score float8, first_at timestamptz,
               message_ids bigint[], words int, text text)
LANGUAGE plpgsql STABLE
SECURITY DEFINER
ROWS 20
SET search_path = pg_catalog, pg_temp
SET jit = off
AS $$
DECLARE
    v__entered boolean := mneme._enter(context_items.conversation_id);  -- the caller forwarded first (Citus: mneme._enter)
BEGIN
    RETURN QUERY
    SELECT * FROM mneme._context_fill(context_items.conversation_id, context_items.query, context_items.budget,
                                      context_items.query_embedding, context_items.since, context_items.until,
                                      context_items.at, context_items.scope, NULL);
END
$$;
COMMENT ON FUNCTION mneme.context_items(uuid, text, int, real[], timestamptz, timestamptz, timestamptz, text) IS
    'The memory context for a prompt as rows, with no side effects. Of the top context_candidates memories of '
    'mneme.search (same arguments, same ranking), every episode turn that matches the query is an anchor, placed by '
    '1/(rrf_k + memory rank) + 1/(rrf_k + the turn''s BM25 rank among those turns) (BM25 of the turn, idf of the '
    'scope''s memories); an episode with no matching turn anchors on its first turn; a fact is its own anchor. '
    'With an external embedder and query_embedding, the turns that have embeddings are also ranked by cosine '
    '(the top context_candidates anchor too, their 1/(rrf_k + cosine rank) added). '
    'Anchors in that order bring their context_window neighbours; a turn or fact that does not fit is left out; '
    'the budget is filled in stages (budget / 2^k down to 100 words, each going on from the one before), so a '
    'budget of 2B words holds every turn and fact of B''s (B >= 100); '
    'no turn twice. One row per memory, in the order it got room (context_order "newest": by its latest turn shown, '
    'newest first), its turns in conversation order under a "### date" heading (context_order "newest": its '
    'separate passages newest first, a blank line between them, each in conversation order); the words (headings '
    'and speakers included) never exceed budget (1..100000).';
GRANT EXECUTE ON FUNCTION mneme.context_items(uuid, text, int, real[], timestamptz, timestamptz, timestamptz, text) TO mneme_app, mneme_worker, mneme_admin;

-- What mneme.context_items chose from, for a person (mneme ui's search
-- page): mneme.search's top context_candidates with every column, each with
-- the context item it became (NULL: cut by the budget). One search, not
-- two: the context is filled from these very rows.
CREATE OR REPLACE FUNCTION mneme.context_candidates(
    conversation_id uuid,
    query text,
    budget int DEFAULT 1000,
    query_embedding real[] DEFAULT NULL,
    since timestamptz DEFAULT NULL,
    until timestamptz DEFAULT NULL,
    at timestamptz DEFAULT now(),
    scope text DEFAULT 'conversation')
RETURNS TABLE (memory_id uuid, kind text, summary text, content text, created_at timestamptz, score float8, rrf float8,
               bm25_rank int, vector_rank int, retrievability float8, title text, label text, pinned boolean,
               bm25_score float8, vector_distance float8, status text, confidence_score real,
               item int, item_score float8, first_at timestamptz, message_ids bigint[], words int, text text)
LANGUAGE plpgsql STABLE
SECURITY DEFINER
ROWS 50
SET search_path = pg_catalog, pg_temp
SET jit = off
AS $$
#variable_conflict use_column
DECLARE
    v__entered boolean := mneme._enter(context_candidates.conversation_id);  -- the caller forwarded first (Citus: mneme._enter)
    v_hits mneme.retrieval[];
BEGIN
    IF context_candidates.budget IS NULL THEN
        RAISE EXCEPTION 'budget must not be NULL' USING ERRCODE = '22004';
    END IF;
    IF context_candidates.budget < 1 OR context_candidates.budget > mneme._context_budget_max() THEN
        RAISE EXCEPTION 'budget must be 1 to % words, got %', mneme._context_budget_max(), context_candidates.budget
            USING ERRCODE = '22023',
            HINT = 'the budget is the most words the context holds (whitespace-separated, headings and speakers included)';
    END IF;
    v_hits := ARRAY(SELECT s FROM mneme.search(context_candidates.conversation_id, context_candidates.query,
                                               mneme.setting('context_candidates')::int, context_candidates.query_embedding,
                                               context_candidates.since, context_candidates.until, context_candidates.at,
                                               context_candidates.scope) s);
    RETURN QUERY
    SELECT h.memory_id, h.kind, h.summary, h.content, h.created_at, h.score, h.rrf, h.bm25_rank, h.vector_rank,
           h.retrievability, h.title, h.label, h.pinned, h.bm25_score, h.vector_distance, h.status, h.confidence_score,
           c.item, c.score, c.first_at, c.message_ids, c.words, c.text
    FROM unnest(v_hits) WITH ORDINALITY AS h
    LEFT JOIN mneme._context_fill(context_candidates.conversation_id, context_candidates.query, context_candidates.budget,
                                  context_candidates.query_embedding, context_candidates.since, context_candidates.until,
                                  context_candidates.at, context_candidates.scope, v_hits) c ON c.memory_id = h.memory_id
    ORDER BY h.ordinality;
END
$$;
COMMENT ON FUNCTION mneme.context_candidates(uuid, text, int, real[], timestamptz, timestamptz, timestamptz, text) IS
    'What mneme.context_items (same arguments) chose from: mneme.search''s top context_candidates memories in rank '
    'order, every column of search, each with the context item it became (item, its score, first_at, message_ids, '
    'words, text as context_items returns them; NULL where the budget cut it). One search: the context is filled '
    'from these rows.';
GRANT EXECUTE ON FUNCTION mneme.context_candidates(uuid, text, int, real[], timestamptz, timestamptz, timestamptz, text) TO mneme_app, mneme_worker, mneme_admin;

-- The cosine distance of each given message that has an embedding to a
-- query embedding (turns found by meaning in context_items). The messages
-- are of the given conversations (the scope's): on one server the ids are
-- the plan (the primary key, which no statistics can flip); on Citus
-- (sql/citus/200-functions.sql) the read names the conversations too, so it goes to
-- their shards only. The items' reads (_context_fill) name the conversations too.
DO $do$
BEGIN
    EXECUTE replace($fn$
CREATE OR REPLACE FUNCTION mneme._turn_distances(message_ids bigint[], embedding real[], conversation_ids uuid[])
RETURNS TABLE (message_id bigint, distance float8)
LANGUAGE plpgsql STABLE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
-- (PL/pgSQL with one plan for every call: as a SQL function it was planned
-- again at every call, 61 us of planning for 2 us of work; issue 49)
SET plan_cache_mode = force_generic_plan
AS $$
BEGIN
    RETURN QUERY
    SELECT m.id, @@distance@@
    FROM mneme.messages m
    WHERE m.id = ANY (_turn_distances.message_ids) AND m.embedding IS NOT NULL;
END
$$
$fn$, '@@distance@@', CASE WHEN mneme.setting('vector_variant') #>> '{}' = 'pgvector'
        THEN '(m.embedding OPERATOR(@extschema@.<=>) _turn_distances.embedding::mneme.embedding)::float8'
        ELSE 'mneme.cosine_distance(m.embedding::real[], _turn_distances.embedding)' END);
END
$do$;
COMMENT ON FUNCTION mneme._turn_distances(bigint[], real[], uuid[]) IS
    'Internal: the cosine distance of each given message (of the given conversations) that has an embedding to the query embedding.';

CREATE OR REPLACE FUNCTION mneme.context(
    conversation_id uuid,
    query text,
    budget int DEFAULT 1000,
    query_embedding real[] DEFAULT NULL,
    since timestamptz DEFAULT NULL,
    until timestamptz DEFAULT NULL,
    at timestamptz DEFAULT now(),
    scope text DEFAULT 'conversation',
    record boolean DEFAULT true)
RETURNS text
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
SET jit = off
AS $$
DECLARE
    v__entered boolean := mneme._enter(context.conversation_id);  -- the caller forwarded first (Citus: mneme._enter)
    v_md  text;
    v_ids uuid[];
BEGIN
    IF context.record IS NULL THEN
        RAISE EXCEPTION 'record must not be NULL' USING ERRCODE = '22004';
    END IF;
    IF context.record THEN
        PERFORM mneme._require_primary('mneme.context');
    END IF;
    SELECT string_agg(i.text, E'\n\n' ORDER BY i.item), array_agg(i.memory_id ORDER BY i.item)
    INTO v_md, v_ids
    FROM mneme.context_items(context.conversation_id, context.query, context.budget, context.query_embedding,
                             context.since, context.until, context.at, context.scope) i;
    IF context.record AND cardinality(v_ids) > 0 THEN
        PERFORM mneme.add_pending_review(context.conversation_id, v_ids, context.query);
    END IF;
    RETURN coalesce(v_md, '');
END
$$;
COMMENT ON FUNCTION mneme.context(uuid, text, int, real[], timestamptz, timestamptz, timestamptz, text, boolean) IS
    'mneme.context_items as markdown for a prompt: per episode a "### date" heading and "speaker: text" lines, '
    'facts as "- " entries, best first; at most budget words; empty when nothing matches. Records a pending '
    'review of the memories used (like retrieve) unless record => false.';
GRANT EXECUTE ON FUNCTION mneme.context(uuid, text, int, real[], timestamptz, timestamptz, timestamptz, text, boolean) TO mneme_app, mneme_worker, mneme_admin;
