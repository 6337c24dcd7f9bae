package tests

import (
	"context"
	"encoding/json"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	openai "github.com/sashabaranov/go-openai"
	"github.com/stretchr/testify/require"

	"github.com/mneme-memory/mneme/sidecar/config"
	"github.com/mneme-memory/mneme/sidecar/embed"
	"github.com/mneme-memory/mneme/sidecar/llm"
	"github.com/mneme-memory/mneme/sidecar/llm/llmtest"
)

var usageMemoryHeading = regexp.MustCompile(`### Memory ([0-9a-f-]{36})`)

// usageModel answers every schema the pipelines ask for: the segmenter
// creates an episode with one fact, the reviser adds, the reviewer rates
// every memory good.
func usageModel(req openai.ChatCompletionRequest) llmtest.Reply {
	var out any
	switch schemaName(req) {
	case "segment_decision":
		out = map[string]any{"action": "create", "summary": "Dana talks about Lisbon.", "surprise": 0.3, "label": "general",
			"pinned": false, "facts": []map[string]any{{"text": "Dana lives in Lisbon.", "messages": []int{1}}}}
	case "revision_decision":
		return decisionReply("ADD", 0, "new information", 0.9)
	case "memory_ratings":
		var rs []map[string]string
		for _, m := range usageMemoryHeading.FindAllStringSubmatch(req.Messages[1].Content, -1) {
			rs = append(rs, map[string]string{"memory_id": m[1], "rating": "good", "reason": "it answered the question"})
		}
		out = map[string]any{"ratings": rs}
	default:
		return llmtest.Reply{Status: http.StatusBadRequest, Content: "unknown schema " + schemaName(req)}
	}
	b, _ := json.Marshal(out)
	return llmtest.Reply{Content: string(b)}
}

// newUsageEnv is a pipeline environment whose LLM and embedder both talk
// to the fake server (one HTTP attempt per chat call: a failure fails the
// job's attempt).
func newUsageEnv(t *testing.T, timeout time.Duration) *pipelineEnv {
	t.Helper()
	e := newPipelineEnv(t, true)
	e.deps.LLM = llm.New(config.Endpoint{BaseURL: e.srv.URL(), Model: "fake-chat", APIKey: "secret-key"}, timeout, llm.WithAttempts(1))
	e.srv.SetEmbedDim(config.DefaultEmbedDim)
	e.deps.Embedder = embed.NewOpenAI(config.Endpoint{BaseURL: e.srv.URL(), Model: "fake-embed", APIKey: "secret-key"},
		config.DefaultEmbedDim)
	e.srv.Default(usageModel)
	// The sidecar embeds with the external embedder (not the hash
	// embedder's Go twin): every embedding is a model call.
	_, err := e.db.Pool.Exec(context.Background(), `SELECT mneme.set_setting('embedder', '"external"')`)
	require.NoError(t, err)
	return e
}

type ledgerRow struct {
	JobID            int64
	JobKind          string
	Attempt          int
	Call             string
	Purpose          string
	Model            string
	Endpoint         string
	PromptTokens     int64
	CompletionTokens int64
	Usage            string
	Outcome          string
	Retries          int
	Tenant           string
	Conversation     uuid.NullUUID
}

func ledger(t *testing.T, e *pipelineEnv) []ledgerRow {
	t.Helper()
	rows, err := e.db.Pool.Query(context.Background(), `
		SELECT job_id, job_kind, attempt, call, purpose, model, endpoint, prompt_tokens, completion_tokens, usage, outcome,
		       retries, tenant_id, conversation_id
		FROM mneme.llm_calls ORDER BY id`)
	require.NoError(t, err)
	out, err := pgx.CollectRows(rows, pgx.RowToStructByPos[ledgerRow])
	require.NoError(t, err)
	return out
}

