package ui

import (
	"context"
	"net/http"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/mneme-memory/mneme/sidecar/dbtest"
)

// foundIDs are the memory ids of the memories view's rows, in order.
func foundIDs(body string) []string {
	var out []string
	for _, m := range regexp.MustCompile(`<tr class="found" data-memory="([0-9a-f-]{36})"`).FindAllStringSubmatch(body, -1) {
		out = append(out, m[1])
	}
	return out
}

// TestMemoriesView: the memories view filters (words, status, kind,
// label, pinned, retrievability), sorts and pages, for the tenant and for
// one conversation; bad values are 400 with what was wrong.
func TestMemoriesView(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := dbtest.New(t)
	s := seed(t, db.Pool, "default", "lanternfish")
	other := seed(t, db.Pool, "default", "otherword")
	cl := newClient(t, newServer(t, db.Pool, ""))

	code, body := cl.get("/memories")
	require.Equal(t, http.StatusOK, code, body)
	require.Len(t, foundIDs(body), 8, "both conversations' four memories")
	require.Contains(t, body, "1–8 of 8 memories")

	_, body = cl.get("/memories?conversation=" + s.Conv.String())
	require.ElementsMatch(t, []string{s.Episode.String(), s.Second.String(), s.Paris.String(), s.Berlin.String()}, foundIDs(body))

	// Every word, any case, in title, summary or content.
	_, body = cl.get("/memories?q=ALICE+berlin")
	require.ElementsMatch(t, []string{s.Berlin.String(), other.Berlin.String()}, foundIDs(body))
	_, body = cl.get("/memories?q=lanternfish")
	require.Equal(t, []string{s.Episode.String()}, foundIDs(body))
	_, body = cl.get("/memories?q=%25")
	require.Empty(t, foundIDs(body), "a LIKE wildcard is taken literally")
	require.Contains(t, body, "No memory matches")

	_, body = cl.get("/memories?status=superseded&conversation=" + s.Conv.String())
	require.Equal(t, []string{s.Paris.String()}, foundIDs(body))
	_, body = cl.get("/memories?kind=episodic&conversation=" + s.Conv.String())
	require.ElementsMatch(t, []string{s.Episode.String(), s.Second.String()}, foundIDs(body))
	_, body = cl.get("/memories?label=user_profile&status=active&kind=semantic")
	require.ElementsMatch(t, []string{s.Berlin.String(), other.Berlin.String()}, foundIDs(body))

	_, err := db.Pool.Exec(ctx, `SELECT mneme.pin($1)`, s.Second)
	require.NoError(t, err)
	_, body = cl.get("/memories?pinned=yes")
	require.Equal(t, []string{s.Second.String()}, foundIDs(body))
	_, body = cl.get("/memories?r_min=0.999&conversation=" + s.Conv.String())
	require.Contains(t, foundIDs(body), s.Second.String(), "pinned: R 1")
	_, body = cl.get("/memories?r_max=0.999&conversation=" + s.Conv.String())
	require.NotContains(t, foundIDs(body), s.Second.String())

	// Sorts: stored newest first (default) and oldest first; R low first.
	_, body = cl.get("/memories?conversation=" + s.Conv.String())
	newest := foundIDs(body)
	_, body = cl.get("/memories?sort=created_asc&conversation=" + s.Conv.String())
	oldest := foundIDs(body)
	require.Len(t, oldest, 4)
	for i := range oldest {
		require.Equal(t, newest[len(newest)-1-i], oldest[i])
	}
	require.Equal(t, s.Paris.String(), oldest[0], "stored 60 days ago")
	_, body = cl.get("/memories?sort=r&conversation=" + s.Conv.String())
	rs := regexp.MustCompile(`<td class="num r">([0-9.]+)</td>`).FindAllStringSubmatch(body, -1)
	require.Len(t, rs, 4)
	require.True(t, slices.IsSortedFunc(rs, func(a, b []string) int { return strings.Compare(a[1], b[1]) }), "R low first: %v", rs)
	require.Equal(t, "1.000", rs[3][1])
	require.Equal(t, s.Second.String(), foundIDs(body)[3], "pinned last")

	// Pages of 50: 120 facts more.
	_, err = db.Pool.Exec(ctx, `SELECT mneme.remember($1, 'filler fact number ' || g, 'general') FROM generate_series(1, 120) g`, s.Conv)
	require.NoError(t, err)
	_, body = cl.get("/memories?q=filler")
	require.Len(t, foundIDs(body), 50)
	require.Contains(t, body, "1–50 of 120 memories")
	require.Contains(t, body, `id="next"`)
	require.NotContains(t, body, `id="prev"`)
	p1 := foundIDs(body)
	_, body = cl.get("/memories?q=filler&page=3")
	require.Len(t, foundIDs(body), 20)
	require.Contains(t, body, "101–120 of 120 memories")
	require.Contains(t, body, `id="prev"`)
	require.NotContains(t, body, `id="next"`)
	require.NotContains(t, foundIDs(body), p1[0])

	for q, want := range map[string]string{
		"?sort=bogus":        "sort must be",
		"?status=gone":       "only_status must be",
		"?kind=x":            "only_kind must be",
		"?r_min=2":           "r_min",
		"?page=0":            "page must be",
		"?page=x":            "page",
		"?conversation=nope": "not a UUID",
		"?pinned=maybe":      "pinned",
	} {
		code, body := cl.get("/memories" + q)
		require.Equal(t, http.StatusBadRequest, code, q)
		require.Contains(t, body, want, q)
	}
}
