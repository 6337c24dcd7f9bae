-- Offline defaults tuned on the LoCoMo development split with
-- `mneme eval locomo` (docs/eval.md has each step's numbers and the command).
-- Numbered goose migration: applied once, never edited after release.

-- +goose Up
INSERT INTO mneme.settings (key, value, description) VALUES
  ('rrf_hash_vector_weight', '0.1',
   'weight of the vector leg in the fusion when the embedder is the built-in hash embedder, whose vectors are lexical and mostly redundant with BM25 (an external embedder''s leg always weighs 1)')
ON CONFLICT (key) DO NOTHING;

-- Shorter episodes: a context budget holds more of them, so more distinct
-- evidence fits (LoCoMo dev: 8.6 turns per episode on average at 14, 6.2
-- at 8). Only where the old default is still in place: a value someone
-- chose stays.
UPDATE mneme.settings SET value = '8', updated_at = now() WHERE key = 'segment_episode_max' AND value = '14';
UPDATE mneme.settings SET value = '2', updated_at = now() WHERE key = 'segment_window' AND value = '3';

-- +goose Down
UPDATE mneme.settings SET value = '3' WHERE key = 'segment_window' AND value = '2';
UPDATE mneme.settings SET value = '14' WHERE key = 'segment_episode_max' AND value = '8';
DELETE FROM mneme.settings WHERE key = 'rrf_hash_vector_weight';
