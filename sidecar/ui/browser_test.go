package ui

import (
	"bytes"
	"context"
	"image"
	"image/png"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"

	"github.com/mneme-memory/mneme/sidecar/dbtest"
)

// browserPath finds Chromium (or Chrome). The browser tests fail, not skip,
// without one: `make test` must show what was not tested.
func browserPath(t *testing.T) string {
	t.Helper()
	if p := os.Getenv("MNEME_UI_BROWSER"); p != "" {
		return p
	}
	for _, n := range []string{"chromium", "chromium-browser", "google-chrome", "headless_shell"} {
		if p, err := exec.LookPath(n); err == nil {
			return p
		}
	}
	t.Fatal("no Chromium on PATH: the browser tests of mneme ui need it (Debian/Ubuntu: apt-get install chromium; " +
		"make test installs it with apt-get; or set MNEME_UI_BROWSER to a Chrome binary)")
	return ""
}

// browser starts a headless Chromium for the test: its own profile
// directory, no sandbox (the tests may run as root), generous timeouts for
// a slow shared machine.
func browser(t *testing.T) context.Context {
	t.Helper()
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(browserPath(t)),
		chromedp.UserDataDir(t.TempDir()),
		chromedp.NoSandbox,
		chromedp.DisableGPU,
		chromedp.WindowSize(1280, 1300),
		chromedp.Flag("hide-scrollbars", true),
	)
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancelCtx := chromedp.NewContext(actx)
	t.Cleanup(func() { cancelCtx(); cancelAlloc() })
	// The first run starts the browser; no timeout on it (it would stop
	// the browser), a watchdog that stops it if it never comes up.
	start := time.Now()
	watchdog := time.AfterFunc(3*time.Minute, cancelAlloc) // a browser that never comes up stops the wait
	err := chromedp.Do(ctx, chromedp.Navigate("about:blank"))
	watchdog.Stop()
	require.NoError(t, err, "start Chromium (%s)", browserPath(t))
	t.Logf("Chromium started in %s", time.Since(start).Round(time.Millisecond))
	return ctx
}

// step runs browser actions with a timeout of their own.
func step(t *testing.T, ctx context.Context, what string, actions ...chromedp.Action[chromedp.Void]) {
	t.Helper()
	c, cancel := context.WithTimeout(ctx, 90*time.Second)
	defer cancel()
	require.NoError(t, chromedp.Do(c, actions...), what)
}

func eval[T any](t *testing.T, ctx context.Context, js string) T {
	t.Helper()
	c, cancel := context.WithTimeout(ctx, 90*time.Second)
	defer cancel()
	v, err := chromedp.Run(c, chromedp.Evaluate[T](js))
	require.NoError(t, err, js)
	return v
}

func text(t *testing.T, ctx context.Context, css string) string {
	t.Helper()
	c, cancel := context.WithTimeout(ctx, 90*time.Second)
	defer cancel()
	v, err := chromedp.Run(c, chromedp.TextContent(chromedp.CSS(css)))
	require.NoError(t, err, css)
	return v
}

// screenshot captures the viewport, checks that it is not blank (many
// colours, a fair share of pixels not white) and, with
// MNEME_UI_SCREENSHOTS=dir (relative to the repository), writes it there.
func screenshot(t *testing.T, ctx context.Context, name string) {
	t.Helper()
	c, cancel := context.WithTimeout(ctx, 90*time.Second)
	defer cancel()
	b, err := chromedp.Run(c, chromedp.CaptureScreenshot())
	require.NoError(t, err)
	img, err := png.Decode(bytes.NewReader(b))
	require.NoError(t, err, "the screenshot is a PNG")
	colours, ink := distinctColours(img)
	t.Logf("%s: %d bytes, %d colours, %.1f%% not white", name, len(b), colours, 100*ink)
	require.Greater(t, colours, 16, "the screenshot has content, not a blank page")
	require.Greater(t, ink, 0.03, "the screenshot is not (nearly) all white")
	if dir := os.Getenv("MNEME_UI_SCREENSHOTS"); dir != "" {
		if !filepath.IsAbs(dir) {
			dir = filepath.Join(repoRoot(t), dir)
		}
		require.NoError(t, os.WriteFile(filepath.Join(dir, name), b, 0o644))
	}
}

func distinctColours(img image.Image) (int, float64) {
	seen := map[uint32]bool{}
	ink, all := 0, 0
	r := img.Bounds()
	for y := r.Min.Y; y < r.Max.Y; y++ {
		for x := r.Min.X; x < r.Max.X; x++ {
			cr, cg, cb, _ := img.At(x, y).RGBA()
			seen[(cr>>8)<<16|(cg>>8)<<8|cb>>8] = true
			if cr < 0xf000 || cg < 0xf000 || cb < 0xf000 {
				ink++
			}
			all++
		}
	}
	return len(seen), float64(ink) / float64(all)
}

func repoRoot(t *testing.T) string {
	dir, err := os.Getwd()
	require.NoError(t, err)
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		parent := filepath.Dir(dir)
		require.NotEqual(t, parent, dir, "no go.mod above the test")
		dir = parent
	}
}

