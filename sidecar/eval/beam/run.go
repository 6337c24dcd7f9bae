package beam

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"path/filepath"
	"strconv"
	"text/tabwriter"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/mneme-memory/mneme/sidecar/eval/locomo"
)

// Spacing is the time between two messages of a batch: BEAM dates batches,
// not messages.
const Spacing = time.Minute

// Report is the result of a run: per method and budget, evidence recall
// overall and per ability, and the knowledge-update and contradiction
// measures. Everything but the latencies is a function of the data and
// the configuration.
type Report struct {
	Data          string         `json:"data"`
	Mode          string         `json:"mode"`
	Conversations int            `json:"conversations"`
	Messages      int            `json:"messages"`
	Questions     map[string]int `json:"questions"` // evaluated, by ability
	Skipped       map[string]int `json:"skipped_questions"`
	Budgets       []int          `json:"budgets"`
	Headline      int            `json:"headline_budget"`
	Methods       []Method       `json:"methods"`
	Rules         string         `json:"rules"`
	// CrossValidated: the context's settings chosen on some conversations
	// and measured on the others (--folds, --choose).
	CrossValidated *locomo.CrossValidation `json:"cross_validated,omitempty"`

	locomo *locomo.Report
	acc    map[string]map[int]*acc // method -> budget
}

// Method is one method's results, one entry per budget.
type Method struct {
	Name    string   `json:"name"`
	Label   string   `json:"label"`
	Results []Result `json:"results"`
}

// Result is one method at one budget.
type Result struct {
	Budget    int                `json:"budget"`
	Recall    float64            `json:"recall"`
	ByAbility map[string]float64 `json:"recall_by_ability"`
	// Knowledge updates: the updated value inside; the old value inside
	// and ahead of the new one (or inside without it).
	UpdatedFound float64 `json:"knowledge_update_updated_found"`
	StaleFirst   float64 `json:"knowledge_update_stale_first"`
	// Contradictions: both statements inside.
	BothFound float64 `json:"contradiction_both_found"`
}

// Rules states how the measures are counted.
const Rules = "a statement (original_info, updated_info, first_statement, second_statement) is inside when any of its " +
	"messages is; recall is the share of a question's source_chat_ids inside, averaged over questions"

type acc struct {
	n, ku, cr                    int
	recall, updated, stale, both float64
	abilityN                     map[string]int
	abilityRecall                map[string]float64
}

// Eval loads the BEAM conversations under dir and evaluates them like
// locomo.Eval (a fresh scratch database, the sidecar's pipelines, every
// method of the LoCoMo evaluation), measuring through its observer.
func Eval(ctx context.Context, o locomo.EvalOptions, dir string) (*Report, error) {
	convs, err := Load(dir)
	if err != nil {
		return nil, err
	}
	if o.Limit > 0 && o.Limit < len(convs) {
		convs = convs[:o.Limit]
	}
	// BEAM has messages longer than mneme's default message_max_chars
	// (100,000; one of 348,853 characters in the 100K tier): the run
	// raises it to the longest message rather than lose one.
	if _, set := o.Settings["message_max_chars"]; !set && longest(convs) > 100000 {
		settings := map[string]json.RawMessage{"message_max_chars": json.RawMessage(strconv.Itoa(longest(convs)))}
		for k, v := range o.Settings {
			settings[k] = v
		}
		o.Settings = settings
	}
	rep, lconvs, observe := prepare(convs, dir)
	o.Data = dir
	o.Run.Observe = observe
	lrep, err := locomo.EvalLoaded(ctx, o, lconvs)
	if err != nil {
		return nil, err
	}
	rep.finish(lrep)
	rep.CrossValidated = lrep.CrossValidated
	return rep, nil
}

// Run evaluates convs against the migrated mneme database behind pool
// (which must not hold them yet), segmenting with opt.Jobs: Eval without
// the scratch database.
func Run(ctx context.Context, pool *pgxpool.Pool, convs []Conversation, opt locomo.Options) (*Report, error) {
	rep, lconvs, observe := prepare(convs, opt.Data)
	opt.Observe = observe
	lrep, err := locomo.Run(ctx, pool, lconvs, opt)
	if err != nil {
		return nil, err
	}
	rep.finish(lrep)
	return rep, nil
}

