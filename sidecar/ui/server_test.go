package ui

import (
	"context"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/mneme-memory/mneme/sidecar/dbtest"
)

// TestCheckAddr: loopback without a token; any other address only with one.
func TestCheckAddr(t *testing.T) {
	for _, a := range []string{"127.0.0.1:8420", "localhost:1", "[::1]:8420", "127.0.0.2:80"} {
		require.NoError(t, CheckAddr(a, ""), a)
	}
	for _, a := range []string{"0.0.0.0:8420", ":8420", "192.168.1.4:8420", "[::]:8420", "example.org:80"} {
		require.ErrorIs(t, CheckAddr(a, ""), ErrTokenRequired, a)
		require.NoError(t, CheckAddr(a, "s3cret"), a)
	}
	require.Error(t, CheckAddr("no-port", ""))
}

// bound creates tenants ta and tb with a conversation each and two
// mneme_app logins bound to them (as tests/tenant_logins_test.go does).
func bound(t *testing.T, variant string) (db *dbtest.DB, a, b *pgxpool.Pool, sa, sb seeded) {
	t.Helper()
	ctx := context.Background()
	db = dbtest.New(t, dbtest.WithVector(variant))
	for _, tn := range []string{"ta", "tb"} {
		_, err := db.Pool.Exec(ctx, `SELECT mneme.create_tenant($1)`, tn)
		require.NoError(t, err)
	}
	sa, sb = seed(t, db.Pool, "ta", "quillfeather"), seed(t, db.Pool, "tb", "marrowbone")
	var aURL, bURL string
	a, aURL = db.PoolAs(t, "mneme_app")
	b, bURL = db.PoolAs(t, "mneme_app")
	for u, tn := range map[string]string{aURL: "ta", bURL: "tb"} {
		p, err := url.Parse(u)
		require.NoError(t, err)
		_, err = db.Pool.Exec(ctx, `SELECT mneme.bind_login($1, $2)`, p.User.Username(), tn)
		require.NoError(t, err)
	}
	return db, a, b, sa, sb
}

// TestBoundLoginsSeeOnlyTheirTenant: a server on each of two bound
// mneme_app logins shows its own tenant's conversation, memories, reviews
// and search results, and nothing of the other's: the other's pages are
// 404 or empty and hold neither its secret word nor its ids; an action on
// the other's memory changes nothing; naming the other tenant is 403.
func TestBoundLoginsSeeOnlyTheirTenant(t *testing.T) {
	t.Parallel()
	for _, variant := range variants(t) {
		t.Run(variant, func(t *testing.T) {
			db, a, b, sa, sb := bound(t, variant)
			for _, c := range []struct {
				name       string
				pool       *pgxpool.Pool
				own, other seeded
				otherT     string
			}{{"a", a, sa, sb, "tb"}, {"b", b, sb, sa, "ta"}} {
				t.Run(c.name, func(t *testing.T) {
					cl := newClient(t, newServer(t, c.pool, ""))
					// Nothing of the other tenant's but the id asked for
					// (error pages name it).
					notOther := func(body string, asked ...string) {
						t.Helper()
						require.NotContains(t, body, c.other.Secret)
						for _, id := range []string{c.other.Conv.String(), c.other.Episode.String(), c.other.Paris.String(), c.other.Berlin.String()} {
							if !slices.Contains(asked, id) {
								require.NotContains(t, body, id)
							}
						}
					}
					code, body := cl.get("/")
					require.Equal(t, http.StatusOK, code)
					require.Contains(t, body, c.own.Conv.String())
					notOther(body)
					code, body = cl.get("/conversations/" + c.own.Conv.String())
					require.Equal(t, http.StatusOK, code)
					require.Contains(t, body, c.own.Secret)
					require.Contains(t, body, c.own.Episode.String())
					code, body = cl.get("/memories/" + c.own.Episode.String())
					require.Equal(t, http.StatusOK, code, body)
					require.Contains(t, body, "what does the user drink", "the review's matched queries")
					code, body = cl.get("/search?conversation=" + c.own.Conv.String() + "&q=codeword+trip")
					require.Equal(t, http.StatusOK, code)
					require.Contains(t, body, c.own.Episode.String())

					code, body = cl.get("/conversations/" + c.other.Conv.String())
					require.Equal(t, http.StatusNotFound, code)
					notOther(body, c.other.Conv.String())
					for _, id := range []string{c.other.Episode.String(), c.other.Berlin.String()} {
						code, body = cl.get("/memories/" + id)
						require.Equal(t, http.StatusNotFound, code)
						notOther(body, id)
						code, body = cl.get("/memories/" + id + "/confirm/pin")
						require.Equal(t, http.StatusNotFound, code)
						notOther(body, id)
					}
					for _, scope := range []string{"conversation", "tenant"} {
						code, body = cl.get("/search?conversation=" + c.other.Conv.String() + "&q=codeword+trip&scope=" + scope)
						require.Equal(t, http.StatusOK, code)
						notOther(body, c.other.Conv.String())
					}
					code, body = cl.get("/?tenant=" + c.otherT)
					require.Equal(t, http.StatusForbidden, code)
					notOther(body)

					csrf := cl.csrf()
					require.NotEmpty(t, csrf)
					code, _ = cl.post("/memories/"+c.other.Berlin.String()+"/pin", url.Values{"csrf": {csrf}, "confirm": {"yes"}})
					require.Equal(t, http.StatusNotFound, code)
					code, _ = cl.post("/memories/"+c.other.Berlin.String()+"/forget", url.Values{"csrf": {csrf}, "confirm": {"yes"}, "reason": {"planted"}})
					require.Equal(t, http.StatusNotFound, code)
				})
			}
			var pinned int
			require.NoError(t, db.Pool.QueryRow(context.Background(), `SELECT count(*) FROM mneme.memories WHERE pinned OR status = 'invalidated'`).Scan(&pinned))
			require.Zero(t, pinned, "no action reached the other tenant")
			// The app login reads no job table: the jobs page says so.
			cl := newClient(t, newServer(t, a, ""))
			code, body := cl.get("/jobs")
			require.Equal(t, http.StatusOK, code)
			require.Contains(t, body, "may not read the job queue")
		})
	}
}

