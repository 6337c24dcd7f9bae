-- One psql session through mneme's SQL API, as pasted (make psql, then paste;
-- or psql -v ON_ERROR_STOP=1 -f docs/examples.sql). A test runs this file.
\set conv '7f1c2f9e-0000-4000-8000-000000000001'

-- conversations: append messages (the rule-based segmentation check runs in SQL;
-- the sidecar, `mneme run`, turns them into episodic memories)
SELECT mneme.add_message(:'conv', 'user', 'I started learning Rust this week.', '2026-03-01 10:00+00');
SELECT mneme.add_message(:'conv', 'assistant', 'Start with ownership and borrowing.', '2026-03-01 10:01+00');
SELECT mneme.set_speakers(:'conv', ARRAY['Caroline', 'Melanie']);  -- names usable as roles
SELECT mneme.add_message(:'conv', 'Caroline', 'My sister lives in Porto.', '2026-03-01 10:02+00');

-- explicit memories and beliefs (psql's \gset keeps the returned id); each write is
-- revised by the sidecar's revise job: ADD, NOOP, SUPERSEDE or INVALIDATE (docs/revision.md)
SELECT mneme.remember(:'conv', 'Alice lives in Paris', 'user_profile') AS paris \gset
SELECT mneme.remember(:'conv', 'Alice moved to Berlin', 'user_profile', supersedes => :'paris') AS berlin \gset
SELECT mneme.remember(:'conv', 'I work at Acme', source_ref => 'https://bob:s3cret@crm.example/notes/7',
                      at => '2026-02-01');  -- stored redacted; at: when it was said
SELECT mneme.remember(:'conv', 'Thanks, bye!');  -- no label: mneme.auto_label chooses (trivial)
SELECT mneme.pin(:'berlin');  SELECT mneme.unpin(:'berlin');
SELECT memory_id, status, label, stability, confidence_score, source_type, revision FROM mneme.inspect(:'berlin');
SELECT depth, relation, memory_id, status, content FROM mneme.history(:'berlin');  -- the lineage both ways
SELECT memory_id, status, content FROM mneme.search(:'conv', 'where does Alice live', include_history => true);
SELECT memory_id, content FROM mneme.search(:'conv', 'where does Alice live', as_of => now() - interval '1 day');

-- retrieval: hybrid BM25 + vector, RRF-fused, times FSRS retrievability and label weight
SELECT memory_id, content, score, bm25_rank, vector_rank, retrievability
FROM mneme.retrieve(:'conv', 'where does Alice live?', 5);                   -- records a pending review
SELECT memory_id, score FROM mneme.search(:'conv', 'Berlin', k => 10);        -- same ranking, no side effects
SELECT memory_id FROM mneme.search(:'conv', 'Berlin', 10, NULL, '2026-01-01', '2030-01-01');  -- created in a range
SELECT memory_id, retrievability FROM mneme.search(:'conv', 'Berlin', 10, at => now() + interval '5 years');
SELECT memory_id, content FROM mneme.search(:'conv', 'Alice', 5, scope => 'tenant');  -- all the tenant's conversations
SELECT mneme.retrieve_markdown(:'conv', 'where does Alice live?', 3);       -- for a prompt

-- context for a prompt: the best turns and facts within a word budget (docs/context.md)
SELECT mneme.context(:'conv', 'where does Alice live?', 1000);                -- markdown; records a pending review
SELECT item, kind, message_ids, words FROM mneme.context_items(:'conv', 'where does Alice live?', 200);  -- rows, no side effects

-- pending reviews: what retrieve records; the sidecar takes and clears them atomically
SELECT mneme.take_pending_reviews(:'conv');

-- forgetting and the lifecycle (docs/forgetting.md)
SELECT mneme.remember(:'conv', 'The office wifi password is hunter2') AS wifi \gset
SELECT mneme.forget(:'wifi', 'user asked to forget');   -- invalidated with a reason, row kept
SELECT mneme.erase(:'wifi', 'user request 42');          -- content removed everywhere, a tombstone stays
SELECT event, reason, actor FROM mneme.memory_events WHERE memory_id = :'wifi' ORDER BY id;
SELECT * FROM mneme.cleanup(dry_run => true);           -- what the cleanup job would do now
SELECT mneme.labels();
SELECT * FROM mneme.initial_state('user_profile', surprise => 0.4);

-- why a memory strengthened or faded
SELECT memory_id, rating, reviewer, stability_before, stability_after,
       ARRAY(SELECT q.query FROM mneme.review_queries q
             WHERE q.conversation_id = l.conversation_id AND q.review_log_id = l.id ORDER BY q.ord) AS matched_queries
FROM mneme.review_log l ORDER BY reviewed_at DESC LIMIT 10;

-- the work queue and the tunables
SELECT mneme.segment_now(:'conv');  -- the conversation is over: segment what is queued
SELECT * FROM mneme.job_stats;
SELECT key, value FROM mneme.settings ORDER BY key;
SELECT mneme.set_setting('segment_gap_seconds', '1800');

-- README.md, "Tenants and roles": a tenant per transaction
SELECT mneme.create_tenant('acme');               -- as an admin
BEGIN;
SELECT mneme.set_tenant('acme');                  -- transaction-local
SELECT mneme.remember('5e1d7a40-0000-4000-8000-00000000ac01', 'Alice lives in Lisbon');  -- in acme's conversation
SELECT * FROM mneme.search('5e1d7a40-0000-4000-8000-00000000ac01', 'where does Alice live?', 5);
COMMIT;
