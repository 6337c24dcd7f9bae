package transfer

import (
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
)

// The import's pipeline. The reader (Import's goroutine) decodes, checks and
// batches the lines of one conversation after another and hands each
// conversation to the next free worker; a worker writes its conversation in
// its own transaction on its own connection while the reader reads on and
// the other workers write theirs. Memory stays bounded: a conversation's
// worker holds at most itemDepth batches waiting, and the reader waits for
// a free worker before it starts the next conversation.
//
// What keeps every Jobs the same as one conversation after another:
//   - Conversations commit in the file's order (a worker waits for the
//     conversation before its own to be done), and once one fails the ones
//     after it are given up: the conversations before the first bad one are
//     in, it and the ones after are not, and its error is the import's.
//   - A conversation's error is the first of its items: the reader's error
//     goes to the worker behind the batches read before it.
//   - A line that writes or refers to an id a conversation still being
//     written wrote or referred to (a file that repeats an id; a link to a
//     memory of the conversation before) waits, before its batch is
//     written, for the conversations before its own to be done: it then sees
//     what it would see one conversation after another, and no earlier
//     conversation ever waits for a lock a later one holds (the later one
//     waits for its turn to commit: that would be a deadlock PostgreSQL
//     cannot see).

// itemDepth is how many batches a conversation's worker may have waiting.
const itemDepth = 2

// maxTracked is how many ids of a conversation the reader keeps for the
// check above; a conversation with more is taken to touch every id.
const maxTracked = 200_000

// item is one step of a conversation, sent by the reader to its worker.
type item struct {
	begin  []byte    // the conversation line (the first item)
	conv   uuid.UUID // its id (with begin)
	was    uuid.UUID // its id in the file, before remapping (with begin)
	erased bool      // the file has it erased (with begin)
	// reviewsWas is its pending reviews with the file's memory ids (with begin)
	reviewsWas json.RawMessage
	kind       string // a batch of rows of this kind
	rows       []any  // *messageLine, *memoryLine, *reviewLine or *eventLine
	first      int    // the batch's first line (its rows are contiguous)
	last       int
	barrier    bool  // wait for the conversations before to be done first
	dry        bool  // check the rows only: the reader stopped in this batch
	err        error // the reader's error: give the conversation up with it
	end        bool  // the conversation is complete: commit it in its turn
}

// task is one conversation handed to a worker.
type task struct {
	seq   int
	items chan item
	prev  *task
	done  chan struct{} // closed when it is committed, skipped or given up
	// failed is set before done is closed: this conversation, or one
	// before it, failed.
	failed bool
	// ids the conversation writes or refers to (the reader's).
	ids       map[uuid.UUID]struct{}
	untracked bool
}

// turns is what the worker whose turn it is to commit updates.
type turns struct {
	pending                          []link // lineage links whose target is not in yet
	conversations, skipped, embedded int64
	erasedConversations, erasedRows  int64 // left out: the tenant erased them (tombstones)
	err                              error // the first failed conversation's
}

type pipeline struct {
	im     *importer
	tasks  chan *task
	wg     sync.WaitGroup
	extra  []*pgx.Conn // the workers' connections beside the caller's
	last   *task
	flight []*task // dispatched, not seen done (the reader's)
	seq    int
	// failedSeq is the seq of a failed conversation (0: none): the reader
	// stops and later conversations are given up early.
	failedSeq atomic.Int64
	turns     turns
}

// startWorkers connects the workers: the caller's connection and Jobs-1
// more with its configuration.
func (im *importer) startWorkers() (*pipeline, error) {
	p := &pipeline{im: im, tasks: make(chan *task)}
	conns := []*pgx.Conn{im.conn}
	for range im.o.Jobs - 1 {
		c, err := pgx.ConnectConfig(im.ctx, im.conn.Config().Copy())
		if err != nil {
			for _, c := range p.extra {
				_ = c.Close(im.ctx)
			}
			return nil, fmt.Errorf("import with %d jobs: connect: %w", im.o.Jobs, err)
		}
		p.extra = append(p.extra, c)
		conns = append(conns, c)
	}
	for _, c := range conns {
		p.wg.Add(1)
		go p.work(c)
	}
	return p, nil
}

// dispatch hands a new conversation to the next free worker.
func (p *pipeline) dispatch() *task {
	p.seq++
	t := &task{seq: p.seq, items: make(chan item, itemDepth), prev: p.last, done: make(chan struct{}),
		ids: map[uuid.UUID]struct{}{}}
	p.last = t
	p.pruneDone()
	p.flight = append(p.flight, t)
	p.tasks <- t
	return t
}

