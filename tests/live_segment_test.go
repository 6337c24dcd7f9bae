package tests

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/sashabaranov/go-openai"
	"github.com/stretchr/testify/require"

	"github.com/mneme-memory/mneme/sidecar/config"
	"github.com/mneme-memory/mneme/sidecar/daemon"
	"github.com/mneme-memory/mneme/sidecar/dbtest"
	"github.com/mneme-memory/mneme/sidecar/embed"
	"github.com/mneme-memory/mneme/sidecar/llm"
	"github.com/mneme-memory/mneme/sidecar/llm/llmtest"
	"github.com/mneme-memory/mneme/sidecar/pipeline"
)

// Issue 37: episodes that respect session gaps whatever the arrival timing.
// Every test here runs the sidecar live (the daemon `mneme run` starts, as
// a mneme_worker login, notify transport) while the application (a
// mneme_app login) adds messages, and compares what it stored with a drain
// of the same messages on a fresh database.

// liveSidecar is one running daemon.
type liveSidecar struct {
	t      *testing.T
	mu     sync.Mutex
	cancel context.CancelFunc
	done   chan error
}

// startSidecar starts the daemon on workerURL: offline, or with the fake
// LLM at llmURL.
func startSidecar(t *testing.T, workerURL, llmURL string) *liveSidecar {
	t.Helper()
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, workerURL)
	require.NoError(t, err)
	cfg := config.Config{DatabaseURL: workerURL, Events: "notify", Concurrency: 2, PollEvery: 100 * time.Millisecond,
		SlotName: "unused", LLMTimeout: 5 * time.Second}
	if llmURL != "" {
		cfg.LLM = config.Endpoint{BaseURL: llmURL, Model: "fake", APIKey: "k"}
	}
	log := slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelWarn}))
	d, err := daemon.New(ctx, cfg, pool, log)
	require.NoError(t, err)
	runCtx, cancel := context.WithCancel(ctx)
	s := &liveSidecar{t: t, cancel: cancel, done: make(chan error, 1)}
	go func() {
		err := d.Serve(runCtx)
		pool.Close()
		s.done <- err
	}()
	t.Cleanup(s.stop)
	return s
}

// stop shuts the daemon down as SIGTERM does (in-flight jobs finish or are
// released); safe twice.
func (s *liveSidecar) stop() {
	s.mu.Lock()
	cancel := s.cancel
	s.cancel = nil
	s.mu.Unlock()
	if cancel == nil {
		return
	}
	cancel()
	select {
	case err := <-s.done:
		if err != nil {
			s.t.Errorf("sidecar: %v", err)
		}
	case <-time.After(60 * time.Second):
		s.t.Error("the sidecar did not stop")
	}
}

