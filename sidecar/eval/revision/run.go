// Package revision owns `mneme eval revision`: a suite of scripted
// conversations in which facts change (moves, job changes, preferences
// changed several times, retractions, duplicates, out-of-order writes,
// named people, similar but unrelated facts), each write labelled with the
// revision it should cause. The suite is written through mneme.remember
// into a scratch database, every revise job drained after each write, and
// the report compares what was applied with the labels (per action
// precision and recall, the confusion matrix) and asks mneme.search for
// each current value (returned first, or a stale one first). It runs with
// the offline classifier (TestScriptedModel runs it through the LLM path
// against a fake OpenAI-compatible server that also sends malformed answers).
package revision

import (
	"context"
	"errors"
	"fmt"
	"io"
	"regexp"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/mneme-memory/mneme/sidecar/eval/recall"
	jobkinds "github.com/mneme-memory/mneme/sidecar/jobs"
	"github.com/mneme-memory/mneme/sidecar/revision"
)

// Start is when the suite's day 0 is: fixed and in the past, so the run
// never depends on the wall clock (remember refuses times in the future).
var Start = time.Date(2024, 1, 1, 9, 0, 0, 0, time.UTC)

// K is how many results each question asks mneme.search for.
const K = 5

// namespace makes conversation ids deterministic.
var namespace = uuid.MustParse("6d6e656d-652d-7265-7669-73696f6e7375")

// Actions in report order; None is a write no revision was recorded for.
var Actions = []string{revision.ActionAdd, revision.ActionNoop, revision.ActionSupersede, revision.ActionInvalidate}

// None: no revised event (the job failed or did not run).
const None = "none"

// applied is what the revise job did to one write.
type applied struct {
	id     uuid.UUID
	status string
	action string
	target uuid.UUID
	reason string
}

// observer is told which write is being revised (the scripted model).
type observer interface {
	revising(c *Conversation, i int)
}

// Run writes the suite into pool (a migrated mneme database), draining
// jobs (the pipelines' runner) after each write, and scores what was
// applied. obs may be nil.
func Run(ctx context.Context, pool *pgxpool.Pool, jobs recall.Jobs, suite []Conversation, obs observer, progress io.Writer) (*Report, error) {
	if err := Check(suite); err != nil {
		return nil, err
	}
	rep := newReport()
	for ci := range suite {
		c := &suite[ci]
		res, err := runConversation(ctx, pool, jobs, c, obs)
		if err != nil {
			return nil, fmt.Errorf("conversation %q: %w", c.Name, err)
		}
		rep.add(c, res)
		if progress != nil {
			// One line each: the pipelines' warnings interleave with it.
			fmt.Fprintf(progress, "revision suite: %d/%d conversations (%s)\n", ci+1, len(suite), c.Name)
		}
	}
	if err := pool.QueryRow(ctx, `SELECT count(*) FILTER (WHERE state = 'failed'), count(*) FILTER (WHERE state <> 'done' AND state <> 'failed')
		FROM mneme.jobs WHERE kind = $1`, jobkinds.KindRevise).Scan(&rep.FailedJobs, &rep.PendingJobs); err != nil {
		return nil, fmt.Errorf("count revise jobs: %w", err)
	}
	rep.finish()
	return rep, nil
}

// convResult is one conversation's outcome: per write what was applied,
// per question the keys of the memories returned (best first).
type convResult struct {
	applied  []applied
	keyOf    map[uuid.UUID]string
	answered [][]string
}

func runConversation(ctx context.Context, pool *pgxpool.Pool, jobs recall.Jobs, c *Conversation, obs observer) (convResult, error) {
	conv := uuid.NewSHA1(namespace, []byte(c.Name))
	res := convResult{keyOf: map[uuid.UUID]string{}}
	ids := make([]uuid.UUID, len(c.Writes))
	last := Start
	for i, w := range c.Writes {
		at := w.at(i)
		if at.After(last) {
			last = at
		}
		if obs != nil {
			obs.revising(c, i)
		}
		if err := pool.QueryRow(ctx, `SELECT mneme.remember($1, $2, at => $3)`, conv, w.Text, at).Scan(&ids[i]); err != nil {
			return res, fmt.Errorf("remember %s: %w", w.Key, err)
		}
		res.keyOf[ids[i]] = w.Key
		if err := jobs.Drain(ctx); err != nil {
			return res, fmt.Errorf("drain after %s: %w", w.Key, err)
		}
	}
	for i, id := range ids {
		a := applied{id: id, action: None}
		// Two reads, each naming the conversation (on Citus a join of the
		// two tables by memory alone is refused).
		var reason *string
		var conv uuid.UUID
		err := pool.QueryRow(ctx, `SELECT conversation_id, status FROM mneme.memories WHERE id = $1`, id).Scan(&conv, &a.status)
		if err == nil {
			err = pool.QueryRow(ctx, `SELECT reason FROM mneme.memory_events
				WHERE conversation_id = $1 AND memory_id = $2 AND event = 'revised' ORDER BY id DESC LIMIT 1`, conv, id).Scan(&reason)
			if errors.Is(err, pgx.ErrNoRows) {
				err = nil
			}
		}
		if err != nil {
			return res, fmt.Errorf("read %s: %w", c.Writes[i].Key, err)
		}
		if reason != nil {
			a.reason = *reason
			a.action, a.target = parseRevised(*reason)
		}
		res.applied = append(res.applied, a)
	}
	// Asked the day after the last write: retrievability is evaluated then,
	// not at the wall clock.
	for _, qu := range c.Questions {
		rows, err := pool.Query(ctx, `SELECT memory_id FROM mneme.search($1, $2, $3, at => $4)`, conv, qu.Query, K, last.Add(24*time.Hour))
		if err != nil {
			return res, fmt.Errorf("search %q: %w", qu.Query, err)
		}
		got, err := pgx.CollectRows(rows, pgx.RowTo[uuid.UUID])
		if err != nil {
			return res, fmt.Errorf("search %q: %w", qu.Query, err)
		}
		keys := make([]string, len(got))
		for i, id := range got {
			keys[i] = res.keyOf[id]
		}
		res.answered = append(res.answered, keys)
	}
	return res, nil
}

