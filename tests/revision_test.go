package tests

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/mneme-memory/mneme/sidecar/dbtest"
	"github.com/mneme-memory/mneme/sidecar/jobs"
	"github.com/mneme-memory/mneme/sidecar/revision"
)

// belief is one memory row as belief revision sees it.
type belief struct {
	ID            uuid.UUID
	Content       string
	Kind          string
	Status        string
	StatusReason  *string
	SupersedesID  *uuid.UUID
	ConfirmsID    *uuid.UUID
	InvalidatesID *uuid.UUID
	ValidUntil    *time.Time
	LastConfirmed *time.Time
	CreatedAt     time.Time
	LastReviewed  time.Time
	Confidence    float32
	Stability     float64
	Difficulty    float64
	Phase         string
	Reviews       int
	Slot          *string
	SourceType    string
	SourceRef     *string
	SourceIDs     []int64
}

func getBelief(t *testing.T, db *dbtest.DB, id uuid.UUID) belief {
	t.Helper()
	var b belief
	require.NoError(t, db.Pool.QueryRow(context.Background(), `
		SELECT id, content, kind, status, status_reason, supersedes_id, confirms_id, invalidates_id, valid_until,
		       last_confirmed_at, created_at, last_reviewed_at, confidence_score, stability, difficulty, fsrs_state,
		       review_count, slot, source_type, source_ref, source_message_ids
		FROM mneme.memories WHERE id = $1`, id).Scan(&b.ID, &b.Content, &b.Kind, &b.Status, &b.StatusReason,
		&b.SupersedesID, &b.ConfirmsID, &b.InvalidatesID, &b.ValidUntil, &b.LastConfirmed, &b.CreatedAt, &b.LastReviewed,
		&b.Confidence, &b.Stability, &b.Difficulty, &b.Phase, &b.Reviews, &b.Slot, &b.SourceType, &b.SourceRef, &b.SourceIDs))
	return b
}

// rememberFact writes an explicit memory (mneme.remember, which enqueues its
// revise job); at nil means now.
func rememberFact(t *testing.T, db *dbtest.DB, conv uuid.UUID, content string, at *time.Time) uuid.UUID {
	t.Helper()
	var id uuid.UUID
	require.NoError(t, db.Pool.QueryRow(context.Background(), `SELECT mneme.remember($1, $2, at => $3)`, conv, content, at).Scan(&id))
	return id
}

type revisedEvent struct{ Reason, Actor string }

// revisedEvents are the 'revised' memory_events rows of a memory.
func revisedEvents(t *testing.T, db *dbtest.DB, id uuid.UUID) []revisedEvent {
	t.Helper()
	rows, err := db.Pool.Query(context.Background(),
		`SELECT coalesce(reason, ''), actor FROM mneme.memory_events WHERE memory_id = $1 AND event = 'revised' ORDER BY id`, id)
	require.NoError(t, err)
	evs, err := pgx.CollectRows(rows, pgx.RowToStructByPos[revisedEvent])
	require.NoError(t, err)
	return evs
}

// requireOneRevised: the memory's revision left exactly one 'revised' event,
// by the classifier, whose reason starts with the action.
func requireOneRevised(t *testing.T, db *dbtest.DB, id uuid.UUID, action, classifier string) revisedEvent {
	t.Helper()
	evs := revisedEvents(t, db, id)
	require.Len(t, evs, 1, "one revised event for %s", id)
	require.Equal(t, "revise:"+classifier, evs[0].Actor)
	require.True(t, strings.HasPrefix(evs[0].Reason, action+" by "+classifier+": "), "reason %q", evs[0].Reason)
	require.NotContains(t, evs[0].Reason, "no reason given")
	return evs[0]
}

// found runs mneme.search over the conversation (k 10, extra named
// arguments appended) and returns each memory's status.
func found(t *testing.T, db *dbtest.DB, conv uuid.UUID, query, extra string, args ...any) map[uuid.UUID]string {
	t.Helper()
	rows, err := db.Pool.Query(context.Background(),
		`SELECT memory_id, status FROM mneme.search($1, $2, 10`+extra+`)`, append([]any{conv, query}, args...)...)
	require.NoError(t, err)
	out := map[uuid.UUID]string{}
	for rows.Next() {
		var id uuid.UUID
		var st string
		require.NoError(t, rows.Scan(&id, &st))
		out[id] = st
	}
	require.NoError(t, rows.Err())
	return out
}

func midway(a, b time.Time) time.Time { return a.Add(b.Sub(a) / 2) }

type historyRow struct {
	Depth    int
	Relation string
	ID       uuid.UUID
	Status   string
}

func history(t *testing.T, db *dbtest.DB, id uuid.UUID) []historyRow {
	t.Helper()
	rows, err := db.Pool.Query(context.Background(), `SELECT depth, relation, memory_id, status FROM mneme.history($1)`, id)
	require.NoError(t, err)
	out, err := pgx.CollectRows(rows, pgx.RowToStructByPos[historyRow])
	require.NoError(t, err)
	return out
}

