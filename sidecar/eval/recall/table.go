package recall

import (
	"fmt"
	"io"
	"sort"
	"strings"
	"text/tabwriter"
)

// WriteTable writes the report as tables: recall per budget, then at the
// headline budget recall per category, and the extra measures, the share
// of questions with evidence found, the words used and the latencies.
func (r *Report) WriteTable(w io.Writer) error {
	var b strings.Builder
	fmt.Fprintf(&b, "%s evidence recall: %s, %s\n", r.Benchmark, r.Data, r.Mode)
	skipped := make([]string, 0, len(r.Skipped))
	for k, v := range r.Skipped {
		skipped = append(skipped, fmt.Sprintf("%d %s", v, k))
	}
	sort.Strings(skipped)
	fmt.Fprintf(&b, "%d conversations, %d turns, %d questions (not evaluated: %s)\n",
		len(r.Conversations), r.Turns, r.Questions, orNone(strings.Join(skipped, ", ")))
	fmt.Fprintf(&b, "%d evidence ids, %d of them name no turn (%s) and count as missed\n",
		r.Evidence.IDs, r.Evidence.Invalid, orNone(strings.Join(r.Evidence.InvalidIDs, ", ")))
	fmt.Fprintf(&b, "mneme memories: %d, %.2f turns and %.1f words (content) each on average\n",
		r.Memories.Count, r.Memories.MeanTurns, r.Memories.MeanWords)
	agent := "none (search only, no reviews)"
	if r.AgentK > 0 {
		agent = fmt.Sprintf("mneme.retrieve k=%d for every turn during ingest, reviewed by the pipeline", r.AgentK)
	}
	fmt.Fprintf(&b, "retrievability as of each conversation's last turn; agent retrievals: %s\n", agent)
	for _, m := range r.Measures {
		fmt.Fprintf(&b, "%s: %s\n", m.Label, m.About)
	}
	fmt.Fprintln(&b)

	width := len("recall at budget (words)")
	for _, m := range r.Methods {
		width = max(width, len(m.Label))
	}
	pad := func(s string) string { return fmt.Sprintf("%-*s", width, s) }
	tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "%s\t", pad("recall at budget (words)"))
	for _, bud := range r.Budgets {
		fmt.Fprintf(tw, "%d\t", bud)
	}
	fmt.Fprintln(tw)
	for _, m := range r.Methods {
		fmt.Fprintf(tw, "%s\t", pad(m.Label))
		for _, res := range m.Results {
			fmt.Fprintf(tw, "%.3f\t", res.Overall.Recall)
		}
		fmt.Fprintln(tw)
	}

	at := pad(fmt.Sprintf("at %d words", r.Headline))
	fmt.Fprintf(tw, "\n%s\toverall\t", at)
	for _, c := range r.Categories {
		fmt.Fprintf(tw, "%s\t", c)
	}
	fmt.Fprintln(tw)
	for _, m := range r.Methods {
		res := r.Result(m.Name, r.Headline)
		fmt.Fprintf(tw, "%s\t%.3f\t", pad(m.Label), res.Overall.Recall)
		for _, c := range r.Categories {
			fmt.Fprintf(tw, "%.3f\t", res.ByCategory[c].Recall)
		}
		fmt.Fprintln(tw)
	}
	res := r.Result(MethodContext, r.Headline)
	fmt.Fprintf(tw, "%s\t%d\t", pad("questions"), res.Overall.Questions)
	for _, c := range r.Categories {
		fmt.Fprintf(tw, "%d\t", res.ByCategory[c].Questions)
	}
	fmt.Fprintln(tw)

	fmt.Fprintf(tw, "\n%s\t", at)
	for _, ms := range r.Measures {
		fmt.Fprintf(tw, "%s\t", ms.Label)
	}
	fmt.Fprint(tw, ">=1 found\tmean words\tsearch p50 ms\tp95 ms\t\n")
	for _, m := range r.Methods {
		res := r.Result(m.Name, r.Headline)
		fmt.Fprintf(tw, "%s\t", pad(m.Label))
		for _, ms := range r.Measures {
			fmt.Fprintf(tw, "%.3f\t", res.Measures[ms.Name])
		}
		l := r.Timing.SearchMS[m.Name]
		fmt.Fprintf(tw, "%.3f\t%.0f\t%.2f\t%.2f\t\n", res.Overall.AnyFound, res.Overall.MeanWords, l.P50, l.P95)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintf(&b, "\ningest: %.1f s per conversation on average (add_message for every turn, segmentation in process)\n",
		r.Timing.IngestSecondsMean)
	fmt.Fprintf(&b, "mneme and mneme without R share one mneme.search call per question; the legs are mneme.bm25_search and mneme.vector_search\n")
	if r.CrossValidated != nil {
		WriteCrossValidation(&b, r.CrossValidated, r.Budgets)
	}
	_, err := io.WriteString(w, b.String())
	return err
}

func orNone(s string) string {
	if s == "" {
		return "none"
	}
	return s
}