func prepare(convs []Conversation, data string) (*Report, []locomo.Conversation, func(string, *locomo.Question, int, []string)) {
	rep := &Report{Data: filepath.Base(filepath.Clean(data)), Conversations: len(convs), Questions: map[string]int{},
		Skipped: map[string]int{}, Rules: Rules, acc: map[string]map[int]*acc{}}
	lconvs, byIndex := Convert(convs)
	for _, c := range convs {
		for _, b := range c.Batches {
			rep.Messages += len(b.Messages)
		}
		for k, v := range c.Skipped {
			rep.Skipped[k] += v
		}
		for _, q := range c.Questions {
			rep.Questions[q.Ability]++
		}
	}
	return rep, lconvs, func(method string, q *locomo.Question, budget int, found []string) {
		rep.observe(method, byIndex[q.Index], budget, found)
	}
}

func (r *Report) finish(lrep *locomo.Report) {
	r.locomo, r.Mode, r.Budgets, r.Headline = lrep, lrep.Mode, lrep.Budgets, lrep.Headline
	for _, m := range locomo.Methods {
		mr := Method{Name: m.Name, Label: m.Label}
		for _, b := range r.Budgets {
			mr.Results = append(mr.Results, r.acc[m.Name][b].result(b))
		}
		r.Methods = append(r.Methods, mr)
	}
}

func longest(convs []Conversation) int {
	n := 0
	for _, c := range convs {
		for _, b := range c.Batches {
			for _, m := range b.Messages {
				n = max(n, len([]rune(m.Content)))
			}
		}
	}
	return n
}

// Convert turns BEAM conversations into the LoCoMo evaluation's shape: a
// batch is a session, a message a turn (its id the turn's id), a minute
// apart; every question gets an index unique across the conversations,
// the key of the returned map.
func Convert(convs []Conversation) ([]locomo.Conversation, map[int]*Question) {
	byIndex := map[int]*Question{}
	var out []locomo.Conversation
	n := 0
	for ci := range convs {
		c := &convs[ci]
		lc := locomo.Conversation{ID: "beam-" + c.ID, Spacing: Spacing, Skipped: map[string]int{}}
		for bi, b := range c.Batches {
			s := locomo.Session{N: bi + 1, At: b.At}
			for _, m := range b.Messages {
				s.Turns = append(s.Turns, locomo.Turn{DiaID: strconv.Itoa(m.ID), Speaker: m.Role, Text: m.Content})
			}
			lc.Sessions = append(lc.Sessions, s)
		}
		for qi := range c.Questions {
			q := &c.Questions[qi]
			lq := locomo.Question{Index: n, Text: q.Text, Category: 1}
			for _, id := range q.Evidence {
				lq.Evidence = append(lq.Evidence, strconv.Itoa(id))
			}
			byIndex[n] = q
			lc.Questions = append(lc.Questions, lq)
			n++
		}
		out = append(out, lc)
	}
	return out, byIndex
}

func (r *Report) observe(method string, q *Question, budget int, found []string) {
	if q == nil {
		return
	}
	if r.acc[method] == nil {
		r.acc[method] = map[int]*acc{}
	}
	a := r.acc[method][budget]
	if a == nil {
		a = &acc{abilityN: map[string]int{}, abilityRecall: map[string]float64{}}
		r.acc[method][budget] = a
	}
	pos := map[int]int{}
	for i, f := range found {
		if id, err := strconv.Atoi(f); err == nil {
			if _, seen := pos[id]; !seen {
				pos[id] = i
			}
		}
	}
	hits := 0
	for _, id := range q.Evidence {
		if _, ok := pos[id]; ok {
			hits++
		}
	}
	recall := float64(hits) / float64(len(q.Evidence))
	a.n++
	a.recall += recall
	a.abilityN[q.Ability]++
	a.abilityRecall[q.Ability] += recall
	first := func(ids []int) (int, bool) {
		best, ok := 0, false
		for _, id := range ids {
			if p, in := pos[id]; in && (!ok || p < best) {
				best, ok = p, true
			}
		}
		return best, ok
	}
	oldAt, oldIn := first(q.Old)
	newAt, newIn := first(q.New)
	switch q.Ability {
	case "knowledge_update":
		a.ku++
		if newIn {
			a.updated++
		}
		if oldIn && (!newIn || oldAt < newAt) {
			a.stale++
		}
	case "contradiction_resolution":
		a.cr++
		if oldIn && newIn {
			a.both++
		}
	}
}

