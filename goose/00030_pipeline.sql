-- Pipelines (segmentation and review): the FSRS phase of a memory, the
-- review log, and the tunables of the offline segmenter and reviewer.
-- Numbered goose migration: applied once, never edited after release.

-- +goose Up
-- go-fsrs keeps a card's phase besides S and D: a new card rated good on its
-- first review is in learning (the next review uses the short-term step),
-- later ones in review or relearning. The default matches the column
-- defaults of stability and difficulty (that first good review).
ALTER TABLE mneme.memories
    ADD COLUMN fsrs_state text NOT NULL DEFAULT 'learning'
        CHECK (fsrs_state IN ('learning', 'review', 'relearning'));

-- One row per rating a review job applied, so a user can see why a memory
-- strengthened or faded. Stale and skipped reviews write no row.
CREATE TABLE mneme.review_log (
    id                bigserial PRIMARY KEY,
    memory_id         uuid NOT NULL REFERENCES mneme.memories (id) ON DELETE CASCADE,
    conversation_id   uuid NOT NULL,
    job_id            bigint,
    rating            text NOT NULL CHECK (rating IN ('again', 'hard', 'good', 'easy')),
    -- reviewer: who rated (llm, heuristic); defaulted: the reviewer gave no
    -- usable rating and setting review_default_rating was applied.
    reviewer          text NOT NULL CHECK (reviewer IN ('llm', 'heuristic')),
    defaulted         boolean NOT NULL DEFAULT false,
    stability_before  float8 NOT NULL,
    stability_after   float8 NOT NULL,
    difficulty_before float8 NOT NULL,
    difficulty_after  float8 NOT NULL,
    state_before      text NOT NULL,
    state_after       text NOT NULL,
    last_reviewed_before timestamptz NOT NULL,
    reviewed_at       timestamptz NOT NULL,
    matched_queries   text[] NOT NULL DEFAULT '{}',
    created_at        timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX review_log_memory_idx ON mneme.review_log (memory_id, reviewed_at);
CREATE INDEX review_log_conversation_idx ON mneme.review_log (conversation_id, id);

INSERT INTO mneme.settings (key, value, description) VALUES
  ('segment_window',           '3',    'offline segmenter: messages compared on each side of a candidate topic boundary'),
  ('segment_episode_min',      '4',    'offline segmenter: an episode it cuts has at least this many messages'),
  ('segment_episode_max',      '14',   'offline segmenter: an episode this long is cut at its weakest boundary, shift or not'),
  ('segment_shift_similarity', '0.10', 'offline segmenter: cosine similarity of the embedded windows below which a topic shift is declared'),
  ('segment_summary_sentences','2',    'offline segmenter: sentences in the extractive summary (the most central ones, in order)'),
  ('review_default_rating',    '"hard"', 'rating applied when the reviewer gives none, or an unknown one, for a memory (logged; review_log.defaulted)'),
  ('review_heuristic_thresholds', '{"hard": 0.04, "good": 0.09, "easy": 0.25}',
                                  'offline reviewer: overlap score (content words the later conversation shares with the memory, query words excluded, Ochiai coefficient) below hard = again, below good = hard, below easy = good, else easy');

-- +goose Down
DELETE FROM mneme.settings WHERE key IN ('segment_window', 'segment_episode_min', 'segment_episode_max',
    'segment_shift_similarity', 'segment_summary_sentences', 'review_default_rating', 'review_heuristic_thresholds');
DROP TABLE mneme.review_log;
ALTER TABLE mneme.memories DROP COLUMN fsrs_state;
