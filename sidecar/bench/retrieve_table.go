package bench

import (
	"fmt"
	"io"
)

// WriteTable prints the result for a person.
func (out RetrieveResult) WriteTable(w io.Writer) {
	fmt.Fprintf(w, "mneme bench retrieve: %d memories in %d conversation(s), variant %s (dim %d), %d queries, k=10, load %.1fs\n",
		out.Memories, out.Conversations, out.Variant, out.Dim, out.Queries, out.LoadSeconds)
	fmt.Fprintf(w, "  %-44s %9s %9s %9s\n", "query", "p50 ms", "p95 ms", "p99 ms")
	for _, r := range []struct {
		name string
		l    Latencies
	}{
		{"mneme.retrieve (embedding passed)", out.Retrieve},
		{"mneme.retrieve (SQL embeds the query)", out.RetrieveSQL},
		{"mneme.search (embedding passed)", out.Search},
		{"bare ORDER BY embedding <=> q LIMIT 10", out.Vector},
		{"bare BM25 top 10 (mneme.bm25_search)", out.BM25},
		{fmt.Sprintf("its BM25 leg (bm25_search top %d)", out.Candidates), out.BM25Leg},
		{fmt.Sprintf("its vector leg (vector_search top %d)", out.VectorCands), out.VectorLeg},
	} {
		fmt.Fprintf(w, "  %-44s %9.2f %9.2f %9.2f\n", r.name, r.l.P50, r.l.P95, r.l.P99)
	}
	if r := out.Recall; r != nil {
		fmt.Fprintf(w, "  recall@10 against exact (%d queries): vector leg (%d rows) %.3f, BM25 leg (%d rows) %.3f",
			r.Queries, r.VectorCandidates, r.VectorLeg, out.Candidates, r.BM25Leg)
		if out.Conversations == 1 {
			fmt.Fprintf(w, ", bare vector top 10 %.3f", r.BareVector)
		}
		fmt.Fprintln(w)
	}
	if out.RLS != nil {
		fmt.Fprintf(w, "  conversations over %d tenants, interleaved:\n", out.RLS.Tenants)
		fmt.Fprintf(w, "  %-44s %9.2f %9.2f %9.2f\n", "mneme.retrieve as the superuser", out.RLS.Superuser.P50, out.RLS.Superuser.P95, out.RLS.Superuser.P99)
		fmt.Fprintf(w, "  %-44s %9.2f %9.2f %9.2f\n", "mneme.retrieve as mneme_app, RLS by tenant", out.RLS.App.P50, out.RLS.App.P95, out.RLS.App.P99)
	}
	if c := out.Context; c != nil {
		fmt.Fprintf(w, "  a conversation of %d episodes of %d messages, %d-word context (%.0f words on average):\n",
			c.Episodes, c.Messages, c.Budget, c.MeanWords)
		fmt.Fprintf(w, "  %-44s %9.2f %9.2f %9.2f\n", "mneme.context_items", c.Items.P50, c.Items.P95, c.Items.P99)
		fmt.Fprintf(w, "  %-44s %9.2f %9.2f %9.2f\n", "mneme.context (markdown, record => false)", c.Markdown.P50, c.Markdown.P95, c.Markdown.P99)
		fmt.Fprintf(w, "  %-44s %9.2f %9.2f %9.2f\n", "mneme.search alone, k = context_candidates", c.Search.P50, c.Search.P95, c.Search.P99)
		fmt.Fprintf(w, "  %-44s %9.2f %9.2f %9.2f\n", fmt.Sprintf("PostgreSQL hybrid_search, top %d (%s)", c.HybridK, c.HybridVector),
			c.Hybrid.P50, c.Hybrid.P95, c.Hybrid.P99)
	}
}