// TestRevisionActions: each action end to end through the revise job with
// the offline classifier (ADD, NOOP, SUPERSEDE twice, INVALIDATE), what
// retrieval returns then (current beliefs, as_of, include_history, the
// markdown), and the lineage from the middle of the chain. Every write
// leaves exactly one 'revised' event; no row is ever deleted.
func TestRevisionActions(t *testing.T) {
	t.Parallel()
	for _, variant := range variants(t) {
		t.Run(variant, func(t *testing.T) {
			e := newPipelineEnv(t, false, dbtest.WithVector(variant))
			db, conv := e.db, e.conv
			ctx := context.Background()
			written := 0
			write := func(content string) uuid.UUID {
				id := rememberFact(t, db, conv, content, nil)
				written++
				require.Equal(t, 1, e.count(`SELECT count(*) FROM mneme.jobs WHERE kind = 'revise' AND payload->>'memory_id' = $1`, id.String()),
					"remember enqueues its revise job")
				e.drain()
				require.Zero(t, e.count(`SELECT count(*) FROM mneme.jobs WHERE state <> 'done'`))
				require.Equal(t, written, e.count(`SELECT count(*) FROM mneme.memories WHERE conversation_id = $1`, conv), "nothing deleted")
				require.Equal(t, written, e.count(`SELECT count(*) FROM mneme.memory_events WHERE event = 'revised'`), "one revised event per write")
				return id
			}

			// ADD: nothing believed yet.
			paris := write("I live in Paris")
			requireOneRevised(t, db, paris, "ADD", "heuristic")
			p := getBelief(t, db, paris)
			require.Equal(t, "active", p.Status)
			require.Equal(t, "explicit", p.SourceType)
			require.InDelta(t, 0.9, p.Confidence, 1e-6, "confidence_by_source.explicit")
			require.NotNil(t, p.Slot)
			require.Equal(t, "user|lives_in", *p.Slot, "the slot is recorded")

			// ADD: unrelated information leaves the first fact alone.
			cats := write("I have two cats called Tom and Jerry")
			requireOneRevised(t, db, cats, "ADD", "heuristic")
			require.Equal(t, "active", getBelief(t, db, cats).Status)
			require.Equal(t, p, getBelief(t, db, paris))

			// NOOP: a restatement reconfirms the fact; the duplicate stays, merged.
			dup := write("I live in Paris")
			requireOneRevised(t, db, dup, "NOOP", "heuristic")
			d := getBelief(t, db, dup)
			require.Equal(t, "merged", d.Status)
			require.NotNil(t, d.ConfirmsID)
			require.Equal(t, paris, *d.ConfirmsID)
			p2 := getBelief(t, db, paris)
			require.Equal(t, "active", p2.Status)
			require.NotNil(t, p2.LastConfirmed)
			require.True(t, p2.LastConfirmed.Equal(d.CreatedAt), "last_confirmed_at = the restatement's time")
			require.InDelta(t, min(1, p.Confidence+0.1), p2.Confidence, 1e-6, "confidence raised by 0.1")
			require.Equal(t, p.Reviews+1, p2.Reviews, "an FSRS review")
			require.True(t, p2.LastReviewed.Equal(d.CreatedAt), "reviewed at the restatement's time")
			var rating, reviewer string
			var sb, sa float64
			require.NoError(t, db.Pool.QueryRow(ctx, `SELECT rating, reviewer, stability_before, stability_after
				FROM mneme.review_log WHERE memory_id = $1`, paris).Scan(&rating, &reviewer, &sb, &sa))
			require.Equal(t, "good", rating)
			require.Equal(t, "heuristic", reviewer)
			require.Equal(t, p.Stability, sb)
			require.Equal(t, p2.Stability, sa)
			require.Equal(t, 1, e.count(`SELECT count(*) FROM mneme.review_log`), "only the confirmed fact is reviewed")

			// SUPERSEDE: a new value of the slot replaces the old one, which stays.
			berlin := write("I moved to Berlin")
			requireOneRevised(t, db, berlin, "SUPERSEDE", "heuristic")
			p3, b := getBelief(t, db, paris), getBelief(t, db, berlin)
			require.Equal(t, "superseded", p3.Status)
			require.NotNil(t, p3.ValidUntil)
			require.True(t, p3.ValidUntil.Equal(b.CreatedAt), "valid_until = the new belief's time")
			require.Contains(t, *p3.StatusReason, berlin.String())
			require.Equal(t, "active", b.Status)
			require.NotNil(t, b.SupersedesID)
			require.Equal(t, paris, *b.SupersedesID)
			require.Equal(t, p2.Stability, b.Stability, "the new belief starts from the old one's FSRS state")
			require.Equal(t, p2.Difficulty, b.Difficulty)
			require.Equal(t, p2.Phase, b.Phase)
			require.Equal(t, p2.Reviews, b.Reviews)
			require.Equal(t, "merged", getBelief(t, db, dup).Status)

			// Retrieval: the current belief by default, the past on request.
			const q = "where does the user live Paris Berlin moved"
			cur := found(t, db, conv, q, "")
			require.Contains(t, cur, berlin)
			require.NotContains(t, cur, paris, "a superseded belief is not returned by default")
			require.NotContains(t, cur, dup, "a merged duplicate never is")
			for id, st := range cur {
				require.Equal(t, "active", st, "%s", id)
			}
			then := found(t, db, conv, q, ", as_of => $3", midway(d.CreatedAt, b.CreatedAt))
			require.Contains(t, then, paris, "as_of between the writes: what was believed then")
			require.NotContains(t, then, berlin, "not yet written then")
			require.NotContains(t, then, dup)
			now := found(t, db, conv, q, ", as_of => $3", b.CreatedAt.Add(time.Millisecond))
			require.Contains(t, now, berlin)
			require.NotContains(t, now, paris)
			all := found(t, db, conv, q, ", include_history => true")
			require.Equal(t, "superseded", all[paris])
			require.Equal(t, "active", all[berlin])
			require.NotContains(t, all, dup)
			var md, mdNow string
			require.NoError(t, db.Pool.QueryRow(ctx, `SELECT mneme.retrieve_markdown($1, $2, 10, include_history => true)`, conv, q).Scan(&md))
			require.Equal(t, 1, strings.Count(md, "I live in Paris"), md)
			entry := md[strings.Index(md, "I live in Paris"):]
			entry = entry[:strings.Index(entry, "   - why")]
			require.Contains(t, entry, ", SUPERSEDED", md)
			entry = md[strings.Index(md, "I moved to Berlin"):]
			entry = entry[:strings.Index(entry, "   - why")]
			require.NotContains(t, entry, "SUPERSEDED", md)
			require.NoError(t, db.Pool.QueryRow(ctx, `SELECT mneme.retrieve_markdown($1, $2, 10)`, conv, q).Scan(&mdNow))
			require.NotContains(t, mdNow, "I live in Paris", mdNow)
			require.NotContains(t, mdNow, "SUPERSEDED")

			// A second move: the chain grows.
			munich := write("I moved to Munich")
			requireOneRevised(t, db, munich, "SUPERSEDE", "heuristic")
			require.Equal(t, "superseded", getBelief(t, db, berlin).Status)
			m := getBelief(t, db, munich)
			require.Equal(t, berlin, *m.SupersedesID)

			// INVALIDATE: a retraction retires the fact without a new value.
			retract := write("I no longer live in Munich")
			requireOneRevised(t, db, retract, "INVALIDATE", "heuristic")
			m2, n := getBelief(t, db, munich), getBelief(t, db, retract)
			require.Equal(t, "invalidated", m2.Status)
			require.NotNil(t, m2.ValidUntil)
			require.True(t, m2.ValidUntil.Equal(n.CreatedAt))
			require.Contains(t, *m2.StatusReason, retract.String())
			require.Equal(t, "active", n.Status)
			require.NotNil(t, n.InvalidatesID)
			require.Equal(t, munich, *n.InvalidatesID)
			require.Nil(t, n.SupersedesID)
			require.NotContains(t, found(t, db, conv, "Munich moved live", ""), munich)
			// as_of between the move and the retraction: believed then (the
			// status column is the row's status now).
			require.Equal(t, "invalidated", found(t, db, conv, "Munich moved live", ", as_of => $3", midway(m.CreatedAt, n.CreatedAt))[munich])
			require.NotContains(t, found(t, db, conv, "Munich moved live", ", as_of => $3", n.CreatedAt.Add(time.Millisecond)), munich)
			require.Equal(t, "invalidated", found(t, db, conv, "Munich moved live", ", include_history => true")[munich])

			// The lineage from the middle of the chain: what it replaced and
			// what confirmed that, what replaced it and what retracted that.
			require.Equal(t, []historyRow{
				{-1, "replaced", paris, "superseded"},
				{-1, "confirmed_by", dup, "merged"},
				{0, "self", berlin, "superseded"},
				{1, "replaced_by", munich, "invalidated"},
				{1, "invalidated_by", retract, "active"},
			}, history(t, db, berlin))
			require.Equal(t, []historyRow{{0, "self", dup, "merged"}, {0, "confirms", paris, "superseded"}}, history(t, db, dup))
			require.Equal(t, []historyRow{{0, "self", retract, "active"}, {0, "invalidates", munich, "invalidated"}}, history(t, db, retract))
			require.Equal(t, "active", getBelief(t, db, cats).Status, "the unrelated fact survived every revision")
		})
	}
}

// TestRevisionOlderWrite: a fact stated before the one it would replace
// (remember at => earlier) never replaces it: it is stored as already
// superseded by it, and as_of finds it in its time.
func TestRevisionOlderWrite(t *testing.T) {
	t.Parallel()
	for _, variant := range variants(t) {
		t.Run(variant, func(t *testing.T) {
			e := newPipelineEnv(t, false, dbtest.WithVector(variant))
			db, conv := e.db, e.conv
			acme := rememberFact(t, db, conv, "I work at Acme", nil)
			e.drain()
			a := getBelief(t, db, acme)
			at := a.CreatedAt.Add(-24 * time.Hour)
			old := rememberFact(t, db, conv, "I work at Initech", &at)
			e.drain()
			require.Zero(t, e.count(`SELECT count(*) FROM mneme.jobs WHERE state <> 'done'`))
			ev := requireOneRevised(t, db, old, "SUPERSEDE", "heuristic")
			require.Contains(t, ev.Reason, "older than "+acme.String())
			o, a2 := getBelief(t, db, old), getBelief(t, db, acme)
			require.True(t, o.CreatedAt.Equal(at), "created_at = at")
			require.Equal(t, "superseded", o.Status, "stored as already superseded")
			require.NotNil(t, o.ValidUntil)
			require.True(t, o.ValidUntil.Equal(a.CreatedAt), "believed until the newer fact")
			require.Equal(t, "active", a2.Status, "the newer fact stays current")
			require.Nil(t, a2.ValidUntil)
			require.NotNil(t, a2.SupersedesID)
			require.Equal(t, old, *a2.SupersedesID, "linked: the newer one replaced it")
			require.Equal(t, a.Stability, a2.Stability)
			require.Equal(t, 2, e.count(`SELECT count(*) FROM mneme.memories`))

			const q = "where does the user work Acme Initech"
			cur := found(t, db, conv, q, "")
			require.Contains(t, cur, acme)
			require.NotContains(t, cur, old)
			then := found(t, db, conv, q, ", as_of => $3", at.Add(time.Hour))
			require.Contains(t, then, old)
			require.NotContains(t, then, acme)
			require.Equal(t, "superseded", found(t, db, conv, q, ", include_history => true")[old])
			require.Equal(t, []historyRow{{-1, "replaced", old, "superseded"}, {0, "self", acme, "active"}}, history(t, db, acme))
		})
	}
}

