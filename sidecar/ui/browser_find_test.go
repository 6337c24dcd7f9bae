package ui

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/mneme-memory/mneme/sidecar/dbtest"
)

// TestBrowserFindFollowExplain drives the questions of issue 51 in a real
// Chromium: find a memory (the memories view: filter, sort, page), follow
// where it came from (source messages to their anchors, the episode of an
// extracted fact, lineage both ways, the job that set messages aside), see
// why it was rated (each review's evidence) and why it ranks where it does
// (rank this memory), read the plot's marks; then every page at 390 px
// wide without horizontal overflow, measured in the browser.
func TestBrowserFindFollowExplain(t *testing.T) {
	browserPath(t)
	ctx := context.Background()
	db := dbtest.New(t)
	s := seed(t, db.Pool, "default", "juniper")
	exec := func(q string, args ...any) {
		t.Helper()
		_, err := db.Pool.Exec(ctx, q, args...)
		require.NoError(t, err, q)
	}
	exec(`SELECT mneme.remember($1, 'filler fact number ' || g || ' about the garden', 'general') FROM generate_series(1, 120) g`, s.Conv)
	exec(`SELECT mneme.apply_review($1, 'again', 9, 7.9, 'relearning', now() - interval '20 days', 'heuristic', ARRAY['where does Alice live'],
	        evidence => '{"score": 0.031, "thresholds": {"hard": 0.04, "good": 0.09, "easy": 0.25}}')`, s.Berlin)
	exec(`SELECT mneme.apply_review($1, 'good', 25, 7.5, 'review', now() - interval '2 hours', 'llm', ARRAY['which city is Alice in'],
	        evidence => '{"reason": "the user asked where Alice lives and the answer used Berlin"}')`, s.Berlin)
	var fact uuid.UUID
	var first int64
	require.NoError(t, db.Pool.QueryRow(ctx, `SELECT min(id) FROM mneme.messages WHERE conversation_id = $1`, s.Conv).Scan(&first))
	require.NoError(t, db.Pool.QueryRow(ctx, `SELECT mneme.add_fact($1, 'The user likes the tile museum', ARRAY[$2::bigint + 4], $3, 'user_profile')`,
		s.Conv, first, s.Episode).Scan(&fact))
	var job int64
	require.NoError(t, db.Pool.QueryRow(ctx, `INSERT INTO mneme.jobs (kind, conversation_id, state, attempts, max_attempts, last_error, tenant_id)
	        VALUES ('segment', $1, 'failed', 1, 5, 'the model answered no JSON', 'default') RETURNING id`, s.Conv).Scan(&job))
	exec(`UPDATE mneme.messages SET consumed_at = now(), set_aside_job_id = $2 WHERE conversation_id = $1 AND memory_id IS NULL`, s.Conv, job)

	admin, _ := db.PoolAs(t, "mneme_admin")
	srv := newServer(t, admin, "")
	b := browser(t)
	// follow clicks css and waits for the next page (a new document, then
	// wait visible): WaitVisible alone may see the old page.
	follow := func(what, css, wait string) {
		t.Helper()
		old, err := chromedp.Run(b, chromedp.Location())
		require.NoError(t, err)
		step(t, b, what, chromedp.Click(chromedp.CSS(css)))
		for deadline := time.Now().Add(90 * time.Second); ; time.Sleep(50 * time.Millisecond) {
			if loc, err := chromedp.Run(b, chromedp.Location()); err == nil && loc != old {
				break
			}
			require.True(t, time.Now().Before(deadline), "%s: the page never changed", what)
		}
		step(t, b, what, chromedp.WaitVisible(chromedp.CSS(wait)))
	}
	count := func(css string) int {
		t.Helper()
		return eval[int](t, b, fmt.Sprintf(`document.querySelectorAll(%q).length`, css))
	}

	// Find: words, then the next page, then a sort, then a status.
	step(t, b, "memories", chromedp.Navigate(srv.URL+"/memories"), chromedp.WaitVisible(chromedp.CSS("#mq")),
		chromedp.SendKeys(chromedp.CSS("#mq"), "garden FILLER"))
	follow("search the memories", "#mgo", "#found-memories")
	require.Equal(t, 50, count("#found-memories tr.found"))
	require.Contains(t, text(t, b, "#found"), "1–50 of 120 memories")
	firstRow := text(t, b, "#found-memories tr.found td a.memory")
	follow("next page", "#next", "#prev")
	require.Contains(t, text(t, b, "#found"), "51–100 of 120 memories")
	require.NotEqual(t, firstRow, text(t, b, "#found-memories tr.found td a.memory"))
	if true {
		screenshot(t, b, "ui-memories.png")
	}
	follow("sort by stored, oldest first", `th a.sort[href*="sort=created_asc"]`, "#found-memories")
	require.Contains(t, text(t, b, "#found"), "1–50 of 120", "a new sort starts at page 1")
	require.Equal(t, "created_asc", eval[string](t, b, `document.querySelector('#msort').value`))
	eval[string](t, b, `document.querySelector('#mq').value = ''`)
	follow("every memory, oldest stored first", "#mgo", "#found-memories")
	require.Contains(t, text(t, b, "#found"), "1–50 of 125")
	require.Equal(t, "/memories/"+s.Paris.String(), eval[string](t, b, `document.querySelector('#found-memories tr.found a.memory').getAttribute('href')`),
		"Paris, stored 60 days ago, first")
	step(t, b, "superseded only", chromedp.Navigate(srv.URL+"/memories"), chromedp.WaitVisible(chromedp.CSS("#mstatus")),
		chromedp.SetValue(chromedp.CSS("#mstatus"), "superseded"))
	follow("superseded only", "#mgo", "#found-memories")
	require.Equal(t, 1, count("#found-memories tr.found"))

	// Follow: the lineage both ways.
	follow("Paris", `#found-memories a[href="/memories/`+s.Paris.String()+`"]`, "#superseded-by")
	require.Equal(t, 1, count("#plot g.supersession"), "the supersession marked")
	require.Equal(t, 1, count("#plot g.valid-until"), "valid-until marked")
	require.Equal(t, 0, count(`#plot polyline[data-label="ahead, if not reviewed"]`), "no live curve after it was superseded")
	require.Zero(t, count("#pin"), "no pin offered on a superseded memory")
	step(t, b, "rank Paris", chromedp.SendKeys(chromedp.CSS("#rank-q"), "Alice"))
	follow("rank Paris", "#rank-go", "#rank-result")
	require.Contains(t, text(t, b, "#rank-position"), "not in search's top 100")
	require.Contains(t, text(t, b, "#rank-why"), "superseded: search and context return active memories only")
	follow("superseded by", "#superseded-by", "#supersedes")
	require.Contains(t, text(t, b, "#content"), "Alice moved to Berlin")
	// Why it was rated: each review's evidence, and the marks by rating.
	reviews := text(t, b, "#reviews")
	require.Contains(t, reviews, "overlap 0.031 with the conversation after it (again < 0.04 ≤ hard < 0.09 ≤ good < 0.25 ≤ easy)")
	require.Contains(t, reviews, "the user asked where Alice lives and the answer used Berlin")
	require.Equal(t, 1, count("#plot g.review-again"))
	require.Equal(t, 1, count("#plot g.review-good"))
	require.Equal(t, 1, count("#plot g.now"))
	step(t, b, "rank Berlin", chromedp.SendKeys(chromedp.CSS("#rank-q"), "Alice Berlin"))
	follow("rank Berlin", "#rank-go", "#rank-factors")
	require.Contains(t, text(t, b, "#rank-position"), "search rank 1")
	require.Regexp(t, `^item \d+$`, text(t, b, "#rank-context"), "kept in the context")
	require.Contains(t, text(t, b, "#rank-factors"), "user_profile")
	berlin := srv.URL + "/memories/" + s.Berlin.String()
	follow("supersedes", "#supersedes", "#superseded-by")

	// Follow: an extracted fact to its episode and source message.
	step(t, b, "the fact", chromedp.Navigate(srv.URL+"/memories/"+fact.String()), chromedp.WaitVisible(chromedp.CSS("#episode")))
	require.Equal(t, 1, count("#provenance a.source"))
	follow("its source message", "#provenance a.source", fmt.Sprintf("#m%d", first+4))
	require.True(t, eval[bool](t, b, fmt.Sprintf(`document.querySelector('#m%d').matches(':target')`, first+4)), "the anchor is the target")
	require.Contains(t, text(t, b, fmt.Sprintf("#m%d", first+4)), "Museums, the tile museum first.")
	step(t, b, "the fact again", chromedp.Navigate(srv.URL+"/memories/"+fact.String()), chromedp.WaitVisible(chromedp.CSS("#episode")))
	follow("the fact's episode", "#episode", `#facts[data-memory="`+s.Episode.String()+`"]`)
	require.Equal(t, 6, count("#provenance a.source"), "the episode's six messages, each a link")

	// Follow: the messages a failed job set aside, to the job.
	step(t, b, "session 2", chromedp.Navigate(srv.URL+"/conversations/"+s.Conv.String()+"?session=2"), chromedp.WaitVisible(chromedp.CSS("a.job")))
	follow("the job that set messages aside", "a.job", fmt.Sprintf("#job-%d", job))
	require.Contains(t, text(t, b, fmt.Sprintf("#job-%d", job)), "the model answered no JSON")
	require.Contains(t, text(t, b, fmt.Sprintf("#job-%d .attempts", job)), "stopped before its 5")

	// 390 px: no page wider than the screen; the plot's text readable.
	step(t, b, "a phone", chromedp.EmulateViewport(390, 844, chromedp.EmulateScale(2), chromedp.EmulateMobile))
	for _, path := range []string{"/", "/memories", "/memories?q=filler", "/conversations/" + s.Conv.String(),
		"/conversations/" + s.Conv.String() + "?session=2", "/memories/" + s.Berlin.String() + "?rank=Alice",
		"/memories/" + s.Paris.String(), "/memories/" + s.Episode.String(), "/search?conversation=" + s.Conv.String() + "&q=Lisbon+tea",
		"/jobs", "/nowhere"} {
		step(t, b, "390 px "+path, chromedp.Navigate(srv.URL+path), chromedp.WaitVisible(chromedp.CSS("main")))
		w := eval[[]int](t, b, `[document.documentElement.scrollWidth, document.body.scrollWidth, window.innerWidth]`)
		t.Logf("390 px %s: scroll width %d, body %d, viewport %d", path, w[0], w[1], w[2])
		require.Equal(t, 390, w[2])
		require.LessOrEqual(t, w[0], w[2], "%s overflows the screen", path)
		require.LessOrEqual(t, w[1], w[2], "%s overflows the screen", path)
		if strings.HasPrefix(path, "/memories/"+s.Berlin.String()) {
			h := eval[float64](t, b, `document.querySelector('#plot svg text.xtick').getBoundingClientRect().height`)
			t.Logf("390 px: the plot's date labels are %.1f px high", h)
			require.GreaterOrEqual(t, h, 8.0, "the plot's labels are readable on a phone")
			eval[bool](t, b, `document.querySelector('#facts dt:nth-of-type(8)').scrollIntoView(), true`)
			screenshot(t, b, "ui-memory-390.png")
		}
		if path == "/memories?q=filler" {
			screenshot(t, b, "ui-memories-390.png")
		}
		if path == "/conversations/"+s.Conv.String() {
			screenshot(t, b, "ui-conversation-390.png")
		}
	}
	_ = berlin
}
