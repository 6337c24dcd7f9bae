package soak

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/google/uuid"
)

// Invariant is one check of the soak, pass or fail, with its counts.
type Invariant struct {
	Name     string   `json:"name"`
	Pass     bool     `json:"pass"`
	Checked  int      `json:"checked"`
	Failed   int      `json:"failed"`
	Detail   string   `json:"detail"`
	Examples []string `json:"examples,omitempty"`
}

func (iv *Invariant) fail(format string, args ...any) {
	iv.Failed++
	if len(iv.Examples) < 5 {
		iv.Examples = append(iv.Examples, fmt.Sprintf(format, args...))
	}
}

// liveEpisodes are the kept conversations' episodes: those in the
// database and those the soak erased (as they were).
func liveEpisodes(s *snapshot, led *ledger) map[uuid.UUID][][]int64 {
	out := map[uuid.UUID][][]int64{}
	for _, e := range s.episodes {
		out[e.Conversation] = append(out[e.Conversation], e.MessageIDs)
	}
	for _, e := range led.erasedEpisodes {
		out[e.Conversation] = append(out[e.Conversation], e.MessageIDs)
	}
	return out
}

// checkMessages: every message add_message accepted is in exactly one
// episode or still queued; none lost (gone without an erase), none
// duplicated (two episodes, or a row nobody sent).
func checkMessages(s *snapshot, led *ledger, kept []*conversation) Invariant {
	iv := Invariant{Name: "every message in exactly one episode or still queued"}
	eps := liveEpisodes(s, led)
	var queued, inEpisode, erased int
	for _, c := range kept {
		in := map[int64]int{}
		for _, ids := range eps[c.ID] {
			for _, id := range ids {
				in[id]++
				if _, ok := c.messages[id]; !ok {
					iv.fail("conversation %s: an episode holds message %d, which the soak never sent", c.ID, id)
				}
			}
		}
		for _, m := range c.msgs {
			iv.Checked++
			row, exists := s.messages[m.ID]
			n := in[m.ID]
			switch {
			case n > 1:
				iv.fail("message %d (conversation %s, #%d) is in %d episodes", m.ID, c.ID, m.Index, n)
			case exists && !row.Consumed && n == 0:
				queued++
			case exists && !row.Consumed:
				iv.fail("message %d (conversation %s, #%d) is queued and in an episode", m.ID, c.ID, m.Index)
			case exists && n == 1:
				inEpisode++
			case exists:
				iv.fail("message %d (conversation %s, #%d) was consumed without an episode (lost)", m.ID, c.ID, m.Index)
			case led.erasedMessages[m.ID] && n == 1:
				erased++
			default:
				iv.fail("message %d (conversation %s, #%d) is gone without an erase (lost)", m.ID, c.ID, m.Index)
			}
		}
		for id, row := range s.messages {
			if row.Conversation == c.ID {
				if _, ok := c.messages[id]; !ok {
					iv.fail("conversation %s holds message %d, which the soak never sent (duplicated?)", c.ID, id)
				}
			}
		}
	}
	iv.Pass = iv.Failed == 0
	iv.Detail = fmt.Sprintf("%d messages of %d conversations: %d in an episode, %d erased with theirs, %d still queued",
		iv.Checked, len(kept), inEpisode, erased, queued)
	return iv
}

// positions maps a conversation's episodes to spans of its messages'
// positions; ok is false when a message time is unknown.
func positions(c *conversation, eps [][]int64) ([]span, bool) {
	index := map[int64]int{}
	for _, m := range c.msgs {
		if !m.Known {
			return nil, false
		}
		index[m.ID] = m.Index
	}
	out := make([]span, 0, len(eps))
	for _, ids := range eps {
		out = append(out, spanOf(ids, index))
	}
	slices.SortFunc(out, func(a, b span) int { return a.First - b.First })
	return out, true
}

// crossings counts the spans with two consecutive messages further apart
// than gap.
func crossings(c *conversation, spans []span, gap time.Duration) (n int, example string) {
	for _, sp := range spans {
		if sp.First > sp.Last {
			continue // not contiguous: the message check reports it
		}
		for i := sp.First + 1; i <= sp.Last; i++ {
			if d := c.msgs[i].At.Sub(c.msgs[i-1].At); d > gap {
				n++
				if example == "" {
					example = fmt.Sprintf("conversation %s: the episode of messages #%d to #%d holds #%d and #%d, %s apart",
						c.ID, sp.First, sp.Last, i-1, i, d)
				}
				break
			}
		}
	}
	return n, example
}

// checkGaps: no episode holds two consecutive messages further apart than
// segment_gap_seconds, live or in the offline reference.
func checkGaps(live, ref map[uuid.UUID][]span, kept []*conversation, gap time.Duration) Invariant {
	iv := Invariant{Name: "no episode crosses a gap"}
	var liveN, refN, liveBad, refBad int
	for _, c := range kept {
		if sp, ok := live[c.ID]; ok {
			n, ex := crossings(c, sp, gap)
			liveN, liveBad = liveN+len(sp), liveBad+n
			if n > 0 {
				iv.fail("live: %s", ex)
			}
		}
		if sp, ok := ref[c.ID]; ok {
			n, ex := crossings(c, sp, gap)
			refN, refBad = refN+len(sp), refBad+n
			if n > 0 {
				iv.fail("reference drain: %s", ex)
			}
		}
	}
	iv.Checked = liveN + refN
	iv.Failed = liveBad + refBad
	iv.Pass = iv.Failed == 0
	iv.Detail = fmt.Sprintf("gap %s: live %d of %d episodes cross a gap; the offline reference (drained) %d of %d",
		gap, liveBad, liveN, refBad, refN)
	return iv
}

// checkReference: the live episodes equal the offline reference's, per
// conversation (the same boundaries); the agreement is measured too.
func checkReference(live, ref map[uuid.UUID][]span, kept []*conversation) Invariant {
	iv := Invariant{Name: "live episodes equal a drain of the same messages"}
	var equal, liveN, refN, both int
	for _, c := range kept {
		l, r := live[c.ID], ref[c.ID]
		iv.Checked++
		liveN, refN = liveN+len(l), refN+len(r)
		set := map[span]bool{}
		for _, s := range r {
			set[s] = true
		}
		for _, s := range l {
			if set[s] {
				both++
			}
		}
		if slices.Equal(l, r) {
			equal++
			continue
		}
		iv.fail("conversation %s: live %s, drained %s", c.ID, spansString(l), spansString(r))
	}
	iv.Failed = iv.Checked - equal
	iv.Pass = iv.Failed == 0
	agree := 1.0
	if m := max(liveN, refN); m > 0 {
		agree = float64(both) / float64(m)
	}
	iv.Detail = fmt.Sprintf("%d of %d conversations equal; episodes live %d, drained %d, the same in both %d (agreement %.3f)",
		equal, iv.Checked, liveN, refN, both, agree)
	return iv
}

// spansString prints spans short: "0-5 6-11 ...", at most 12.
func spansString(sp []span) string {
	var b strings.Builder
	for i, s := range sp {
		if i == 12 {
			fmt.Fprintf(&b, " ... (%d)", len(sp))
			break
		}
		if i > 0 {
			b.WriteByte(' ')
		}
		if s.First > s.Last {
			b.WriteString("(not contiguous)")
			continue
		}
		fmt.Fprintf(&b, "%d-%d", s.First, s.Last)
	}
	if len(sp) == 0 {
		return "none"
	}
	return b.String()
}
