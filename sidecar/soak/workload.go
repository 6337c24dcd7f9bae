package soak

import (
	"context"
	"errors"
	"fmt"
	"math/rand"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// workload is the traffic of the soak: one writer per conversation, as an
// agent and its user talk, with retrievals, contexts, remembers and
// segment_now in between, and an eraser.
type workload struct {
	o     Options
	led   *ledger
	owner *pgxpool.Pool   // reads the soak needs for its ledger (the owner sees every tenant)
	apps  []*pgxpool.Pool // per tenant: its bound mneme_app login
	admin *pgxpool.Pool   // the mneme_admin login: erases, in the memory's tenant
	start time.Time
}

// topics give each session words of its own, so the offline segmenter sees
// topic shifts as well as gaps.
var topics = [][]string{
	{"garden", "tomato", "beds", "compost", "watering", "seedlings", "greenhouse"},
	{"rust", "borrow", "checker", "ownership", "lifetimes", "traits", "cargo"},
	{"lisbon", "trip", "tram", "pastel", "alfama", "flight", "hotel"},
	{"bakery", "sourdough", "oven", "flour", "shift", "croissant", "starter"},
	{"marathon", "running", "pace", "intervals", "shoes", "hydration", "training"},
	{"weather", "umbrella", "rain", "forecast", "wind", "jacket", "sunny"},
	{"piano", "scales", "chopin", "practice", "metronome", "pedal", "sonata"},
	{"chess", "opening", "endgame", "gambit", "rook", "tactics", "tournament"},
}

// markerLetters: a marker is "zq" and nine of these letters, a word no
// other text of the soak holds (no uuid or hex digest has letters past f).
const markerLetters = "ghjkmnpqrstvwxz"

// markerPattern finds markers in any text (a row cast to text).
const markerPattern = `zq[ghjkmnpqrstvwxz]{9}`

// markers counts the markers made: a marker's first seven letters (what
// the scan compares, since BM25 terms are stems) are "zq" and this count
// in base 15, so no two markers share them; four random letters follow.
var markers atomic.Int64

func newMarker(rng *rand.Rand) string {
	b := []byte("zq")
	for n, i := markers.Add(1), 0; i < 5; i++ {
		b = append(b, markerLetters[n%int64(len(markerLetters))])
		n /= int64(len(markerLetters))
	}
	for range 4 {
		b = append(b, markerLetters[rng.Intn(len(markerLetters))])
	}
	return string(b)
}

// sentence is one message about topic t.
func sentence(rng *rand.Rand, t, turn int) string {
	words := topics[t]
	var b strings.Builder
	fmt.Fprintf(&b, "turn %d:", turn)
	for range 4 + rng.Intn(5) {
		b.WriteString(" " + words[rng.Intn(len(words))])
	}
	return b.String()
}

// write is conversation c's writer until stopAt.
func (w *workload) write(ctx context.Context, c *conversation, rng *rand.Rand, stopAt time.Time) {
	app := w.apps[c.Tenant]
	topic := rng.Intn(len(topics))
	gap := w.o.Gap
	turn := 0
	for ctx.Err() == nil && time.Now().Before(stopAt) {
		turn++
		role := []string{"user", "assistant"}[turn%2]
		text := sentence(rng, topic, turn)
		var mark *planted
		if c.Marked && rng.Float64() < map[bool]float64{false: 0.04, true: 0.15}[c.Doomed] {
			m := newMarker(rng)
			mark = &planted{Kind: "message", Conversation: c}
			w.led.plant(m, mark)
			text += " " + m
		}
		var at *time.Time
		if !c.ServerClock {
			t := c.virtual
			at = &t
		}
		var id int64
		err := app.QueryRow(ctx, `SELECT mneme.add_message($1, $2, $3, $4)`, c.ID, role, text, at).Scan(&id)
		if err != nil {
			if ctx.Err() == nil {
				w.led.fail("add_message", err)
			}
			continue
		}
		w.led.call("add_message")
		if mark != nil {
			w.led.mu.Lock()
			mark.MessageID = id
			w.led.mu.Unlock()
		}
		m := &sentMessage{ID: id, Role: role, Content: text, Known: true}
		if at != nil {
			m.At = *at
		} else if err := w.owner.QueryRow(ctx, `SELECT created_at FROM mneme.messages WHERE id = $1`, id).Scan(&m.At); err != nil {
			m.Known = false // erased meanwhile: the reference cannot replay this conversation
		}
		c.addMessage(m)
		c.mu.Lock()
		c.lastAt = m.At
		c.mu.Unlock()

		w.between(ctx, c, rng, app, topic)

		// The next message's time: within the session, at the gap exactly
		// (not a gap: the rule is "further apart than"), or after a gap
		// (a new session, often a new topic).
		r := rng.Float64()
		newSession := r < 0.1
		var step, sleep time.Duration
		switch {
		case newSession:
			step = time.Duration(float64(gap) * (1.0001 + 4*rng.Float64()))
		case r < 0.13:
			step = gap
		case r < 0.16:
			step = 0
		default:
			step = time.Duration(float64(gap) * 0.9 * rng.Float64())
		}
		sleep = time.Duration(10+rng.Intn(70)) * time.Millisecond
		if rng.Float64() < 0.03 { // a late arrival: the writer stalls, its message's time does not jump
			sleep = time.Duration(500+rng.Intn(1500)) * time.Millisecond
		}
		if c.ServerClock && newSession {
			sleep = time.Duration(float64(gap) * (1.1 + rng.Float64()))
		}
		sleep = min(sleep, time.Until(stopAt))
		c.virtual = c.virtual.Add(step).Truncate(time.Microsecond)
		if newSession && rng.Intn(3) > 0 {
			topic = rng.Intn(len(topics))
		} else if rng.Float64() < 0.08 {
			topic = (topic + 1) % len(topics) // a shift within the session
		}
		select {
		case <-ctx.Done():
		case <-time.After(sleep):
		}
	}
}

// between is what happens after a message: a retrieval, a context, a
// remember, a segment_now, a message out of time order (refused).
func (w *workload) between(ctx context.Context, c *conversation, rng *rand.Rand, app *pgxpool.Pool, topic int) {
	query := func() string {
		q := strings.Join([]string{topics[topic][rng.Intn(7)], topics[topic][rng.Intn(7)], "soakq" + strings.ReplaceAll(uuid.NewString(), "-", "")[:12]}, " ")
		if rng.Float64() < 0.15 {
			w.led.mu.Lock()
			for m := range w.led.markers { // a marker planted somewhere (map order: any)
				q += " " + m
				break
			}
			w.led.mu.Unlock()
		}
		return q
	}
	switch r := rng.Float64(); {
	case r < 0.08:
		scope := "conversation"
		if rng.Intn(4) == 0 {
			scope = "tenant"
		}
		q := query()
		t0 := time.Now()
		rows, err := app.Query(ctx, `SELECT memory_id FROM mneme.retrieve($1, $2, 5, scope => $3)`, c.ID, q, scope)
		var ids []uuid.UUID
		if err == nil {
			ids, err = pgx.CollectRows(rows, pgx.RowTo[uuid.UUID])
		}
		if err != nil {
			if ctx.Err() == nil {
				w.led.fail("retrieve", err)
			}
			return
		}
		w.led.call("retrieve")
		w.led.addRetrieval(retrieval{Conversation: c, Query: q, MemoryIDs: ids, Scope: scope, Start: t0, End: time.Now()})
	case r < 0.12:
		q := query()
		t0 := time.Now()
		ids, err := w.context(ctx, app, c.ID, q)
		if err != nil {
			if ctx.Err() == nil {
				w.led.fail("context", err)
			}
			return
		}
		w.led.call("context")
		w.led.addRetrieval(retrieval{Conversation: c, Query: q, MemoryIDs: ids, Context: true, Scope: "conversation", Start: t0, End: time.Now()})
	case r < 0.15:
		text := fmt.Sprintf("Note about the %s: the user likes %s.", topics[topic][0], topics[topic][rng.Intn(7)])
		if c.Marked && rng.Intn(5) > 0 {
			m := newMarker(rng)
			w.led.plant(m, &planted{Kind: "remember", Conversation: c})
			text = fmt.Sprintf("The codeword for the %s is %s.", topics[topic][0], m)
		}
		if _, err := app.Exec(ctx, `SELECT mneme.remember($1, $2)`, c.ID, text); err != nil {
			if ctx.Err() == nil {
				w.led.fail("remember", err)
			}
			return
		}
		w.led.call("remember")
	case r < 0.17:
		if _, err := app.Exec(ctx, `SELECT mneme.segment_now($1)`, c.ID); err != nil {
			if ctx.Err() == nil {
				w.led.fail("segment_now", err)
			}
			return
		}
		w.led.call("segment_now")
		c.addSegmentNow()
	case r < 0.20 && !c.ServerClock:
		// Bad input: a time before the previous message is refused (22008)
		// and loses nothing.
		c.mu.Lock()
		at := c.lastAt.Add(-time.Second)
		c.mu.Unlock()
		_, err := app.Exec(ctx, `SELECT mneme.add_message($1, 'user', 'an out-of-order message', $2)`, c.ID, at)
		var pgErr *pgconn.PgError
		switch {
		case errors.As(err, &pgErr) && pgErr.Code == "22008":
			w.led.reject()
		case err == nil:
			w.led.fail("add_message out of time order", errors.New("accepted a message earlier than the previous one"))
		case ctx.Err() == nil:
			w.led.fail("add_message out of time order", err)
		}
	}
}

// context calls mneme.context and returns the memories it recorded: the
// items (mneme.context_items) and the call in one repeatable-read
// snapshot, so both see the same memories. A serialization failure (the
// pending reviews' row changed meanwhile) is retried.
func (w *workload) context(ctx context.Context, app *pgxpool.Pool, conv uuid.UUID, q string) ([]uuid.UUID, error) {
	var ids []uuid.UUID
	var err error
	for range 10 {
		err = pgx.BeginTxFunc(ctx, app, pgx.TxOptions{IsoLevel: pgx.RepeatableRead}, func(tx pgx.Tx) error {
			if err := tx.QueryRow(ctx, `SELECT coalesce(array_agg(memory_id ORDER BY item), '{}') FROM mneme.context_items($1, $2, 200)`,
				conv, q).Scan(&ids); err != nil {
				return err
			}
			_, err := tx.Exec(ctx, `SELECT mneme.context($1, $2, 200)`, conv, q)
			return err
		})
		var pgErr *pgconn.PgError
		if !errors.As(err, &pgErr) || (pgErr.Code != "40001" && pgErr.Code != "40P01") {
			return ids, err
		}
	}
	return ids, err
}

// eraser erases a random memory that holds a marker now and then while
// the writers write (racing segmentation and reviews), and every one left
// at the end (eraseAll).
type eraser struct {
	w         *workload
	mu        sync.Mutex // one erase at a time: the before/after of a conversation's messages is the erase's alone
	attempted map[uuid.UUID]bool
}

// tried lists the memories erase was called on (a failed erase is not
// tried again: the failure is recorded; a memory left is the check's).
func (e *eraser) tried() []uuid.UUID {
	if e.attempted == nil {
		e.attempted = map[uuid.UUID]bool{}
	}
	out := make([]uuid.UUID, 0, len(e.attempted))
	for id := range e.attempted {
		out = append(out, id)
	}
	return out
}

// eraseOne erases one memory holding a marker (a random one, or the first
// by id); false when none is left.
func (e *eraser) eraseOne(ctx context.Context, random bool) (bool, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	order := "id"
	if random {
		order = "random()"
	}
	found, err := e.find(ctx, order, 1)
	if err != nil || len(found) == 0 {
		return false, err
	}
	return true, e.eraseFound(ctx, found[0])
}

// markedMemory is a memory holding a marker, as find reads it.
type markedMemory struct {
	id, conv uuid.UUID
	tenant   string
}

// find reads up to limit memories holding a marker that erase was not
// called on yet, in the given order.
func (e *eraser) find(ctx context.Context, order string, limit int) ([]markedMemory, error) {
	rows, err := e.w.owner.Query(ctx, `SELECT id, conversation_id, tenant_id
		FROM mneme.memories WHERE content ~ $1 AND tenant_id LIKE 'soak\_t%' AND NOT id = ANY ($2)
		ORDER BY `+order+` LIMIT $3`, markerPattern, e.tried(), limit)
	if err != nil {
		return nil, fmt.Errorf("find a memory to erase: %w", err)
	}
	var out []markedMemory
	for rows.Next() {
		var m markedMemory
		if err := rows.Scan(&m.id, &m.conv, &m.tenant); err != nil {
			rows.Close()
			return nil, fmt.Errorf("find a memory to erase: %w", err)
		}
		out = append(out, m)
	}
	return out, rows.Err()
}

// eraseFound erases one memory find returned, recording what the erase
// deleted of its conversation (e.mu held).
func (e *eraser) eraseFound(ctx context.Context, m markedMemory) error {
	w := e.w
	id, conv, tenant := m.id, m.conv, m.tenant
	e.attempted[id] = true
	var t int
	if _, err := fmt.Sscanf(tenant, "soak_t%d", &t); err != nil || t >= len(w.apps) {
		return fmt.Errorf("memory %s of unknown tenant %q", id, tenant)
	}
	// What the erase deletes of the conversation (an episode and its
	// messages, a fact's messages, what is taken along: the facts of those
	// messages, the episode a fact came from): its messages and episodes
	// before and after. Nothing else deletes them in a conversation the soak
	// keeps, and one erase runs at a time.
	state := func() (map[int64]bool, map[uuid.UUID][]int64, error) {
		rows, err := w.owner.Query(ctx, `SELECT id FROM mneme.messages WHERE conversation_id = $1`, conv)
		if err != nil {
			return nil, nil, err
		}
		ids, err := pgx.CollectRows(rows, pgx.RowTo[int64])
		if err != nil {
			return nil, nil, err
		}
		msgs := make(map[int64]bool, len(ids))
		for _, i := range ids {
			msgs[i] = true
		}
		rows, err = w.owner.Query(ctx, `SELECT id, coalesce(source_message_ids, '{}') FROM mneme.memories
			WHERE conversation_id = $1 AND kind = 'episodic'`, conv)
		if err != nil {
			return nil, nil, err
		}
		eps := map[uuid.UUID][]int64{}
		for rows.Next() {
			var id uuid.UUID
			var src []int64
			if err := rows.Scan(&id, &src); err != nil {
				rows.Close()
				return nil, nil, err
			}
			eps[id] = src
		}
		return msgs, eps, rows.Err()
	}
	msgsBefore, epsBefore, err := state()
	if err != nil {
		return fmt.Errorf("the conversation before an erase: %w", err)
	}
	t0 := time.Now()
	err = w.asAdmin(ctx, t, `SELECT mneme.erase($1, 'soak: planted marker')`, id)
	span := [2]time.Time{t0, time.Now()}
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && pgErr.Code == "P0002" {
		return nil // taken along by an erase before (a fact, a merged duplicate)
	}
	if err != nil {
		w.led.fail("erase", err)
		return nil
	}
	w.led.call("erase")
	msgsAfter, epsAfter, err := state()
	if err != nil {
		return fmt.Errorf("the conversation after an erase: %w", err)
	}
	var deleted []int64
	for i := range msgsBefore {
		if !msgsAfter[i] {
			deleted = append(deleted, i)
		}
	}
	var eps []erasedEpisode
	for e, src := range epsBefore {
		if _, ok := epsAfter[e]; !ok {
			eps = append(eps, erasedEpisode{Conversation: conv, MemoryID: e, MessageIDs: src})
		}
	}
	w.led.addErased(eps, id, deleted, span)
	return nil
}

// run erases now and then until ctx ends.
func (e *eraser) run(ctx context.Context, rng *lockedRand) error {
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(time.Duration(float64(e.w.o.ChaosEvery) * (0.3 + rng.Float64()))):
		}
		// (not cancelled midway: an erase that commits unseen would be in
		// no ledger)
		if _, err := e.eraseOne(context.WithoutCancel(ctx), true); err != nil {
			return err
		}
	}
}