// waitBlocked waits until a backend runs a query containing marker and
// waits for a lock.
func waitBlocked(t *testing.T, db *dbtest.DB, marker string) {
	t.Helper()
	require.Eventually(t, func() bool {
		var n int
		require.NoError(t, db.Pool.QueryRow(context.Background(), `SELECT count(*) FROM pg_stat_activity
			WHERE wait_event_type = 'Lock' AND query LIKE '%' || $1 || '%' AND pid <> pg_backend_pid()`, marker).Scan(&n))
		return n > 0
	}, 30*time.Second, 10*time.Millisecond, "the second revision waits for the first one's row lock")
}

// TestRevisionRace: two facts revising the same fact at once. The first
// holds the row lock; the second waits, re-checks under the lock, finds its
// target superseded and returns STALE having written nothing; with force
// it is stored as an ADD. Many at once: exactly one wins.
func TestRevisionRace(t *testing.T) {
	t.Parallel()
	db := dbtest.New(t)
	ctx := context.Background()
	conv := uuid.New()
	target := rememberFact(t, db, conv, "I work at Acme", nil)
	x := rememberFact(t, db, conv, "I work at Initech", nil)
	y := rememberFact(t, db, conv, "I work at Globex", nil)
	yBefore := getBelief(t, db, y)

	tx, err := db.Pool.Begin(ctx)
	require.NoError(t, err)
	defer tx.Rollback(ctx) //nolint:errcheck
	var r1 string
	require.NoError(t, tx.QueryRow(ctx, `SELECT mneme.apply_revision($1, 'SUPERSEDE', $2, 'x replaces the target', 'heuristic')`,
		x, target).Scan(&r1))
	require.Equal(t, "SUPERSEDE", r1)
	type result struct {
		action string
		err    error
	}
	done := make(chan result, 1)
	go func() {
		var r string
		err := db.Pool.QueryRow(ctx, `SELECT mneme.apply_revision($1, 'SUPERSEDE', $2, 'y replaces the target', 'heuristic')`,
			y, target).Scan(&r)
		done <- result{r, err}
	}()
	waitBlocked(t, db, "y replaces the target")
	require.NoError(t, tx.Commit(ctx))
	r2 := <-done
	require.NoError(t, r2.err)
	require.Equal(t, "STALE", r2.action, "the second re-checks under the lock")

	tg, xb := getBelief(t, db, target), getBelief(t, db, x)
	require.Equal(t, "superseded", tg.Status)
	require.Contains(t, *tg.StatusReason, x.String())
	require.Equal(t, target, *xb.SupersedesID)
	require.Equal(t, yBefore, getBelief(t, db, y), "STALE writes nothing")
	require.Empty(t, revisedEvents(t, db, y))
	require.Len(t, revisedEvents(t, db, x), 1)

	var forced string
	require.NoError(t, db.Pool.QueryRow(ctx, `SELECT mneme.apply_revision($1, 'SUPERSEDE', $2, 'y replaces the target', 'heuristic', force => true)`,
		y, target).Scan(&forced))
	require.Equal(t, "ADD", forced, "with force a stale decision is stored as an ADD")
	yb := getBelief(t, db, y)
	require.Equal(t, "active", yb.Status)
	require.Nil(t, yb.SupersedesID)
	ev := revisedEvents(t, db, y)
	require.Len(t, ev, 1)
	require.True(t, strings.HasPrefix(ev[0].Reason, "ADD (SUPERSEDE of "+target.String()+" no longer applies: the target is superseded)"), ev[0].Reason)
	require.Equal(t, "superseded", getBelief(t, db, target).Status)

	// A new memory no longer active (revised or forgotten meanwhile): SKIPPED, nothing written.
	var skipped string
	require.NoError(t, db.Pool.QueryRow(ctx, `SELECT mneme.apply_revision($1, 'ADD', NULL, 'again', 'heuristic')`, x).Scan(&skipped))
	require.Equal(t, "ADD", skipped, "an ADD of an active memory is applied")
	_, err = db.Pool.Exec(ctx, `SELECT mneme.forget($1, 'gone')`, x)
	require.NoError(t, err)
	require.NoError(t, db.Pool.QueryRow(ctx, `SELECT mneme.apply_revision($1, 'ADD', NULL, 'again', 'heuristic')`, x).Scan(&skipped))
	require.Equal(t, "SKIPPED", skipped)
	require.Len(t, revisedEvents(t, db, x), 2, "SKIPPED writes no event")

	// Eight at once on one target: one SUPERSEDE, seven STALE.
	shared := rememberFact(t, db, conv, "My favourite colour is green", nil)
	news := make([]uuid.UUID, 8)
	for i := range news {
		news[i] = rememberFact(t, db, conv, fmt.Sprintf("My favourite colour is shade %d", i), nil)
	}
	results := make([]string, len(news))
	var wg sync.WaitGroup
	for i, id := range news {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := db.Pool.QueryRow(ctx, `SELECT mneme.apply_revision($1, 'SUPERSEDE', $2, 'race', 'heuristic')`, id, shared).Scan(&results[i]); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	winners := 0
	for i, r := range results {
		switch r {
		case "SUPERSEDE":
			winners++
			require.Equal(t, shared, *getBelief(t, db, news[i]).SupersedesID)
		case "STALE":
			require.Nil(t, getBelief(t, db, news[i]).SupersedesID)
			require.Empty(t, revisedEvents(t, db, news[i]))
		default:
			t.Fatalf("result %q", r)
		}
	}
	require.Equal(t, 1, winners, "%v", results)
	var n int
	require.NoError(t, db.Pool.QueryRow(ctx, `SELECT count(*) FROM mneme.memories WHERE supersedes_id = $1`, shared).Scan(&n))
	require.Equal(t, 1, n)
}

// TestRevisionJobsRace: five writes of one slot revised by the job runner
// two at a time (a STALE decision is retried and decided again): in the
// end one current belief for the slot, the newest, every other one retired
// with its time, one revised event each, no job failed.
func TestRevisionJobsRace(t *testing.T) {
	t.Parallel()
	e := newPipelineEnv(t, false)
	db, conv := e.db, e.conv
	first := rememberFact(t, db, conv, "I work at Acme", nil)
	e.drain()
	ids := []uuid.UUID{first}
	for _, c := range []string{"Initech", "Globex", "Hooli", "Umbrella"} {
		ids = append(ids, rememberFact(t, db, conv, "I work at "+c, nil))
	}
	e.drain()
	require.Zero(t, e.count(`SELECT count(*) FROM mneme.jobs WHERE state <> 'done'`))
	newest := ids[len(ids)-1]
	require.Equal(t, "active", getBelief(t, db, newest).Status, "the newest")
	for _, id := range ids {
		// One event per revision applied; a write retired by a newer one
		// before its own job ran is SKIPPED (no event of its own).
		b := getBelief(t, db, id)
		n := len(revisedEvents(t, db, id))
		require.LessOrEqual(t, n, 1, b.Content)
		if n == 0 {
			require.Equal(t, "superseded", b.Status, b.Content)
		}
	}
	require.Equal(t, len(ids), e.count(`SELECT count(*) FROM mneme.memories`))
	require.Equal(t, 1, e.count(`SELECT count(*) FROM mneme.memories WHERE status = 'active'`), "one current belief per slot")
	for _, id := range ids[:len(ids)-1] {
		b := getBelief(t, db, id)
		require.Equal(t, "superseded", b.Status, b.Content)
		require.NotNil(t, b.ValidUntil, b.Content)
		require.False(t, b.ValidUntil.Before(b.CreatedAt), b.Content)
	}
	cur := found(t, db, conv, "work at Acme Initech Globex Hooli Umbrella", "")
	require.Equal(t, map[uuid.UUID]string{newest: "active"}, cur)
}

// TestRevisionOutOfOrderJobs: two writes of one slot whose revise jobs run
// newest first (two sidecars, or the older job retrying after a STALE):
// the newer one supersedes the newest other candidate, the older one is
// then no longer active and is skipped, and the slot's first fact must not
// stay current beside the newest.
func TestRevisionOutOfOrderJobs(t *testing.T) {
	t.Parallel()
	e := newPipelineEnv(t, false)
	db, conv := e.db, e.conv
	ctx := context.Background()
	acme := rememberFact(t, db, conv, "I work at Acme", nil)
	e.drain()
	hooli := rememberFact(t, db, conv, "I work at Hooli", nil)
	umbrella := rememberFact(t, db, conv, "I work at Umbrella", nil)
	r := revision.Reviser{Classifier: revision.Heuristic{}, Log: e.log}
	run := func(id uuid.UUID) {
		var job jobs.Job
		require.NoError(t, db.Pool.QueryRow(ctx, `SELECT id, payload FROM mneme.jobs WHERE kind = 'revise' AND payload->>'memory_id' = $1`,
			id.String()).Scan(&job.ID, &job.Payload))
		job.Kind, job.Attempts, job.ConversationID = "revise", 1, uuid.NullUUID{UUID: conv, Valid: true}
		require.NoError(t, r.Handle(ctx, jobs.Inline(db.Pool), job))
	}
	run(umbrella)
	run(hooli)
	require.Equal(t, "active", getBelief(t, db, umbrella).Status)
	require.Equal(t, "superseded", getBelief(t, db, hooli).Status)
	require.Equal(t, map[uuid.UUID]string{umbrella: "active"}, found(t, db, conv, "work at Acme Hooli Umbrella", ""),
		"one current belief for the slot")
	require.NotEqual(t, "active", getBelief(t, db, acme).Status)
}

// TestRevisionBadInput: every bad argument of the revision functions gets
// its SQLSTATE and writes nothing.
func TestRevisionBadInput(t *testing.T) {
	t.Parallel()
	db := dbtest.New(t)
	ctx := context.Background()
	conv, other := uuid.New(), uuid.New()
	mem := rememberFact(t, db, conv, "I live in Paris", nil)
	target := rememberFact(t, db, conv, "I live in Rome", nil)
	var msg, otherMsg int64
	require.NoError(t, db.Pool.QueryRow(ctx, `SELECT mneme.add_message($1, 'user', 'I live in Paris, I said.')`, conv).Scan(&msg))
	require.NoError(t, db.Pool.QueryRow(ctx, `SELECT mneme.add_message($1, 'user', 'Another conversation.')`, other).Scan(&otherMsg))
	state := func() string {
		var s string
		require.NoError(t, db.Pool.QueryRow(ctx, `SELECT format('%s/%s/%s/%s', (SELECT md5(string_agg(m::text, ',' ORDER BY id)) FROM mneme.memories m),
			(SELECT count(*) FROM mneme.memory_events), (SELECT md5(string_agg(j::text, ',' ORDER BY id)) FROM mneme.jobs j),
			(SELECT count(*) FROM mneme.review_log))`).Scan(&s))
		return s
	}
	before := state()
	long := strings.Repeat("r", 2001)
	cases := []struct {
		name, sql, state string
		args             []any
	}{
		{"apply: NULL memory", `SELECT mneme.apply_revision(NULL, 'ADD', NULL, 'r', 'heuristic')`, "22004", nil},
		{"apply: NULL action", `SELECT mneme.apply_revision($1, NULL, NULL, 'r', 'heuristic')`, "22004", []any{mem}},
		{"apply: NULL classifier", `SELECT mneme.apply_revision($1, 'ADD', NULL, 'r', NULL)`, "22004", []any{mem}},
		{"apply: unknown action", `SELECT mneme.apply_revision($1, 'MERGE', $2, 'r', 'heuristic')`, "22023", []any{mem, target}},
		{"apply: blank action", `SELECT mneme.apply_revision($1, ' ', $2, 'r', 'heuristic')`, "22023", []any{mem, target}},
		{"apply: no target", `SELECT mneme.apply_revision($1, 'SUPERSEDE', NULL, 'r', 'heuristic')`, "22023", []any{mem}},
		{"apply: self target", `SELECT mneme.apply_revision($1, 'NOOP', $1, 'r', 'heuristic')`, "22023", []any{mem}},
		{"apply: unknown classifier", `SELECT mneme.apply_revision($1, 'ADD', NULL, 'r', 'gpt')`, "22023", []any{mem}},
		{"apply: unknown memory", `SELECT mneme.apply_revision($1, 'ADD', NULL, 'r', 'heuristic')`, "P0002", []any{uuid.New()}},
		{"apply: long reason", `SELECT mneme.apply_revision($1, 'SUPERSEDE', $2, $3, 'heuristic')`, "22001", []any{mem, target, long}},
		{"apply: long slot", `SELECT mneme.apply_revision($1, 'ADD', NULL, 'r', 'heuristic', $2)`, "22001", []any{mem, strings.Repeat("s", 201)}},
		{"fact: NULL conversation", `SELECT mneme.add_fact(NULL, 'I live in Paris.', ARRAY[$1]::bigint[])`, "22004", []any{msg}},
		{"fact: NULL messages", `SELECT mneme.add_fact($1, 'I live in Paris.', NULL)`, "22004", []any{conv}},
		{"fact: no messages", `SELECT mneme.add_fact($1, 'I live in Paris.', '{}')`, "22023", []any{conv}},
		{"fact: NULL content", `SELECT mneme.add_fact($1, NULL, ARRAY[$2]::bigint[])`, "22023", []any{conv, msg}},
		{"fact: blank content", `SELECT mneme.add_fact($1, E' \u200b\t', ARRAY[$2]::bigint[])`, "22023", []any{conv, msg}},
		{"fact: another conversation's message", `SELECT mneme.add_fact($1, 'I live in Paris.', ARRAY[$2]::bigint[])`, "22023", []any{conv, otherMsg}},
		{"fact: one of them another's", `SELECT mneme.add_fact($1, 'I live in Paris.', ARRAY[$2, $3]::bigint[])`, "22023", []any{conv, msg, otherMsg}},
		{"fact: unknown message", `SELECT mneme.add_fact($1, 'I live in Paris.', ARRAY[$2]::bigint[])`, "22023", []any{conv, int64(1 << 40)}},
		{"fact: NULL message", `SELECT mneme.add_fact($1, 'I live in Paris.', ARRAY[NULL]::bigint[])`, "22023", []any{conv}},
		{"fact: too long", `SELECT mneme.add_fact($1, $3, ARRAY[$2]::bigint[])`, "22001", []any{conv, msg, strings.Repeat("x", 2001)}},
		{"candidates: NULL", `SELECT * FROM mneme.revision_candidates(NULL)`, "22004", nil},
		{"candidates: unknown", `SELECT * FROM mneme.revision_candidates($1)`, "P0002", []any{uuid.New()}},
		{"candidates: k 0", `SELECT * FROM mneme.revision_candidates($1, 0)`, "22023", []any{mem}},
		{"candidates: k 100", `SELECT * FROM mneme.revision_candidates($1, 100)`, "22023", []any{mem}},
		{"candidates: k negative", `SELECT * FROM mneme.revision_candidates($1, -5)`, "22023", []any{mem}},
		{"remember: long source_ref", `SELECT mneme.remember($1, 'a fact', source_ref => $2)`, "22001", []any{conv, strings.Repeat("e", 513)}},
		{"remember: at infinity", `SELECT mneme.remember($1, 'a fact', at => 'infinity')`, "22008", []any{conv}},
		{"remember: at -infinity", `SELECT mneme.remember($1, 'a fact', at => '-infinity')`, "22008", []any{conv}},
		{"remember: at far future", `SELECT mneme.remember($1, 'a fact', at => now() + interval '10 years')`, "22008", []any{conv}},
		{"search: as_of infinity", `SELECT * FROM mneme.search($1, 'Paris', 5, as_of => 'infinity')`, "22008", []any{conv}},
		{"search: as_of -infinity", `SELECT * FROM mneme.search($1, 'Paris', 5, as_of => '-infinity')`, "22008", []any{conv}},
		{"retrieve: as_of infinity", `SELECT * FROM mneme.retrieve($1, 'Paris', 5, as_of => 'infinity')`, "22008", []any{conv}},
		{"history: NULL", `SELECT * FROM mneme.history(NULL)`, "22004", nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := db.Pool.Exec(ctx, tc.sql, tc.args...)
			require.Error(t, err)
			require.Equal(t, tc.state, sqlState(t, err), err.Error())
			require.Less(t, len(err.Error()), 600, "the error quotes a prefix at most")
			require.Equal(t, before, state(), "nothing written")
		})
	}

	// A target that does not exist (or is no longer active) is not an
	// error: the decision is STALE and nothing is written; force stores an
	// ADD.
	var r string
	require.NoError(t, db.Pool.QueryRow(ctx, `SELECT mneme.apply_revision($1, 'SUPERSEDE', $2, 'r', 'heuristic')`, mem, uuid.New()).Scan(&r))
	require.Equal(t, "STALE", r)
	require.Equal(t, before, state())
	// A target of another tenant is STALE too.
	_, err := db.Pool.Exec(ctx, `SELECT mneme.create_tenant('elsewhere')`)
	require.NoError(t, err)
	var foreign uuid.UUID
	require.NoError(t, inTenant(t, db.Pool, "elsewhere", func(tx pgx.Tx) error {
		return tx.QueryRow(ctx, `SELECT mneme.remember($1, 'I live in Oslo')`, uuid.New()).Scan(&foreign)
	}))
	fb := getBelief(t, db, foreign)
	require.NoError(t, db.Pool.QueryRow(ctx, `SELECT mneme.apply_revision($1, 'SUPERSEDE', $2, 'r', 'heuristic')`, mem, foreign).Scan(&r))
	require.Equal(t, "STALE", r, "another tenant's memory is never a target")
	require.Equal(t, fb, getBelief(t, db, foreign))
	require.Equal(t, "active", getBelief(t, db, mem).Status)
	require.NoError(t, db.Pool.QueryRow(ctx, `SELECT mneme.apply_revision($1, 'SUPERSEDE', $2, 'r', 'heuristic', force => true)`, mem, uuid.New()).Scan(&r))
	require.Equal(t, "ADD", r)
	require.Equal(t, "active", getBelief(t, db, mem).Status)
	require.Nil(t, getBelief(t, db, mem).SupersedesID)

	// Hostile fact text with valid messages: stored as given, or a
	// documented error.
	for _, h := range []string{"\x01\x02 control", "😀 emoji \u202e bidi", "Robert'); DROP TABLE mneme.memories;--", "%s%n%x"} {
		var id uuid.UUID
		require.NoError(t, db.Pool.QueryRow(ctx, `SELECT mneme.add_fact($1, $2, ARRAY[$3]::bigint[])`, conv, h, msg).Scan(&id), h)
		require.Equal(t, strings.TrimSpace(h), getBelief(t, db, id).Content)
	}
	// Bounds accepted: k 1 and 99, 2000-character facts, 512-character refs.
	for _, k := range []int{1, 99} {
		_, err := db.Pool.Exec(ctx, `SELECT * FROM mneme.revision_candidates($1, $2)`, mem, k)
		require.NoError(t, err)
	}
	_, err = db.Pool.Exec(ctx, `SELECT mneme.add_fact($1, $2, ARRAY[$3]::bigint[])`, conv, strings.Repeat("y", 2000), msg)
	require.NoError(t, err)
	_, err = db.Pool.Exec(ctx, `SELECT mneme.remember($1, 'a fact', source_ref => $2)`, conv, strings.Repeat("e", 512))
	require.NoError(t, err)
}

