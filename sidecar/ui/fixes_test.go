package ui

import (
	"context"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"
)

// TestUIFixes: one check per item of issue 51 that was a fault (10 to 12;
// 13, the Host header, is TestHostHeaderRefused) and issue 55's titles.
func TestUIFixes(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db, _, _, sa, sb := bound(t, "auto")
	admin, _ := db.PoolAs(t, "mneme_admin")
	exec := func(q string, args ...any) {
		t.Helper()
		_, err := db.Pool.Exec(ctx, q, args...)
		require.NoError(t, err, q)
	}
	cl := newClient(t, newServer(t, admin, ""))

	t.Run("10: the jobs page counts its tenant's jobs only, and says why a job stopped early", func(t *testing.T) {
		var job int64
		require.NoError(t, db.Pool.QueryRow(ctx, `INSERT INTO mneme.jobs (kind, conversation_id, state, attempts, max_attempts, last_error, tenant_id)
		        VALUES ('segment', $1, 'failed', 1, 5, 'no JSON', 'tb') RETURNING id`, sb.Conv).Scan(&job))
		_, body := cl.get("/jobs?tenant=ta")
		require.Contains(t, body, "No failed jobs")
		require.NotRegexp(t, `<td>segment</td><td>failed</td>`, body, "tb's failed job is not in ta's counts")
		_, body = cl.get("/jobs?tenant=tb")
		require.Regexp(t, `<td>segment</td><td>failed</td><td class="num">1</td>`, body)
		require.Contains(t, body, `id="job-`)
		require.Contains(t, body, "stopped before its 5: a permanent error, or the sidecar's MNEME_MAX_ATTEMPTS")
		require.NotContains(t, body, "1 / 5")
	})

	t.Run("11: no pin on a forgotten memory, and the API refuses it", func(t *testing.T) {
		exec(`SELECT set_config('mneme.tenant', 'ta', false)`)
		var gone uuid.UUID
		require.NoError(t, db.Pool.QueryRow(ctx, `SELECT mneme.set_tenant('ta'), mneme.remember($1, 'a wrong fact')`, sa.Conv).Scan(new(string), &gone))
		exec(`SELECT mneme.forget($1, 'wrong')`, gone)
		mem := "/memories/" + gone.String()
		_, body := cl.get(mem + "?tenant=ta")
		require.Contains(t, body, "invalidated")
		require.NotContains(t, body, `id="pin"`)
		code, body := cl.post(mem+"/pin", url.Values{"csrf": {cl.csrf()}, "confirm": {"yes"}, "tenant": {"ta"}})
		require.Equal(t, http.StatusConflict, code)
		require.Contains(t, body, "only an active or inactive memory can be pinned")
		var pinned bool
		require.NoError(t, db.Pool.QueryRow(ctx, `SELECT pinned FROM mneme.memories WHERE id = $1`, gone).Scan(&pinned))
		require.False(t, pinned)
	})

	t.Run("12: the smaller items", func(t *testing.T) {
		// The tenant scope without a conversation searches the tenant.
		code, body := cl.get("/search?q=Lisbon&scope=tenant&tenant=ta")
		require.Equal(t, http.StatusOK, code)
		require.Contains(t, body, `id="hits"`)
		require.Contains(t, body, "Lisbon")
		_, body = cl.get("/search?q=Lisbon&tenant=ta")
		require.Contains(t, body, "Choose a conversation")
		// The formula's confidence factor is a column.
		_, body = cl.get("/search?q=Alice&conversation=" + sa.Conv.String() + "&tenant=ta")
		require.Contains(t, body, "<th class=\"num\">confidence factor</th>")
		require.Regexp(t, `<td class="num conf">[0-9.]+</td>`, body)
		// A fact's summary that repeats its content is not shown twice.
		_, body = cl.get("/memories/" + sa.Berlin.String() + "?tenant=ta")
		require.NotContains(t, body, "summary: Alice moved to Berlin")
		// Errors are the error page, not plain text.
		for path, status := range map[string]int{"/nowhere": 404, "/memories/" + sa.Berlin.String() + "/pin": 405} {
			code, body := cl.get(path)
			require.Equal(t, status, code, path)
			require.Contains(t, body, `<div class="error" id="error">`, path)
			require.Contains(t, body, "<html", path)
		}
		code, body = cl.post("/memories/"+sa.Berlin.String()+"/pin", url.Values{"confirm": {"yes"}})
		require.Equal(t, http.StatusForbidden, code)
		require.Contains(t, body, `<div class="error" id="error">`)
		// The session gap in words, not Go's "15m0s".
		_, body = cl.get("/conversations/" + sa.Conv.String() + "?tenant=ta")
		require.Contains(t, body, "a pause of more than 15 minutes")
		require.NotContains(t, body, "15m0s")
	})

	t.Run("9: every page says its clock and timezone", func(t *testing.T) {
		for _, p := range []string{"/", "/memories", "/conversations/" + sa.Conv.String(), "/memories/" + sa.Second.String(), "/jobs"} {
			_, body := cl.get(p + "?tenant=ta")
			require.Contains(t, body, "Times are UTC", p)
			require.NotRegexp(t, `\d\d:\d\d:\d\d<`, body, "%s: every time has its zone", p)
		}
		_, body := cl.get("/memories/" + sa.Second.String() + "?tenant=ta")
		require.Contains(t, body, "never reviewed; its curve starts", "not 'last reviewed' for a memory never reviewed")
		require.Contains(t, body, "(said: its newest source message)")
		_, body = cl.get("/memories/" + sa.Paris.String() + "?tenant=ta")
		require.Contains(t, body, "(stored: when it was superseded)")
	})

	t.Run("issue 55 item 7: titles from the speakers or the first message", func(t *testing.T) {
		_, body := cl.get("/?tenant=ta")
		require.Contains(t, body, "I am planning a trip to Lisbon with my sister")
		require.NotContains(t, body, "Conversation "+sa.Conv.String()[:8])
		exec(`SELECT mneme.set_tenant('ta'), mneme.set_speakers($1, ARRAY['Caroline', 'Melanie'])`, sa.Conv)
		_, body = cl.get("/?tenant=ta")
		require.Contains(t, body, ">Caroline &amp; Melanie</a>")
		_, body = cl.get("/conversations/" + sa.Conv.String() + "?tenant=ta")
		require.Regexp(t, regexp.MustCompile(`<h1>Caroline &amp; Melanie</h1>`), body)
		require.True(t, strings.Contains(body, "<title>Caroline &amp; Melanie · mneme</title>"))
	})
}