// waitIdle waits until no job is due, running or waiting for a retry (three
// looks in a row; the daily cleanup job waits for its time).
func waitIdle(t *testing.T, pool *pgxpool.Pool) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	quiet := 0
	for quiet < 3 {
		if !time.Now().Before(deadline) {
			rows, _ := pool.Query(context.Background(), `SELECT id || ' ' || kind || ' ' || state || ' ' || attempts || ' ' || coalesce(last_error, '') || ' ' || run_at FROM mneme.jobs WHERE state IN ('pending', 'running')`)
			open, _ := pgx.CollectRows(rows, pgx.RowTo[string])
			require.Fail(t, "jobs still due or running after 60 s", "%v", open)
		}
		var n int
		require.NoError(t, pool.QueryRow(context.Background(),
			`SELECT count(*) FROM mneme.jobs WHERE state = 'running' OR (state = 'pending' AND (run_at <= now() OR attempts > 0))`).Scan(&n))
		if n == 0 {
			quiet++
		} else {
			quiet = 0
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// liveMsg is one message of a scripted conversation; endAfter calls
// mneme.segment_now after it.
type liveMsg struct {
	conv     int
	role     string
	content  string
	at       time.Time
	endAfter bool
}

// addLive adds m (and its segment_now) as the application.
func addLive(t *testing.T, app *pgxpool.Pool, convs []uuid.UUID, m liveMsg) {
	t.Helper()
	ctx := context.Background()
	var at any = m.at
	if m.at.IsZero() {
		at = nil // the server's clock
	}
	_, err := app.Exec(ctx, `SELECT mneme.add_message($1, $2, $3, $4)`, convs[m.conv], m.role, m.content, at)
	require.NoError(t, err)
	if m.endAfter {
		_, err := app.Exec(ctx, `SELECT mneme.segment_now($1)`, convs[m.conv])
		require.NoError(t, err)
	}
}

// episodeSpans are a conversation's episodes as the positions (1-based, in
// the conversation) of their messages, in order.
func episodeSpans(t *testing.T, pool *pgxpool.Pool, conv uuid.UUID) [][]int {
	t.Helper()
	rows, err := pool.Query(context.Background(), `
		WITH o AS (SELECT m.id, row_number() OVER (ORDER BY m.id)::int AS n FROM mneme.messages m WHERE m.conversation_id = $1)
		SELECT array_agg(o.n ORDER BY o.n) FROM mneme.memories e JOIN o ON o.id = ANY (e.source_message_ids)
		WHERE e.conversation_id = $1 AND e.kind = 'episodic' GROUP BY e.id ORDER BY min(o.n)`, conv)
	require.NoError(t, err)
	spans, err := pgx.CollectRows(rows, pgx.RowTo[[]int])
	require.NoError(t, err)
	return spans
}

// requireNoEpisodeCrossesAGap: no episode holds two consecutive messages
// further apart than segment_gap_seconds, nor continues past a message
// segment_now ended a session at; every message is in one episode at most.
func requireNoEpisodeCrossesAGap(t *testing.T, pool *pgxpool.Pool) {
	t.Helper()
	var crossing, afterEnd, twice int
	var worst string
	require.NoError(t, pool.QueryRow(context.Background(), `
		WITH em AS (
			SELECT e.id AS episode, msg.id, msg.created_at, msg.ends_session,
			       msg.created_at - lag(msg.created_at) OVER w AS since_prev, lead(msg.id) OVER w AS next_id
			FROM mneme.memories e JOIN mneme.messages msg ON msg.conversation_id = e.conversation_id AND msg.id = ANY (e.source_message_ids)
			WHERE e.kind = 'episodic'
			WINDOW w AS (PARTITION BY e.id ORDER BY msg.id))
		SELECT count(*) FILTER (WHERE since_prev > make_interval(secs => mneme.setting('segment_gap_seconds')::float8)),
		       count(*) FILTER (WHERE ends_session AND next_id IS NOT NULL),
		       (SELECT count(*) FROM (SELECT id FROM em GROUP BY id HAVING count(*) > 1) d),
		       coalesce(max(since_prev)::text, '')
		FROM em`).Scan(&crossing, &afterEnd, &twice, &worst))
	require.Zero(t, crossing, "episodes span a gap longer than segment_gap_seconds (longest step %s)", worst)
	require.Zero(t, afterEnd, "an episode runs past a segment_now")
	require.Zero(t, twice, "a message is in two episodes")
}

// drainedSpans adds the same messages to a fresh database with no sidecar
// running, drains it (mneme run --drain's runner, offline, or with the fake
// LLM at llmURL) and returns each conversation's episodes.
func drainedSpans(t *testing.T, variant string, script []liveMsg, nConv int, llmURL string) [][][]int {
	t.Helper()
	db := dbtest.New(t, dbtest.WithVector(variant))
	convs := make([]uuid.UUID, nConv)
	for i := range convs {
		convs[i] = uuid.New()
	}
	for _, m := range script {
		addLive(t, db.Pool, convs, m)
	}
	log := slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelWarn}))
	deps := pipeline.Deps{Embedder: embed.NewHash(config.DefaultEmbedDim), Log: log}
	if llmURL != "" {
		deps.LLM = llm.New(config.Endpoint{BaseURL: llmURL, Model: "fake", APIKey: "k"}, 5*time.Second)
	}
	drainJobs(t, db.Pool, deps, log)
	requireNoEpisodeCrossesAGap(t, db.Pool)
	out := make([][][]int, nConv)
	for i, c := range convs {
		out[i] = episodeSpans(t, db.Pool, c)
	}
	return out
}

// weatherRustScript is the thirteen messages: six about the
// weather 300 to 295 minutes ago, six about learning Rust 200 to 195
// minutes ago, then "Hello again." 100 minutes ago.
func weatherRustScript(now time.Time) []liveMsg {
	var s []liveMsg
	roles := []string{"user", "assistant"}
	for i, m := range weatherSession {
		s = append(s, liveMsg{role: roles[i%2], content: m[1], at: now.Add(time.Duration(-300+i) * time.Minute)})
	}
	for i, m := range rustSession {
		s = append(s, liveMsg{role: roles[i%2], content: m[1], at: now.Add(time.Duration(-200+i) * time.Minute)})
	}
	return append(s, liveMsg{role: "user", content: "Hello again.", at: now.Add(-100 * time.Minute)})
}

