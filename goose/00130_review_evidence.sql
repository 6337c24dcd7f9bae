-- Why a review rated as it did (issue 51): the heuristic's overlap score
-- with the thresholds it was compared to, or the LLM's stated reason.
-- NULL for the reviews written before. apply_review gains an argument
-- (evidence, last, with a default: a sidecar of the previous release calls
-- it as before) and memory_reviews a column; the old forms are dropped
-- here, sql/ re-creates both.
-- Numbered goose migration: applied once, never edited after release.

-- +goose Up
-- (on Citus: one connection a shard, so the function commands may follow
-- the table's DDL in this transaction; a placeholder setting elsewhere)
SET LOCAL citus.multi_shard_modify_mode TO 'sequential';
-- (the column, then its check: Citus adds no column with a constraint to
-- a distributed table)
ALTER TABLE mneme.review_log ADD COLUMN evidence jsonb;
ALTER TABLE mneme.review_log ADD CONSTRAINT review_log_evidence_check
    CHECK (evidence IS NULL OR (jsonb_typeof(evidence) = 'object' AND pg_column_size(evidence) <= 4096));
COMMENT ON COLUMN mneme.review_log.evidence IS
    'Why the reviewer rated so: {"score": s, "thresholds": {"hard": h, "good": g, "easy": e}} (heuristic) or {"reason": text} (LLM); NULL before mneme 00130.';
DROP FUNCTION IF EXISTS mneme.apply_review(uuid, text, float8, float8, text, timestamptz, text, text[], boolean, bigint);
DROP FUNCTION IF EXISTS mneme.memory_reviews(uuid);

-- +goose Down
DROP FUNCTION IF EXISTS mneme.memory_reviews(uuid);
ALTER TABLE mneme.review_log DROP COLUMN evidence;
