package ui

import (
	"context"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"
)

// Hostile text: if a page did not escape it, the script would run (the
// browser test checks window.__xss) and the markup would show as markup.
const (
	scriptText = `<script>window.__xss=1</script> I like <b>bold</b> tea`
	imgText    = `Alice lives in Paris <img src=x onerror="window.__xss=2">`
)

// seeded is what seed wrote into one tenant.
type seeded struct {
	Conv            uuid.UUID
	Episode, Second uuid.UUID // episodic memories (the first reviewed once)
	Paris, Berlin   uuid.UUID // Berlin supersedes Paris
	Secret          string    // a word only this tenant's rows hold
}

// seed writes a conversation into tenant: two sessions two hours apart,
// two episodes and two queued messages, a fact superseded by another, and
// a review of the first episode. It runs as the superuser (it creates
// episodes and reviews as the sidecar would).
func seed(t testing.TB, pool *pgxpool.Pool, tenant, secret string) seeded {
	t.Helper()
	ctx := context.Background()
	s := seeded{Conv: uuid.New(), Secret: secret}
	base := time.Now().UTC().Add(-72 * time.Hour).Truncate(time.Minute)
	msgs := []struct {
		role, text string
		at         time.Duration
	}{
		{"user", "I am planning a trip to Lisbon with my sister, codeword " + secret + ".", 0},
		{"assistant", "Lisbon is lovely in spring. Do you want museums or beaches?", time.Minute},
		{"user", scriptText, 2 * time.Minute},
		{"assistant", "Noted: tea, and the trip. Anything else for Lisbon?", 3 * time.Minute},
		{"user", "Museums, the tile museum first.", 4 * time.Minute},
		{"assistant", "The National Tile Museum opens at ten.", 5 * time.Minute},
		{"user", "Back again: my Rust project needs a borrow checker fix.", 2*time.Hour + 5*time.Minute},
		{"assistant", "Show me the function with the lifetime error.", 2*time.Hour + 6*time.Minute},
		{"user", "It returns a reference to a local vector.", 2*time.Hour + 7*time.Minute},
		{"assistant", "Return the vector itself, not a reference.", 2*time.Hour + 8*time.Minute},
		{"user", "Thanks, that compiled.", 2*time.Hour + 9*time.Minute},
		{"assistant", "Great, anything else?", 2*time.Hour + 10*time.Minute},
	}
	err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `SELECT mneme.set_tenant($1)`, tenant); err != nil {
			return err
		}
		ids := make([]int64, len(msgs))
		for i, m := range msgs {
			if err := tx.QueryRow(ctx, `SELECT mneme.add_message($1, $2, $3, $4)`, s.Conv, m.role, m.text, base.Add(m.at)).Scan(&ids[i]); err != nil {
				return err
			}
		}
		if err := tx.QueryRow(ctx, `SELECT mneme.create_episode($1, $2, $3, 'A trip to Lisbon with the sister (codeword `+secret+`); tea; the tile museum', NULL, 0.3, NULL, false, NULL, NULL)`,
			s.Conv, ids[:6], "Lisbon trip and tea").Scan(&s.Episode); err != nil {
			return err
		}
		if err := tx.QueryRow(ctx, `SELECT mneme.create_episode($1, $2, 'Rust borrow checker fix', 'A Rust borrow checker fix: return the vector', NULL, 0.1, NULL, false, NULL, NULL)`,
			s.Conv, ids[6:10]).Scan(&s.Second); err != nil {
			return err
		}
		if err := tx.QueryRow(ctx, `SELECT mneme.remember($1, $2, 'user_profile', at => now() - interval '60 days')`, s.Conv, imgText).Scan(&s.Paris); err != nil {
			return err
		}
		if err := tx.QueryRow(ctx, `SELECT mneme.remember($1, 'Alice moved to Berlin', 'user_profile', supersedes => $2, at => now() - interval '40 days')`, s.Conv, s.Paris).Scan(&s.Berlin); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, `SELECT mneme.apply_review($1, 'good', 40, 4.5, 'review', now() - interval '1 day', 'heuristic',
		        ARRAY['where is the trip', 'what does the user drink'])`, s.Episode)
		return err
	})
	require.NoError(t, err)
	return s
}

// webClient is an HTTP client of a test server that keeps cookies and does
// not follow redirects (the tests look at them).
type webClient struct {
	t    testing.TB
	base string
	c    *http.Client
}

func newClient(t testing.TB, srv *httptest.Server) *webClient {
	jar, err := cookiejar.New(nil)
	require.NoError(t, err)
	return &webClient{t: t, base: srv.URL, c: &http.Client{Jar: jar, Timeout: time.Minute,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}}
}

func (c *webClient) do(req *http.Request) (int, string, http.Header) {
	c.t.Helper()
	resp, err := c.c.Do(req)
	require.NoError(c.t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(c.t, err)
	return resp.StatusCode, string(b), resp.Header
}

func (c *webClient) get(path string, header ...string) (int, string) {
	c.t.Helper()
	req, err := http.NewRequest(http.MethodGet, c.base+path, nil)
	require.NoError(c.t, err)
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	code, body, _ := c.do(req)
	return code, body
}

func (c *webClient) post(path string, form url.Values, header ...string) (int, string) {
	c.t.Helper()
	req, err := http.NewRequest(http.MethodPost, c.base+path, strings.NewReader(form.Encode()))
	require.NoError(c.t, err)
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	code, body, _ := c.do(req)
	return code, body
}

// csrf is the CSRF cookie the server set for this client (after a GET).
func (c *webClient) csrf() string {
	u, _ := url.Parse(c.base)
	for _, k := range c.c.Jar.Cookies(u) {
		if k.Name == csrfCookie {
			return k.Value
		}
	}
	return ""
}

func newServer(t testing.TB, pool *pgxpool.Pool, token string) *httptest.Server {
	t.Helper()
	s, err := New(context.Background(), Options{Pool: pool, Token: token})
	require.NoError(t, err)
	srv := httptest.NewServer(s.Handler())
	t.Cleanup(srv.Close)
	return srv
}