// forcedOnlyModel is a fake LLM segmenter: it creates on a forced cut (a
// closed session) and skips a check.
func forcedOnlyModel(req openai.ChatCompletionRequest) llmtest.Reply {
	user := req.Messages[1].Content
	action, summary := "skip", ""
	if strings.Contains(user, "The cut is forced") {
		action, summary = "create", "Small talk about the weather."
		if strings.Contains(user, "Rust") {
			summary = "The user is learning Rust."
		}
	}
	b, _ := json.Marshal(map[string]any{"action": action, "summary": summary, "surprise": 0.2, "label": "general", "pinned": false, "facts": []any{}})
	return llmtest.Reply{Content: string(b)}
}

// TestLiveWeatherRust is the scenario with the sidecar live: the
// thirteen messages added one after another while it runs, three times
// (waiting for the sidecar after every message, at full speed with the
// model's first forced cut failing and retried, and with random pauses),
// offline and with an LLM. The episodes are the weather
// turns 1-6 and the Rust turns 7-12 every time, as a drain of the same
// messages gives them; "Hello again." waits in the queue.
func TestLiveWeatherRust(t *testing.T) {
	t.Parallel()
	for _, variant := range variants(t) {
		for _, withLLM := range []bool{false, true} {
			t.Run(variant+"/"+map[bool]string{false: "offline", true: "llm"}[withLLM], func(t *testing.T) {
				now := time.Now().UTC().Truncate(time.Second)
				script := weatherRustScript(now)
				want := [][]int{{1, 2, 3, 4, 5, 6}, {7, 8, 9, 10, 11, 12}}
				// The model answers garbage to its first forced cut when
				// failFirst: that attempt fails and the job is retried.
				newLLM := func(failFirst bool) string {
					if !withLLM {
						return ""
					}
					srv := llmtest.New(t)
					var failed atomic.Bool
					srv.Default(func(req openai.ChatCompletionRequest) llmtest.Reply {
						if failFirst && strings.Contains(req.Messages[1].Content, "The cut is forced") && failed.CompareAndSwap(false, true) {
							return llmtest.Reply{Content: "not json"}
						}
						return forcedOnlyModel(req)
					})
					return srv.URL()
				}
				require.Equal(t, [][][]int{want}, drainedSpans(t, variant, script, 1, newLLM(false)), "drained")
				rng := rand.New(rand.NewPCG(37, uint64(len(variant))))
				for rep := range 3 {
					db := dbtest.New(t, dbtest.WithVector(variant))
					_, workerURL := db.PoolAs(t, "mneme_worker")
					app, _ := db.PoolAs(t, "mneme_app")
					s := startSidecar(t, workerURL, newLLM(rep == 1))
					conv := []uuid.UUID{uuid.New()}
					for _, m := range script {
						addLive(t, app, conv, m)
						switch rep {
						case 0:
							waitIdle(t, db.Pool) // the sidecar keeps up with every message
						case 2:
							time.Sleep(time.Duration(rng.IntN(80)) * time.Millisecond)
						}
					}
					waitIdle(t, db.Pool)
					s.stop()
					requireNoEpisodeCrossesAGap(t, db.Pool)
					require.Equal(t, want, episodeSpans(t, db.Pool, conv[0]), "repetition %d", rep)
					var queued int
					require.NoError(t, db.Pool.QueryRow(context.Background(),
						`SELECT count(*) FROM mneme.messages WHERE consumed_at IS NULL`).Scan(&queued))
					require.Equal(t, 1, queued, "Hello again. waits for its session to go on")
				}
			})
		}
	}
}