// Every model call a job makes is one ledger row, with the job's tenant,
// conversation and kind and the tokens the endpoint reported; a failed
// attempt's call is a row of that attempt, and the retry's its own (no
// double count); the endpoint is a host, never the key.
func TestLLMUsageLedger(t *testing.T) {
	t.Parallel()
	e := newUsageEnv(t, 5*time.Second)
	ctx := context.Background()
	// The first chat call fails (HTTP 500): the segment job's first attempt
	// fails and its retry succeeds.
	e.srv.Script(llmtest.Reply{Status: http.StatusInternalServerError, Content: "overloaded"})
	lines := []string{"My name is Dana and I live in Lisbon.", "Nice to meet you, Dana.", "I moved there from Porto.",
		"Lisbon is lovely.", "I work as a nurse.", "That sounds rewarding."}
	for i, line := range lines {
		e.say(day1.Add(time.Duration(i)*time.Minute).Format(time.RFC3339), []string{"user", "assistant"}[i%2], line)
	}
	_, err := e.db.Pool.Exec(ctx, `SELECT mneme.segment_now($1)`, e.conv)
	require.NoError(t, err)
	e.drain()
	// A retrieval, then a second episode: its segment job hands the pending
	// review to a review job.
	_, err = e.db.Pool.Exec(ctx, `SELECT count(*) FROM mneme.retrieve($1, 'where does Dana live', 5, query_embedding => '{}')`, e.conv)
	require.NoError(t, err)
	for i, line := range lines {
		e.say(day1.Add(time.Hour+time.Duration(i)*time.Minute).Format(time.RFC3339), []string{"user", "assistant"}[i%2], line)
	}
	_, err = e.db.Pool.Exec(ctx, `SELECT mneme.segment_now($1)`, e.conv)
	require.NoError(t, err)
	e.drain()
	require.Zero(t, e.count(`SELECT count(*) FROM mneme.jobs WHERE state <> 'done'`))

	rows := ledger(t, e)
	chats, embeds := e.srv.Requests(), e.srv.EmbedRequests()
	require.Len(t, rows, len(chats)+len(embeds), "one ledger row per model call")

	// Per kind and purpose: the chat calls each job kind made.
	want := map[string]int{}
	for _, r := range chats {
		want[schemaName(r)]++
	}
	got := map[string]int{}
	kinds := map[string]string{}
	for _, r := range rows {
		if r.Call == "chat" {
			got[r.Purpose]++
			kinds[r.Purpose] = r.JobKind
		}
		require.Equal(t, "default", r.Tenant)
		require.Equal(t, uuid.NullUUID{UUID: e.conv, Valid: true}, r.Conversation)
		require.NotContains(t, r.Endpoint, "secret")
		require.Equal(t, strings.TrimPrefix(strings.TrimSuffix(e.srv.URL(), "/v1"), "http://"), r.Endpoint)
	}
	require.Equal(t, want, got)
	require.Equal(t, map[string]string{"segment_decision": "segment", "revision_decision": "revise", "memory_ratings": "review"}, kinds)
	require.Equal(t, 3, want["segment_decision"], "two episodes and one failed attempt")
	require.Positive(t, want["revision_decision"])
	require.Equal(t, 1, want["memory_ratings"])

	// The failed call: a row of attempt 1, marked; the retry's row is
	// attempt 2 of the same job.
	var failed ledgerRow
	for _, r := range rows {
		if r.Outcome != "ok" {
			require.Zero(t, failed.JobID, "one failed call")
			failed = r
		}
	}
	require.Equal(t, "segment_decision", failed.Purpose)
	require.Equal(t, 1, failed.Attempt)
	require.Equal(t, "error", failed.Outcome)
	require.Equal(t, "missing", failed.Usage, "no answer, no usage: estimated")
	retried := false
	for _, r := range rows {
		if r.JobID == failed.JobID && r.Call == "chat" && r.Outcome == "ok" {
			require.Equal(t, 2, r.Attempt)
			retried = true
		}
	}
	require.True(t, retried)

	// Tokens as reported (the fake server reports a token per word).
	var wantPrompt, gotPrompt, gotCompletion int64
	for _, r := range chats[1:] { // chats[0] got the 500
		var prompt []string
		for _, m := range r.Messages {
			prompt = append(prompt, m.Content)
		}
		wantPrompt += int64(llmtest.Words(prompt, "").PromptTokens)
	}
	for _, r := range embeds {
		wantPrompt += int64(llmtest.Words(r.Input, "").PromptTokens)
	}
	for _, r := range rows {
		if r.Outcome == "ok" {
			require.Equal(t, "reported", r.Usage)
			require.Equal(t, map[string]string{"chat": "fake-chat", "embedding": "fake-embed"}[r.Call], r.Model)
			gotPrompt += r.PromptTokens
			gotCompletion += r.CompletionTokens
		}
	}
	require.Equal(t, wantPrompt, gotPrompt)
	require.Positive(t, gotCompletion)

	// mneme.llm_usage agrees with the rows.
	var calls, prompt int64
	require.NoError(t, e.db.Pool.QueryRow(ctx, `SELECT sum(calls), sum(prompt_tokens) FROM mneme.llm_usage(now() - interval '1 hour', now() + interval '1 hour', 'kind')`).
		Scan(&calls, &prompt))
	require.Equal(t, int64(len(rows)), calls)
	require.Equal(t, gotPrompt+rows[indexOf(rows, failed)].PromptTokens, prompt)

	// Erasing the conversation removes its rows and keeps their totals.
	before := usageTotals(t, e)
	_, err = e.db.Pool.Exec(ctx, `SELECT mneme.erase_conversation($1, 'test')`, e.conv)
	require.NoError(t, err)
	require.Zero(t, e.count(`SELECT count(*) FROM mneme.llm_calls`))
	require.Equal(t, before, usageTotals(t, e))
	require.Positive(t, e.count(`SELECT count(*) FROM mneme.llm_usage_days`))
}

