-- No input add_message accepts stops a conversation: messages of
-- a segment job that failed for good are set aside (out of the queue, kept,
-- retryable) so the next ones segment; message times are bounded in the
-- future.
-- Numbered goose migration: applied once, never edited after release.

-- +goose Up
ALTER TABLE mneme.messages ADD COLUMN set_aside_job_id bigint;
CREATE INDEX messages_set_aside_idx ON mneme.messages (set_aside_job_id) WHERE set_aside_job_id IS NOT NULL;

INSERT INTO mneme.settings (key, value, description) VALUES
  ('message_max_future', '"1 hour"',
   'add_message rejects a message time later than now() plus this (a PostgreSQL interval): one far-future time would make every later message "earlier than the previous one"'),
  ('pending_reviews_max', '500',
   'a conversation keeps at most this many pending review entries: past it, the oldest half go to a review job at once (judged by the messages queued so far), so retrieve never rewrites an unbounded array and no entry is lost')
ON CONFLICT (key) DO NOTHING;

-- +goose Down
DELETE FROM mneme.settings WHERE key IN ('message_max_future', 'pending_reviews_max');
DROP INDEX mneme.messages_set_aside_idx;
ALTER TABLE mneme.messages DROP COLUMN set_aside_job_id;