// TestRevisionSourceRefRedacted: source_ref is stored redacted (credentials
// in URLs, bearer tokens, key=value secrets, well-known key prefixes, long
// random tokens); harmless references stay as given.
func TestRevisionSourceRefRedacted(t *testing.T) {
	t.Parallel()
	db := dbtest.New(t)
	ctx := context.Background()
	conv := uuid.New()
	id := uuid.NewString()
	cases := []struct {
		ref, want string
		secrets   []string
	}{
		{"https://alice:hunter2pw@git.example.com/x", "https://[REDACTED]@git.example.com/x", []string{"alice", "hunter2pw"}},
		{"postgres://svc:s3cr3t@db.internal:5432/app", "postgres://[REDACTED]@db.internal:5432/app", []string{"s3cr3t"}},
		{"header Authorization: Bearer eyJhbGciOiJIUzI1NiJ9.payload.sig", "header Authorization: Bearer [REDACTED]", []string{"eyJhbGci"}},
		{"https://api.example.com/v1/items?api_key=ZX81secret&page=2", "https://api.example.com/v1/items?api_key=[REDACTED]&page=2", []string{"ZX81secret"}},
		{"https://h.example.com/cb?access_token=tok123&x=1", "https://h.example.com/cb?access_token=[REDACTED]&x=1", []string{"tok123"}},
		{"key sk-proj-abcdefghijklmnopqrstuvwx0123", "key [REDACTED]", []string{"abcdefghijklmnop"}},
		{"ghp_abcdefghijklmnopqrstuvwxyz0123456789", "[REDACTED]", []string{"ghp_abc"}},
		{"aws AKIAIOSFODNN7EXAMPLE used", "aws [REDACTED] used", []string{"AKIAIOSFODNN7EXAMPLE"}},
		{"token 9f8a7b6c5d4e3f2a1b0c9d8e7f6a5b4c3d2e1f0a", "token [REDACTED]", []string{"9f8a7b6c5d4e3f2a1b0c"}},
		{"password: letmein, then the import", "password: [REDACTED], then the import", []string{"letmein"}},
		{id, id, nil},
		{"episode " + id + " messages 1,2", "episode " + id + " messages 1,2", nil},
		{"https://example.com/docs/guide.html#section-2", "https://example.com/docs/guide.html#section-2", nil},
		{"notes from 2026-03-01, page 12", "notes from 2026-03-01, page 12", nil},
	}
	for _, c := range cases {
		var mem uuid.UUID
		require.NoError(t, db.Pool.QueryRow(ctx, `SELECT mneme.remember($1, 'a fact with a source', source_ref => $2)`, conv, c.ref).Scan(&mem))
		var stored, inspected, direct string
		require.NoError(t, db.Pool.QueryRow(ctx, `SELECT source_ref FROM mneme.memories WHERE id = $1`, mem).Scan(&stored))
		require.NoError(t, db.Pool.QueryRow(ctx, `SELECT source_ref FROM mneme.inspect($1)`, mem).Scan(&inspected))
		require.NoError(t, db.Pool.QueryRow(ctx, `SELECT mneme.redact($1)`, c.ref).Scan(&direct))
		require.Equal(t, c.want, stored, c.ref)
		require.Equal(t, stored, inspected)
		require.Equal(t, stored, direct)
		for _, s := range c.secrets {
			require.NotContains(t, stored, s)
		}
	}
	var null *string
	require.NoError(t, db.Pool.QueryRow(ctx, `SELECT mneme.redact(NULL)`).Scan(&null))
	require.Nil(t, null)
	var none int
	require.NoError(t, db.Pool.QueryRow(ctx, `SELECT count(*) FROM mneme.memory_events WHERE reason ~ '(hunter2pw|s3cr3t|ZX81secret|letmein)'`).Scan(&none))
	require.Zero(t, none, "no secret in the event log")
}

