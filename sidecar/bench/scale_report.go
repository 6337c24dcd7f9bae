package bench

import (
	"fmt"
	"io"
	"sort"

	"github.com/mneme-memory/mneme/sidecar/clip"
	"github.com/mneme-memory/mneme/sidecar/plot"
)

// WriteTable prints the result for a person.
func (r *ScaleResult) WriteTable(w io.Writer) {
	fmt.Fprintf(w, "mneme bench scale: database %s, variant %s, embedder %s, %s vectors, %d conversations over %d tenants, %d queries per call; "+
		"timed conversations: small %d memories, typical %d, context %d episodes (fixed), huge (the largest, grows)\n",
		r.DB, r.Variant, r.Embedder, r.Vectors, r.Conversations, r.Tenants, r.Queries, r.Probes["small"], r.Probes["typical"], r.Probes["context"])
	fmt.Fprintf(w, "command: %s\nload average (1 minute, 2-core machine shared with other work): %s\n", r.Command, r.Load)
	if r.Citus {
		fmt.Fprintln(w, "on Citus: a scratch database distributed by conversation; each call in a transaction (set_tenant), so Citus runs it on the coordinator, every statement routed to the conversation's shard; "+
			"the \"bound login\" calls are made alone by a login bound to the tenant, which Citus delegates to the conversation's worker whole")
	}
	for _, s := range r.Steps {
		fmt.Fprintf(w, "\n%d memories (database %.0f MB, built in %.0f s", s.Memories, float64(s.DBBytes)/1e6, s.BuildSeconds)
		if s.ScopeIndexes > 0 {
			fmt.Fprintf(w, ", %d per-scope HNSW indexes made in %.0f s", s.ScopeIndexes, s.IndexSeconds)
		}
		fmt.Fprint(w, "); bytes per memory:")
		names := make([]string, 0, len(s.BytesPerMemory))
		for k := range s.BytesPerMemory {
			names = append(names, k)
		}
		sort.Strings(names)
		for _, k := range names {
			fmt.Fprintf(w, " %s %.0f,", k, s.BytesPerMemory[k])
		}
		fmt.Fprintf(w, "\n  %-28s %-8s %9s %9s %9s\n", "call (ms)", "conv", "p50", "p95", "p99")
		for _, c := range scaleCalls {
			for _, conv := range c.on {
				l, ok := s.Calls[conv][c.name]
				if !ok {
					continue // not timed there (see scaleTime)
				}
				fmt.Fprintf(w, "  %-28s %-8s %9.2f %9.2f %9.2f\n", c.name, conv, l.P50, l.P95, l.P99)
			}
		}
	}
	for _, e := range []struct {
		call  string
		steps []SlowStep
	}{{"context_items", r.ContextSteps}, {"search (typical conversation)", r.SearchSteps},
		{"search (huge conversation)", r.HugeSteps}, {"search (scope tenant, the huge conversation's tenant)", r.TenantSteps}} {
		if len(e.steps) > 0 {
			fmt.Fprintln(w)
			writeSlowSteps(w, e.call, e.steps, "")
		}
	}
	if len(r.Scopes) > 0 {
		fmt.Fprintf(w, "\nscopes at %d memories (p50 ms; the goal: search p50 at most %d x the faster bare top-10 of the same scope)\n", r.Steps[len(r.Steps)-1].Memories, scopeRatio)
		fmt.Fprintf(w, "  %-34s %9s %9s %9s %11s %11s %7s  %s\n", "scope", "search", "p99", "retrieve", "bare HNSW", "bare exact", "ratio", "goal")
		for _, s := range r.Scopes {
			fmt.Fprintf(w, "  %-34s %9.2f %9.2f %9.2f %11s %11s %7.2f  %s\n", s.Scope, s.Search.P50, s.Search.P99, s.Retrieve.P50,
				orDash(s.BareHNSW), orDash(s.BareExact), s.Goal.Measured, goalMark(s.Goal))
		}
	}
	if len(r.Recall) > 0 {
		fmt.Fprintf(w, "\nrecall@10 against exact at %d memories (%s vectors, %d queries per scope)\n", r.Steps[len(r.Steps)-1].Memories, r.Vectors, r.Recall[0].Queries)
		fmt.Fprintf(w, "  %-34s %11s %11s\n", "scope", "vector leg", "bare HNSW")
		for _, rc := range r.Recall {
			fmt.Fprintf(w, "  %-34s %11.3f %11.3f\n", rc.Scope, rc.Leg, rc.BareHNSW)
		}
	}
	if r.Ingest != nil {
		fmt.Fprintf(w, "\ningest: %.0f messages/s over %d conversations (aimed at %d), segmentation lag p50 %.0f ms, p95 %.0f, p99 %.0f; backlog %.1f s after the writers stopped\n",
			r.Ingest.PerSecond, r.Ingest.Conversations, r.Ingest.Rate, r.Ingest.Lag.P50, r.Ingest.Lag.P95, r.Ingest.Lag.P99, r.Ingest.BacklogSeconds)
	}
	fmt.Fprintln(w, "\ngoals")
	writeGoals(w, r.Goals, "  ")
}

