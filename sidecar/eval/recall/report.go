package recall

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"sort"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"
)

// Report is the result of a run, in one shape for every benchmark.
// Everything but Timing is a function of the data and the configuration:
// two runs give identical values.
type Report struct {
	Benchmark     string         `json:"benchmark"`
	Data          string         `json:"data"`
	Mode          string         `json:"mode"`
	Conversations []string       `json:"conversations"`
	Turns         int            `json:"turns"`
	Questions     int            `json:"questions"`
	Categories    []string       `json:"categories"` // of the questions, in report order
	Skipped       map[string]int `json:"skipped_questions"`
	Evidence      EvidenceStats  `json:"evidence"`
	ClampedTurns  int            `json:"clamped_turns"`
	Budgets       []int          `json:"budgets"`
	Headline      int            `json:"headline_budget"`
	BudgetRule    string         `json:"budget_rule"`
	Measures      []Measure      `json:"measures"` // the reader's extra measures (none for LoCoMo)
	AgentK        int            `json:"agent_k"`
	Memories      MemoryStats    `json:"memories"`
	Settings      map[string]any `json:"settings"`
	Methods       []MethodResult `json:"methods"`
	Timing        Timing         `json:"timing"`
	// CrossValidated is set when the run cross-validated the context's
	// settings (--folds, --choose).
	CrossValidated *CrossValidation `json:"cross_validated,omitempty"`

	acc      map[cellKey]*cellAcc // key: a category ("" overall)
	measured map[cellKey]*cellAcc // key: a measure; recall sums its values
	lat      map[string][]time.Duration
	// questions receives QuestionLines (Options.Questions); conv is the
	// conversation being measured.
	questions *json.Encoder
	conv      string
	dumpErr   error
	memTurns  int
	memWords  int
}

// EvidenceStats counts the evidence ids of the evaluated questions.
type EvidenceStats struct {
	IDs                  int      `json:"ids"`
	Invalid              int      `json:"invalid"`
	InvalidIDs           []string `json:"invalid_ids"` // conversation/turn id
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
	// Measures holds each extra measure's mean over the questions that
	// count toward it (Question.Measure; 0 when none does).
	Measures map[string]float64 `json:"measures"`
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

// cellKey names an accumulator: a method's at a budget for a key.
type cellKey struct {
	method string
	budget int
	key    string
}

// at is the accumulator of k in m, created on first use.
func at(m map[cellKey]*cellAcc, k cellKey) *cellAcc {
	if m[k] == nil {
		m[k] = &cellAcc{}
	}
	return m[k]
}

// BudgetRule documents how a memory that fits partly counts.
const BudgetRule = "memories are taken in rank order and their texts concatenated, cut at exactly the budget: " +
	"the memory that crosses the budget is cut and only the turns that end before the cut count"

func newReport(d *Data, convs []Conversation, budgets []int, headline int) *Report {
	r := &Report{
		Benchmark: d.Benchmark, Data: d.Name, Budgets: budgets, Headline: headline, BudgetRule: BudgetRule,
		Measures: append([]Measure{}, d.Measures...), Skipped: map[string]int{},
		Evidence: EvidenceStats{InvalidIDs: []string{}},
		acc:      map[cellKey]*cellAcc{},
		measured: map[cellKey]*cellAcc{},
		lat:      map[string][]time.Duration{},
		Timing:   Timing{IngestSeconds: map[string]float64{}, SearchMS: map[string]Latency{}},
	}
	// The categories that have questions: the reader's in its order, then
	// any other in order of appearance.
	asked := map[string]bool{}
	var other []string
	for _, c := range convs {
		for _, q := range c.Questions {
			if !asked[q.Category] && !slices.Contains(d.Categories, q.Category) {
				other = append(other, q.Category)
			}
			asked[q.Category] = true
		}
	}
	r.Categories = []string{}
	for _, cat := range d.Categories {
		if asked[cat] {
			r.Categories = append(r.Categories, cat)
		}
	}
	r.Categories = append(r.Categories, other...)
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
		invalid := 0
		for _, id := range q.Evidence {
			if _, ok := in.Text[id]; !ok {
				invalid++
				r.Evidence.InvalidIDs = append(r.Evidence.InvalidIDs, c.ID+"/"+id)
			}
		}
		r.Evidence.Invalid += invalid
		if invalid > 0 {
			r.Evidence.QuestionsWithInvalid++
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

// QuestionLine is one line of Options.Questions: one method's context for
// one question at one budget.
type QuestionLine struct {
	Conversation string             `json:"conversation"`
	Question     int                `json:"question"` // Question.Index
	Text         string             `json:"text"`
	Category     string             `json:"category"`
	Method       string             `json:"method"`
	Budget       int                `json:"budget"`
	Evidence     []string           `json:"evidence"`
	Inside       []string           `json:"inside"` // the turns inside, in context order
	Words        int                `json:"words"`
	Recall       float64            `json:"recall"`
	Measures     map[string]float64 `json:"measures,omitempty"`
}

// add scores one method's ranking for one question at every budget.
func (r *Report) add(method string, q *Question, docs []Doc, took time.Duration) {
	r.lat[method] = append(r.lat[method], took)
	for _, b := range r.Budgets {
		inside, words := Take(docs, b)
		r.addContext(method, q, b, inside, words)
	}
}

// addContext counts one context built for a question at one budget: the
// ids of the turns inside, in context order, and its words.
func (r *Report) addContext(method string, q *Question, budget int, inside []string, words int) {
	recall, hits := evidenceRecall(q.Evidence, inside)
	var measures map[string]float64
	if q.Measure != nil {
		measures = q.Measure(inside)
	}
	if r.questions != nil && r.dumpErr == nil {
		r.dumpErr = r.questions.Encode(QuestionLine{Conversation: r.conv, Question: q.Index, Text: q.Text,
			Category: q.Category, Method: method, Budget: budget, Evidence: q.Evidence, Inside: inside,
			Words: words, Recall: round(recall, 4), Measures: measures})
	}
	for _, key := range []string{"", q.Category} {
		a := at(r.acc, cellKey{method, budget, key})
		a.n++
		a.recall += recall
		a.words += words
		if hits > 0 {
			a.any++
		}
	}
	if q.Measure == nil {
		return
	}
	for name, v := range measures {
		a := at(r.measured, cellKey{method, budget, name})
		a.n++
		a.recall += v
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
			br := BudgetResult{Budget: b, Overall: r.acc[cellKey{m.Name, b, ""}].cell(), ByCategory: map[string]Cell{}, Measures: map[string]float64{}}
			for _, cat := range r.Categories {
				br.ByCategory[cat] = r.acc[cellKey{m.Name, b, cat}].cell()
			}
			for _, ms := range r.Measures {
				br.Measures[ms.Name] = 0
			}
			for k, a := range r.measured {
				if k.method == m.Name && k.budget == b {
					br.Measures[k.key] = round(a.recall/float64(a.n), 4)
				}
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
	if a == nil || a.n == 0 {
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
