package soak

import (
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/mneme-memory/mneme/sidecar/clip"
)

// checkJobs: after the settle, every job is done, or failed with its
// error; none running, none due and waiting (the schedule's cleanup job
// waits for its time, as it should).
func checkJobs(s *snapshot) Invariant {
	iv := Invariant{Name: "every job done or failed with an error"}
	states := map[string]int{}
	failedBy := map[string]int{}
	var firstFailed string
	for _, j := range s.jobs {
		iv.Checked++
		states[j.State]++
		switch j.State {
		case "done":
		case "failed":
			if j.LastError == nil || strings.TrimSpace(*j.LastError) == "" {
				iv.fail("job %d (%s) failed without an error", j.ID, j.Kind)
				continue
			}
			failedBy[j.Kind]++
			if firstFailed == "" {
				firstFailed = fmt.Sprintf("job %d (%s): %s", j.ID, j.Kind, clip.String(*j.LastError, 200))
			}
		case "running":
			if j.LockedUntil != nil && j.LockedUntil.Before(s.now) {
				iv.fail("job %d (%s) is running past its lease (%s ago), attempt %d", j.ID, j.Kind, s.now.Sub(*j.LockedUntil).Round(1e6), j.Attempts)
			} else {
				iv.fail("job %d (%s) is still running after the settle, attempt %d", j.ID, j.Kind, j.Attempts)
			}
		case "pending":
			if j.Kind == "cleanup" && j.RunAt.After(s.now) {
				continue
			}
			e := ""
			if j.LastError != nil {
				e = "; last error: " + clip.String(*j.LastError, 200)
			}
			if j.RunAt.After(s.now) {
				iv.fail("job %d (%s) waits for a retry in %s after %d attempts%s", j.ID, j.Kind, j.RunAt.Sub(s.now).Round(1e6), j.Attempts, e)
			} else {
				iv.fail("job %d (%s) is due and was not run after the settle%s", j.ID, j.Kind, e)
			}
		default:
			iv.fail("job %d (%s) is in state %q", j.ID, j.Kind, j.State)
		}
	}
	iv.Pass = iv.Failed == 0
	iv.Detail = fmt.Sprintf("%d jobs: %s", iv.Checked, countsString(states))
	if len(failedBy) > 0 {
		iv.Detail += fmt.Sprintf("; failed with an error by kind: %s; first: %s", countsString(failedBy), firstFailed)
	}
	return iv
}

// erasedSet is every memory erased: the soak's own erases and those taken
// along (their tombstones).
func erasedSet(s *snapshot, led *ledger) map[uuid.UUID]bool {
	e := map[uuid.UUID]bool{}
	for id := range led.erasedMemories {
		e[id] = true
	}
	for id := range s.tombstones {
		e[id] = true
	}
	return e
}

// expectedReviews is how many times a retrieval's pending review must be
// found (in a queue or a review job): once, or never when nothing was
// returned, when it returned an erased memory (erase removes the query
// with it), or when its conversation was erased.
func expectedReviews(r retrieval, erased map[uuid.UUID]bool) (int, string) {
	switch {
	case len(r.MemoryIDs) == 0:
		return 0, "none returned"
	case r.Conversation.isErased():
		return 0, "conversation erased"
	}
	for _, id := range r.MemoryIDs {
		if erased[id] {
			return 0, "removed with an erased memory"
		}
	}
	return 1, ""
}

// checkReviews: every recorded retrieval is taken exactly once: found once
// in all the pending reviews and review jobs together (never lost, never
// handed to two jobs), and no review job applies a memory's review twice.
func checkReviews(s *snapshot, led *ledger) Invariant {
	iv := Invariant{Name: "every pending review taken exactly once"}
	erased := erasedSet(s, led)
	why := map[string]int{}
	var pending, inJobs int
	for _, r := range led.retrievals {
		iv.Checked++
		want, reason := expectedReviews(r, erased)
		p, j := s.pendingQueries[r.Query], s.jobQueries[r.Query]
		pending += p
		inJobs += j
		if p+j != want {
			call := "retrieve"
			if r.Context {
				call = "context"
			}
			if reason == "removed with an erased memory" {
				reason += raceNote(r, led)
			}
			iv.fail("%s %q (scope %s) in conversation %s (%d memories): found %d times pending and %d in review jobs, want %d %s",
				call, r.Query, r.Scope, r.Conversation.ID, len(r.MemoryIDs), p, j, want, reason)
			continue
		}
		if reason != "" {
			why[reason]++
		}
	}
	for _, d := range s.reviewTwice {
		iv.fail("review_log: %s", d)
	}
	iv.Pass = iv.Failed == 0
	iv.Detail = fmt.Sprintf("%d retrievals and contexts: %d still pending, %d taken into review jobs; not recorded or removed: %s; "+
		"%d reviews applied (review_log), %d of a memory twice by one job", iv.Checked, pending, inJobs, countsString(why), s.reviewsApplied, len(s.reviewTwice))
	return iv
}

