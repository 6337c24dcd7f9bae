-- Forgetting that keeps what matters: memories start as graduated
-- FSRS cards with a stability per label, a lifecycle (inactive, purge, erase)
-- and the append-only record of every lifecycle change.
-- Numbered goose migration: applied once, never edited after release.

-- +goose Up
-- The initial FSRS state now depends on the label (setting
-- initial_stability_days): a BEFORE INSERT trigger (sql/410-initial-state.sql)
-- fills stability, difficulty and fsrs_state when an insert leaves them out,
-- so the column defaults (go-fsrs's first "good" of a new card, in learning)
-- go. Existing rows keep their state until mneme.reset_initial_state().
ALTER TABLE mneme.memories
    ALTER COLUMN stability DROP DEFAULT,
    ALTER COLUMN difficulty DROP DEFAULT,
    ALTER COLUMN fsrs_state DROP DEFAULT;

-- One row per lifecycle change, append only (a trigger refuses UPDATE and
-- DELETE, except erase's removal of content from reasons). No content: ids,
-- the event, a reason, who, when. memory_id has no foreign key: the events
-- of a purged or erased memory outlive it (the tombstone).
CREATE TABLE mneme.memory_events (
    id              bigserial PRIMARY KEY,
    memory_id       uuid,
    conversation_id uuid,
    event           text NOT NULL CHECK (event IN ('created', 'reviewed', 'pinned', 'unpinned', 'forgotten',
                        'superseded', 'inactivated', 'reactivated', 'expired', 'purged', 'erased')),
    reason          text,
    actor           text NOT NULL,
    review_log_id   bigint,
    at              timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX memory_events_memory_idx ON mneme.memory_events (memory_id, at);
CREATE INDEX memory_events_conversation_idx ON mneme.memory_events (conversation_id, at);
CREATE INDEX memory_events_expired_idx ON mneme.memory_events (memory_id) WHERE event = 'expired';

-- Cleanup finds what it may inactivate or purge by status.
CREATE INDEX memories_inactive_idx ON mneme.memories (id) WHERE status = 'inactive';
CREATE INDEX jobs_done_idx ON mneme.jobs (finished_at) WHERE state = 'done';

INSERT INTO mneme.settings (key, value, description) VALUES
  ('initial_stability_days',
   '{"trivial": 3, "temporary": 14, "general": 900, "project": 900, "user_profile": 3650, "important": 3650}',
   'FSRS stability (days) a new memory starts with, by label (project_* use "project", unknown labels "general"), times 1 + 0.5 * surprise; the memory starts as a graduated card (state review), so an "again" review is a lapse'),
  ('inactive_below_r', '0.5',
   'cleanup: an active memory whose retrievability is below this becomes inactive (kept, out of retrieval); pinned and important memories never do'),
  ('purge_after_days', 'null',
   'cleanup: a memory inactive for longer than this many days is purged (deleted, tombstone kept); null = never purge'),
  ('cleanup_interval', '"1 day"',
   'how often the sidecar runs the cleanup job (a PostgreSQL interval); null = the sidecar never schedules it'),
  ('jobs_retention', '"7 days"',
   'cleanup: done jobs finished longer ago than this are deleted (failed jobs are kept); null = keep all')
ON CONFLICT (key) DO NOTHING;

-- Labels act through how fast a memory fades (initial_stability_days), not
-- through the ranking: the first label weights (0.5 to 1.5) cut LoCoMo
-- recall at 1,000 words from 0.797 to 0.459 once the offline labeller
-- labels every memory (docs/forgetting.md). The default becomes flat; an
-- operator's own weights are kept.
UPDATE mneme.settings
   SET value = '{"important": 1, "user_profile": 1, "project": 1, "general": 1, "temporary": 1, "trivial": 1}',
       description = 'multiplier of a memory''s score by label (project_* use "project"); flat by default: labels act '
                     'through initial_stability_days (docs/forgetting.md)'
 WHERE key = 'label_weights'
   AND value = '{"important":1.5,"user_profile":1.3,"project":1.2,"general":1.0,"temporary":0.8,"trivial":0.5}'::jsonb;

-- +goose Down
UPDATE mneme.settings
   SET value = '{"important":1.5,"user_profile":1.3,"project":1.2,"general":1.0,"temporary":0.8,"trivial":0.5}'
 WHERE key = 'label_weights'
   AND value = '{"important": 1, "user_profile": 1, "project": 1, "general": 1, "temporary": 1, "trivial": 1}'::jsonb;
DELETE FROM mneme.settings WHERE key IN ('initial_stability_days', 'inactive_below_r', 'purge_after_days',
    'cleanup_interval', 'jobs_retention');
DROP INDEX mneme.jobs_done_idx;
DROP INDEX mneme.memories_inactive_idx;
DROP TABLE mneme.memory_events;
ALTER TABLE mneme.memories
    ALTER COLUMN stability SET DEFAULT 3.173,
    ALTER COLUMN difficulty SET DEFAULT 5.28243442,
    ALTER COLUMN fsrs_state SET DEFAULT 'learning';