// factSession is a conversation that states facts about the user (and
// other things that are not facts).
var factSession = [][2]string{
	{"user", "I live in Paris with my partner Sam."},
	{"assistant", "Paris is lovely in the spring."},
	{"user", "My favourite food is ramen."},
	{"assistant", "Ramen is a great choice on a cold day."},
	{"user", "What should I cook tonight?"},
	{"assistant", "Try a miso ramen at home."},
}

var moveSession = [][2]string{
	{"user", "I moved to Berlin last month."},
	{"assistant", "How do you like Berlin so far?"},
	{"user", "The winters are cold but the museums are great."},
	{"assistant", "The Pergamon is worth a visit."},
	{"user", "Thanks for the tip."},
}

type extracted struct {
	ID         uuid.UUID
	Content    string
	SourceIDs  []int64
	SourceRef  string
	Confidence float32
	Status     string
}

func (e *pipelineEnv) extractedFacts() []extracted {
	e.t.Helper()
	rows, err := e.db.Pool.Query(context.Background(), `SELECT id, content, source_message_ids, source_ref, confidence_score, status
		FROM mneme.memories WHERE conversation_id = $1 AND source_type = 'extracted' ORDER BY created_at, content`, e.conv)
	require.NoError(e.t, err)
	out, err := pgx.CollectRows(rows, pgx.RowToStructByPos[extracted])
	require.NoError(e.t, err)
	return out
}