func orDash(v float64) string {
	if v == 0 {
		return "-"
	}
	return fmt.Sprintf("%.2f", v)
}

// goalMark is a goal's verdict: pass, FAIL or n/a.
func goalMark(g ScaleGoal) string {
	switch {
	case g.NotApplicable:
		return "n/a "
	case g.Pass:
		return "pass"
	}
	return "FAIL"
}

// writeGoals prints goals, one line each, pass, FAIL or n/a.
func writeGoals(w io.Writer, goals []ScaleGoal, indent string) {
	for _, g := range goals {
		mark := goalMark(g)
		bound := "limit"
		if g.AtLeast {
			bound = "at least"
		}
		fmt.Fprintf(w, "%s%s  %-70s %8.2f (%s %.2f)\n", indent, mark, g.Goal, g.Measured, bound, g.Limit)
	}
}

// writeSlowSteps prints where a call's time goes: its slowest eight
// statements, with the start of each plan.
func writeSlowSteps(w io.Writer, call string, steps []SlowStep, indent string) {
	fmt.Fprintf(w, "%swhere %s's time goes (auto_explain of a warmed call, nested statements, slowest first):\n", indent, call)
	for i, st := range steps {
		if i == 8 {
			break
		}
		fmt.Fprintf(w, "%s  %8.2f ms  %s\n%s              %s\n", indent, st.MS, st.Query, indent, clip.String(st.Plan, 150))
	}
}

// WritePlot draws p50 latency against the database's size (both log
// scales): the fixed-size conversations' calls solid, the growing huge
// conversation's dashed.
func (r *ScaleResult) WritePlot(w io.Writer) error {
	c := plot.Chart{Title: fmt.Sprintf("p50 against database size (%s variant, as mneme_app)", r.Variant),
		XLabel: "memories in the database (log scale)", YLabel: "p50 ms (log scale)", XLog: true, YLog: true,
		XFormat: func(v float64) string { return fmt.Sprintf("%.0f", v) },
		YFormat: func(v float64) string { return fmt.Sprintf("%g", v) }}
	for _, l := range []struct{ conv, call string }{
		{"typical", "search"}, {"typical", "retrieve"}, {"typical", "BM25 leg"}, {"typical", "vector leg"},
		{"typical", hybridCall}, {"small", "search"}, {"context", "context_items"}, {"huge", "search"}, {"huge", "BM25 leg"},
	} {
		sr := plot.Series{Label: l.call + ", " + l.conv, Dashed: l.conv == "huge"}
		for _, s := range r.Steps {
			if lat, ok := s.Calls[l.conv][l.call]; ok && lat.P50 > 0 {
				sr.X, sr.Y = append(sr.X, float64(s.Memories)), append(sr.Y, lat.P50)
			}
		}
		if len(sr.X) > 0 {
			c.Series = append(c.Series, sr)
		}
	}
	return c.WriteSVG(w)
}
