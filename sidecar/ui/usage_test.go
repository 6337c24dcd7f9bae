package ui

import (
	"context"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"
	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/mneme-memory/mneme/sidecar/dbtest"
)

// seedUsage writes ledger rows as the sidecar's jobs would: three calls of
// conv (tenant default) today and yesterday, one of another tenant.
func seedUsage(t *testing.T, pool *pgxpool.Pool, conv uuid.UUID) {
	t.Helper()
	ctx := context.Background()
	_, err := pool.Exec(ctx, `SELECT mneme.create_tenant('acme')`)
	require.NoError(t, err)
	_, err = pool.Exec(ctx, `
		INSERT INTO mneme.llm_calls (tenant_id, conversation_id, job_id, job_kind, attempt, call, purpose, model, endpoint,
		                             prompt_tokens, completion_tokens, usage, latency_ms, outcome, retries, at)
		VALUES ('default', $1, 1, 'segment', 1, 'chat', 'segment_decision', 'gpt-x', 'api.example', 1200, 80, 'reported', 900, 'ok', 0, now()),
		       ('default', $1, 2, 'review', 1, 'chat', 'memory_ratings', 'gpt-x', 'api.example', 800, 40, 'reported', 700, 'ok', 0, now() - interval '1 day'),
		       ('default', $1, 1, 'segment', 1, 'embedding', 'embedding', 'emb-x', 'api.example', 300, 0, 'missing', 50, 'timeout', 2, now()),
		       ('acme', gen_random_uuid(), 3, 'revise', 1, 'chat', 'revision_decision', 'gpt-x', 'api.example', 5000, 100, 'reported', 1000, 'ok', 0, now())`, conv)
	require.NoError(t, err)
	_, err = pool.Exec(ctx, `SELECT mneme.set_setting('llm_prices', '{"gpt-x": {"in": 0.001, "out": 0.002}}')`)
	require.NoError(t, err)
}

// The usage page: an admin sees every tenant's usage by tenant, kind,
// model and day with the plot, or one tenant's when it chose one; a login
// of the application its own tenant's, with no link to the page; the
// conversation page has its usage line.
func TestUsagePage(t *testing.T) {
	t.Parallel()
	db := dbtest.New(t)
	s := seed(t, db.Pool, "default", "saffron")
	seedUsage(t, db.Pool, s.Conv)
	admin, _ := db.PoolAs(t, "mneme_admin")
	c := newClient(t, newServer(t, admin, ""))

	code, body := c.get("/usage")
	require.Equal(t, 200, code, body)
	for _, want := range []string{`id="by-tenant"`, "<td>acme</td>", "<td>default</td>", "<td>revise</td>", "<td>emb-x</td>",
		"4 calls (1 failed, 1 with estimated tokens)", "7300 prompt + 220 completion tokens", "<svg", "LLM tokens per day"} {
		require.Contains(t, body, want)
	}
	code, body = c.get("/usage?tenant=acme")
	require.Equal(t, 200, code)
	require.Contains(t, body, "1 calls (0 failed, 0 with estimated tokens)")
	require.NotContains(t, body, "<td>default</td>")
	code, body = c.get("/usage?days=abc")
	require.Equal(t, 200, code, "a bad ?days= is the default 30")
	require.Contains(t, body, `id="by-day"`)

	code, body = c.get("/conversations/" + s.Conv.String())
	require.Equal(t, 200, code)
	require.Contains(t, body, `id="conversation-usage"`)
	require.Contains(t, body, "LLM use: 3 calls (1 failed) · 2300 prompt + 120 completion tokens")

	app, _ := db.PoolAs(t, "mneme_app")
	ca := newClient(t, newServer(t, app, ""))
	code, body = ca.get("/usage")
	require.Equal(t, 200, code, body)
	require.Contains(t, body, "3 calls")
	require.NotContains(t, body, "acme")
	_, body = ca.get("/")
	require.NotContains(t, body, `href="/usage"`, "the link is an admin's")
	_, body = c.get("/")
	require.Contains(t, body, `href="/usage"`)
}

// The usage page in the browser: reached from the navigation, its plot
// drawn, its tables filled; the conversation's usage line.
func TestBrowserUsage(t *testing.T) {
	browserPath(t)
	db := dbtest.New(t)
	s := seed(t, db.Pool, "default", "saffron")
	seedUsage(t, db.Pool, s.Conv)
	admin, _ := db.PoolAs(t, "mneme_admin")
	srv := newServer(t, admin, "")
	b := browser(t)
	step(t, b, "open /", chromedp.Navigate(srv.URL+"/"), chromedp.WaitVisible(chromedp.CSS("#conversations")))
	step(t, b, "click Usage", chromedp.Click(chromedp.CSS(`header a[href="/usage"]`)), chromedp.WaitVisible(chromedp.CSS("#usage-plot")))
	require.Equal(t, 2, eval[int](t, b, `document.querySelectorAll('#usage-plot svg polyline').length`), "prompt and completion lines")
	require.Equal(t, 3, eval[int](t, b, `document.querySelectorAll('#by-tenant tr').length`), "a header and two tenants")
	require.Contains(t, text(t, b, "#by-kind"), "review")
	require.Contains(t, text(t, b, "#usage-total"), "4 calls")
	screenshot(t, b, "ui-usage.png")
	step(t, b, "the conversation", chromedp.Navigate(srv.URL+"/conversations/"+s.Conv.String()),
		chromedp.WaitVisible(chromedp.CSS("#conversation-usage")))
	require.True(t, strings.HasPrefix(strings.TrimSpace(text(t, b, "#conversation-usage")), "LLM use: 3 calls"))
}