// raceNote says whether the erase of a memory the retrieval returned ran
// while the retrieval did (docs/sidecar.md: a retrieval that races the
// erase records its review after the erase removed the others).
func raceNote(r retrieval, led *ledger) string {
	for _, id := range r.MemoryIDs {
		d, ok := led.erasedDuring[id]
		if !ok {
			continue
		}
		const hms = "15:04:05.000"
		switch {
		case d[0].Before(r.End) && d[1].After(r.Start):
			return fmt.Sprintf(": memory %s was erased by a call that ran while it did (%s to %s, the retrieval %s to %s): the retrieve/erase race",
				id, d[0].Format(hms), d[1].Format(hms), r.Start.Format(hms), r.End.Format(hms))
		case !d[1].After(r.Start):
			return fmt.Sprintf(": memory %s was erased %s before the retrieval started, which returned it nonetheless", id, r.Start.Sub(d[1]).Round(time.Millisecond))
		default:
			return fmt.Sprintf(": memory %s was erased %s after the retrieval returned (the erase missed its committed review)", id, d[0].Sub(r.End).Round(time.Millisecond))
		}
	}
	return ": the memory was taken along by an erase"
}

// checkErased: no marker is in any row of any table of schema mneme where
// no copy of it may be left, and nothing is left of a conversation erased
// whole. A copy may be left only of a message still queued (erase reaches
// messages through their memories): in mneme.messages; and of the query of
// a retrieval that returned no erased memory (the query is the caller's,
// not the memory's): where queries go (pending reviews, review jobs, the
// review log's queries in mneme.review_queries). Every other marker was erased with its memory or
// conversation and must be nowhere.
func checkErased(s *snapshot, led *ledger) Invariant {
	iv := Invariant{Name: "erased text in no row of any table"}
	erased := erasedSet(s, led)
	quoted := map[string]bool{} // markers quoted by a query that stays
	for _, r := range led.retrievals {
		if want, _ := expectedReviews(r, erased); want == 1 {
			for _, w := range strings.Fields(r.Query) {
				quoted[w] = true
			}
		}
	}
	var remembered, messages, queued, partly int
	for m, p := range led.markers {
		allowed := map[string]bool{}
		if p.Kind == "remember" {
			remembered++
		} else {
			messages++
			if p.MessageID == 0 {
				continue // never stored
			}
			if row, ok := s.messages[p.MessageID]; ok && !row.Consumed && !p.Conversation.isErased() {
				allowed["messages"] = true
				queued++
			}
		}
		if quoted[m] {
			// (a review row's queries are rows of review_queries, goose 00310)
			allowed["message_queue"], allowed["jobs"], allowed["review_queries"] = true, true, true
			partly++
		}
		iv.Checked++
		var bad []string
		for _, tbl := range s.markersFound[m[:7]] {
			if !allowed[tbl] {
				bad = append(bad, tbl)
			}
		}
		if len(bad) > 0 {
			iv.fail("marker %s (planted in a %s) is still in %s", m, p.Kind, strings.Join(bad, ", "))
		}
	}
	for _, l := range s.erasedLeft {
		iv.fail("left of conversations erased whole: %s", l)
	}
	iv.Pass = iv.Failed == 0
	iv.Detail = fmt.Sprintf("%d markers planted (%d in remembers, %d in messages): %d in a message still queued, %d quoted by a query that stays, "+
		"every other copy erased; %d memories erased", len(led.markers), remembered, messages, queued, partly, len(erased))
	return iv
}

// checkCalls: the API refused the bad input it was given (a message out
// of time order) with its SQLSTATE and failed no other call; no sidecar
// exited on its own.
func checkCalls(led *ledger, f *fleet) Invariant {
	iv := Invariant{Name: "no call failed unexpectedly, no sidecar crashed"}
	iv.Checked = led.totalCalls() + led.rejected
	for _, u := range led.unexpected {
		iv.fail("%s", clip.String(u, 300))
	}
	iv.Failed = led.unexpectedN
	for _, c := range f.crashed {
		iv.fail("%s", c)
	}
	iv.Pass = iv.Failed == 0
	iv.Detail = fmt.Sprintf("%d calls (%s); %d bad inputs (messages out of time order, job payloads that are no bigint) refused as expected; %d unexpected errors; %d sidecars exited on their own",
		iv.Checked-led.rejected, countsString(led.counts), led.rejected, led.unexpectedN, len(f.crashed))
	return iv
}

// countsString prints a map of counts sorted by key: "a 1, b 2".
func countsString(m map[string]int) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, 0, len(keys))
	for _, k := range keys {
		parts = append(parts, fmt.Sprintf("%s %d", k, m[k]))
	}
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, ", ")
}