func indexOf(rows []ledgerRow, r ledgerRow) int {
	for i, x := range rows {
		if x == r {
			return i
		}
	}
	return -1
}

func usageTotals(t *testing.T, e *pipelineEnv) string {
	t.Helper()
	var s string
	require.NoError(t, e.db.Pool.QueryRow(context.Background(), `
		SELECT string_agg(format('%s %s %s %s %s %s', key, calls, failed_calls, estimated_calls, prompt_tokens, completion_tokens), '; ')
		FROM mneme.llm_usage(now() - interval '3 days', now() + interval '3 days', 'model')`).Scan(&s))
	return s
}

// An endpoint that reports no usage, or nonsense, or does not answer in
// time gives a marked ledger row: the job is not failed by the usage, and
// the timeout fails only its attempt, as before.
func TestLLMUsageBadInput(t *testing.T) {
	t.Parallel()
	e := newUsageEnv(t, 300*time.Millisecond)
	ctx := context.Background()
	segment := func(reply llmtest.Reply) {
		t.Helper()
		e.srv.Script(reply)
		for i := range 6 {
			e.say(day1.Add(time.Duration(e.count(`SELECT count(*) FROM mneme.messages`))*time.Minute).Format(time.RFC3339),
				"user", "Message number "+string(rune('a'+i))+" about the harbour.")
		}
		_, err := e.db.Pool.Exec(ctx, `SELECT mneme.segment_now($1)`, e.conv)
		require.NoError(t, err)
		e.drain()
		require.Zero(t, e.count(`SELECT count(*) FROM mneme.jobs WHERE state <> 'done'`))
	}
	skip := `{"action":"skip","summary":"","surprise":0,"label":"general","pinned":false,"facts":[]}`
	last := func() ledgerRow {
		rows := ledger(t, e)
		for i := len(rows) - 1; i >= 0; i-- {
			if rows[i].Call == "chat" {
				return rows[i]
			}
		}
		t.Fatal("no chat row")
		return ledgerRow{}
	}

	segment(llmtest.Reply{Content: skip, NoUsage: true})
	r := last()
	require.Equal(t, "missing", r.Usage)
	require.Equal(t, "ok", r.Outcome)
	require.Positive(t, r.PromptTokens, "estimated from the characters sent")
	require.Equal(t, int64((len(skip)+3)/4), r.CompletionTokens)

	segment(llmtest.Reply{Content: skip, Usage: &openai.Usage{PromptTokens: -5, CompletionTokens: 3}})
	r = last()
	require.Equal(t, "invalid", r.Usage)
	require.GreaterOrEqual(t, r.PromptTokens, int64(0))

	segment(llmtest.Reply{Content: skip, Usage: &openai.Usage{PromptTokens: 1 << 40, CompletionTokens: 3}})
	require.Equal(t, "invalid", last().Usage)

	// A timeout fails the attempt (as any failed call does); the row says
	// timeout, and the retry's row is ok.
	e.srv.Script(llmtest.Reply{Content: skip, Delay: 2 * time.Second})
	segment(llmtest.Reply{Content: skip})
	var outcomes []string
	for _, r := range ledger(t, e) {
		if r.Call == "chat" {
			outcomes = append(outcomes, r.Outcome)
		}
	}
	require.Equal(t, []string{"timeout", "ok"}, outcomes[len(outcomes)-2:])
}

