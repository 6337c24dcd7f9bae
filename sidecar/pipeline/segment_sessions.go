package pipeline

import (
	"context"
	"fmt"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/mneme-memory/mneme/sidecar/jobs"
)

// A segment job's decisions are a function of the queued messages, not of
// when the job ran: it reads the queue split into sessions
// (mneme.queued_sessions: a new session at every gap longer than
// segment_gap_seconds, after a segment_now mark, at a hole), and no episode
// crosses a session's start. A closed session (another follows it,
// segment_now ended it, or a message that is not queued follows it) is
// stored whole; the open one, the last, may still
// grow: the offline segmenter stores of it only the episodes no later
// message can change (cutEpisodes), so a check now, a check later and a
// drain of everything at once store the same episodes.

// session is a run of queued messages no episode crosses the start of.
type session struct {
	Messages []message
	Closed   bool
}

// queueRead is the queue as one attempt of a segment job read it.
type queueRead struct {
	Sessions  []session
	All       []message // every message read, in order
	Truncated bool      // the read stopped at its limit: more are queued
}

// readLimit is how many queued messages a segment job reads at once: a
// backlog longer than that is segmented by follow-up jobs
// (mneme._segment_followup), the last session read counting as open.
func readLimit(s settings) int { return max(500, 4*s.MaxMessages) }

// readSessions reads the conversation's queue as sessions.
func readSessions(ctx context.Context, db jobs.Querier, conv uuid.UUID, limit int) (queueRead, error) {
	var out queueRead
	rows, err := db.Query(ctx, `SELECT id, role, content, created_at, session, closed FROM mneme.queued_sessions($1, $2)`, conv, limit)
	if err != nil {
		return out, fmt.Errorf("read queued sessions: %w", err)
	}
	type row struct {
		m       message
		session int
		closed  bool
	}
	got, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (row, error) {
		var x row
		err := r.Scan(&x.m.ID, &x.m.Role, &x.m.Content, &x.m.At, &x.session, &x.closed)
		x.m.At = x.m.At.UTC()
		return x, err
	})
	if err != nil {
		return out, fmt.Errorf("read queued sessions: %w", err)
	}
	out.Truncated = len(got) >= limit
	last := -1
	for _, x := range got {
		out.All = append(out.All, x.m)
		if x.session != last {
			out.Sessions = append(out.Sessions, session{Closed: x.closed})
			last = x.session
		}
		s := &out.Sessions[len(out.Sessions)-1]
		s.Messages = append(s.Messages, x.m)
	}
	// (A truncated read's last session is closed only if segment_now
	// ended it at the last message read: SQL computes closed within the
	// read.)
	return out, nil
}

// segmentSessions asks the segmenter about each session in order: a
// closed session is stored whole (Forced), the open one is checked. An
// open session shorter than segment_min_messages waits (nothing it could
// store yet is owed). The LLM segmenter makes one episode a call, so it
// gets a session in pieces of at most segment_max_messages; the offline
// segmenter gets it whole and cuts it itself. An open session of
// segment_max_messages or more of which the offline segmenter stores
// nothing is stored whole: the one case where an episode depends on when
// the job ran (docs/pipelines.md), which the default settings never reach.
func (p *Pipelines) segmentSessions(ctx context.Context, conv uuid.UUID, read queueRead, prior []priorMemory,
	set settings, labels []labelMeaning) ([]episode, error) {
	var eps []episode
	_, llm := p.segmenter.(llmSegmenter)
	type part struct {
		msgs   []message
		forced bool
	}
	for _, s := range read.Sessions {
		msgs := s.Messages
		if !s.Closed && len(msgs) < set.MinMessages {
			continue
		}
		var parts []part
		if llm {
			// Pieces of at most segment_max_messages: all of a closed
			// session's forced; of an open one, the full pieces forced and
			// the rest checked.
			for len(msgs) > 0 && (s.Closed || len(msgs) >= set.MaxMessages) {
				n := min(len(msgs), set.MaxMessages)
				parts = append(parts, part{msgs[:n], true})
				msgs = msgs[n:]
			}
			if len(msgs) >= set.MinMessages {
				parts = append(parts, part{msgs, false})
			}
		} else {
			parts = []part{{msgs, s.Closed}}
		}
		for _, pt := range parts {
			in := segmentInput{Conversation: conv, Messages: pt.msgs, Forced: pt.forced, Prior: withEpisodes(prior, eps),
				Settings: set, Labels: labels}
			got, err := p.segmenter.Segment(ctx, in)
			if err != nil {
				return nil, err
			}
			if len(got) == 0 && !in.Forced && len(pt.msgs) >= set.MaxMessages {
				in.Forced = true
				if got, err = p.segmenter.Segment(ctx, in); err != nil {
					return nil, err
				}
			}
			eps = append(eps, got...)
		}
	}
	return eps, nil
}

// withEpisodes is prior with the episodes a job decided before, newest
// first, as the segmenters compare a new episode with recent memories.
func withEpisodes(prior []priorMemory, eps []episode) []priorMemory {
	if len(eps) == 0 {
		return prior
	}
	out := make([]priorMemory, 0, len(prior)+len(eps))
	for i := len(eps) - 1; i >= 0; i-- {
		out = append(out, priorMemory{Summary: eps[i].Summary, Content: episodeContent(eps[i].Messages)})
	}
	return append(out, prior...)
}
