-- review_log.asked_in: the conversation whose review job wrote the row,
-- where its matched_queries were typed. With scope tenant a query typed in
-- one conversation rates memories of another; erase_conversation of the
-- asking conversation takes those queries out of the other conversation's
-- review log (sql/440-erase.sql). Rows written before: the review job's
-- conversation while the job is kept, else unknown (NULL).
-- Numbered goose migration: applied once, never edited after release.

-- +goose Up
ALTER TABLE mneme.review_log ADD COLUMN asked_in uuid;
-- Every tenant's rows: the owner (who migrates) is not held by row
-- security while it is not forced.
ALTER TABLE mneme.review_log NO FORCE ROW LEVEL SECURITY;
ALTER TABLE mneme.jobs NO FORCE ROW LEVEL SECURITY;
UPDATE mneme.review_log l SET asked_in = j.conversation_id
FROM mneme.jobs j WHERE j.id = l.job_id AND j.kind = 'review';
ALTER TABLE mneme.review_log FORCE ROW LEVEL SECURITY;
ALTER TABLE mneme.jobs FORCE ROW LEVEL SECURITY;
CREATE INDEX review_log_asked_in_idx ON mneme.review_log (asked_in) WHERE asked_in IS NOT NULL;

-- +goose Down
DROP INDEX mneme.review_log_asked_in_idx;
ALTER TABLE mneme.review_log DROP COLUMN asked_in;