// mneme.llm_usage: an admin bound to no tenant sees every tenant; a bound
// login its own tenant only; an application session the tenant it set.
// The estimated cost follows setting llm_prices. Bad arguments are clear
// errors.
func TestLLMUsageRoles(t *testing.T) {
	t.Parallel()
	db := newPipelineEnv(t, false).db
	ctx := context.Background()
	for _, tn := range []string{"ta", "tb"} {
		_, err := db.Pool.Exec(ctx, `SELECT mneme.create_tenant($1)`, tn)
		require.NoError(t, err)
	}
	_, err := db.Pool.Exec(ctx, `
		INSERT INTO mneme.llm_calls (tenant_id, conversation_id, job_id, job_kind, attempt, call, purpose, model, endpoint,
		                             prompt_tokens, completion_tokens, usage, latency_ms, outcome, retries)
		VALUES ('ta', gen_random_uuid(), 1, 'segment', 1, 'chat', 'segment_decision', 'm1', 'h', 1000, 100, 'reported', 5, 'ok', 0),
		       ('tb', gen_random_uuid(), 2, 'review', 1, 'chat', 'memory_ratings', 'm1', 'h', 2000, 200, 'reported', 5, 'ok', 0),
		       ('tb', gen_random_uuid(), 3, 'segment', 1, 'embedding', 'embedding', 'm2', 'h', 50, 0, 'missing', 5, 'timeout', 1)`)
	require.NoError(t, err)
	_, err = db.Pool.Exec(ctx, `SELECT mneme.set_setting('llm_prices', '{"m1": {"in": 0.5, "out": 2}}')`)
	require.NoError(t, err)

	admin, _ := db.PoolAs(t, "mneme_admin")
	bound, boundURL := db.PoolAs(t, "mneme_app")
	app, _ := db.PoolAs(t, "mneme_app")
	_, err = admin.Exec(ctx, `SELECT mneme.bind_login($1, 'tb')`, loginOf(t, boundURL))
	require.NoError(t, err)

	const q = `SELECT coalesce(string_agg(format('%s:%s/%s/%s/%s', key, calls, failed_calls, prompt_tokens, round(estimated_cost, 4)), ' '), '')
		FROM mneme.llm_usage(now() - interval '1 day', now() + interval '1 day', group_by => 'tenant')`
	read := func(p interface {
		QueryRow(context.Context, string, ...any) pgx.Row
	}) string {
		var s string
		require.NoError(t, p.QueryRow(ctx, q).Scan(&s))
		return s
	}
	require.Equal(t, "ta:1/0/1000/0.7000 tb:2/1/2050/1.4000", read(admin))
	require.Equal(t, "tb:2/1/2050/1.4000", read(bound))
	require.NoError(t, inTenant(t, app, "ta", func(tx pgx.Tx) error {
		require.Equal(t, "ta:1/0/1000/0.7000", read(tx))
		return nil
	}))
	require.Equal(t, "", read(app), "tenant default has no usage")
	// An admin that chose a tenant reads that tenant's.
	require.NoError(t, inTenant(t, admin, "tb", func(tx pgx.Tx) error {
		require.Equal(t, "tb:2/1/2050/1.4000", read(tx))
		return nil
	}))
	// The bound login reaches no row of another tenant through the table
	// either (it has no privilege on it at all).
	_, err = bound.Exec(ctx, `SELECT count(*) FROM mneme.llm_calls`)
	require.Error(t, err)

	for _, c := range []struct{ sql, code string }{
		{`SELECT * FROM mneme.llm_usage(NULL, now(), 'day')`, "22004"},
		{`SELECT * FROM mneme.llm_usage(now(), now(), NULL)`, "22004"},
		{`SELECT * FROM mneme.llm_usage(now(), now(), 'week')`, "22023"},
		{`SELECT * FROM mneme.llm_usage(now(), now() - interval '1 day', 'day')`, "22008"},
		{`SELECT * FROM mneme.llm_usage('-infinity', now(), 'day')`, "22008"},
		{`SELECT mneme.record_llm_calls(1, 1, '{}')`, "22023"},
	} {
		_, err := db.Pool.Exec(ctx, c.sql)
		require.Error(t, err, c.sql)
		require.Equal(t, c.code, sqlState(t, err), c.sql)
	}
	var keys []string
	rows, err := admin.Query(ctx, `SELECT key FROM mneme.llm_usage(now() - interval '1 day', now() + interval '1 day', 'kind')`)
	require.NoError(t, err)
	keys, err = pgx.CollectRows(rows, pgx.RowTo[string])
	require.NoError(t, err)
	require.Equal(t, []string{"review", "segment"}, keys)
}

