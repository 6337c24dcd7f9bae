package tests

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/mneme-memory/mneme/sidecar/dbtest"
	"github.com/mneme-memory/mneme/sidecar/migrate"
	"github.com/mneme-memory/mneme/sidecar/transfer"
)

// citusRefusals are the errors a function of the API may answer on Citus
// with sane arguments, by function: SQLSTATE and a part of the message.
// Each is listed in docs/scale.md ("What is refused on Citus"), which
// TestCitusEveryFunction checks. On one server every call must succeed.
var citusRefusals = map[string][2]string{
	// mneme reembed's DDL: refused on a distributed mneme.
	"change_embedding_dim": {"0A000", "change_embedding_dim does not run on a distributed mneme"},
	// Its erase_conversation calls run on the coordinator, not delegated.
	"drop_tenant": {"0A000", "drop_tenant does not run on a distributed mneme (Citus) yet"},
}

// apiCall is one call of TestCitusEveryFunction: the function it covers,
// the group whose login calls it, and the statement with its arguments.
type apiCall struct {
	fn, group, q string
	args         []any
}

// TestCitusEveryFunction calls every function of the API (the app, worker
// and admin grants of sql/*.sql, every function a login of those
// groups may execute) once with sane arguments, as a login of its group,
// outside a transaction block (as a driver sends a call): on one server
// each succeeds; on a distributed database (the citus deployment) each
// succeeds or answers an error listed in citusRefusals and docs/scale.md.
func TestCitusEveryFunction(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := dbtest.New(t)
	pools := map[string]*pgxpool.Pool{}
	logins := map[string]string{}
	for _, g := range []string{"mneme_app", "mneme_worker", "mneme_admin"} {
		u := db.As(t, g)
		p, err := pgxpool.New(ctx, u)
		require.NoError(t, err)
		t.Cleanup(p.Close)
		pools[g] = p
		cfg, err := pgx.ParseConfig(u)
		require.NoError(t, err)
		logins[g] = cfg.User
	}
	exec := execer(t, db.Pool)
	scan := func(dst any, q string, args ...any) {
		t.Helper()
		require.NoError(t, db.Pool.QueryRow(ctx, q, args...).Scan(dst), q)
	}

	// A conversation with messages, memories, a review and a job; another
	// to export and import again; one to erase whole.
	conv, src, gone := uuid.New(), uuid.New(), uuid.New()
	var msg, msg2 int64
	var mem, mem2, mem3 uuid.UUID
	scan(&msg, `SELECT mneme.add_message($1, 'user', 'I live in Lisbon and I work at a bakery.')`, conv)
	scan(&msg2, `SELECT mneme.add_message($1, 'assistant', 'A bakery in Lisbon sounds lovely.')`, conv)
	scan(&mem, `SELECT mneme.remember($1, 'The user lives in Lisbon.')`, conv)
	scan(&mem2, `SELECT mneme.remember($1, 'The user works at a bakery.')`, conv)
	scan(&mem3, `SELECT mneme.remember($1, 'The user has a cat called Miso.')`, conv)
	var forgotten uuid.UUID
	scan(&forgotten, `SELECT mneme.remember($1, 'The user once lived in Porto.')`, conv)
	exec(`SELECT mneme.forget($1, 'moved away')`, forgotten)
	exec(`SELECT mneme.retrieve($1, 'where does the user live', 3)`, conv)
	exec(`SELECT mneme.add_message($1, 'user', 'My sister lives in Madrid.')`, src)
	exec(`SELECT mneme.remember($1, 'The user''s sister lives in Madrid.')`, src)
	exec(`SELECT mneme.remember($1, 'The user''s sister plays the cello.')`, src)
	exec(`SELECT mneme.retrieve($1, 'sister', 2)`, src)
	exec(`SELECT mneme.add_message($1, 'user', 'Something to erase.')`, gone)
	exec(`SELECT mneme.remember($1, 'Something to erase, remembered.')`, gone)
	// Two facts of one slot, and a consolidate job (issue 52).
	cons := uuid.New()
	var stale, current uuid.UUID
	var consJob int64
	scan(&stale, `SELECT mneme.remember($1, 'The user lives in Porto.', at => now() - interval '2 days')`, cons)
	scan(&current, `SELECT mneme.remember($1, 'The user lives in Faro.', at => now() - interval '1 day')`, cons)
	scan(&consJob, `SELECT mneme.consolidate($1)`, cons)
	var job, failedJob int64
	scan(&job, `SELECT mneme.enqueue_job('noop', $1)`, conv)
	scan(&failedJob, `SELECT mneme.enqueue_job('noop', $1, '{"n": 2}')`, conv)
	exec(`UPDATE mneme.jobs SET state = 'failed', last_error = 'a test failure' WHERE conversation_id = $1 AND id = $2`, conv, failedJob)
	var inactive uuid.UUID
	scan(&inactive, `SELECT mneme.remember($1, 'The user once had a red kite.')`, conv)
	exec(`UPDATE mneme.memories SET status = 'inactive', status_reason = 'a test' WHERE conversation_id = $1 AND id = $2`, conv, inactive)

	// The lines of src as an import of a new conversation: every id of
	// the file replaced by a new one.
	rows, err := db.Pool.Query(ctx, `SELECT l::text FROM mneme.export_lines($1) l`, src)
	require.NoError(t, err)
	lines, err := pgx.CollectRows(rows, pgx.RowTo[string])
	require.NoError(t, err)
	renamed := map[string]string{}
	uuidRe := regexp.MustCompile(`[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}`)
	byType := map[string][]json.RawMessage{}
	var convLine string
	for _, l := range lines {
		l = uuidRe.ReplaceAllStringFunc(l, func(id string) string {
			if renamed[id] == "" {
				renamed[id] = uuid.NewString()
			}
			return renamed[id]
		})
		var head struct {
			Type string `json:"type"`
		}
		require.NoError(t, json.Unmarshal([]byte(l), &head))
		if head.Type == "conversation" {
			convLine = l
		}
		byType[head.Type] = append(byType[head.Type], json.RawMessage(l))
	}
	imported := renamed[src.String()]
	require.NotEmpty(t, convLine, "export_lines has the conversation's line")
	require.NotEmpty(t, byType["memory"])
	var importedMems []string
	for _, m := range byType["memory"] {
		var v struct {
			ID string `json:"id"`
		}
		require.NoError(t, json.Unmarshal(m, &v))
		importedMems = append(importedMems, v.ID)
	}
	arr := func(ls []json.RawMessage) string {
		b, err := json.Marshal(ls)
		require.NoError(t, err)
		if ls == nil {
			return "[]"
		}
		return string(b)
	}

	tenant := "t" + strings.ReplaceAll(uuid.NewString()[:8], "-", "")
	emb := "mneme.hash_embed('Lisbon')"
	episodes := fmt.Sprintf(`[{"message_ids": [%d, %d], "content": "user: I live in Lisbon.", "summary": "Lisbon", "embedding": null, "surprise": 0.1, "label": "general", "pinned": false}]`, msg, msg2)
	app, worker, admin, owner := "mneme_app", "mneme_worker", "mneme_admin", "owner"
	pools[owner] = db.Pool
	calls := []apiCall{
		{"version", app, `SELECT mneme.version()`, nil},
		{"setting", app, `SELECT mneme.setting('rrf_k')`, nil},
		{"set_tenant", app, `SELECT mneme.set_tenant('default')`, nil},
		{"labels", app, `SELECT * FROM mneme.labels()`, nil},
		{"label_vocabulary", app, `SELECT * FROM mneme.label_vocabulary()`, nil},
		{"is_label", app, `SELECT mneme.is_label('general')`, nil},
		{"check_label", app, `SELECT mneme.check_label('general')`, nil},
		{"auto_label", app, `SELECT mneme.auto_label('I love my cat')`, nil},
		{"episode_label", app, `SELECT mneme.episode_label(ARRAY['I love my cat', 'So do I'])`, nil},
		{"initial_state", app, `SELECT * FROM mneme.initial_state('general')`, nil},
		{"retrievability", app, `SELECT mneme.retrievability(10, now() - interval '1 day')`, nil},
		{"hash_embed", app, `SELECT mneme.hash_embed('Lisbon')`, nil},
		{"hash_embed", app, `SELECT mneme.hash_embed('Lisbon', 64)`, nil},
		{"hash_fold", app, `SELECT mneme.hash_fold('Lisbon')`, nil},
		{"memory_text", app, `SELECT mneme.memory_text('a title', 'a summary', 'the content')`, nil},
		{"check_embedding", app, `SELECT mneme.check_embedding(` + emb + `)`, nil},
		{"bm25_tsvector", app, `SELECT mneme.bm25_tsvector('the user lives in Lisbon')`, nil},
		{"l2_normalize", app, `SELECT mneme.l2_normalize(ARRAY[3, 4]::real[])`, nil},
		{"cosine_distance", app, `SELECT mneme.cosine_distance(ARRAY[1, 0]::real[], ARRAY[0, 1]::real[])`, nil},
		{"redact", app, `SELECT mneme.redact('call me at alice@example.com')`, nil},
		{"add_message", app, `SELECT mneme.add_message($1, 'user', 'And I have a cat.')`, []any{conv}},
		{"add_message", app, `SELECT mneme.add_message($1, 'user', 'A message to take back.')`, []any{conv}},
		{"pop_message", app, `SELECT * FROM mneme.pop_message($1)`, []any{conv}},
		{"set_speakers", app, `SELECT mneme.set_speakers($1, ARRAY['Ann', 'Bob'])`, []any{conv}},
		{"remember", app, `SELECT mneme.remember($1, 'The user drinks coffee at eight.')`, []any{conv}},
		{"pin", app, `SELECT mneme.pin($1)`, []any{mem}},
		{"unpin", app, `SELECT mneme.unpin($1)`, []any{mem}},
		{"inspect", app, `SELECT * FROM mneme.inspect($1)`, []any{mem}},
		{"history", app, `SELECT * FROM mneme.history($1)`, []any{mem}},
		{"search", app, `SELECT * FROM mneme.search($1, 'where does the user live', 3)`, []any{conv}},
		{"search", app, `SELECT mneme.search($1, 'where does the user live', 3)`, []any{conv}},
		{"bm25_search", app, `SELECT * FROM mneme.bm25_search($1, 'Lisbon')`, []any{conv}},
		{"vector_search", app, `SELECT * FROM mneme.vector_search($1, ` + emb + `)`, []any{conv}},
		{"retrieve", app, `SELECT * FROM mneme.retrieve($1, 'where does the user live', 3)`, []any{conv}},
		{"retrieve_markdown", app, `SELECT mneme.retrieve_markdown($1, 'where does the user live', 3)`, []any{conv}},
		{"context", app, `SELECT mneme.context($1, 'where does the user live', 200)`, []any{conv}},
		{"context_items", app, `SELECT * FROM mneme.context_items($1, 'where does the user live', 200)`, []any{conv}},
		{"context_candidates", app, `SELECT * FROM mneme.context_candidates($1, 'where does the user live', 200)`, []any{conv}},
		{"record_retrieval", app, `SELECT mneme.record_retrieval($1, 'bakery', ARRAY[$2]::uuid[])`, []any{conv, mem2}},
		{"conversations", app, `SELECT * FROM mneme.conversations()`, nil},
		{"recent_conversations", app, `SELECT * FROM mneme.recent_conversations(5)`, nil},
		{"named_conversation", app, `SELECT mneme.named_conversation('user:alice')`, nil},
		{"llm_usage", app, `SELECT * FROM mneme.llm_usage(now() - interval '1 day', now() + interval '1 day', 'kind')`, nil},
		{"conversation_llm_usage", app, `SELECT * FROM mneme.conversation_llm_usage($1)`, []any{conv}},
		{"conversation_titles", app, `SELECT * FROM mneme.conversation_titles(ARRAY[$1]::uuid[])`, []any{conv}},
		{"find_memories", app, `SELECT * FROM mneme.find_memories($1, words => 'Lisbon', sort => 'created')`, []any{conv}},
		{"find_memories", app, `SELECT * FROM mneme.find_memories(only_status => 'active')`, nil},
		{"consolidate", app, `SELECT mneme.consolidate($1)`, []any{cons}},
		{"conversation_messages", app, `SELECT * FROM mneme.conversation_messages($1)`, []any{conv}},
		{"conversation_memories", app, `SELECT * FROM mneme.conversation_memories($1)`, []any{conv}},
		{"memory_reviews", app, `SELECT * FROM mneme.memory_reviews($1)`, []any{mem}},
		{"memory_event_log", app, `SELECT * FROM mneme.memory_event_log($1)`, []any{forgotten}},
		{"export_header", app, `SELECT mneme.export_header()`, nil},
		{"export_settings", app, `SELECT mneme.export_settings()`, nil},
		{"export_conversations", app, `SELECT * FROM mneme.export_conversations()`, nil},
		{"export_lines", app, `SELECT * FROM mneme.export_lines($1)`, []any{conv}},
		{"export_conversation", app, `SELECT mneme.export_conversation($1)`, []any{conv}},
		{"segment_now", app, `SELECT mneme.segment_now($1)`, []any{conv}},
		{"forget", app, `SELECT mneme.forget($1, 'no longer true')`, []any{mem3}},

		{"add_pending_review", worker, `SELECT mneme.add_pending_review($1, ARRAY[$2]::uuid[], 'coffee')`, []any{conv, mem}},
		{"take_pending_reviews", worker, `SELECT mneme.take_pending_reviews($1)`, []any{conv}},
		{"queued_messages", worker, `SELECT * FROM mneme.queued_messages($1)`, []any{conv}},
		{"queued_sessions", worker, `SELECT * FROM mneme.queued_sessions($1, 50)`, []any{conv}},
		{"context_messages", worker, `SELECT * FROM mneme.context_messages($1, ARRAY[$2]::bigint[])`, []any{conv, msg}},
		{"extractive_summary", worker, `SELECT mneme.extractive_summary($1, ARRAY['user', 'assistant'], ARRAY['I live in Lisbon.', 'Lovely city.'])`, []any{conv}},
		{"recent_memories", worker, `SELECT * FROM mneme.recent_memories($1, 5)`, []any{conv}},
		{"revision_candidates", worker, `SELECT * FROM mneme.revision_candidates($1)`, []any{mem2}},
		{"review_targets", worker, `SELECT * FROM mneme.review_targets(ARRAY[$1]::uuid[])`, []any{mem}},
		{"review_targets", worker, `SELECT * FROM mneme.review_targets(ARRAY[$1]::uuid[], lock => true)`, []any{mem}},
		{"apply_review", worker, `SELECT mneme.apply_review($1, 'good', 12, 5, 'review', now(), 'heuristic', ARRAY['where does the user live'])`, []any{mem}},
		{"memories_to_embed", worker, `SELECT * FROM mneme.memories_to_embed()`, nil},
		{"set_embedding", worker, `SELECT mneme.set_embedding($1, ` + emb + `)`, []any{mem2}},
		{"set_message_embedding", worker, `SELECT mneme.set_message_embedding($1, ` + emb + `)`, []any{msg}},
		{"lock_queued", worker, `SELECT mneme.lock_queued($1, ARRAY[$2, $3]::bigint[])`, []any{conv, msg, msg2}},
		{"create_episodes", worker, `SELECT * FROM mneme.create_episodes($1, $2::jsonb)`, []any{conv, episodes}},
		{"create_episode", worker, `SELECT mneme.create_episode($1, ARRAY[(SELECT max(message_id) FROM mneme.conversation_messages($1))], 'user: And I have a cat.', 'a cat', NULL, 0.1, 'general', false, 5, 5)`, []any{conv}},
		{"add_fact", worker, `SELECT mneme.add_fact($1, 'The user works at a bakery in Lisbon.', ARRAY[$2]::bigint[])`, []any{conv, msg}},
		{"apply_revision", worker, `SELECT mneme.apply_revision($1, 'NOOP', $2, 'nothing to change', 'heuristic')`, []any{mem2, mem}},
		{"_segment_followup", worker, `SELECT mneme._segment_followup($1, $2)`, []any{conv, msg2}},
		{"_interval_setting", worker, `SELECT mneme._interval_setting('cleanup_interval')`, nil},
		{"enqueue_job", worker, `SELECT mneme.enqueue_job('noop', $1, '{}', 'every-function')`, []any{conv}},
		{"enqueue_segment", worker, `SELECT mneme.enqueue_segment($1, '{}')`, []any{conv}},
		{"unhandled_jobs", worker, `SELECT * FROM mneme.unhandled_jobs(ARRAY[$1]::bigint[])`, []any{job}},
		{"claim_jobs", worker, `SELECT * FROM mneme.claim_jobs('every-function', 1, interval '1 minute')`, nil},
		{"extend_job_lease", worker, `SELECT mneme.extend_job_lease($1, 'every-function', 1, interval '1 minute')`, []any{job}},
		{"release_job", worker, `SELECT mneme.release_job($1, 'every-function', 1)`, []any{job}},
		{"fail_job", worker, `SELECT mneme.fail_job($1, 'every-function', 1, 'a test failure', interval '1 second')`, []any{job}},
		{"record_llm_calls", worker, `SELECT mneme.record_llm_calls($1, 1, '[{"call": "chat", "purpose": "segment_decision", "model": "m", "prompt_tokens": 10, "completion_tokens": 2, "usage": "reported", "latency_ms": 5, "outcome": "ok"}]')`, []any{job}},
		{"complete_job", worker, `SELECT mneme.complete_job($1, 'every-function', 1)`, []any{job}},
		{"retry_job", worker, `SELECT mneme.retry_job($1)`, []any{failedJob}},
		{"schedule_cleanup", worker, `SELECT mneme.schedule_cleanup()`, nil},
		{"schedule_consolidation", worker, `SELECT * FROM mneme.schedule_consolidation()`, nil},
		{"consolidation_facts", worker, `SELECT * FROM mneme.consolidation_facts($1)`, []any{cons}},
		{"apply_consolidation", worker, `SELECT mneme.apply_consolidation('SUPERSEDE', $1, $2, 'moved', 'heuristic', $3)`, []any{current, stale, consJob}},
		{"finish_consolidation", worker, `SELECT mneme.finish_consolidation($1, $2, '{"facts": 2}')`, []any{consJob, cons}},
		{"cleanup", worker, `SELECT * FROM mneme.cleanup(dry_run => true)`, nil},

		{"set_setting", admin, `SELECT mneme.set_setting('rrf_k', '61')`, nil},
		{"reset_initial_state", admin, `SELECT * FROM mneme.reset_initial_state($1, dry_run => true)`, []any{conv}},
		{"bm25_reindex", admin, `SELECT mneme.bm25_reindex()`, nil},
		{"reactivate", admin, `SELECT mneme.reactivate($1)`, []any{inactive}},
		{"erase", admin, `SELECT mneme.erase($1, 'the user asked')`, []any{mem3}},
		{"erase_conversation", admin, `SELECT mneme.erase_conversation($1, 'the user asked')`, []any{gone}},
		{"cleanup", admin, `SELECT * FROM mneme.cleanup()`, nil},
		{"create_tenant", admin, `SELECT mneme.create_tenant($1)`, []any{tenant}},
		{"bind_login", admin, `SELECT mneme.bind_login($1, $2)`, []any{logins[app], tenant}},
		{"unbind_login", admin, `SELECT mneme.unbind_login($1)`, []any{logins[app]}},
		{"tenants", admin, `SELECT * FROM mneme.tenants()`, nil},
		{"drop_tenant", admin, `SELECT mneme.drop_tenant($1, 'every-function')`, []any{tenant}},
		{"import_conversation", admin, `SELECT mneme.import_conversation($1::jsonb)`, []any{convLine}},
		{"import_messages", admin, `SELECT * FROM mneme.import_messages($1, $2::jsonb)`, []any{imported, arr(byType["message"])}},
		{"import_memories", admin, `SELECT * FROM mneme.import_memories($1, $2::jsonb)`, []any{imported, arr(byType["memory"])}},
		{"import_links", admin, `SELECT * FROM mneme.import_links('[]')`, nil},
		{"import_missing_links", admin, `SELECT * FROM mneme.import_missing_links('[]')`, nil},
		{"import_reviews", admin, `SELECT * FROM mneme.import_reviews($1, $2::jsonb)`, []any{imported, arr(byType["review"])}},
		{"import_events", admin, `SELECT mneme.import_events($1, $2::jsonb)`, []any{imported, arr(byType["event"])}},
		{"import_tombstones", admin, `SELECT * FROM mneme.import_tombstones(ARRAY[$1, $2]::uuid[])`, []any{gone, mem3}},
		{"import_source_erased", admin, `SELECT mneme.import_source_erased($1, 'mem0:x')`, []any{conv}},
		{"import_present", admin, `SELECT mneme.import_present($1, $2::uuid[])`, []any{imported, importedMems}},
		{"import_unembedded", admin, `SELECT * FROM mneme.import_unembedded($1)`, []any{imported}},
		{"import_unembedded_messages", admin, `SELECT * FROM mneme.import_unembedded_messages($1)`, []any{imported}},
		{"import_fact", admin, `SELECT mneme.import_fact($1, 'The user likes tea.', now(), '{"test": {"id": "fact-1"}}')`, []any{uuid.New()}},
		{"erase_vacuum_targets", admin, `SELECT * FROM mneme.erase_vacuum_targets()`, nil},
		{"vector_index_status", admin, `SELECT * FROM mneme.vector_index_status()`, nil},
		// DDL that runs as its caller, who must own the tables: the role
		// that migrates (mneme reembed, mneme vector-indexes).
		{"change_embedding_dim", owner, `SELECT mneme.change_embedding_dim((mneme.setting('embedding_dim') #>> '{}')::int)`, nil},
		{"vector_index_plan", owner, `SELECT * FROM mneme.vector_index_plan()`, nil}, // 0A000 in the array variant (anywhere)
	}

	// Every function a login of the three groups may execute has a call.
	rows, err = db.Pool.Query(ctx, `SELECT DISTINCT p.proname::text FROM pg_proc p
		WHERE p.pronamespace = 'mneme'::regnamespace AND p.prokind = 'f' AND p.prorettype <> 'trigger'::regtype
		  AND p.proname NOT IN ('_tenant', '_resolve_tenant', '_is_worker', '_is_operator')
		  AND (has_function_privilege('mneme_app', p.oid, 'EXECUTE') OR has_function_privilege('mneme_worker', p.oid, 'EXECUTE')
		       OR has_function_privilege('mneme_admin', p.oid, 'EXECUTE'))`)
	require.NoError(t, err)
	api, err := pgx.CollectRows(rows, pgx.RowTo[string])
	require.NoError(t, err)
	covered := map[string]bool{}
	for _, c := range calls {
		covered[c.fn] = true
	}
	var missing []string
	for _, fn := range api {
		if !covered[fn] {
			missing = append(missing, fn)
		}
	}
	sort.Strings(missing)
	require.Empty(t, missing, "functions of the API without a call in TestCitusEveryFunction")
	require.Greater(t, len(api), 90)

	var failures []string
	for _, c := range calls {
		cctx, cancel := context.WithTimeout(ctx, time.Minute)
		_, err := pools[c.group].Exec(cctx, c.q, c.args...)
		cancel()
		if err == nil {
			continue
		}
		var pe *pgconn.PgError
		if c.fn == "vector_index_plan" && db.Variant == "array" && errors.As(err, &pe) && pe.Code == "0A000" {
			continue
		}
		if r, ok := citusRefusals[c.fn]; ok && dbtest.OnCitus() && errors.As(err, &pe) && pe.Code == r[0] && strings.Contains(pe.Message, r[1]) {
			continue
		}
		failures = append(failures, fmt.Sprintf("%s as %s: %s: %v", c.fn, c.group, c.q, err))
	}
	require.Empty(t, failures, "calls that failed")
	doc, err := os.ReadFile("../docs/scale.md")
	require.NoError(t, err)
	for fn, r := range citusRefusals {
		require.True(t, strings.Contains(string(doc), r[0]) && strings.Contains(string(doc), r[1]),
			"docs/scale.md lists %s's refusal on Citus: %s %q", fn, r[0], r[1])
	}

	// What the calls did holds: the erased conversation is gone, the
	// imported one answers, the conversation goes on, read on a new
	// connection.
	fresh, err := pgx.Connect(ctx, db.URL)
	require.NoError(t, err)
	defer fresh.Close(ctx)
	scan = func(dst any, q string, args ...any) {
		t.Helper()
		require.NoError(t, fresh.QueryRow(ctx, q, args...).Scan(dst), q)
	}
	var n int
	scan(&n, `SELECT count(*) FROM mneme.messages WHERE conversation_id = $1`, gone)
	require.Zero(t, n)
	scan(&n, `SELECT count(*) FROM mneme.search($1, 'sister', 5)`, imported)
	require.Equal(t, 2, n, "the imported conversation is searched")
	scan(&n, `SELECT count(*) FROM mneme.search($1, 'where does the user live', 5)`, conv)
	require.Positive(t, n)
}

