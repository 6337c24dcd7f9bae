-- The BM25 leg's skipping (MaxScore) against scoring every posting, where
-- a speaker's name is in most memories. Run as the owner on the database
-- `mneme-lab bench scale` keeps (docs/performance.md):
--
--   psql "<url of mneme_bench_scale>" -X -f scripts/bench-bm25-skip.sql
--
-- Once, it makes a conversation (fixed id, in the huge conversation's
-- tenant) of 20,000 of the huge conversation's memories, 80% of them
-- prefixed with "Caroline said". Then it times 40 queries "what did
-- caroline say about <two of its words>", top 100, through
-- mneme._bm25_search with bm25_skip_min_postings at its default and at
-- 100,000,000 (every posting scored), and counts the queries whose results
-- (memory, score, rank) differ between the two.
\set named '11111111-1111-1111-1111-111111111111'
\set huge 'd8aec5e8-7b29-59f3-8290-378c13e87717'
SELECT NOT EXISTS (SELECT 1 FROM mneme.message_queue WHERE id = :'named') AS make_named \gset
\if :make_named
INSERT INTO mneme.message_queue (id, tenant_id) SELECT :'named', tenant_id FROM mneme.message_queue WHERE id = :'huge';
SELECT setseed(0.1);
INSERT INTO mneme.memories (conversation_id, content, embedding, created_at, last_reviewed_at)
SELECT :'named', CASE WHEN random() < 0.8 THEN 'Caroline said ' ELSE '' END || content, embedding, created_at, last_reviewed_at
FROM mneme.memories WHERE conversation_id = :'huge' LIMIT 20000;
\endif
SELECT set_config('bench.named', :'named', false) \gset
CREATE TEMP TABLE bench_words AS
SELECT w FROM (SELECT unnest(string_to_array(content, ' ')) AS w
               FROM (SELECT content FROM mneme.memories WHERE conversation_id = :'named' ORDER BY id LIMIT 200) s) x
WHERE w ~ '^[a-z]+$';
SELECT setseed(0.3);
CREATE TEMP TABLE bench_queries AS
SELECT 'what did caroline say about ' || (SELECT string_agg(w, ' ') FROM (SELECT w FROM bench_words WHERE g > 0 ORDER BY random() LIMIT 2) z) AS q
FROM generate_series(1, 40) g;
DO $$
DECLARE
    conv  uuid[] := ARRAY[current_setting('bench.named')::uuid];
    kept  jsonb := (SELECT value FROM mneme.settings WHERE key = 'bm25_skip_min_postings');
    r     record;
    t0    timestamptz;
    a     text;
    b     text;
    diff  int := 0;
BEGIN
    FOR r IN SELECT q FROM bench_queries LOOP  -- warm-up
        PERFORM count(*) FROM mneme._bm25_search(conv, r.q, 100, NULL, NULL);
    END LOOP;
    FOR rep IN 1 .. 3 LOOP
        t0 := clock_timestamp();
        FOR r IN SELECT q FROM bench_queries LOOP
            PERFORM count(*) FROM mneme._bm25_search(conv, r.q, 100, NULL, NULL);
        END LOOP;
        RAISE NOTICE 'skipping: % ms a query', round((extract(epoch FROM clock_timestamp() - t0) * 1000 / 40)::numeric, 2);
        UPDATE mneme.settings SET value = '100000000' WHERE key = 'bm25_skip_min_postings';
        t0 := clock_timestamp();
        FOR r IN SELECT q FROM bench_queries LOOP
            PERFORM count(*) FROM mneme._bm25_search(conv, r.q, 100, NULL, NULL);
        END LOOP;
        RAISE NOTICE 'every posting: % ms a query', round((extract(epoch FROM clock_timestamp() - t0) * 1000 / 40)::numeric, 2);
        UPDATE mneme.settings SET value = kept WHERE key = 'bm25_skip_min_postings';
    END LOOP;
    FOR r IN SELECT q FROM bench_queries LOOP
        SELECT string_agg(memory_id || ' ' || score || ' ' || rank, ',' ORDER BY rank, memory_id) INTO a
        FROM mneme._bm25_search(conv, r.q, 100, NULL, NULL);
        UPDATE mneme.settings SET value = '100000000' WHERE key = 'bm25_skip_min_postings';
        SELECT string_agg(memory_id || ' ' || score || ' ' || rank, ',' ORDER BY rank, memory_id) INTO b
        FROM mneme._bm25_search(conv, r.q, 100, NULL, NULL);
        UPDATE mneme.settings SET value = kept WHERE key = 'bm25_skip_min_postings';
        IF a IS DISTINCT FROM b THEN
            diff := diff + 1;
        END IF;
    END LOOP;
    RAISE NOTICE 'queries whose results differ: % of 40', diff;
END
$$;