// TestBrowser drives mneme ui in a real headless Chromium, as an admin
// login behind a token: it opens each page, clicks from the conversation to
// a memory and along its lineage, runs a search, pins a memory and erases
// one through their confirmations, retries a failed job, checks what each
// page shows and that hostile memory text never runs, and screenshots the
// conversation and memory pages (not blank; written to docs/ with
// MNEME_UI_SCREENSHOTS=docs).
func TestBrowser(t *testing.T) {
	browserPath(t) // before any database: without Chromium, fail at once
	for i, variant := range variants(t) {
		t.Run(variant, func(t *testing.T) {
			ctx := context.Background()
			db := dbtest.New(t, dbtest.WithVector(variant))
			s := seed(t, db.Pool, "default", "saffron")
			_, err := db.Pool.Exec(ctx, `SELECT mneme.apply_review($1, 'hard', 9, 6.1, 'review', now() - interval '6 hours', 'llm', ARRAY['do I like tea'])`, s.Episode)
			require.NoError(t, err)
			// Berlin: a lapse a month ago, then a good review (the
			// stabilities as go-fsrs might give them; the page only shows them).
			_, err = db.Pool.Exec(ctx, `SELECT mneme.apply_review($1, 'again', 6, 7.9, 'relearning', now() - interval '30 days', 'llm', ARRAY['which city is Alice in'])`, s.Berlin)
			require.NoError(t, err)
			_, err = db.Pool.Exec(ctx, `SELECT mneme.apply_review($1, 'good', 25, 7.5, 'review', now() - interval '3 hours', 'heuristic', ARRAY['where does Alice live'])`, s.Berlin)
			require.NoError(t, err)
			var job int64
			require.NoError(t, db.Pool.QueryRow(ctx, `INSERT INTO mneme.jobs (kind, conversation_id, state, attempts, last_error, tenant_id)
			        VALUES ('noop', $1, 'failed', 5, 'model answered no JSON', 'default') RETURNING id`, s.Conv).Scan(&job))
			admin, _ := db.PoolAs(t, "mneme_admin")
			srv := newServer(t, admin, "browser-t0ken")
			b := browser(t)
			shots := i == len(variants(t))-1 // one set of screenshots

			// The token once in the URL; the cookie from then on.
			step(t, b, "open /", chromedp.Navigate(srv.URL+"/?token=browser-t0ken"), chromedp.WaitVisible(chromedp.CSS("#conversations")))
			loc, err := chromedp.Run(b, chromedp.Location())
			require.NoError(t, err)
			require.Equal(t, srv.URL+"/", loc, "the token left the URL")
			require.Contains(t, text(t, b, "#conversations"), s.Conv.String()[:8])
			require.Contains(t, text(t, b, "#conversations"), "user, assistant", "the speakers")

			// Conversation: its title, paged by session (the index), episodes,
			// hostile text as text.
			step(t, b, "click the conversation", chromedp.Click(chromedp.CSS(`a.conversation[href="/conversations/`+s.Conv.String()+`"]`)),
				chromedp.WaitVisible(chromedp.CSS(".episode")))
			require.Contains(t, text(t, b, "h1"), "I am planning a trip to Lisbon", "titled by its first message")
			require.Equal(t, 2, eval[int](t, b, `document.querySelectorAll('#sessions a.session').length`), "two sessions, 2 hours apart")
			require.Equal(t, 1, eval[int](t, b, `document.querySelectorAll('.episode').length`), "session 1: the Lisbon episode")
			body := text(t, b, "main")
			require.Contains(t, body, scriptText, "the script is shown as text")
			step(t, b, "session 2", chromedp.Click(chromedp.CSS("#next-session")), chromedp.WaitVisible(chromedp.CSS("#prev-session")))
			require.Equal(t, 2, eval[int](t, b, `document.querySelectorAll('.episode').length`), "the Rust episode and the queued messages")
			require.Contains(t, text(t, b, "main"), "queued: not segmented yet")
			require.Contains(t, text(t, b, "#sessions"), "2.0 hours later")
			require.True(t, eval[bool](t, b, `window.__xss === undefined`), "no script of a memory ran")
			step(t, b, "session 1", chromedp.Click(chromedp.CSS("#prev-session")), chromedp.WaitVisible(chromedp.CSS("#next-session")))
			if shots {
				screenshot(t, b, "ui-conversation.png")
			}

			// Memory: facts, the retrievability plot with its reviews, the lineage.
			step(t, b, "the conversation's memories", chromedp.Click(chromedp.CSS("#conv-memories")), chromedp.WaitVisible(chromedp.CSS("#found-memories")))
			require.Equal(t, 4, eval[int](t, b, `document.querySelectorAll('#found-memories tr.found').length`))
			step(t, b, "click the Berlin memory", chromedp.Click(chromedp.CSS(`#found-memories a[href="/memories/`+s.Berlin.String()+`"]`)),
				chromedp.WaitVisible(chromedp.CSS(`#facts[data-memory="`+s.Berlin.String()+`"]`)))
			require.Equal(t, "active", strings.TrimSpace(text(t, b, "#status")))
			require.Contains(t, text(t, b, "#content"), "Alice moved to Berlin")
			require.GreaterOrEqual(t, eval[int](t, b, `document.querySelectorAll('#plot svg polyline').length`), 1, "the curve")
			require.Equal(t, 1, eval[int](t, b, `document.querySelectorAll('#plot g.review-good').length`), "the good review marked on the plot")
			require.Equal(t, 1, eval[int](t, b, `document.querySelectorAll('#plot g.review-again').length`), "the lapse marked on the plot")
			require.Equal(t, 1, eval[int](t, b, `document.querySelectorAll('#plot g.now').length`), "the now line")
			require.Contains(t, text(t, b, "#reviews"), "where does Alice live")
			require.Contains(t, text(t, b, "#plot"), "matched: where does Alice live", "the review's queries in its marker's tooltip")
			require.Equal(t, 2, eval[int](t, b, `document.querySelectorAll('#lineage a.node').length`), "Paris and Berlin")
			require.Contains(t, text(t, b, "#events"), "created")
			if shots {
				screenshot(t, b, "ui-memory.png")
			}

			// Along the lineage to what it superseded.
			step(t, b, "click Paris in the lineage", chromedp.Click(chromedp.CSS(`#lineage a[data-memory="`+s.Paris.String()+`"]`)),
				chromedp.WaitVisible(chromedp.CSS(`#facts[data-memory="`+s.Paris.String()+`"]`)))
			require.Contains(t, text(t, b, "#status"), "superseded")
			require.Contains(t, text(t, b, "#content"), imgText, "the markup is shown as text")
			require.True(t, eval[bool](t, b, `window.__xss === undefined && document.querySelectorAll('main img').length === 0`))

			// Search and the context's budget.
			step(t, b, "search", chromedp.Navigate(srv.URL+"/search"), chromedp.WaitVisible(chromedp.CSS("#q")),
				chromedp.SetValue(chromedp.CSS("#conversation"), s.Conv.String()),
				chromedp.SendKeys(chromedp.CSS("#q"), "Lisbon trip tea"),
				chromedp.Click(chromedp.CSS("#go")), chromedp.WaitVisible(chromedp.CSS("#hits")))
			require.GreaterOrEqual(t, eval[int](t, b, `document.querySelectorAll('#hits tr').length`), 2)
			require.GreaterOrEqual(t, eval[int](t, b, `document.querySelectorAll('#items tr').length`), 2)
			require.Contains(t, text(t, b, "#hits"), "BM25 rank")
			require.Contains(t, text(t, b, "#hits"), "Lisbon")

			// Pin, through the confirmation.
			ep := srv.URL + "/memories/" + s.Episode.String()
			step(t, b, "pin", chromedp.Navigate(ep), chromedp.Click(chromedp.CSS("#pin")), chromedp.WaitVisible(chromedp.CSS("#confirm")),
				chromedp.Click(chromedp.CSS("#confirm")), chromedp.WaitVisible(chromedp.CSS("#pinned")))
			var pinned bool
			require.NoError(t, db.Pool.QueryRow(ctx, `SELECT pinned FROM mneme.memories WHERE id = $1`, s.Episode).Scan(&pinned))
			require.True(t, pinned)
			require.Equal(t, "1.000", strings.TrimSpace(text(t, b, "#retrievability")), "a pinned memory counts as 1")

			// Erase, through the confirmation with a reason.
			step(t, b, "erase", chromedp.Click(chromedp.CSS("#erase")), chromedp.WaitVisible(chromedp.CSS("#reason")),
				chromedp.SendKeys(chromedp.CSS("#reason"), "user request 42"),
				chromedp.Click(chromedp.CSS("#confirm")), chromedp.WaitVisible(chromedp.CSS("#tombstone")))
			require.Contains(t, text(t, b, "#events"), "erased")
			require.Contains(t, text(t, b, "#events"), "user request 42")
			var left int
			require.NoError(t, db.Pool.QueryRow(ctx, `SELECT count(*) FROM mneme.memories WHERE id = $1`, s.Episode).Scan(&left))
			require.Zero(t, left)
			require.NoError(t, db.Pool.QueryRow(ctx, `SELECT count(*) FROM mneme.messages WHERE content LIKE '%saffron%'`).Scan(&left))
			require.Zero(t, left, "erase removed the episode's source messages")

			// Jobs: the failed one, retried.
			step(t, b, "jobs", chromedp.Navigate(srv.URL+"/jobs"), chromedp.WaitVisible(chromedp.CSS("#failed")))
			require.Contains(t, text(t, b, "#failed"), "model answered no JSON")
			require.Contains(t, text(t, b, "#job-stats"), "failed")
			step(t, b, "retry", chromedp.Click(chromedp.CSS("button.retry")), chromedp.WaitVisible(chromedp.CSS("#no-failed")))
			var state string
			require.NoError(t, db.Pool.QueryRow(ctx, `SELECT state FROM mneme.jobs WHERE id = $1`, job).Scan(&state))
			require.Equal(t, "pending", state)
		})
	}
}