// TestPagesEscapeContent: memory text with a script element and HTML is
// shown as text on every page that shows it, never as markup.
func TestPagesEscapeContent(t *testing.T) {
	t.Parallel()
	for _, variant := range variants(t) {
		t.Run(variant, func(t *testing.T) {
			db := dbtest.New(t, dbtest.WithVector(variant))
			s := seed(t, db.Pool, "default", "lanternfish")
			cl := newClient(t, newServer(t, db.Pool, ""))
			for _, p := range []string{
				"/conversations/" + s.Conv.String(),
				"/memories/" + s.Episode.String(),
				"/memories/" + s.Paris.String(),
				"/memories/" + s.Berlin.String(),
				"/memories/" + s.Paris.String() + "/confirm/forget",
				"/search?conversation=" + s.Conv.String() + "&q=Paris+tea+bold",
			} {
				code, body := cl.get(p)
				require.Equal(t, http.StatusOK, code, p)
				require.NotContains(t, body, "<script", p)
				require.NotContains(t, body, "<b>bold", p)
				require.NotContains(t, body, "<img src=x", p)
				require.NotContains(t, body, "onerror=\"", p)
			}
			_, body := cl.get("/conversations/" + s.Conv.String())
			require.Contains(t, body, "&lt;script&gt;window.__xss=1&lt;/script&gt;")
			_, body = cl.get("/memories/" + s.Paris.String())
			require.Contains(t, body, "&lt;img src=x onerror=&#34;window.__xss=2&#34;&gt;")
			require.True(t, strings.Contains(body, "&lt;img src=x onerror=&amp;#34;") || strings.Contains(body, "&lt;img src=x onerror=&#34;"),
				"the lineage graph's SVG text is escaped too")
		})
	}
}