// episodes are the conversation's episodic memories, oldest first.
func (e *pipelineEnv) episodes() []belief {
	e.t.Helper()
	rows, err := e.db.Pool.Query(context.Background(),
		`SELECT id FROM mneme.memories WHERE conversation_id = $1 AND kind = 'episodic' ORDER BY created_at`, e.conv)
	require.NoError(e.t, err)
	ids, err := pgx.CollectRows(rows, pgx.RowTo[uuid.UUID])
	require.NoError(e.t, err)
	out := make([]belief, len(ids))
	for i, id := range ids {
		out[i] = getBelief(e.t, e.db, id)
	}
	return out
}

func joinIDs(ids []int64) string {
	s := make([]string, len(ids))
	for i, id := range ids {
		s[i] = fmt.Sprint(id)
	}
	return strings.Join(s, ",")
}

// TestFactExtraction: segmentation (offline) stores the facts an episode
// states beside it, each a semantic memory with its messages as provenance
// and a revise job; a later move supersedes the earlier fact; context
// returns facts beside episodes; erase of the episode takes its facts.
func TestFactExtraction(t *testing.T) {
	t.Parallel()
	for _, variant := range variants(t) {
		t.Run(variant, func(t *testing.T) {
			e := newPipelineEnv(t, false, dbtest.WithVector(variant))
			ctx := context.Background()
			_, err := e.db.Pool.Exec(ctx, `SELECT mneme.set_setting('segment_shift_similarity', '-1')`) // a session is an episode
			require.NoError(t, err)
			e.session(day1, factSession)
			e.say(day3.Format(time.RFC3339), moveSession[0][0], moveSession[0][1]) // the gap cuts the first session
			e.drain()
			eps := e.episodes()
			require.Len(t, eps, 1)
			ep1 := eps[0]
			facts := e.extractedFacts()
			var contents []string
			for _, f := range facts {
				contents = append(contents, f.Content)
				require.NotEmpty(t, f.SourceIDs)
				require.Subset(t, ep1.SourceIDs, f.SourceIDs, "a fact's messages are its episode's")
				require.Equal(t, fmt.Sprintf("episode %s messages %s", ep1.ID, joinIDs(f.SourceIDs)), f.SourceRef)
				require.InDelta(t, 0.7, f.Confidence, 1e-6, "confidence_by_source.extracted")
				require.Equal(t, "active", f.Status)
				require.Equal(t, 1, e.count(`SELECT count(*) FROM mneme.jobs WHERE kind = 'revise' AND state = 'done'
					AND payload->>'memory_id' = $1`, f.ID.String()), "each fact is revised")
				require.Len(t, revisedEvents(t, e.db, f.ID), 1)
				require.Equal(t, "semantic", getBelief(t, e.db, f.ID).Kind)
			}
			require.ElementsMatch(t, []string{"User: I live in Paris with my partner Sam.", "User: My favourite food is ramen."}, contents,
				"first-person statements of the user; no question, no assistant turn")
			paris := facts[0]
			if !strings.Contains(paris.Content, "Paris") {
				paris = facts[1]
			}
			require.Equal(t, []int64{ep1.SourceIDs[0]}, paris.SourceIDs)

			// The second session: its move supersedes the first fact.
			e.session(day3.Add(time.Minute), moveSession[1:])
			_, err = e.db.Pool.Exec(ctx, `SELECT mneme.segment_now($1)`, e.conv)
			require.NoError(t, err)
			e.drain()
			require.Zero(t, e.count(`SELECT count(*) FROM mneme.jobs WHERE state <> 'done'`))
			eps = e.episodes()
			require.Len(t, eps, 2)
			ep2 := eps[1]
			var berlin extracted
			for _, f := range e.extractedFacts() {
				if strings.Contains(f.Content, "Berlin") {
					berlin = f
				}
			}
			require.Equal(t, "User: I moved to Berlin last month.", berlin.Content)
			require.Equal(t, fmt.Sprintf("episode %s messages %s", ep2.ID, joinIDs(berlin.SourceIDs)), berlin.SourceRef)
			requireOneRevised(t, e.db, berlin.ID, "SUPERSEDE", "heuristic")
			p := getBelief(t, e.db, paris.ID)
			require.Equal(t, "superseded", p.Status)
			require.Equal(t, paris.ID, *getBelief(t, e.db, berlin.ID).SupersedesID)
			require.Len(t, e.extractedFacts(), 3, "nothing else extracted from the second session")

			// Retrieval and context return facts beside episodes.
			cur := found(t, e.db, e.conv, "where does the user live Berlin Paris", "")
			require.Contains(t, cur, berlin.ID)
			require.NotContains(t, cur, paris.ID)
			kinds := map[string]bool{}
			for _, it := range e.contextItems("where does the user live now Berlin", 400) {
				kinds[it.Kind] = true
				require.NotEqual(t, paris.ID, it.MemoryID, "the superseded fact is not in the context")
			}
			require.True(t, kinds["semantic"] && kinds["episodic"], "facts beside episodes: %v", kinds)
			var text string
			require.NoError(t, e.db.Pool.QueryRow(ctx, `SELECT mneme.context($1, 'where does the user live now Berlin', 400, record => false)`, e.conv).Scan(&text))
			require.Contains(t, text, "I moved to Berlin last month.")

			// Erase of the first episode takes the facts extracted from it.
			before := e.count(`SELECT count(*) FROM mneme.memories`)
			var texts []string
			for _, m := range factSession {
				texts = append(texts, m[1])
			}
			sh := shingles(texts...)
			require.NotEmpty(t, leaks(t, e.db, sh)["memories"], "the scan finds the facts before erase")
			_, err = e.db.Pool.Exec(ctx, `SELECT mneme.erase($1, 'user request')`, ep1.ID)
			require.NoError(t, err)
			require.Equal(t, before-3, e.count(`SELECT count(*) FROM mneme.memories`), "the episode and its two facts")
			require.Zero(t, e.count(`SELECT count(*) FROM mneme.memories WHERE id = ANY ($1)`, []uuid.UUID{ep1.ID, facts[0].ID, facts[1].ID}))
			require.Equal(t, 3, e.count(`SELECT count(*) FROM mneme.memory_events WHERE event = 'erased' AND memory_id = ANY ($1)`,
				[]uuid.UUID{ep1.ID, facts[0].ID, facts[1].ID}), "a tombstone each")
			require.Empty(t, leaks(t, e.db, sh), "no 3-word sequence of the erased episode is left")
			b := getBelief(t, e.db, berlin.ID)
			require.Equal(t, "active", b.Status, "the later fact stays")
			require.Nil(t, b.SupersedesID, "its link to the erased fact is gone")
			bm25Equal(t, e.db)
		})
	}
}