// TestLiveFiveMessagesSegmentNow: five messages at t, t+1, t+2, t+40 and
// t+41 minutes (t three hours ago) with the sidecar live, then segment_now:
// two episodes, the gap between them, live and drained.
func TestLiveFiveMessagesSegmentNow(t *testing.T) {
	t.Parallel()
	for _, variant := range variants(t) {
		t.Run(variant, func(t *testing.T) {
			base := time.Now().UTC().Add(-3 * time.Hour).Truncate(time.Second)
			var script []liveMsg
			for i, m := range []int{0, 1, 2, 40, 41} {
				script = append(script, liveMsg{role: "user", content: fmt.Sprintf("message number %d about the garden", i+1),
					at: base.Add(time.Duration(m) * time.Minute)})
			}
			script[len(script)-1].endAfter = true
			want := [][]int{{1, 2, 3}, {4, 5}}
			require.Equal(t, [][][]int{want}, drainedSpans(t, variant, script, 1, ""), "drained")

			db := dbtest.New(t, dbtest.WithVector(variant))
			_, workerURL := db.PoolAs(t, "mneme_worker")
			app, _ := db.PoolAs(t, "mneme_app")
			s := startSidecar(t, workerURL, "")
			conv := []uuid.UUID{uuid.New()}
			for _, m := range script {
				addLive(t, app, conv, m)
				waitIdle(t, db.Pool)
			}
			s.stop()
			requireNoEpisodeCrossesAGap(t, db.Pool)
			require.Equal(t, want, episodeSpans(t, db.Pool, conv[0]))
		})
	}
}

// TestLiveLateAndOutOfOrderMessages: with the sidecar live, a message that
// arrives long after the ones before it but close to them in time joins
// their session; one dated before the previous message is refused (22008)
// and changes nothing; with the server's clock and segment_gap_seconds = 2,
// pauses of 3 s are gaps. Live equals drained.
func TestLiveLateAndOutOfOrderMessages(t *testing.T) {
	t.Parallel()
	for _, variant := range variants(t) {
		t.Run(variant, func(t *testing.T) {
			ctx := context.Background()
			base := time.Now().UTC().Add(-5 * time.Hour).Truncate(time.Second)
			db := dbtest.New(t, dbtest.WithVector(variant))
			_, workerURL := db.PoolAs(t, "mneme_worker")
			app, _ := db.PoolAs(t, "mneme_app")
			s := startSidecar(t, workerURL, "")
			conv := []uuid.UUID{uuid.New()}
			var script []liveMsg
			add := func(m liveMsg) {
				addLive(t, app, conv, m)
				script = append(script, m)
			}
			for i := range 6 {
				add(liveMsg{role: "user", content: fmt.Sprintf("the garden plan, step %d: tomatoes and basil", i), at: base.Add(time.Duration(i) * time.Minute)})
			}
			waitIdle(t, db.Pool)
			time.Sleep(time.Second) // late: the sidecar has long finished with the ones before
			add(liveMsg{role: "user", content: "the garden plan, step 6: water the tomatoes", at: base.Add(6 * time.Minute)})
			_, err := app.Exec(ctx, `SELECT mneme.add_message($1, 'user', 'out of order', $2)`, conv[0], base.Add(2*time.Minute))
			require.Equal(t, "22008", sqlState(t, err), "a message dated before the previous one is refused")
			add(liveMsg{role: "user", content: "a new day: the bike needs new brakes", at: base.Add(3 * time.Hour), endAfter: true})
			waitIdle(t, db.Pool)
			requireNoEpisodeCrossesAGap(t, db.Pool)
			live := episodeSpans(t, db.Pool, conv[0])
			require.Equal(t, [][]int{{1, 2, 3, 4, 5, 6, 7}, {8}}, live, "the late message joined its session")
			require.Equal(t, [][][]int{live}, drainedSpans(t, variant, script, 1, ""))

			s.stop()

			// The server's clock, segment_gap_seconds = 2: pauses of 3 s.
			db = dbtest.New(t, dbtest.WithVector(variant))
			_, workerURL = db.PoolAs(t, "mneme_worker")
			app, _ = db.PoolAs(t, "mneme_app")
			_, err = db.Pool.Exec(ctx, `SELECT mneme.set_setting('segment_gap_seconds', '2')`)
			require.NoError(t, err)
			s = startSidecar(t, workerURL, "")
			conv[0] = uuid.New()
			for session := range 3 {
				for i := range 3 {
					addLive(t, app, conv, liveMsg{role: "user", content: fmt.Sprintf("clock session %d, message %d about bikes", session, i)})
				}
				time.Sleep(3 * time.Second)
			}
			addLive(t, app, conv, liveMsg{role: "user", content: "the last word", endAfter: true})
			waitIdle(t, db.Pool)
			s.stop()
			requireNoEpisodeCrossesAGap(t, db.Pool)
			require.Equal(t, [][]int{{1, 2, 3}, {4, 5, 6}, {7, 8, 9}, {10}}, episodeSpans(t, db.Pool, conv[0]))
		})
	}
}