func (a *acc) result(budget int) Result {
	res := Result{Budget: budget, ByAbility: map[string]float64{}}
	if a == nil || a.n == 0 {
		return res
	}
	res.Recall = round(a.recall / float64(a.n))
	for ab, n := range a.abilityN {
		res.ByAbility[ab] = round(a.abilityRecall[ab] / float64(n))
	}
	if a.ku > 0 {
		res.UpdatedFound, res.StaleFirst = round(a.updated/float64(a.ku)), round(a.stale/float64(a.ku))
	}
	if a.cr > 0 {
		res.BothFound = round(a.both / float64(a.cr))
	}
	return res
}

func round(x float64) float64 { return float64(int(x*1000+0.5)) / 1000 }

// WriteJSON writes the report as one JSON object.
func (r *Report) WriteJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(r)
}

// WritePlot draws recall against budget per method (the LoCoMo plot's
// form).
func (r *Report) WritePlot(w io.Writer) error {
	return r.locomo.WritePlot(w, "BEAM evidence recall, "+r.Data+", "+r.Mode)
}

// WriteTable prints the tables.
func (r *Report) WriteTable(w io.Writer) error {
	total := 0
	for _, n := range r.Questions {
		total += n
	}
	fmt.Fprintf(w, "BEAM evidence recall: %s, %s\n", r.Data, r.Mode)
	fmt.Fprintf(w, "%d conversations, %d messages, %d questions with source_chat_ids (not evaluated: %v)\n",
		r.Conversations, r.Messages, total, r.Skipped)
	fmt.Fprintf(w, "counting: %s\n\n", r.Rules)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprint(tw, "  recall at budget (words)\t")
	for _, b := range r.Budgets {
		fmt.Fprintf(tw, "%d\t", b)
	}
	fmt.Fprintln(tw)
	for _, m := range r.Methods {
		fmt.Fprintf(tw, "  %s\t", m.Label)
		for _, res := range m.Results {
			fmt.Fprintf(tw, "%.3f\t", res.Recall)
		}
		fmt.Fprintln(tw)
	}
	fmt.Fprintf(tw, "\n  at %d words\tupdated found\tstale first\tboth found\t", r.Headline)
	for _, ab := range Abilities {
		if r.Questions[ab] > 0 {
			fmt.Fprintf(tw, "%s\t", ab)
		}
	}
	fmt.Fprintln(tw)
	for _, m := range r.Methods {
		for _, res := range m.Results {
			if res.Budget != r.Headline {
				continue
			}
			fmt.Fprintf(tw, "  %s\t%.3f\t%.3f\t%.3f\t", m.Label, res.UpdatedFound, res.StaleFirst, res.BothFound)
			for _, ab := range Abilities {
				if r.Questions[ab] > 0 {
					fmt.Fprintf(tw, "%.3f\t", res.ByAbility[ab])
				}
			}
			fmt.Fprintln(tw)
		}
	}
	fmt.Fprint(tw, "  questions\t\t\t\t")
	for _, ab := range Abilities {
		if r.Questions[ab] > 0 {
			fmt.Fprintf(tw, "%d\t", r.Questions[ab])
		}
	}
	fmt.Fprintln(tw)
	if err := tw.Flush(); err != nil {
		return err
	}
	if r.CrossValidated != nil {
		locomo.WriteCrossValidation(w, r.CrossValidated, r.Budgets)
	}
	return nil
}