// TestTokenAndCSRF: with a token, every request needs it (401 without);
// ?token= sets a cookie and redirects to the same page without it. Every
// state change is a POST that must carry the CSRF token and the
// confirmation; a refused one changes nothing, and bad input (no reason
// to forget) is a clear 400 that changes nothing either.
func TestTokenAndCSRF(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := dbtest.New(t)
	s := seed(t, db.Pool, "default", "copperkettle")
	srv := newServer(t, db.Pool, "tok-3x4mple")
	cl := newClient(t, srv)
	mem := "/memories/" + s.Berlin.String()

	code, body := cl.get("/")
	require.Equal(t, http.StatusUnauthorized, code)
	require.NotContains(t, body, s.Conv.String())
	code, _ = cl.get(mem, "Authorization", "Bearer wrong")
	require.Equal(t, http.StatusUnauthorized, code)
	code, _ = cl.get("/?token=wrong")
	require.Equal(t, http.StatusUnauthorized, code)
	code, body = cl.get("/", "Authorization", "Bearer tok-3x4mple")
	require.Equal(t, http.StatusOK, code)
	require.Contains(t, body, s.Conv.String())
	req, err := http.NewRequest(http.MethodGet, srv.URL+mem+"?token=tok-3x4mple", nil)
	require.NoError(t, err)
	code, _, h := cl.do(req)
	require.Equal(t, http.StatusSeeOther, code)
	require.Equal(t, mem, h.Get("Location"), "the token leaves the URL")
	code, body = cl.get(mem) // the cookie now
	require.Equal(t, http.StatusOK, code)
	require.Contains(t, body, "Alice moved to Berlin")

	pinned := func() bool {
		var p bool
		require.NoError(t, db.Pool.QueryRow(ctx, `SELECT pinned FROM mneme.memories WHERE id = $1`, s.Berlin).Scan(&p))
		return p
	}
	csrf := cl.csrf()
	require.Len(t, csrf, 64)
	_, body = cl.get(mem + "/confirm/pin")
	require.Contains(t, body, `name="csrf" value="`+csrf+`"`)

	code, _ = cl.get(mem + "/pin")
	require.Equal(t, http.StatusMethodNotAllowed, code, "no state change by GET")
	code, _ = cl.post(mem+"/pin", url.Values{"confirm": {"yes"}})
	require.Equal(t, http.StatusForbidden, code, "no CSRF token")
	code, _ = cl.post(mem+"/pin", url.Values{"confirm": {"yes"}, "csrf": {strings.Repeat("0", 64)}})
	require.Equal(t, http.StatusForbidden, code, "a wrong CSRF token")
	code, _ = cl.post(mem+"/pin", url.Values{"confirm": {"yes"}, "csrf": {csrf}}, "Sec-Fetch-Site", "cross-site")
	require.Equal(t, http.StatusForbidden, code, "from another site")
	code, _ = cl.post(mem+"/pin", url.Values{"csrf": {csrf}})
	require.Equal(t, http.StatusBadRequest, code, "no confirmation")
	require.False(t, pinned())
	code, _ = cl.post(mem+"/pin", url.Values{"confirm": {"yes"}, "csrf": {csrf}})
	require.Equal(t, http.StatusSeeOther, code)
	require.True(t, pinned())
	code, _ = cl.post(mem+"/unpin", url.Values{"confirm": {"yes"}, "csrf": {csrf}})
	require.Equal(t, http.StatusSeeOther, code)
	require.False(t, pinned())

	code, body = cl.post(mem+"/forget", url.Values{"confirm": {"yes"}, "csrf": {csrf}, "reason": {"  "}})
	require.Equal(t, http.StatusBadRequest, code)
	require.Contains(t, body, "forget needs a reason")
	var status string
	require.NoError(t, db.Pool.QueryRow(ctx, `SELECT status FROM mneme.memories WHERE id = $1`, s.Berlin).Scan(&status))
	require.Equal(t, "active", status)
	code, _ = cl.post(mem+"/forget", url.Values{"confirm": {"yes"}, "csrf": {csrf}, "reason": {"user said so"}})
	require.Equal(t, http.StatusSeeOther, code)
	require.NoError(t, db.Pool.QueryRow(ctx, `SELECT status FROM mneme.memories WHERE id = $1`, s.Berlin).Scan(&status))
	require.Equal(t, "invalidated", status)

	code, _ = cl.get("/memories/not-a-uuid")
	require.Equal(t, http.StatusBadRequest, code)
	code, _ = cl.get("/search?conversation=" + s.Conv.String() + "&q=tea&budget=0")
	require.Equal(t, http.StatusBadRequest, code, "context_items refuses the budget")
}