// eraseAll erases every memory still holding a marker: it reads them in
// batches by id (one scan of the memories per batch, not per erase) until
// none is left.
func (e *eraser) eraseAll(ctx context.Context) error {
	for range 1000 {
		e.mu.Lock()
		found, err := e.find(ctx, "id", 500)
		e.mu.Unlock()
		if err != nil || len(found) == 0 {
			return err
		}
		for _, m := range found {
			e.mu.Lock()
			err := e.eraseFound(ctx, m)
			e.mu.Unlock()
			if err != nil {
				return err
			}
		}
	}
	return errors.New("erase: memories holding markers keep coming back")
}

// eraseConversation erases a doomed conversation whole, its writer done.
func (w *workload) eraseConversation(ctx context.Context, c *conversation) {
	if err := w.asAdmin(ctx, c.Tenant, `SELECT mneme.erase_conversation($1, 'soak: doomed conversation')`, c.ID); err != nil {
		if ctx.Err() == nil {
			w.led.fail("erase_conversation", err)
		}
		return
	}
	w.led.call("erase_conversation")
	c.mu.Lock()
	c.erased = true
	c.mu.Unlock()
}

// poison is issue 37's bad job, as the sidecar's own login could enqueue
// it: segment payloads whose message id is no bigint, in a conversation
// of their own. Refused with a data exception (class 22) is right; so is a
// job that ends failed with its error (the jobs check); a queue that stops
// for every tenant is not (the jobs check again: every other job waits).
func (w *workload) poison(ctx context.Context, worker *pgxpool.Pool) {
	for i, payload := range []string{`{"check": false, "through_message_id": 1.5}`, `{"check": false, "through_message_id": 1e300}`} {
		conv := uuid.New()
		if _, err := w.apps[i%len(w.apps)].Exec(ctx, `SELECT mneme.add_message($1, 'user', 'a conversation for a bad job')`, conv); err != nil {
			w.led.fail("add_message", err)
			continue
		}
		_, err := worker.Exec(ctx, `SELECT mneme.enqueue_job('segment', $1, $2::jsonb)`, conv, payload)
		var pgErr *pgconn.PgError
		switch {
		case err == nil:
			w.led.call("enqueue_job (bad payload accepted)")
		case errors.As(err, &pgErr) && strings.HasPrefix(pgErr.Code, "22"):
			w.led.reject()
		default:
			w.led.fail("enqueue_job with a bad payload", err)
		}
	}
}

// asAdmin runs a statement as the admin login in tenant t's transaction.
func (w *workload) asAdmin(ctx context.Context, t int, sql string, args ...any) error {
	return pgx.BeginFunc(ctx, w.admin, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `SELECT mneme.set_tenant($1)`, tenantName(t)); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, sql, args...)
		return err
	})
}

// lockedRand is a rand.Rand for several goroutines.
type lockedRand struct {
	mu sync.Mutex
	r  *rand.Rand
}

func (l *lockedRand) Float64() float64 { l.mu.Lock(); defer l.mu.Unlock(); return l.r.Float64() }
func (l *lockedRand) Intn(n int) int   { l.mu.Lock(); defer l.mu.Unlock(); return l.r.Intn(n) }
