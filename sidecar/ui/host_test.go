package ui

import (
	"context"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/mneme-memory/mneme/sidecar/dbtest"
)

// TestHostCheck: which Host names each configured address accepts.
func TestHostCheck(t *testing.T) {
	for _, c := range []struct {
		addr string
		ok   []string
		not  []string
	}{
		{"", []string{"127.0.0.1:8420", "localhost:8420", "LOCALHOST", "[::1]:8420", "127.0.0.2", "localhost.:1"},
			[]string{"evil.example:8420", "evil.example", "", "10.0.0.1:8420", "localhost.evil.example:8420", "127.0.0.1.evil.example"}},
		{"127.0.0.1:8420", []string{"127.0.0.1:8420", "localhost:8420"}, []string{"evil.example:8420"}},
		{"mneme.lan:8420", []string{"mneme.lan:8420", "MNEME.lan", "localhost:8420"}, []string{"evil.example:8420", "lan:8420"}},
		{"192.168.1.4:8420", []string{"192.168.1.4:8420", "127.0.0.1:8420"}, []string{"192.168.1.5:8420", "evil.example"}},
		{"0.0.0.0:8420", []string{"evil.example:8420", "mneme.lan"}, nil}, // a token is required there
		{":8420", []string{"mneme.lan"}, nil},
	} {
		h := newHostCheck(c.addr)
		for _, v := range c.ok {
			require.True(t, h.ok(v), "addr %q host %q", c.addr, v)
		}
		for _, v := range c.not {
			require.False(t, h.ok(v), "addr %q host %q", c.addr, v)
		}
	}
}

// TestHostHeaderRefused: the DNS-rebinding path. A request naming another
// Host (as a page of evil.example re-pointed at 127.0.0.1 sends) reads
// nothing and changes nothing, even with the token, cookie and CSRF token a
// same-origin page would have; the loopback names work.
func TestHostHeaderRefused(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := dbtest.New(t)
	s := seed(t, db.Pool, "default", "rebindword")
	srv := newServer(t, db.Pool, "")
	cl := newClient(t, srv)
	port := srv.URL[strings.LastIndex(srv.URL, ":"):]
	conv := "/conversations/" + s.Conv.String()
	mem := "/memories/" + s.Berlin.String()

	get := func(host, path string) (int, string) {
		req, err := http.NewRequest(http.MethodGet, srv.URL+path, nil)
		require.NoError(t, err)
		req.Host = host
		code, body, _ := cl.do(req)
		return code, body
	}
	for _, h := range []string{"evil.example" + port, "evil.example", "127.0.0.1.nip.io" + port} {
		code, body := get(h, conv)
		require.Equal(t, http.StatusMisdirectedRequest, code, h)
		require.NotContains(t, body, s.Secret)
		require.NotContains(t, body, "Lisbon")
	}
	for _, h := range []string{"127.0.0.1" + port, "localhost" + port, "[::1]" + port} {
		code, body := get(h, conv)
		require.Equal(t, http.StatusOK, code, h)
		require.Contains(t, body, s.Secret)
	}
	// The cookie and CSRF token of a real visit, then a POST as the
	// rebound page would send it: refused, the memory still active.
	csrf := cl.csrf()
	require.Len(t, csrf, 64)
	form := url.Values{"csrf": {csrf}, "confirm": {"yes"}, "reason": {"rebinding"}}
	req, err := http.NewRequest(http.MethodPost, srv.URL+mem+"/forget", strings.NewReader(form.Encode()))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Origin", "http://evil.example"+port)
	req.Header.Set("Sec-Fetch-Site", "same-origin")
	req.Host = "evil.example" + port
	code, _, _ := cl.do(req)
	require.Equal(t, http.StatusMisdirectedRequest, code)
	var status string
	require.NoError(t, db.Pool.QueryRow(ctx, `SELECT status FROM mneme.memories WHERE id = $1`, s.Berlin).Scan(&status))
	require.Equal(t, "active", status)
}