// TestFactExtractionOff: with setting extract_facts false segmentation
// stores episodes only.
func TestFactExtractionOff(t *testing.T) {
	t.Parallel()
	e := newPipelineEnv(t, false)
	_, err := e.db.Pool.Exec(context.Background(), `SELECT mneme.set_setting('extract_facts', 'false')`)
	require.NoError(t, err)
	e.session(day1, factSession)
	e.session(day3, moveSession)
	_, err = e.db.Pool.Exec(context.Background(), `SELECT mneme.segment_now($1)`, e.conv)
	require.NoError(t, err)
	e.drain()
	require.NotEmpty(t, e.episodes())
	require.Empty(t, e.extractedFacts())
	require.Zero(t, e.count(`SELECT count(*) FROM mneme.jobs WHERE kind = 'revise'`))
	require.Zero(t, e.count(`SELECT count(*) FROM mneme.memories WHERE kind = 'semantic'`))
}

// TestEraseSupersedingFact: erasing the episode whose fact replaced an
// earlier one leaves none of its words in the earlier fact's status_reason
// or in the event log (the revision reason quotes both values).
func TestEraseSupersedingFact(t *testing.T) {
	t.Parallel()
	e := newPipelineEnv(t, false)
	ctx := context.Background()
	_, err := e.db.Pool.Exec(ctx, `SELECT mneme.set_setting('segment_shift_similarity', '-1')`)
	require.NoError(t, err)
	first := [][2]string{
		{"user", "I work at Northwind Traders."},
		{"assistant", "What do you do there?"},
		{"user", "Mostly accounting work."},
		{"assistant", "Numbers all day, then."},
		{"user", "Yes, all day long."},
	}
	second := [][2]string{
		{"user", "I work at the Crooked Linden Bakery now."},
		{"assistant", "A big change from accounting!"},
		{"user", "The sourdough starter is called Gustav."},
		{"assistant", "A fine name for a starter."},
		{"user", "He is older than my cat."},
	}
	e.session(day1, first)
	e.say(day3.Format(time.RFC3339), second[0][0], second[0][1]) // the gap cuts the first session
	e.drain()
	e.session(day3.Add(time.Minute), second[1:])
	_, err = e.db.Pool.Exec(ctx, `SELECT mneme.segment_now($1)`, e.conv)
	require.NoError(t, err)
	e.drain()
	eps := e.episodes()
	require.Len(t, eps, 2)
	var old, bakery uuid.UUID
	for _, f := range e.extractedFacts() {
		switch {
		case strings.Contains(f.Content, "Northwind"):
			old = f.ID
		case strings.Contains(f.Content, "Bakery"):
			bakery = f.ID
		}
	}
	require.NotEqual(t, uuid.Nil, old)
	require.NotEqual(t, uuid.Nil, bakery)
	require.Equal(t, "superseded", getBelief(t, e.db, old).Status)
	var kept, erased []string
	for i := range first {
		kept, erased = append(kept, first[i][1]), append(erased, second[i][1])
	}
	keptSh := map[string]bool{}
	for _, s := range shingles(kept...) {
		keptSh[s] = true
	}
	var sh []string // the erased episode's own word sequences ("i work at" is said in both)
	for _, s := range shingles(erased...) {
		if !keptSh[s] {
			sh = append(sh, s)
		}
	}
	require.Contains(t, leaks(t, e.db, sh)["memories"], "crooked linden bakery", "the scan finds it before erase")
	_, err = e.db.Pool.Exec(ctx, `SELECT mneme.erase($1, 'user request')`, eps[1].ID)
	require.NoError(t, err)
	require.Zero(t, e.count(`SELECT count(*) FROM mneme.memories WHERE id = $1`, bakery))
	require.Equal(t, "superseded", getBelief(t, e.db, old).Status, "the earlier fact stays (the lineage of what was believed)")
	require.Empty(t, leaks(t, e.db, sh), "no 3-word sequence of the erased episode is left")
}

// TestRevisionTenantIsolation: the application role cannot call the
// worker's revision functions, and a search of another tenant's
// conversation with include_history or as_of returns nothing.
func TestRevisionTenantIsolation(t *testing.T) {
	t.Parallel()
	for _, variant := range variants(t) {
		t.Run(variant, func(t *testing.T) {
			db := dbtest.New(t, dbtest.WithVector(variant))
			ctx := context.Background()
			app := appWithTenants(t, db, "acme", "globex")
			convA := uuid.New()
			var v1, v2 uuid.UUID
			var msg int64
			require.NoError(t, inTenant(t, app, "acme", func(tx pgx.Tx) error {
				if err := tx.QueryRow(ctx, `SELECT mneme.remember($1, 'Alice lives in Paris')`, convA).Scan(&v1); err != nil {
					return err
				}
				if err := tx.QueryRow(ctx, `SELECT mneme.add_message($1, 'user', 'Alice lives in Paris, says Alice.')`, convA).Scan(&msg); err != nil {
					return err
				}
				return tx.QueryRow(ctx, `SELECT mneme.remember($1, 'Alice lives in Berlin', supersedes => $2)`, convA, v1).Scan(&v2)
			}))
			queries := []string{
				`SELECT count(*) FROM mneme.search($1, 'Alice Paris Berlin', 10, include_history => true)`,
				`SELECT count(*) FROM mneme.search($1, 'Alice Paris Berlin', 10, as_of => now())`,
				`SELECT count(*) FROM mneme.search($1, 'Alice Paris Berlin', 10, as_of => now(), include_history => true, scope => 'tenant')`,
				`SELECT count(*) FROM mneme.retrieve($1, 'Alice Paris Berlin', 10, include_history => true)`,
			}
			for _, q := range queries {
				var n int
				require.NoError(t, inTenant(t, app, "acme", func(tx pgx.Tx) error { return tx.QueryRow(ctx, q, convA).Scan(&n) }), q)
				require.Positive(t, n, "acme finds its own: %s", q)
			}
			state := func() string {
				var s string
				require.NoError(t, db.Pool.QueryRow(ctx, `SELECT format('%s/%s/%s', (SELECT md5(string_agg(m::text, ',' ORDER BY id)) FROM mneme.memories m),
					(SELECT count(*) FROM mneme.memory_events), (SELECT count(*) FROM mneme.jobs))`).Scan(&s))
				return s
			}
			before := state()
			for _, tenant := range []string{"globex", ""} {
				for _, q := range queries {
					var n int
					require.NoError(t, inTenant(t, app, tenant, func(tx pgx.Tx) error { return tx.QueryRow(ctx, q, convA).Scan(&n) }), q)
					require.Zero(t, n, "%s as %q", q, tenant)
				}
				for _, c := range []struct {
					q    string
					args []any
				}{
					{`SELECT mneme.add_fact($1, 'Alice lives in Rome.', ARRAY[$2]::bigint[])`, []any{convA, msg}},
					{`SELECT mneme.apply_revision($1, 'SUPERSEDE', $2, 'r', 'heuristic')`, []any{v2, v1}},
					{`SELECT mneme.apply_revision($1, 'ADD', NULL, 'r', 'heuristic')`, []any{v2}},
					{`SELECT * FROM mneme.revision_candidates($1)`, []any{v2}},
				} {
					err := inTenant(t, app, tenant, func(tx pgx.Tx) error { _, err := tx.Exec(ctx, c.q, c.args...); return err })
					require.Error(t, err, c.q)
					require.Equal(t, "42501", sqlState(t, err), "%s as %q: %v", c.q, tenant, err)
				}
				require.NoError(t, inTenant(t, app, tenant, func(tx pgx.Tx) error {
					var s string
					return tx.QueryRow(ctx, `SELECT mneme.redact('https://u:p@h/x')`).Scan(&s)
				}), "redact is public")
			}
			require.Equal(t, before, state(), "nothing of acme's changed")
		})
	}
}

