-- Belief revision: every explicit write and every extracted fact
-- is revised against the closest memories of its scope by a 'revise' job:
-- ADD, NOOP (merged into the memory it confirms), SUPERSEDE or INVALIDATE.
-- Nothing is deleted.
-- Numbered goose migration: applied once, never edited after release.

-- +goose Up
ALTER TABLE mneme.memories DROP CONSTRAINT memories_status_check;
ALTER TABLE mneme.memories ADD CONSTRAINT memories_status_check
    CHECK (status IN ('active', 'superseded', 'invalidated', 'inactive', 'merged'));
-- The lineage links beside supersedes_id: what a merged row confirmed, what
-- a retraction invalidated.
ALTER TABLE mneme.memories ADD COLUMN confirms_id uuid REFERENCES mneme.memories (id);
ALTER TABLE mneme.memories ADD COLUMN invalidates_id uuid REFERENCES mneme.memories (id);
-- The slot a fact fills (subject and attribute, e.g. "user|lives_in"),
-- written by the revise job when its classifier knows it: a later fact of
-- the same slot is a candidate whatever its words.
ALTER TABLE mneme.memories ADD COLUMN slot text CHECK (slot IS NULL OR length(slot) <= 200);
ALTER TABLE mneme.memories ADD CONSTRAINT memories_no_self_links
    CHECK ((confirms_id IS NULL OR confirms_id <> id) AND (invalidates_id IS NULL OR invalidates_id <> id));
CREATE INDEX memories_confirms_idx ON mneme.memories (confirms_id) WHERE confirms_id IS NOT NULL;
CREATE INDEX memories_invalidates_idx ON mneme.memories (invalidates_id) WHERE invalidates_id IS NOT NULL;
CREATE INDEX memories_slot_idx ON mneme.memories (conversation_id, slot) WHERE slot IS NOT NULL AND status = 'active';

ALTER TABLE mneme.memory_events DROP CONSTRAINT memory_events_event_check;
ALTER TABLE mneme.memory_events ADD CONSTRAINT memory_events_event_check
    CHECK (event IN ('created', 'reviewed', 'pinned', 'unpinned', 'forgotten', 'superseded', 'inactivated',
                     'reactivated', 'expired', 'purged', 'erased', 'merged', 'revised'));

-- Retrieval results say which belief state a row is in (include_history,
-- as_of) and how much it is trusted.
ALTER TYPE mneme.retrieval ADD ATTRIBUTE status text;
ALTER TYPE mneme.retrieval ADD ATTRIBUTE confidence_score real;

INSERT INTO mneme.settings (key, value, description) VALUES
  ('revision_candidates', '10',
   'a revise job compares a new memory with this many active facts of its scope closest to it (mneme.search over its text), plus those of the same slot'),
  ('revision_scope', '"conversation"',
   'where a revise job looks for the facts a new one may confirm, replace or retract: conversation, or tenant (every conversation of its tenant)'),
  ('revision_duplicate_similarity', '0.8',
   'the offline reviser calls a new fact a duplicate (NOOP) of a candidate when their normalised word sets overlap this much (Jaccard)'),
  ('confidence_by_source', '{"explicit": 0.9, "import": 0.8, "extracted": 0.7, "conversation": 0.6}',
   'initial confidence_score of a memory by its source_type; a reconfirmation (NOOP) raises it by 0.1, up to 1'),
  ('confidence_weight', '0',
   'retrieval multiplies a memory''s score by confidence_score ^ confidence_weight (0 = confidence does not rank; docs/revision.md)'),
  ('context_order', '"newest"',
   'the order of mneme.context''s items once chosen by rank: newest (the latest said first, so a current value is read before the one it replaced) or rank'),
  ('extract_facts', 'true',
   'segmentation also stores the facts an episode states as semantic memories (source_type extracted), each revised like an explicit write')
ON CONFLICT (key) DO NOTHING;

-- +goose Down
DELETE FROM mneme.settings WHERE key IN ('revision_candidates', 'revision_scope', 'context_order', 'revision_duplicate_similarity', 'confidence_by_source',
    'confidence_weight', 'extract_facts');
ALTER TYPE mneme.retrieval DROP ATTRIBUTE confidence_score;
ALTER TYPE mneme.retrieval DROP ATTRIBUTE status;
ALTER TABLE mneme.memory_events DROP CONSTRAINT memory_events_event_check;
ALTER TABLE mneme.memory_events ADD CONSTRAINT memory_events_event_check
    CHECK (event IN ('created', 'reviewed', 'pinned', 'unpinned', 'forgotten', 'superseded', 'inactivated',
                     'reactivated', 'expired', 'purged', 'erased'));
DROP INDEX mneme.memories_slot_idx;
DROP INDEX mneme.memories_invalidates_idx;
DROP INDEX mneme.memories_confirms_idx;
ALTER TABLE mneme.memories DROP CONSTRAINT memories_no_self_links;
ALTER TABLE mneme.memories DROP COLUMN slot;
ALTER TABLE mneme.memories DROP COLUMN invalidates_id;
ALTER TABLE mneme.memories DROP COLUMN confirms_id;
UPDATE mneme.memories SET status = 'superseded' WHERE status = 'merged';
ALTER TABLE mneme.memories DROP CONSTRAINT memories_status_check;
ALTER TABLE mneme.memories ADD CONSTRAINT memories_status_check
    CHECK (status IN ('active', 'superseded', 'invalidated', 'inactive'));