// topicWords are the vocabularies of the random conversations' topics.
var topicWords = [][]string{
	{"garden", "tomatoes", "basil", "soil", "compost", "seedlings", "watering", "greenhouse", "harvest", "mulch"},
	{"bicycle", "brakes", "chain", "gears", "saddle", "tyres", "helmet", "commute", "pedals", "derailleur"},
	{"rust", "compiler", "ownership", "borrowing", "lifetimes", "traits", "cargo", "crates", "macros", "closures"},
	{"recipe", "flour", "butter", "oven", "dough", "sugar", "yeast", "baking", "bread", "pastry"},
	{"holiday", "flights", "hotel", "beach", "luggage", "passport", "itinerary", "museum", "ferry", "island"},
}

// randomScript is nConv conversations of about perConv messages each,
// interleaved: sessions of 1 to 14 messages 20 s to 14 min apart (within
// segment_gap_seconds), sessions 901 to 5,000 s apart, a topic change now
// and then inside a session, segment_now after a few sessions and after
// every other conversation's last message.
func randomScript(rng *rand.Rand, nConv, perConv int, start time.Time) []liveMsg {
	per := make([][]liveMsg, nConv)
	for c := range per {
		at := start
		topic := rng.IntN(len(topicWords))
		for len(per[c]) < perConv {
			n := 1 + rng.IntN(14)
			for i := 0; i < n && len(per[c]) < perConv; i++ {
				if rng.IntN(7) == 0 {
					topic = rng.IntN(len(topicWords))
				}
				words := make([]string, 6+rng.IntN(5))
				for k := range words {
					words[k] = topicWords[topic][rng.IntN(len(topicWords[topic]))]
				}
				per[c] = append(per[c], liveMsg{conv: c, role: []string{"user", "assistant"}[i%2],
					content: strings.Join(words, " "), at: at})
				at = at.Add(time.Duration(20+rng.IntN(820)) * time.Second)
			}
			if rng.IntN(8) == 0 {
				per[c][len(per[c])-1].endAfter = true
			}
			at = at.Add(time.Duration(901+rng.IntN(4100)) * time.Second)
		}
		if c%2 == 0 {
			per[c][len(per[c])-1].endAfter = true // the others end open: what waits must be the same
		}
	}
	var out []liveMsg
	for left := nConv * perConv; left > 0; left-- {
		c := rng.IntN(nConv)
		for len(per[c]) == 0 {
			c = (c + 1) % nConv
		}
		out = append(out, per[c][0])
		per[c] = per[c][1:]
	}
	return out
}

// TestLiveEqualsDrained: random conversations with gaps, fed while the
// sidecar runs, stopped and restarted midway, then with two sidecars at
// once: no episode crosses a gap, and every conversation's episodes equal
// a drain of the same messages on a fresh database (offline segmenter).
func TestLiveEqualsDrained(t *testing.T) {
	t.Parallel()
	for _, variant := range variants(t) {
		t.Run(variant, func(t *testing.T) {
			rng := rand.New(rand.NewPCG(37, 2))
			const nConv = 4
			script := randomScript(rng, nConv, 45, time.Now().UTC().Add(-30*24*time.Hour).Truncate(time.Second))
			db := dbtest.New(t, dbtest.WithVector(variant))
			_, workerURL := db.PoolAs(t, "mneme_worker")
			app, _ := db.PoolAs(t, "mneme_app")
			convs := make([]uuid.UUID, nConv)
			for i := range convs {
				convs[i] = uuid.New()
			}
			first := startSidecar(t, workerURL, "")
			for i, m := range script {
				switch i {
				case len(script) / 3:
					first.stop() // restarted midway: another sidecar takes over
					startSidecar(t, workerURL, "")
				case 2 * len(script) / 3:
					startSidecar(t, workerURL, "") // and a second one beside it
				}
				addLive(t, app, convs, m)
				if rng.IntN(4) == 0 {
					time.Sleep(time.Duration(rng.IntN(40)) * time.Millisecond)
				}
			}
			waitIdle(t, db.Pool)
			requireNoEpisodeCrossesAGap(t, db.Pool)
			live := make([][][]int, nConv)
			episodes := 0
			for i, c := range convs {
				live[i] = episodeSpans(t, db.Pool, c)
				episodes += len(live[i])
			}
			var queued int
			require.NoError(t, db.Pool.QueryRow(context.Background(),
				`SELECT count(*) FROM mneme.messages WHERE consumed_at IS NULL`).Scan(&queued))
			require.Equal(t, drainedSpans(t, variant, script, nConv, ""), live, "live episodes differ from drained ones")
			t.Logf("%d messages, %d episodes, %d messages still queued (open sessions), live == drained", len(script), episodes, queued)
		})
	}
}

