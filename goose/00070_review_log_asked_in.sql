-- review_log.asked_in: the conversation whose review job wrote the row,
-- where its matched_queries were typed. With scope tenant a query typed in
-- one conversation rates memories of another; erase_conversation of the
-- asking conversation takes those queries out of the other conversation's
-- review log (sql/440-erase.sql). Rows written before: the review job's
-- conversation while the job is kept, else unknown (NULL).
-- Numbered goose migration: applied once, never edited after release.

-- +goose Up
ALTER TABLE mneme.review_log ADD COLUMN asked_in uuid;
UPDATE mneme.review_log l SET asked_in = j.conversation_id
FROM mneme.jobs j WHERE j.id = l.job_id AND j.kind = 'review';
CREATE INDEX review_log_asked_in_idx ON mneme.review_log (asked_in) WHERE asked_in IS NOT NULL;

-- +goose Down
DROP INDEX mneme.review_log_asked_in_idx;
ALTER TABLE mneme.review_log DROP COLUMN asked_in;