// TestApplyRevisionBlankSlot: a slot that is blank by mneme's one
// definition (here U+3000 only) is no slot: the new fact keeps the slot it
// has, and a SUPERSEDE retires the other facts of that slot too.
func TestApplyRevisionBlankSlot(t *testing.T) {
	t.Parallel()
	db := dbtest.New(t)
	ctx := context.Background()
	conv := uuid.New()
	older := rememberFact(t, db, conv, "I live in Lyon", nil)
	target := rememberFact(t, db, conv, "I live in Paris", nil)
	fact := rememberFact(t, db, conv, "I live in Berlin", nil)
	_, err := db.Pool.Exec(ctx, `UPDATE mneme.memories SET slot = 'user|lives_in' WHERE id IN ($1, $2)`, older, fact)
	require.NoError(t, err)
	var applied string
	require.NoError(t, db.Pool.QueryRow(ctx, `SELECT mneme.apply_revision($1, 'SUPERSEDE', $2, 'moved', 'heuristic', $3)`,
		fact, target, "\u3000").Scan(&applied))
	require.Equal(t, "SUPERSEDE", applied)
	f := getBelief(t, db, fact)
	require.NotNil(t, f.Slot)
	require.Equal(t, "user|lives_in", *f.Slot, "a blank slot leaves the fact's own")
	require.Equal(t, "superseded", getBelief(t, db, target).Status)
	require.Equal(t, "superseded", getBelief(t, db, older).Status, "the other fact of the fact's slot is retired too")
}

// TestRevisionLateWriteLineage: make demo's case. "I live in Paris.", then
// "I moved to Berlin last month.", then a late "I live in Paris." said
// before the move. The late row is stored superseded, in the lineage at its
// place in time (the link said right after it points to it), history()
// finds the whole chain from either end, and the reason reads in the
// direction the belief changed.
func TestRevisionLateWriteLineage(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		late time.Duration // before now; Paris is at -48h, Berlin at -24h
		// together: Berlin and the late write are revised by one drain, their
		// jobs in either order (the late write may be retired by Berlin's
		// job before its own runs); else one after the other, as make demo
		together bool
	}{
		{"between Paris and Berlin", 36 * time.Hour, false},
		{"before the first Paris", 72 * time.Hour, false},
		{"between, jobs in either order", 36 * time.Hour, true},
		{"before, jobs in either order", 72 * time.Hour, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			e := newPipelineEnv(t, false)
			db, conv := e.db, e.conv
			now := time.Now()
			ago := func(d time.Duration) *time.Time { x := now.Add(-d); return &x }
			paris := rememberFact(t, db, conv, "I live in Paris.", ago(48*time.Hour))
			e.drain()
			berlin := rememberFact(t, db, conv, "I moved to Berlin last month.", ago(24*time.Hour))
			if !tc.together {
				e.drain()
			}
			late := rememberFact(t, db, conv, "I live in Paris.", ago(tc.late))
			e.drain()
			require.Zero(t, e.count(`SELECT count(*) FROM mneme.jobs WHERE state <> 'done'`))

			p, b, l := getBelief(t, db, paris), getBelief(t, db, berlin), getBelief(t, db, late)
			require.Equal(t, "active", b.Status, "Berlin stays current")
			require.Equal(t, "superseded", p.Status)
			require.Equal(t, "superseded", l.Status, "the late write is stored superseded")
			if !tc.together {
				ev := requireOneRevised(t, db, late, "SUPERSEDE", "heuristic")
				require.Contains(t, ev.Reason, `lives_in was "paris" before it changed to "berlin"`)
				require.NotContains(t, ev.Reason, `changes from "berlin" to "paris"`, "never the wrong direction")
				require.Contains(t, ev.Reason, "older than "+berlin.String())
			}

			// The chain in time order, newest first: each link points at
			// the one said before it.
			var chain []uuid.UUID
			if tc.late < 48*time.Hour {
				chain = []uuid.UUID{berlin, late, paris}
			} else {
				chain = []uuid.UUID{berlin, paris, late}
			}
			for i := 0; i+1 < len(chain); i++ {
				next := getBelief(t, db, chain[i])
				require.NotNil(t, next.SupersedesID, "%s has a predecessor", next.Content)
				require.Equal(t, chain[i+1], *next.SupersedesID, "link %d", i)
				prev := getBelief(t, db, chain[i+1])
				require.NotNil(t, prev.ValidUntil)
				require.True(t, prev.ValidUntil.Equal(next.CreatedAt), "believed until the statement said after it")
			}
			require.Nil(t, getBelief(t, db, chain[2]).SupersedesID)
			want := []historyRow{{-2, "replaced", chain[2], "superseded"}, {-1, "replaced", chain[1], "superseded"},
				{0, "self", berlin, "active"}}
			require.Equal(t, want, history(t, db, berlin), "history from the current belief")
			var fromLate []uuid.UUID
			for _, h := range history(t, db, late) {
				fromLate = append(fromLate, h.ID)
			}
			require.ElementsMatch(t, chain, fromLate, "history from the late write finds the whole lineage")
			// As of a time before the move one link is believed: the Paris
			// said last by then, each believed until the next was said.
			then := found(t, db, conv, "where do I live Paris Berlin", ", as_of => $3", now.Add(-30*time.Hour))
			want1 := paris
			if tc.late < 48*time.Hour {
				want1 = late
			}
			require.Equal(t, map[uuid.UUID]string{want1: "superseded"}, then, "one belief at a time")
			require.Equal(t, 3, e.count(`SELECT count(*) FROM mneme.memories WHERE kind = 'semantic'`), "nothing deleted")
		})
	}
}

// TestSlotTitleFindsOtherWords: a fact that fills a slot is titled with the
// slot's words when revised, so a question in those words finds it though
// the statement shares none ("Which company do I work for?" and "I got a
// job at Contoso."); a title a writer gave is kept, and a fact of no slot
// gets none.
func TestSlotTitleFindsOtherWords(t *testing.T) {
	t.Parallel()
	db := dbtest.New(t)
	ctx := context.Background()
	conv := uuid.New()
	contoso := rememberFact(t, db, conv, "User: I got a job at Contoso.", nil)
	other := rememberFact(t, db, conv, "User: I enjoy baking sourdough bread on weekends.", nil)
	var titled uuid.UUID
	require.NoError(t, db.Pool.QueryRow(ctx, `SELECT mneme.remember($1, 'User: I live in Hull.', title => 'Home')`, conv).Scan(&titled))
	bm25 := func() *int {
		var r *int
		require.NoError(t, db.Pool.QueryRow(ctx, `SELECT max(bm25_rank) FROM mneme.search($1, 'Which company do I work for?', 5) WHERE memory_id = $2`,
			conv, contoso).Scan(&r))
		return r
	}
	require.Nil(t, bm25(), "no shared word: BM25 does not find it before its slot is recorded")
	for _, c := range []struct {
		id   uuid.UUID
		slot string
	}{{contoso, "user|works_at"}, {other, ""}, {titled, "user|lives_in"}} {
		var applied string
		require.NoError(t, db.Pool.QueryRow(ctx, `SELECT mneme.apply_revision($1, 'ADD', NULL, 'new', 'heuristic', nullif($2, ''))`,
			c.id, c.slot).Scan(&applied))
		require.Equal(t, "ADD", applied)
	}
	title := func(id uuid.UUID) *string {
		var s *string
		require.NoError(t, db.Pool.QueryRow(ctx, `SELECT title FROM mneme.memories WHERE id = $1`, id).Scan(&s))
		return s
	}
	require.Equal(t, "works at: employer, company, workplace", *title(contoso))
	require.Nil(t, title(other), "no slot, no title")
	require.Equal(t, "Home", *title(titled), "a writer's title is kept")
	require.NotNil(t, bm25(), "the title's words find it")
	var first uuid.UUID
	require.NoError(t, db.Pool.QueryRow(ctx, `SELECT memory_id FROM mneme.search($1, 'Which company do I work for?', 5)`, conv).Scan(&first))
	require.Equal(t, contoso, first)
	var fav, uses *string
	require.NoError(t, db.Pool.QueryRow(ctx, `SELECT mneme._slot_title('user|favourite_colour'), mneme._slot_title('user|uses_for_notes')`).Scan(&fav, &uses))
	require.Equal(t, "favourite colour: favorite", *fav)
	require.Equal(t, "uses for notes: tool", *uses)
}