// at is when write i was stated: its day, plus i minutes so two writes of
// one day keep their order.
func (w Write) at(i int) time.Time {
	return Start.Add(time.Duration(w.Day*24*float64(time.Hour)) + time.Duration(i)*time.Minute)
}

var (
	revisedActionRE = regexp.MustCompile(`^(ADD|NOOP|SUPERSEDE|INVALIDATE)\b`)
	revisedTargetRE = regexp.MustCompile(`\[target ([0-9a-f-]{36})\]$`)
)

// parseRevised reads the action and target of a 'revised' event's reason
// (mneme.apply_revision: "<ACTION> by <classifier>: <reason> [target <id>]").
// The event is the record that survives every case: an out-of-order write
// stored as superseded may leave no link on its target's row.
func parseRevised(reason string) (string, uuid.UUID) {
	action := None
	if m := revisedActionRE.FindStringSubmatch(reason); m != nil {
		action = m[1]
	}
	var target uuid.UUID
	if m := revisedTargetRE.FindStringSubmatch(reason); m != nil {
		target, _ = uuid.Parse(m[1])
	}
	return action, target
}

// ErrSuite wraps every inconsistency of a suite's labels.
var ErrSuite = errors.New("revision suite")

// Check validates a suite: unique keys, known actions, targets that are
// earlier writes of the same conversation, questions about known writes.
func Check(suite []Conversation) error {
	names := map[string]bool{}
	for _, c := range suite {
		if names[c.Name] {
			return fmt.Errorf("%w: conversation %q twice", ErrSuite, c.Name)
		}
		names[c.Name] = true
		seen := map[string]bool{}
		for _, w := range c.Writes {
			if w.Key == "" || seen[w.Key] {
				return fmt.Errorf("%w: %s: write key %q empty or repeated", ErrSuite, c.Name, w.Key)
			}
			switch w.Expect {
			case revision.ActionAdd:
				if w.Target != "" {
					return fmt.Errorf("%w: %s/%s: ADD has no target", ErrSuite, c.Name, w.Key)
				}
			case revision.ActionNoop, revision.ActionSupersede, revision.ActionInvalidate:
				if !seen[w.Target] {
					return fmt.Errorf("%w: %s/%s: target %q is not an earlier write", ErrSuite, c.Name, w.Key, w.Target)
				}
			default:
				return fmt.Errorf("%w: %s/%s: unknown action %q", ErrSuite, c.Name, w.Key, w.Expect)
			}
			seen[w.Key] = true
		}
		for _, qu := range c.Questions {
			if !seen[qu.Current] {
				return fmt.Errorf("%w: %s: question %q names no write %q", ErrSuite, c.Name, qu.Query, qu.Current)
			}
		}
	}
	return nil
}

// labels are a conversation's labels, resolved: what each write stands for
// (a NOOP for what it confirmed), the status each should end in, and the
// stale values of each question.
type labels struct {
	c     *Conversation
	index map[string]int
}

func newLabels(c *Conversation) labels {
	l := labels{c: c, index: map[string]int{}}
	for i, w := range c.Writes {
		l.index[w.Key] = i
	}
	return l
}

// canon is the write a key stands for: a NOOP's target, recursively.
func (l labels) canon(key string) string {
	for i := 0; i < len(l.c.Writes); i++ {
		j, ok := l.index[key]
		if !ok || l.c.Writes[j].Expect != revision.ActionNoop {
			return key
		}
		key = l.c.Writes[j].Target
	}
	return key
}

// wantStatus is the status each write should end in by the labels:
// mneme.apply_revision's rules (an older write never replaces a newer
// one) applied to the labelled actions.
func (l labels) wantStatus() []string {
	st := make([]string, len(l.c.Writes))
	for i, w := range l.c.Writes {
		st[i] = "active"
		if w.Expect == revision.ActionAdd {
			continue
		}
		t := l.index[l.canon(w.Target)]
		older := w.at(i).Before(l.c.Writes[t].at(t))
		switch {
		case w.Expect == revision.ActionNoop:
			st[i] = "merged"
		case older:
			st[i] = "superseded"
		case w.Expect == revision.ActionSupersede:
			st[t] = "superseded"
		default:
			st[t] = "invalidated"
		}
	}
	return st
}

// stale are the writes a question must not get first: the earlier and
// later values linked to its current one by the labels (the same belief's
// lineage), less those that stand for the current one.
func (l labels) stale(current string) map[string]bool {
	adj := map[string][]string{}
	for _, w := range l.c.Writes {
		if w.Target != "" {
			adj[w.Key] = append(adj[w.Key], w.Target)
			adj[w.Target] = append(adj[w.Target], w.Key)
		}
	}
	seen := map[string]bool{current: true}
	todo := []string{current}
	for len(todo) > 0 {
		k := todo[0]
		todo = todo[1:]
		for _, n := range adj[k] {
			if !seen[n] {
				seen[n] = true
				todo = append(todo, n)
			}
		}
	}
	out := map[string]bool{}
	cur := l.canon(current)
	for k := range seen {
		if l.canon(k) != cur {
			out[k] = true
		}
	}
	return out
}
