-- How strongly retrievability weighs in the ranking: score = rrf * R^w * label
-- weight. The default 1 is the design's rrf * R; see docs/eval.md for what
-- smaller weights do on LoCoMo.

-- +goose Up
INSERT INTO mneme.settings (key, value, description) VALUES
  ('retrievability_weight', '1',
   'exponent on FSRS retrievability in the ranking: score = rrf * R^w * label weight; 1 = the design''s rrf * R, 0 = forgetting ignored')
ON CONFLICT (key) DO NOTHING;

-- +goose Down
DELETE FROM mneme.settings WHERE key = 'retrievability_weight';