// TestSegmentJobFollowsUpWhatItDidNotSee: a message after a gap, or a
// segment_now, whose writer found the conversation's segment job pending
// (so enqueued none) but committed only after that job had read the queue,
// gets a job of its own when that job commits: the session before it is
// stored, not left until the conversation's next message.
func TestSegmentJobFollowsUpWhatItDidNotSee(t *testing.T) {
	t.Parallel()
	for _, late := range []string{"gap message", "segment_now"} {
		t.Run(late, func(t *testing.T) {
			e := newPipelineEnv(t, true)
			ctx := context.Background()
			read, committed := make(chan struct{}), make(chan struct{})
			var calls atomic.Int32
			e.srv.Default(func(req openai.ChatCompletionRequest) llmtest.Reply {
				if calls.Add(1) == 1 { // the job has read the queue
					close(read)
					<-committed
				}
				return forcedOnlyModel(req)
			})
			e.session(day1, weatherSession) // a check job is pending
			tx, err := e.db.Pool.Begin(ctx)
			require.NoError(t, err)
			defer func() { _ = tx.Rollback(ctx) }()
			if late == "gap message" {
				_, err = tx.Exec(ctx, `SELECT mneme.add_message($1, 'user', 'Back two hours later.', $2)`, e.conv, day1.Add(2*time.Hour))
			} else {
				_, err = tx.Exec(ctx, `SELECT mneme.segment_now($1)`, e.conv)
			}
			require.NoError(t, err)
			require.Equal(t, 1, e.count(`SELECT count(*) FROM mneme.jobs WHERE kind = 'segment'`), "the writer found the job pending")
			drained := make(chan struct{})
			go func() { defer close(drained); e.drain() }()
			<-read
			require.NoError(t, tx.Commit(ctx))
			close(committed)
			<-drained
			mems := e.memories()
			require.Len(t, mems, 1, "the session before the gap or segment_now is stored")
			require.Equal(t, []int64{1, 2, 3, 4, 5, 6}, mems[0].SourceIDs)
		})
	}
}

// TestRetriedMessagesAreSegmented: messages set aside by a segment job that
// failed for good, put back by retry_job after later messages became
// episodes, are a session of their own (no episode joins them to the
// later ones) and closed (nothing can follow them), so they are stored.
func TestRetriedMessagesAreSegmented(t *testing.T) {
	t.Parallel()
	e := newPipelineEnv(t, false)
	ctx := context.Background()
	e.session(day1, weatherSession)
	var failed int64
	require.NoError(t, e.db.Pool.QueryRow(ctx, `SELECT id FROM mneme.jobs WHERE kind = 'segment' AND state = 'pending'`).Scan(&failed))
	// The job fails for good (as fail_job records it): its queue is set aside.
	_, err := e.db.Pool.Exec(ctx, `UPDATE mneme.jobs SET state = 'failed', last_error = 'model down' WHERE id = $1`, failed)
	require.NoError(t, err)
	require.Equal(t, 6, e.count(`SELECT count(*) FROM mneme.set_aside_messages`))
	e.session(day1.Add(10*time.Minute), rustSession) // within the gap of the weather turns
	e.segmentNow()
	e.drain()
	require.Len(t, e.memories(), 1)
	_, err = e.db.Pool.Exec(ctx, `SELECT mneme.retry_job($1)`, failed)
	require.NoError(t, err)
	e.drain()
	requireNoEpisodeCrossesAGap(t, e.db.Pool)
	var spans [][]int64
	for _, m := range e.memories() {
		spans = append(spans, m.SourceIDs)
	}
	require.ElementsMatch(t, [][]int64{{1, 2, 3, 4, 5, 6}, {7, 8, 9, 10, 11, 12}}, spans)
	require.Zero(t, e.count(`SELECT count(*) FROM mneme.messages WHERE consumed_at IS NULL`))
}
