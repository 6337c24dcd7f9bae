-- =============================================================================
-- Experiment (not part of mneme): the backend's CPU time per call of
-- mneme.context_items, mneme.search (k 50) or mneme.retrieve (k 10), read
-- from /proc/self/schedstat around n calls in one session (CPU, not wall
-- clock: a loaded machine's waiting for a core is left out). It first adds,
-- once, a conversation like bench retrieve's context conversation (100
-- episodes of 6 messages of twelve words, the same each time: setseed),
-- whose words make the queries (three at random, the same each run).
-- Run it as a superuser on bench retrieve's kept database (Linux only):
--   psql "postgres://.../mneme_bench_<id>" -v n=300 -v call=context_items -f docs/experiments/call-cpu.sql
--   (call: context_items, search or retrieve; retrieve runs on the kept
--   conversation, in a transaction rolled back)
-- Remove the conversation again before the next bench retrieve --reuse:
--   DELETE FROM mneme.memories WHERE conversation_id = '00000000-0000-0000-0000-00000000c0de';
--   DELETE FROM mneme.message_queue WHERE id = '00000000-0000-0000-0000-00000000c0de';
-- docs/performance.md ("Planning, not work") quotes it.
-- =============================================================================
\set ON_ERROR_STOP on
SELECT set_config('exp.n', :'n', false), set_config('exp.call', :'call', false);
CREATE TABLE IF NOT EXISTS public.exp_words AS
SELECT DISTINCT x AS word
FROM (SELECT regexp_split_to_table(lower(content), '[^a-z]+') AS x
      FROM (SELECT content FROM mneme.memories ORDER BY id LIMIT 300) s) t
WHERE length(x) > 3;
DO $$
DECLARE
    conv uuid := '00000000-0000-0000-0000-00000000c0de';
    ws text[];
    ids bigint[];
    lines text[];
    txt text;
BEGIN
    IF EXISTS (SELECT 1 FROM mneme.memories WHERE conversation_id = conv) THEN
        RETURN;
    END IF;
    PERFORM setseed(0.11);
    SELECT array_agg(word ORDER BY word) INTO ws FROM public.exp_words;
    FOR e IN 0..99 LOOP
        ids := '{}';
        lines := '{}';
        FOR m IN 0..5 LOOP
            SELECT string_agg(ws[1 + floor(random() * array_length(ws, 1))::int], ' ') INTO txt FROM generate_series(1, 12);
            ids := ids || mneme.add_message(conv, (ARRAY['user', 'assistant'])[m % 2 + 1], txt,
                                            timestamptz '2025-01-01' + e * interval '1 hour' + m * interval '1 minute');
            lines := lines || ((ARRAY['user', 'assistant'])[m % 2 + 1] || ': ' || txt);
        END LOOP;
        PERFORM mneme.create_episode(conv, ids, array_to_string(lines, E'\n'), lines[1],
                                     mneme.hash_embed(array_to_string(lines, E'\n')), 0, 'general', false, 900, 5);
    END LOOP;
    DELETE FROM mneme.jobs WHERE conversation_id = conv;
END
$$;
BEGIN;
SELECT split_part(pg_read_file('/proc/self/schedstat'), ' ', 1)::bigint AS c0 \gset
DO $$
DECLARE
    ws text[];
    q text;
    kept uuid := (SELECT conversation_id FROM mneme.memories GROUP BY 1 ORDER BY count(*) DESC LIMIT 1);
BEGIN
    PERFORM setseed(0.5);
    SELECT array_agg(word ORDER BY word) INTO ws FROM public.exp_words;
    FOR i IN 1..current_setting('exp.n')::int LOOP
        q := ws[1 + floor(random() * array_length(ws, 1))::int] || ' ' || ws[1 + floor(random() * array_length(ws, 1))::int]
             || ' ' || ws[1 + floor(random() * array_length(ws, 1))::int];
        CASE current_setting('exp.call')
        WHEN 'context_items' THEN
            PERFORM coalesce(sum(words), 0) FROM mneme.context_items('00000000-0000-0000-0000-00000000c0de', q, 1000);
        WHEN 'search' THEN
            PERFORM count(*) FROM mneme.search('00000000-0000-0000-0000-00000000c0de', q, 50);
        WHEN 'retrieve' THEN
            PERFORM count(*) FROM mneme.retrieve(kept, q, 10);
        END CASE;
    END LOOP;
END
$$;
SELECT :'call' AS call, round((split_part(pg_read_file('/proc/self/schedstat'), ' ', 1)::bigint - :c0) / 1e6 / :n, 3) AS cpu_ms_per_call;
ROLLBACK;