// TestCitusEraseAndExportImport: on the cluster, a source with what an
// export must carry (reviews, a merged duplicate, a superseded and a
// forgotten memory, an erased memory, a conversation erased whole, pending
// reviews: transferSource, through the sidecar's offline pipeline) is
// exported by `mneme export`'s code, imported by `mneme import`'s into
// another distributed database, and exported again: the same file but
// the header's time; search, the context, inspect and history answer the
// same on both; importing again changes nothing; importing it again with
// new ids, two conversations at once, adds its conversations.
func TestCitusEraseAndExportImport(t *testing.T) {
	dbtest.CitusURL(t)
	t.Parallel()
	src, convs := transferSource(t, "array")
	first := exportAll(t, src.db.URL, transfer.ExportOptions{MnemeVersion: "test"})
	require.Contains(t, string(first), `"erased": true`, "the conversation erased whole is exported")
	require.NotContains(t, string(first), "Nightjar", "an erased conversation's content is not exported")
	dst := dbtest.New(t)
	res, err := importFile(t, dst.URL, first, transfer.ImportOptions{Settings: true})
	require.NoError(t, err)
	require.Positive(t, res.Conversations)
	second := exportAll(t, dst.URL, transfer.ExportOptions{MnemeVersion: "test"})
	require.Equal(t, withoutExportTime(t, first), withoutExportTime(t, second))
	sameAnswers(t, src.db.Pool, dst.Pool, convs)
	res, err = importFile(t, dst.URL, first, transfer.ImportOptions{Settings: true})
	require.NoError(t, err)
	require.EqualValues(t, 0, res.Conversations)

	// Into new ids (--conversations new) beside the ones already there,
	// two conversations at once (--jobs 2).
	res, err = importFile(t, dst.URL, first, transfer.ImportOptions{NewIDs: true, Jobs: 2})
	require.NoError(t, err)
	require.Positive(t, res.Conversations)
}

