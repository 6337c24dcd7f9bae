package recall

import (
	"context"
	"fmt"
	"sort"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/mneme-memory/mneme/sidecar/progress"
)

// Jobs runs mneme's pending jobs (segmentation and what it enqueues) until
// none is ready: the sidecar's job runner, in process. Ingest calls it
// after every message, as a sidecar that keeps up with the conversation
// would run each segment job before the next message arrives.
type Jobs interface {
	Drain(ctx context.Context) error
}

// namespace makes conversation ids deterministic: the same conversation
// gets the same uuid in every run.
var namespace = uuid.MustParse("6d6e656d-652d-4c6f-436f-4d6f2d657661")

// ConversationUUID is the mneme conversation id of a benchmark's
// conversation (Conversation.ID).
func ConversationUUID(id, variant string) uuid.UUID {
	return uuid.NewSHA1(namespace, []byte(variant+"/"+id))
}

// Ingested is what ingest learned about one conversation.
type Ingested struct {
	ConvID    uuid.UUID
	TurnByMsg map[int64]string  // message id -> turn id
	Text      map[string]string // turn id -> text
	Duration  time.Duration     // add_message for every turn plus segmentation
	// Last is the time of the conversation's last turn: when a live agent
	// would be asked the questions, and so the time mneme.search evaluates
	// retrievability at (its `at`), which keeps the numbers independent of
	// the wall clock.
	Last time.Time
	// Clamped counts turns whose session date was before the previous
	// turn's time; they were moved to just after it (add_message appends in
	// time order).
	Clamped int
}

// ingest feeds every turn of c through mneme.add_message, running the
// pending jobs after each, then flushes the last messages into a segment.
func ingest(ctx context.Context, pool *pgxpool.Pool, jobs Jobs, c *Conversation, bar *progress.Bar, agentK int) (*Ingested, error) {
	in := &Ingested{
		ConvID:    ConversationUUID(c.ID, "mneme"),
		TurnByMsg: map[int64]string{},
		Text:      map[string]string{},
	}
	start := time.Now()
	if _, err := pool.Exec(ctx, `SELECT mneme.set_speakers($1, $2)`, in.ConvID, speakers(c)); err != nil {
		return nil, fmt.Errorf("conversation %s: set speakers: %w", c.ID, err)
	}
	var last time.Time
	spacing := c.Spacing
	for _, s := range c.Sessions {
		for i, t := range s.Turns {
			at := s.At.Add(time.Duration(i) * spacing)
			if !last.IsZero() && !at.After(last) {
				at = last.Add(spacing)
				in.Clamped++
			}
			last = at
			var id int64
			if err := pool.QueryRow(ctx, `SELECT mneme.add_message($1, $2, $3, $4)`,
				in.ConvID, t.Speaker, t.Text, at).Scan(&id); err != nil {
				return nil, fmt.Errorf("conversation %s: add turn %s: %w", c.ID, t.ID, err)
			}
			in.TurnByMsg[id] = t.ID
			if agentK > 0 {
				// A live agent retrieves with each message it receives;
				// mneme.retrieve records the pending review that the
				// next segmentation rates (offline: by overlap with the
				// conversation that followed).
				if _, err := pool.Exec(ctx, `SELECT count(*) FROM mneme.retrieve($1, $2, $3, at => $4)`,
					in.ConvID, t.Text, agentK, at); err != nil {
					return nil, fmt.Errorf("conversation %s: retrieve for %s: %w", c.ID, t.ID, err)
				}
			}
			in.Text[t.ID] = t.Text
			if err := jobs.Drain(ctx); err != nil {
				return nil, fmt.Errorf("conversation %s: run jobs after %s: %w", c.ID, t.ID, err)
			}
			bar.Add(1)
		}
	}
	// The conversation is over: a live sidecar would cut the last episode
	// when the next message came after the gap. Force that cut now, so the
	// last turns are memories too.
	if _, err := pool.Exec(ctx, `SELECT mneme.segment_now($1)`, in.ConvID); err != nil {
		return nil, fmt.Errorf("conversation %s: flush: %w", c.ID, err)
	}
	if err := jobs.Drain(ctx); err != nil {
		return nil, fmt.Errorf("conversation %s: run jobs after flush: %w", c.ID, err)
	}
	var queued int
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM mneme.messages WHERE conversation_id = $1 AND consumed_at IS NULL`,
		in.ConvID).Scan(&queued); err != nil {
		return nil, fmt.Errorf("conversation %s: count queued: %w", c.ID, err)
	}
	var failed int
	var lastErr *string
	if err := pool.QueryRow(ctx, `SELECT count(*), max(last_error) FROM mneme.jobs WHERE conversation_id = $1 AND last_error IS NOT NULL`,
		in.ConvID).Scan(&failed, &lastErr); err != nil {
		return nil, fmt.Errorf("conversation %s: check jobs: %w", c.ID, err)
	}
	if failed > 0 {
		return nil, fmt.Errorf("conversation %s: %d jobs failed, e.g.: %s", c.ID, failed, *lastErr)
	}
	if queued > 0 {
		return nil, fmt.Errorf("conversation %s: %d messages still queued after the final segmentation", c.ID, queued)
	}
	in.Last = last
	in.Duration = time.Since(start)
	return in, nil
}

func speakers(c *Conversation) []string {
	seen := map[string]bool{}
	var out []string
	for _, s := range c.Sessions {
		for _, t := range s.Turns {
			if !seen[t.Speaker] {
				seen[t.Speaker] = true
				out = append(out, t.Speaker)
			}
		}
	}
	sort.Strings(out)
	return out
}