// A ledger the database refuses (here a trigger that raises) fails no job:
// the rows are rolled back alone and the job commits its effect.
func TestLLMUsageRefusedLedgerFailsNoJob(t *testing.T) {
	t.Parallel()
	e := newUsageEnv(t, 5*time.Second)
	ctx := context.Background()
	_, err := e.db.Pool.Exec(ctx, `
		CREATE FUNCTION public.refuse_ledger() RETURNS trigger LANGUAGE plpgsql AS $$
		BEGIN RAISE EXCEPTION 'ledger refused for the test'; END $$;
		CREATE TRIGGER refuse BEFORE INSERT ON mneme.llm_calls FOR EACH ROW EXECUTE FUNCTION public.refuse_ledger();`)
	require.NoError(t, err)
	for i, line := range []string{"My name is Dana and I live in Lisbon.", "Nice to meet you, Dana.", "I moved there from Porto.",
		"Lisbon is lovely.", "I work as a nurse.", "That sounds rewarding."} {
		e.say(day1.Add(time.Duration(i)*time.Minute).Format(time.RFC3339), []string{"user", "assistant"}[i%2], line)
	}
	_, err = e.db.Pool.Exec(ctx, `SELECT mneme.segment_now($1)`, e.conv)
	require.NoError(t, err)
	e.drain()
	require.NotEmpty(t, e.srv.Requests(), "the model was called")
	require.Zero(t, e.count(`SELECT count(*) FROM mneme.jobs WHERE state <> 'done'`), "every job done")
	require.Zero(t, e.count(`SELECT count(*) FROM mneme.jobs WHERE attempts > 1`), "none retried for the ledger")
	require.Positive(t, e.count(`SELECT count(*) FROM mneme.memories`), "the effect committed")
	require.Zero(t, e.count(`SELECT count(*) FROM mneme.llm_calls`))
}