// previousMneme builds the mneme binary of release ref (git archive of this
// repository's history, go build), once per machine: it is kept in the
// user's cache directory by the ref's name.
func previousMneme(t *testing.T, ref string) string {
	t.Helper()
	cache, err := os.UserCacheDir()
	require.NoError(t, err)
	dir := filepath.Join(cache, "mneme-test", "release-"+ref)
	bin := filepath.Join(dir, "mneme")
	if _, err := os.Stat(bin); err == nil {
		return bin
	}
	root, err := exec.Command("git", "rev-parse", "--show-toplevel").Output()
	require.NoError(t, err, "the upgrade test builds release %s from this repository's history (git)", ref)
	src := t.TempDir()
	archive := exec.Command("sh", "-c", `git -C "$1" archive "$2" | tar -x -C "$3"`, "sh", strings.TrimSpace(string(root)), ref, src)
	out, err := archive.CombinedOutput()
	require.NoError(t, err, "git archive %s: %s", ref, out)
	require.NoError(t, os.MkdirAll(dir, 0o755))
	build := exec.Command("go", "build", "-o", bin+".tmp", "./sidecar")
	build.Dir = src
	out, err = build.CombinedOutput()
	require.NoError(t, err, "build mneme %s: %s", ref, out)
	require.NoError(t, os.Rename(bin+".tmp", bin))
	return bin
}