// pruneDone drops the conversations that are done from the ones in flight.
func (p *pipeline) pruneDone() {
	live := p.flight[:0]
	for _, f := range p.flight {
		select {
		case <-f.done:
		default:
			live = append(live, f)
		}
	}
	p.flight = live
}

// touches records that t writes or refers to ids, and says whether a
// conversation before t that may not be done yet touched one of them too.
func (p *pipeline) touches(t *task, ids ...uuid.UUID) bool {
	hit := false
	for _, id := range ids {
		for _, f := range p.flight {
			if f == t || hit {
				continue
			}
			if f.untracked {
				hit = true
			} else if _, ok := f.ids[id]; ok {
				hit = true
			}
		}
		if !t.untracked {
			t.ids[id] = struct{}{}
			if len(t.ids) > maxTracked {
				t.untracked, t.ids = true, nil
			}
		}
	}
	if hit {
		// Whether they are done yet or not, t waits for them: forget
		// them (the ones done since) for the next lines.
		p.pruneDone()
	}
	return hit
}

// send gives the conversation's worker its next item; the last one (its
// end or an error) closes the conversation's items.
func (p *pipeline) send(cv *conv, it item) {
	cv.task.items <- it
	if it.end || it.err != nil {
		close(cv.task.items)
	}
}

// stopped says whether a conversation failed: the reader stops reading.
func (p *pipeline) stopped() bool { return p.failedSeq.Load() != 0 }

// wait lets the workers finish (cur: the conversation the reader stopped
// in, given up) and returns the first failed conversation's error.
func (p *pipeline) wait(cur *conv) error {
	if cur != nil {
		close(cur.task.items)
	}
	close(p.tasks)
	p.wg.Wait()
	for _, c := range p.extra {
		_ = c.Close(p.im.ctx)
	}
	return p.turns.err
}

func (p *pipeline) work(conn *pgx.Conn) {
	defer p.wg.Done()
	w := &worker{p: p, im: p.im, conn: conn}
	if p.im.hash != nil {
		h := *p.im.hash
		w.hash = &h
	}
	for t := range p.tasks {
		w.do(t)
	}
}

// errGivenUp: the reader stopped within a conversation without an error of
// its own (one before it failed).
var errGivenUp = errors.New("import stopped")

// do writes a conversation, then waits for its turn and commits it.
func (w *worker) do(t *task) {
	ended, err := w.write(t)
	if err != nil || !ended {
		w.rollback()
		for range t.items { //nolint:revive // drained, so the reader never blocks
		}
		if err != nil {
			w.p.fail(t)
		}
	}
	if t.prev != nil {
		<-t.prev.done
	}
	switch {
	case t.prev != nil && t.prev.failed:
		w.rollback()
		t.failed = true
	case err != nil || !ended:
		if err == nil {
			err = errGivenUp
		}
		t.failed = true
		w.p.turns.err = err
	default:
		if err := w.commit(); err != nil {
			w.rollback()
			t.failed = true
			w.p.turns.err = err
			w.p.fail(t)
		}
	}
	w.cv = nil
	close(t.done)
}

// fail records that t failed: the reader stops, later conversations stop.
func (p *pipeline) fail(t *task) {
	for {
		old := p.failedSeq.Load()
		if (old != 0 && old <= int64(t.seq)) || p.failedSeq.CompareAndSwap(old, int64(t.seq)) {
			return
		}
	}
}

// write runs a conversation's items: ended is false when they stopped
// before its end (the reader stopped, or a conversation before failed).
func (w *worker) write(t *task) (ended bool, err error) {
	for it := range t.items {
		if f := w.p.failedSeq.Load(); f != 0 && f < int64(t.seq) {
			return false, nil
		}
		if it.barrier && t.prev != nil {
			<-t.prev.done
			if t.prev.failed {
				return false, nil
			}
		}
		switch {
		case it.err != nil:
			return false, it.err
		case it.end:
			return true, nil
		case it.begin != nil:
			err = w.begin(it)
		default:
			err = w.flush(it)
		}
		if err != nil {
			return false, err
		}
	}
	return false, nil
}

func (w *worker) rollback() {
	if w.cv != nil && w.cv.tx != nil {
		_ = w.cv.tx.Rollback(w.im.ctx)
		w.cv.tx = nil
	}
}