// TestAdminChoosesTenant: an admin login names a tenant with ?tenant=; it
// sees that tenant's rows only, erases (a tombstone page follows) and
// retries a failed job there; an app login may not erase.
func TestAdminChoosesTenant(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db, a, _, sa, sb := bound(t, "auto")
	admin, _ := db.PoolAs(t, "mneme_admin")
	var job int64
	require.NoError(t, db.Pool.QueryRow(ctx, `INSERT INTO mneme.jobs (kind, conversation_id, state, attempts, last_error, tenant_id)
	        VALUES ('noop', $1, 'failed', 5, 'boom <script>x</script>', 'tb') RETURNING id`, sb.Conv).Scan(&job))
	cl := newClient(t, newServer(t, admin, ""))
	code, body := cl.get("/?tenant=ta")
	require.Equal(t, http.StatusOK, code)
	require.Contains(t, body, sa.Conv.String())
	require.NotContains(t, body, sb.Conv.String())
	require.Contains(t, body, `<option value="tb">`, "the tenant chooser")
	code, body = cl.get("/?tenant=tb")
	require.Equal(t, http.StatusOK, code)
	require.Contains(t, body, sb.Conv.String())
	require.NotContains(t, body, sa.Conv.String())
	code, body = cl.get("/conversations/" + sb.Conv.String() + "?tenant=tb")
	require.Equal(t, http.StatusOK, code)
	require.Contains(t, body, `href="/memories/`+sb.Episode.String()+`?tenant=tb"`, "links keep the tenant")
	code, _ = cl.get("/conversations/" + sb.Conv.String() + "?tenant=ta")
	require.Equal(t, http.StatusNotFound, code)

	code, body = cl.get("/jobs?tenant=tb")
	require.Equal(t, http.StatusOK, code)
	require.Contains(t, body, "boom &lt;script&gt;")
	code, body = cl.get("/jobs?tenant=ta")
	require.Equal(t, http.StatusOK, code)
	require.NotContains(t, body, "boom")
	// Issue 53: the per-scope vector indexes the sidecar keeps
	// (mneme.vector_index_status; an index of the name it gives them).
	require.Contains(t, body, `id="no-vector-indexes"`)
	_, err := db.Pool.Exec(ctx, `CREATE INDEX memories_hnsw_c_uitest ON mneme.memories (created_at) WHERE status = 'active'`)
	require.NoError(t, err)
	code, body = cl.get("/jobs?tenant=ta")
	require.Equal(t, http.StatusOK, code)
	require.Contains(t, body, `<td><code>memories_hnsw_c_uitest</code></td><td>conversation</td><td>ready</td>`)
	csrf := cl.csrf()
	code, _ = cl.post("/jobs/"+itoa(job)+"/retry", url.Values{"csrf": {csrf}, "tenant": {"ta"}})
	require.Equal(t, http.StatusNotFound, code, "another tenant's job")
	code, _ = cl.post("/jobs/"+itoa(job)+"/retry", url.Values{"csrf": {csrf}, "tenant": {"tb"}})
	require.Equal(t, http.StatusSeeOther, code)
	var state string
	require.NoError(t, db.Pool.QueryRow(ctx, `SELECT state FROM mneme.jobs WHERE id = $1`, job).Scan(&state))
	require.Equal(t, "pending", state)

	// erase: an app login is refused (42501), an admin erases.
	app := newClient(t, newServer(t, a, ""))
	app.get("/")
	code, _ = app.post("/memories/"+sa.Berlin.String()+"/erase", url.Values{"csrf": {app.csrf()}, "confirm": {"yes"}, "reason": {"r"}})
	require.Equal(t, http.StatusForbidden, code)
	code, _ = cl.post("/memories/"+sa.Berlin.String()+"/erase", url.Values{"csrf": {csrf}, "confirm": {"yes"}, "reason": {"user request 7"}, "tenant": {"ta"}})
	require.Equal(t, http.StatusSeeOther, code)
	code, body = cl.get("/memories/" + sa.Berlin.String() + "?tenant=ta")
	require.Equal(t, http.StatusOK, code)
	require.Contains(t, body, "erased")
	require.NotContains(t, body, "Alice moved to Berlin")
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }
