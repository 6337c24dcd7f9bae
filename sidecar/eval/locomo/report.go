package locomo

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"
)

// Report is the result of a run. Everything but Timing is a function of
// the data and the configuration: two runs give identical values.
type Report struct {
	Data          string         `json:"data"`
	Mode          string         `json:"mode"`
	Conversations []string       `json:"conversations"`
	Turns         int            `json:"turns"`
	Questions     int            `json:"questions"`
	Skipped       map[string]int `json:"skipped_questions"`
	Evidence      EvidenceStats  `json:"evidence"`
	ClampedTurns  int            `json:"clamped_turns"`
	Budgets       []int          `json:"budgets"`
	Headline      int            `json:"headline_budget"`
	BudgetRule    string         `json:"budget_rule"`
	Count         string         `json:"memory_text_counted"`
	AsOf          string         `json:"retrievability_as_of"`
	AgentK        int            `json:"agent_k"`
	Memories      MemoryStats    `json:"memories"`
	Settings      map[string]any `json:"settings"`
	Methods       []MethodResult `json:"methods"`
	Timing        Timing         `json:"timing"`
	// CrossValidated is set when the run cross-validated the context's
	// settings (--folds, --choose).
	CrossValidated *CrossValidation `json:"cross_validated,omitempty"`

	acc      map[string]map[int]map[string]*cellAcc // method -> budget -> category ("" overall)
	lat      map[string][]time.Duration
	memTurns int
	memWords int
}

// EvidenceStats counts the evidence ids of the evaluated questions.
type EvidenceStats struct {
	IDs                  int      `json:"ids"`
	Invalid              int      `json:"invalid"`
	InvalidIDs           []string `json:"invalid_ids"` // conversation/dia_id
	QuestionsWithInvalid int      `json:"questions_with_invalid"`
}

// MemoryStats describes the memories segmentation produced.
type MemoryStats struct {
	Count     int     `json:"count"`
	MeanTurns float64 `json:"mean_turns"`
	MeanWords float64 `json:"mean_words"`
}

// MethodResult holds one method's cells per budget.
type MethodResult struct {
	MethodInfo
	Results []BudgetResult `json:"results"`
}

// BudgetResult holds one method's numbers at one budget.
type BudgetResult struct {
	Budget     int             `json:"budget"`
	Overall    Cell            `json:"overall"`
	ByCategory map[string]Cell `json:"by_category"`
}

// Cell is the aggregate over a set of questions.
type Cell struct {
	Questions int     `json:"questions"`
	Recall    float64 `json:"recall"`    // mean evidence recall
	AnyFound  float64 `json:"any_found"` // share with at least one evidence turn found
	MeanWords float64 `json:"mean_words"`
}

// Timing holds the measurements that vary from run to run.
type Timing struct {
	IngestSeconds     map[string]float64 `json:"ingest_seconds"` // per conversation
	IngestSecondsMean float64            `json:"ingest_seconds_mean"`
	SearchMS          map[string]Latency `json:"search_ms"` // per method
}

// Latency is a percentile summary in milliseconds.
type Latency struct {
	P50 float64 `json:"p50"`
	P95 float64 `json:"p95"`
}

type cellAcc struct {
	n      int
	recall float64
	any    int
	words  int
}

// BudgetRule documents how a memory that fits partly counts.
const BudgetRule = "memories are taken in rank order and their texts concatenated, cut at exactly the budget: " +
	"the memory that crosses the budget is cut and only the turns that end before the cut count"

func newReport(data string, budgets []int, headline int) *Report {
	r := &Report{
		Data: data, Budgets: budgets, Headline: headline, BudgetRule: BudgetRule,
		Skipped: map[string]int{},
		acc:     map[string]map[int]map[string]*cellAcc{},
		lat:     map[string][]time.Duration{},
		Timing:  Timing{IngestSeconds: map[string]float64{}, SearchMS: map[string]Latency{}},
	}
	for _, m := range Methods {
		r.acc[m.Name] = map[int]map[string]*cellAcc{}
		for _, b := range budgets {
			r.acc[m.Name][b] = map[string]*cellAcc{"": {}}
			for _, cat := range Categories {
				r.acc[m.Name][b][cat] = &cellAcc{}
			}
		}
	}
	return r
}

func (r *Report) readSettings(ctx context.Context, pool *pgxpool.Pool) error {
	var b []byte
	if err := pool.QueryRow(ctx, `SELECT coalesce(jsonb_object_agg(key, value), '{}') FROM mneme.settings`).Scan(&b); err != nil {
		return fmt.Errorf("read settings: %w", err)
	}
	return json.Unmarshal(b, &r.Settings)
}

func (r *Report) addConversation(c *Conversation, in *Ingested) {
	r.Conversations = append(r.Conversations, c.ID)
	r.Turns += c.TurnCount()
	r.Questions += len(c.Questions)
	for k, v := range c.Skipped {
		r.Skipped[k] += v
	}
	for _, q := range c.Questions {
		r.Evidence.IDs += len(q.Evidence)
		r.Evidence.Invalid += len(q.Invalid)
		if len(q.Invalid) > 0 {
			r.Evidence.QuestionsWithInvalid++
		}
		for _, id := range q.Invalid {
			r.Evidence.InvalidIDs = append(r.Evidence.InvalidIDs, c.ID+"/"+id)
		}
	}
	r.ClampedTurns += in.Clamped
	r.Timing.IngestSeconds[c.ID] = round(in.Duration.Seconds(), 3)
}

func (r *Report) addMemories(mems map[uuid.UUID]*Memory) {
	for _, m := range mems {
		r.Memories.Count++
		r.memTurns += m.Turns
		r.memWords += m.Doc.Words
	}
}

// add scores one method's ranking for one question at every budget.
func (r *Report) add(method string, q *Question, docs []Doc, took time.Duration) {
	r.lat[method] = append(r.lat[method], took)
	for _, b := range r.Budgets {
		found, words := Take(docs, b)
		r.addFound(method, q, b, found, words)
	}
}

// addFound counts a context built for one budget (a budgetSource's).
func (r *Report) addFound(method string, q *Question, budget int, found map[string]bool, words int) {
	recall, hits := Recall(q.Evidence, found)
	for _, key := range []string{"", Categories[q.Category]} {
		a := r.acc[method][budget][key]
		a.n++
		a.recall += recall
		a.words += words
		if hits > 0 {
			a.any++
		}
	}
}

func (r *Report) finish() {
	if r.Memories.Count > 0 {
		r.Memories.MeanTurns = round(float64(r.memTurns)/float64(r.Memories.Count), 2)
		r.Memories.MeanWords = round(float64(r.memWords)/float64(r.Memories.Count), 1)
	}
	for _, m := range Methods {
		mr := MethodResult{MethodInfo: m}
		for _, b := range r.Budgets {
			br := BudgetResult{Budget: b, Overall: r.acc[m.Name][b][""].cell(), ByCategory: map[string]Cell{}}
			for _, cat := range Categories {
				br.ByCategory[cat] = r.acc[m.Name][b][cat].cell()
			}
			mr.Results = append(mr.Results, br)
		}
		r.Methods = append(r.Methods, mr)
		r.Timing.SearchMS[m.Name] = latency(r.lat[m.Name])
	}
	total := 0.0
	for _, s := range r.Timing.IngestSeconds {
		total += s
	}
	if n := len(r.Timing.IngestSeconds); n > 0 {
		r.Timing.IngestSecondsMean = round(total/float64(n), 3)
	}
}

func (a *cellAcc) cell() Cell {
	if a.n == 0 {
		return Cell{}
	}
	n := float64(a.n)
	return Cell{Questions: a.n, Recall: round(a.recall/n, 4), AnyFound: round(float64(a.any)/n, 4), MeanWords: round(float64(a.words)/n, 1)}
}

func latency(ds []time.Duration) Latency {
	if len(ds) == 0 {
		return Latency{}
	}
	ms := make([]float64, len(ds))
	for i, d := range ds {
		ms[i] = float64(d.Microseconds()) / 1000
	}
	sort.Float64s(ms)
	return Latency{P50: round(Percentile(ms, 0.50), 2), P95: round(Percentile(ms, 0.95), 2)}
}

// Percentile is the nearest-rank p-th percentile (0 < p <= 1) of samples
// sorted in increasing order: the smallest sample with at least p of all
// samples at or below it; 0 without samples. The evaluations' latencies
// and the benchmarks' (package bench) are all computed by it.
func Percentile(sorted []float64, p float64) float64 {
	if len(sorted) == 0 {
		return 0
	}
	i := int(math.Ceil(p*float64(len(sorted)))) - 1
	return sorted[min(max(i, 0), len(sorted)-1)]
}

func round(x float64, places int) float64 {
	p := math.Pow(10, float64(places))
	return math.Round(x*p) / p
}

// Result returns a method's cell at a budget (zero Cell if absent).
func (r *Report) Result(method string, budget int) BudgetResult {
	for _, m := range r.Methods {
		if m.Name != method {
			continue
		}
		for _, b := range m.Results {
			if b.Budget == budget {
				return b
			}
		}
	}
	return BudgetResult{}
}

// WriteJSON writes the report as one JSON object.
func (r *Report) WriteJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(r)
}

var categoryOrder = []int{1, 2, 3, 4}

// WriteTable writes the human-readable tables.
func (r *Report) WriteTable(w io.Writer) error {
	var b strings.Builder
	fmt.Fprintf(&b, "LoCoMo evidence recall: %s, %s\n", r.Data, r.Mode)
	skipped := make([]string, 0, len(r.Skipped))
	for k, v := range r.Skipped {
		skipped = append(skipped, fmt.Sprintf("%d %s", v, k))
	}
	sort.Strings(skipped)
	fmt.Fprintf(&b, "%d conversations, %d turns, %d questions of categories 1-4 (not evaluated: %s)\n",
		len(r.Conversations), r.Turns, r.Questions, orNone(strings.Join(skipped, ", ")))
	fmt.Fprintf(&b, "%d evidence ids, %d of them name no turn (%s) and count as missed\n",
		r.Evidence.IDs, r.Evidence.Invalid, orNone(strings.Join(r.Evidence.InvalidIDs, ", ")))
	fmt.Fprintf(&b, "mneme memories: %d, %.2f turns and %.1f words (%s) each on average\n",
		r.Memories.Count, r.Memories.MeanTurns, r.Memories.MeanWords, r.Count)
	agent := "none (search only, no reviews)"
	if r.AgentK > 0 {
		agent = fmt.Sprintf("mneme.retrieve k=%d for every turn during ingest, reviewed by the pipeline", r.AgentK)
	}
	fmt.Fprintf(&b, "retrievability as of: %s; agent retrievals: %s\n\n", r.AsOf, agent)

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
	fmt.Fprintln(tw)
	fmt.Fprintf(tw, "%s\toverall\t", pad(fmt.Sprintf("at %d words", r.Headline)))
	for _, c := range categoryOrder {
		fmt.Fprintf(tw, "%s\t", Categories[c])
	}
	fmt.Fprint(tw, ">=1 found\tmean words\tsearch p50 ms\tp95 ms\t\n")
	for _, m := range r.Methods {
		res := r.Result(m.Name, r.Headline)
		fmt.Fprintf(tw, "%s\t%.3f\t", pad(m.Label), res.Overall.Recall)
		for _, c := range categoryOrder {
			fmt.Fprintf(tw, "%.3f\t", res.ByCategory[Categories[c]].Recall)
		}
		l := r.Timing.SearchMS[m.Name]
		fmt.Fprintf(tw, "%.3f\t%.0f\t%.2f\t%.2f\t\n", res.Overall.AnyFound, res.Overall.MeanWords, l.P50, l.P95)
	}
	res := r.Result(MethodMneme, r.Headline)
	fmt.Fprintf(tw, "%s\t%d\t", pad("questions"), res.Overall.Questions)
	for _, c := range categoryOrder {
		fmt.Fprintf(tw, "%d\t", res.ByCategory[Categories[c]].Questions)
	}
	fmt.Fprint(tw, "\t\t\t\t\n")
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
