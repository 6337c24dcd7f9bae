#!/usr/bin/env bash
# make demo: a private PostgreSQL under .mneme/pg (or $DATABASE_URL), the
# schema, and a short conversation fed through psql to show the message
# queue, the segment job it enqueues and pending reviews.
set -euo pipefail
cd "$(dirname "$0")/.."
MNEME=bin/mneme
if [ -z "${DATABASE_URL:-}" ]; then
  DATABASE_URL="$($MNEME cluster url --dir .mneme/pg)"
  export DATABASE_URL
fi
echo "== DATABASE_URL=$DATABASE_URL"
$MNEME migrate
PSQL=(psql "$DATABASE_URL" -X -v ON_ERROR_STOP=1 -P pager=off)
CONV=00000000-0000-4000-8000-00000000de00

echo "== a fresh conversation"
"${PSQL[@]}" -q <<SQL
DELETE FROM mneme.jobs WHERE conversation_id = '$CONV';
DELETE FROM mneme.message_queue WHERE id = '$CONV';
SELECT mneme.add_message('$CONV', 'user', 'I want to learn Rust this year.', '2026-03-01 09:00+00');
SELECT mneme.add_message('$CONV', 'assistant', 'Great choice. Start with the book and rustlings.', '2026-03-01 09:00:20+00');
SELECT mneme.add_message('$CONV', 'user', 'How do lifetimes work?', '2026-03-01 09:01+00');
SELECT mneme.add_message('$CONV', 'assistant', 'Lifetimes name how long a reference stays valid.', '2026-03-01 09:01:30+00');
SELECT mneme.add_message('$CONV', 'user', 'And the borrow checker enforces them at compile time?', '2026-03-01 09:02+00');
SELECT mneme.add_pending_review('$CONV', ARRAY[gen_random_uuid()], 'rust lifetimes');
SQL
echo "== the message queue"
"${PSQL[@]}" -c "SELECT id, role, left(content, 50) AS content, created_at FROM mneme.messages WHERE conversation_id = '$CONV' ORDER BY id"
echo "== the segment job the fifth message enqueued (rule: 5 queued messages, ask the segmenter)"
"${PSQL[@]}" -c "SELECT id, kind, state, payload FROM mneme.jobs WHERE conversation_id = '$CONV'"
echo "== pending reviews, then take-and-clear"
"${PSQL[@]}" -c "SELECT jsonb_pretty(pending_reviews) FROM mneme.message_queue WHERE id = '$CONV'"
"${PSQL[@]}" -c "SELECT mneme.take_pending_reviews('$CONV') AS taken"
"${PSQL[@]}" -c "SELECT pending_reviews IS NULL AS cleared FROM mneme.message_queue WHERE id = '$CONV'"