// TestCitusUpgradeFromPreviousRelease: a database that the previous
// release (upgradeFrom, with its Citus layer: sql/950-citus.sql and the
// per-shard copies of functions) distributed with `mneme migrate --citus`
// and that holds data, migrated by this mneme (no flag), has the schema of
// a fresh --citus install, no per-shard copies left on any node, keeps its
// data, and the API works: the calls that failed on that release too.
func TestCitusUpgradeFromPreviousRelease(t *testing.T) {
	dbtest.CitusURL(t)
	t.Parallel()
	ctx := context.Background()
	old := previousMneme(t, upgradeFrom)

	freshURL, _ := citusDatabase(t)
	_, err := migrate.Run(ctx, freshURL, migrate.Options{Vector: "array", Citus: true})
	require.NoError(t, err)

	url, conn := citusDatabase(t)
	cmd := exec.Command(old, "migrate", "--citus")
	cmd.Env = append(os.Environ(), "DATABASE_URL="+url, "MNEME_VECTOR=array", "MNEME_LOG_LEVEL=warn")
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "mneme %s migrate --citus: %s", upgradeFrom, out)
	copies := func() int {
		var n int
		require.NoError(t, conn.QueryRow(ctx, `SELECT count(*) FROM pg_proc WHERE pronamespace = 'mneme'::regnamespace AND proname ~ '_[0-9]{4,}$'`).Scan(&n))
		var onWorkers int
		require.NoError(t, conn.QueryRow(ctx, `SELECT coalesce(sum(result::int), 0) FROM run_command_on_workers(
			$$SELECT count(*) FROM pg_proc WHERE pronamespace = 'mneme'::regnamespace AND proname ~ '_[0-9]{4,}$'$$)`).Scan(&onWorkers))
		return n + onWorkers
	}
	require.Positive(t, copies(), "release %s's Citus layer made per-shard copies of functions", upgradeFrom)

	// Data, written through the old release's API.
	convs := []uuid.UUID{uuid.New(), uuid.New(), uuid.New()}
	for i, c := range convs {
		for _, q := range []string{
			`SELECT mneme.add_message($1, 'user', 'I live in Lisbon and I work at a bakery.')`,
			`SELECT mneme.remember($1, 'The user lives in Lisbon.')`,
			`SELECT mneme.remember($1, 'The user works at a bakery.')`,
			`SELECT mneme.retrieve($1, 'where does the user live', 2)`,
		} {
			_, err := conn.Exec(ctx, q, c)
			require.NoError(t, err, "release %s, conversation %d: %s", upgradeFrom, i, q)
		}
	}
	var moved uuid.UUID
	require.NoError(t, conn.QueryRow(ctx, `SELECT id FROM mneme.memories WHERE conversation_id = $1 AND content LIKE '%Lisbon%'`, convs[0]).Scan(&moved))
	_, err = conn.Exec(ctx, `SELECT mneme.remember($1, 'The user lives in Porto now.', supersedes => $2)`, convs[0], moved)
	require.NoError(t, err)
	data := func() string {
		var s string
		require.NoError(t, conn.QueryRow(ctx, `SELECT concat_ws(E'\n',
			(SELECT string_agg(format('message %s %s %s', conversation_id, role, content), E'\n' ORDER BY conversation_id, id) FROM mneme.messages),
			(SELECT string_agg(format('memory %s %s %s', id, status, content), E'\n' ORDER BY id) FROM mneme.memories),
			(SELECT string_agg(format('event %s %s', memory_id, event), E'\n' ORDER BY memory_id, event) FROM mneme.memory_events))`).Scan(&s))
		var found []string
		for _, c := range convs {
			rows, err := conn.Query(ctx, `SELECT content FROM mneme.search($1, 'where does the user live', 5) ORDER BY score DESC, memory_id`, c)
			require.NoError(t, err)
			f, err := pgx.CollectRows(rows, pgx.RowTo[string])
			require.NoError(t, err)
			found = append(found, strings.Join(f, "|"))
		}
		return s + "\n" + strings.Join(found, "\n")
	}
	before := data()
	require.Contains(t, before, "Porto")

	res, err := migrate.Run(ctx, url, migrate.Options{Vector: "array"})
	require.NoError(t, err)
	require.True(t, res.Distributed, "the upgrade keeps it distributed")
	require.Zero(t, copies(), "per-shard copies left on some node")
	rows, err := conn.Query(ctx, `SELECT c.relname::text FROM pg_class c
		WHERE c.relnamespace = 'mneme'::regnamespace AND c.relkind = 'r'
		  AND c.oid NOT IN (SELECT logicalrelid FROM pg_dist_partition) ORDER BY 1`)
	require.NoError(t, err)
	local, err := pgx.CollectRows(rows, pgx.RowTo[string])
	require.NoError(t, err)
	// (mneme.call_marks stays local, unused: on Citus marks are settings)
	require.Equal(t, []string{"call_marks"}, local, "every table distributed or reference, those made since --citus too")
	onlyFresh, onlyUpgraded := lineDiff(upgradeSchema(t, freshURL), upgradeSchema(t, url))
	require.Empty(t, onlyFresh, "a fresh --citus install has these, the database upgraded from %s not", upgradeFrom)
	require.Empty(t, onlyUpgraded, "the database upgraded from %s has these, a fresh --citus install not", upgradeFrom)
	require.Equal(t, before, data(), "the data is kept")

	// The API after the upgrade, as an application and an operator.
	_, appURL := citusLogin(t, conn, url, "mneme_app")
	_, adminURL := citusLogin(t, conn, url, "mneme_admin")
	app, err := pgx.Connect(ctx, appURL)
	require.NoError(t, err)
	defer app.Close(ctx)
	admin, err := pgx.Connect(ctx, adminURL)
	require.NoError(t, err)
	defer admin.Close(ctx)
	var n int
	require.NoError(t, app.QueryRow(ctx, `SELECT count(*) FROM mneme.conversations()`).Scan(&n))
	require.Equal(t, len(convs), n)
	var text string
	require.NoError(t, app.QueryRow(ctx, `SELECT mneme.context($1, 'where does the user live', 100)`, convs[0]).Scan(&text))
	require.Contains(t, text, "Porto")
	// Two conversations on (likely) two workers in one transaction.
	tx, err := app.Begin(ctx)
	require.NoError(t, err)
	for _, c := range convs[:2] {
		_, err = tx.Exec(ctx, `SELECT mneme.remember($1, 'The user has a cat called Miso.')`, c)
		require.NoError(t, err)
	}
	require.NoError(t, tx.Commit(ctx))
	var bm25Rank *int
	require.NoError(t, app.QueryRow(ctx, `SELECT content, bm25_rank FROM mneme.search($1, 'cat called Miso', 1)`, convs[1]).Scan(&text, &bm25Rank))
	require.Contains(t, text, "Miso")
	require.NotNil(t, bm25Rank, "the BM25 statistics kept by the new triggers")
	_, err = admin.Exec(ctx, `SELECT mneme.erase_conversation($1, 'the user asked')`, convs[2])
	require.NoError(t, err)
	require.NoError(t, app.QueryRow(ctx, `SELECT count(*) FROM mneme.conversations()`).Scan(&n))
	require.Equal(t, len(convs)-1, n)
}
