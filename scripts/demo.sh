#!/usr/bin/env bash
# make demo: a private PostgreSQL under .mneme/pg (or $DATABASE_URL), the
# schema, and a short conversation fed through psql to show the message
# queue, the segment job it enqueues and pending reviews.
set -euo pipefail
cd "$(dirname "$0")/.."
MNEME=bin/mneme
LAB=bin/mneme-lab
OWN_URL=${DATABASE_URL:-}
if [ -z "$OWN_URL" ]; then
  DATABASE_URL="$($LAB cluster url --dir .mneme/pg)"
  export DATABASE_URL
fi
echo "== DATABASE_URL=$DATABASE_URL"
$MNEME migrate
PSQL=(psql "$DATABASE_URL" -X -v ON_ERROR_STOP=1 -P pager=off)
# The sidecar runs as a member of mneme_worker, never as a superuser (README,
# "Roles"). On the private cluster the demo makes that login role; against
# your own server it runs as DATABASE_URL's role unless WORKER_URL is set.
WORKER_URL=${WORKER_URL:-}
if [ -z "$WORKER_URL" ] && [[ "$DATABASE_URL" == postgres://postgres@127.0.0.1:* ]]; then
  "${PSQL[@]}" -qc "DO \$\$ BEGIN IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'mneme_demo_worker') THEN
                      CREATE ROLE mneme_demo_worker LOGIN IN ROLE mneme_worker; END IF; END \$\$"
  WORKER_URL=${DATABASE_URL/postgres@/mneme_demo_worker@}
  echo "== the sidecar connects as mneme_demo_worker (member of mneme_worker)"
fi
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

# -----------------------------------------------------------------------------
# The pipelines, offline: docs/sample-conversation.json becomes episodic
# memories, a retrieval records what it returned, and the next segmentation
# hands it to a review that moves FSRS state (only the review does).
# -----------------------------------------------------------------------------
CONV2=00000000-0000-4000-8000-00000000de01
SAMPLE=docs/sample-conversation.json
feed() { # feed SESSION FIRST LAST: add messages FIRST..LAST of session SESSION (1-based)
  "${PSQL[@]}" -q -v conv="$CONV2" -v s="$1" -v a="$2" -v b="$3" >/dev/null <<'SQL'
\set sample `cat docs/sample-conversation.json`
SELECT count(mneme.add_message(:'conv', m->>'role', m->>'content',
                               ((current_date - (x.s->>'days_ago')::int) + (x.s->>'time')::time) AT TIME ZONE 'UTC'
                               + (y.i - 1) * interval '1 minute'))
FROM (SELECT (:'sample'::jsonb)->'sessions'->(:s - 1) AS s) x,
     jsonb_array_elements(x.s->'messages') WITH ORDINALITY AS y(m, i)
WHERE y.i BETWEEN :a AND :b;
SQL
}
drain() { DATABASE_URL=${WORKER_URL:-$DATABASE_URL} MNEME_LOG_LEVEL=${MNEME_LOG_LEVEL:-warn} $MNEME run --drain; }

echo
echo "== pipelines: the sample conversation ($SAMPLE), offline (no LLM: heuristic segmenter and reviewer)"
"${PSQL[@]}" -q <<SQL
DELETE FROM mneme.jobs WHERE conversation_id = '$CONV2';
DELETE FROM mneme.memories WHERE conversation_id = '$CONV2';
DELETE FROM mneme.message_queue WHERE id = '$CONV2';
SQL
feed 1 1 100   # weekend weather
feed 2 1 100   # Rust, then a birthday present: the 15-minute gap cuts the weather episode
drain
feed 3 1 1     # two days later: the gap cuts the Rust and birthday session; then a retrieval
drain
echo "== memories created (the offline segmenter cut session 2 at its topic shift)"
"${PSQL[@]}" -c "SELECT left(summary, 70) AS summary, label, surprise,
       round(stability::numeric, 3) AS stability, fsrs_state, source_message_ids[1] || '..' || source_message_ids[cardinality(source_message_ids)] AS messages
FROM mneme.memories WHERE conversation_id = '$CONV2' ORDER BY created_at, source_message_ids[1]"

QUERY=$("${PSQL[@]}" -Atq <<'SQL'
\set sample `cat docs/sample-conversation.json`
SELECT (:'sample'::jsonb)#>>'{sessions,2,query}';
SQL
)
echo "== retrieval: mneme.retrieve('$QUERY'), scores; it records a pending review and changes no FSRS state"
"${PSQL[@]}" -c "SELECT left(summary, 60) AS summary, round(score::numeric, 5) AS score, round(rrf::numeric, 5) AS rrf,
       bm25_rank, vector_rank, round(retrievability::numeric, 3) AS retrievability
FROM mneme.retrieve('$CONV2', '$QUERY', 5)"
"${PSQL[@]}" -c "SELECT jsonb_array_length(pending_reviews) AS pending_reviews FROM mneme.message_queue WHERE id = '$CONV2'"

feed 3 2 100   # the conversation goes on about Rust
feed 4 1 100   # that evening: the gap cuts session 3; segmentation takes the pending review
drain
echo "== review: the rating per retrieved memory and its stability change (mneme.review_log)"
"${PSQL[@]}" -c "SELECT left(m.summary, 60) AS memory, l.rating, l.reviewer,
       round(l.stability_before::numeric, 3) AS stability_before, round(l.stability_after::numeric, 3) AS stability_after,
       l.state_before || ' -> ' || l.state_after AS phase,
       ARRAY(SELECT q.query FROM mneme.review_queries q
             WHERE q.conversation_id = l.conversation_id AND q.review_log_id = l.id ORDER BY q.ord) AS matched_queries
FROM mneme.review_log l JOIN mneme.memories m ON m.id = l.memory_id
WHERE l.conversation_id = '$CONV2' ORDER BY l.id"
"${PSQL[@]}" -c "SELECT pending_reviews IS NULL AS pending_reviews_taken FROM mneme.message_queue WHERE id = '$CONV2'"

echo
echo "== belief revision: three writes about where the user lives; each is revised by a revise job (docs/revision.md)"
"${PSQL[@]}" -q <<SQL
SELECT mneme.remember('$CONV2', 'I live in Paris.', at => now() - interval '2 days');
SQL
drain
"${PSQL[@]}" -q <<SQL
SELECT mneme.remember('$CONV2', 'I moved to Berlin last month.', at => now() - interval '1 day');
SQL
drain
"${PSQL[@]}" -q <<SQL
SELECT mneme.remember('$CONV2', 'I live in Paris.', at => now() - interval '36 hours');  -- said before the move, written late
SQL
drain
echo "== the lineage of the current belief (mneme.history), in the order said: the late write is stored superseded at its place in time"
"${PSQL[@]}" -c "SELECT h.depth, h.relation, h.content, h.status, to_char(h.created_at, 'YYYY-MM-DD HH24:MI') AS said,
       to_char(h.valid_until, 'YYYY-MM-DD HH24:MI') AS believed_until
FROM mneme.memories m, mneme.history(m.id) h
WHERE m.conversation_id = '$CONV2' AND m.kind = 'semantic' AND m.status = 'active' AND h.relation IN ('self', 'replaced', 'replaced_by')
ORDER BY h.depth"
echo "== each write's revision in full (mneme.inspect), in the order said"
"${PSQL[@]}" -x -c "SELECT m.content, to_char(m.created_at, 'YYYY-MM-DD HH24:MI') AS said, m.status, i.slot, i.revision
FROM mneme.memories m, LATERAL (SELECT slot, revision FROM mneme.inspect(m.id)) i
WHERE m.conversation_id = '$CONV2' AND m.kind = 'semantic' ORDER BY m.created_at"
echo "== mneme.search returns the current belief; include_history => true also what it replaced, marked"
"${PSQL[@]}" -c "SELECT content, status FROM mneme.search('$CONV2', 'do I live in Paris or Berlin', 2) WHERE kind = 'semantic'"
"${PSQL[@]}" -c "SELECT content, status FROM mneme.search('$CONV2', 'do I live in Paris or Berlin', 3, include_history => true) WHERE kind = 'semantic'"
"${PSQL[@]}" -c "SELECT kind, state, count(*) FROM mneme.jobs WHERE conversation_id = '$CONV2' GROUP BY 1, 2 ORDER BY 1, 2"
echo
echo "== look into it in a browser: bin/mneme ui (http://127.0.0.1:8420/, docs/ui.md)"
if [ -z "$OWN_URL" ]; then
  # The hand-over: every bin/mneme command run from this directory uses the
  # demo cluster while DATABASE_URL is unset; this line sets it in your
  # shell, for psql, clients and other directories too.
  echo "== point your shell at the demo cluster (bin/mneme commands here use it anyway while DATABASE_URL is unset):"
  echo 'eval $(bin/mneme-lab cluster env)'
fi
