package recall

import (
	"context"
	"fmt"
	"io"
	"math"
	"sort"
	"strings"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/mneme-memory/mneme/sidecar/clip"
	"github.com/mneme-memory/mneme/sidecar/progress"
)

// Candidate is one setting combination the cross-validation may choose:
// mneme settings (key to JSON value) that act at query time, so every
// candidate is measured on the same ingested conversations.
type Candidate map[string]string

// String is the candidate as key=value pairs in key order.
func (c Candidate) String() string {
	keys := make([]string, 0, len(c))
	for k := range c {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = k + "=" + c[k]
	}
	if len(parts) == 0 {
		return "(defaults)"
	}
	return strings.Join(parts, ",")
}

// Grid is the cartesian product of the values given per key, in key order.
func Grid(values map[string][]string) []Candidate {
	keys := make([]string, 0, len(values))
	for k := range values {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	out := []Candidate{{}}
	for _, k := range keys {
		var next []Candidate
		for _, c := range out {
			for _, v := range values[k] {
				n := Candidate{k: v}
				for ck, cv := range c {
					n[ck] = cv
				}
				next = append(next, n)
			}
		}
		out = next
	}
	return out
}

// CrossValidation is the mneme context's recall when its settings are
// chosen on some conversations and measured on the others: conversation i
// is in fold i mod Folds; for each fold the candidate with the best recall
// at the headline budget on the other folds is chosen, and the fold's
// questions are scored with it. Recall is then the mean over every
// question, each scored by a choice that never saw it.
type CrossValidation struct {
	Folds      int                        `json:"folds"`
	Candidates []string                   `json:"candidates"`
	Chosen     []FoldChoice               `json:"chosen"`
	Recall     map[int]Cell               `json:"recall"`            // budget -> cross-validated
	Best       map[int]Cell               `json:"best_in_hindsight"` // budget -> the candidate best on all conversations
	PerCand    map[string]map[int]float64 `json:"per_candidate"`     // candidate -> budget -> recall on all conversations
	// Measures are the reader's extra measures at the headline budget
	// (BEAM's knowledge-update measures), each question scored with its
	// fold's choice, like Recall.
	// (Empty for a reader without measures: LoCoMo and BEAM share one shape.)
	Measures map[string]float64 `json:"measures"`
}

// FoldChoice is what one fold's held-out conversations were scored with.
type FoldChoice struct {
	Fold          int      `json:"fold"`
	Conversations []string `json:"conversations"`
	Candidate     string   `json:"candidate"`
	TrainRecall   float64  `json:"train_recall"`
}

// Scores: candidate -> conversation -> budget -> summed score (recall, or
// 1 per right answer), and the count of questions per conversation; what
// FoldScores folds.
type Scores struct {
	Sum map[int]map[int]map[int]float64
	N   map[int]int
}

// crossValidate measures every candidate's context recall on every
// ingested conversation, then folds. The database's settings are restored
// afterwards.
func crossValidate(ctx context.Context, pool *pgxpool.Pool, convs []Conversation, ingested []*Ingested, opt Options,
	embed QueryEmbedder, budgets []int, headline int) (*CrossValidation, error) {
	folds := opt.Folds
	if folds > len(convs) {
		folds = len(convs)
	}
	if folds < 2 {
		return nil, fmt.Errorf("recall: cross-validation needs at least 2 conversations and 2 folds (have %d conversations)", len(convs))
	}
	keys := map[string]bool{}
	for _, c := range opt.Candidates {
		for k := range c {
			keys[k] = true
		}
	}
	saved := map[string]string{}
	for k := range keys {
		var v string
		if err := pool.QueryRow(ctx, `SELECT value::text FROM mneme.settings WHERE key = $1`, k).Scan(&v); err != nil {
			return nil, fmt.Errorf("recall: setting %s: %w", k, err)
		}
		saved[k] = v
	}
	set := func(c map[string]string) error {
		for k, v := range c {
			if _, err := pool.Exec(ctx, `SELECT mneme.set_setting($1, $2::jsonb)`, k, v); err != nil {
				return fmt.Errorf("recall: set %s=%s: %w", k, v, err)
			}
		}
		return nil
	}
	defer func() { _ = set(saved) }()

	sc := Scores{Sum: map[int]map[int]map[int]float64{}, N: map[int]int{}}
	// The extra measures at the headline budget: candidate -> conversation
	// -> measure -> sum, and conversation -> measure -> questions.
	msum := map[int]map[int]map[string]float64{}
	mn := map[int]map[string]int{}
	total := 0
	for i := range convs {
		total += len(convs[i].Questions)
	}
	bar := progress.New(opt.Progress, "cross-validation", total*len(opt.Candidates))
	for ci, cand := range opt.Candidates {
		if err := set(saved); err != nil {
			return nil, err
		}
		if err := set(cand); err != nil {
			return nil, err
		}
		sc.Sum[ci] = map[int]map[int]float64{}
		msum[ci] = map[int]map[string]float64{}
		for i := range convs {
			c := &convs[i]
			bar.Label = "cross-validation " + cand.String()
			src := &contextSource{pool: pool, conv: ingested[i].ConvID, at: ingested[i].Last, in: ingested[i], embed: embed}
			sc.Sum[ci][i] = map[int]float64{}
			msum[ci][i] = map[string]float64{}
			if mn[i] == nil {
				mn[i] = map[string]int{}
			}
			for _, q := range c.Questions {
				for _, b := range budgets {
					inside, _, _, err := src.context(ctx, q.Text, b)
					if err != nil {
						return nil, fmt.Errorf("conversation %s question %d: %w", c.ID, q.Index+1, err)
					}
					r, _ := evidenceRecall(q.Evidence, inside)
					sc.Sum[ci][i][b] += r
					if b == headline && q.Measure != nil {
						for name, v := range q.Measure(inside) {
							msum[ci][i][name] += v
							if ci == 0 {
								mn[i][name]++
							}
						}
					}
				}
				bar.Add(1)
			}
			sc.N[i] = len(c.Questions)
		}
	}
	bar.Done()

	names := make([]string, len(opt.Candidates))
	for ci, c := range opt.Candidates {
		names[ci] = c.String()
	}
	ids := make([]string, len(convs))
	for i := range convs {
		ids[i] = convs[i].ID
	}
	cv := FoldScores(names, ids, sc, folds, budgets, headline)
	// The measures of each fold's questions under the fold's choice.
	index := map[string]int{}
	for ci, name := range names {
		index[name] = ci
	}
	sums, ns := map[string]float64{}, map[string]int{}
	for _, fc := range cv.Chosen {
		ci := index[fc.Candidate]
		for i := range convs {
			if i%folds != fc.Fold-1 {
				continue
			}
			for name, n := range mn[i] {
				sums[name] += msum[ci][i][name]
				ns[name] += n
			}
		}
	}
	for name, n := range ns {
		cv.Measures[name] = round(sums[name]/float64(n), 3)
	}
	return cv, nil
}

// FoldScores chooses, for each fold (conversation i is in fold i mod
// folds), the candidate best on the other folds at the headline budget
// (ties: the first listed) and scores the fold's questions with it. The
// one cross-validation of every evaluation (the recall evaluations and
// the revision suite).
func FoldScores(names, convIDs []string, sc Scores, folds int, budgets []int, headline int) *CrossValidation {
	cv := &CrossValidation{Folds: folds, Candidates: names, Recall: map[int]Cell{}, Best: map[int]Cell{}, PerCand: map[string]map[int]float64{},
		Measures: map[string]float64{}}
	recallOn := func(ci int, in func(i int) bool, b int) float64 {
		s, n := 0.0, 0
		for i := range convIDs {
			if in(i) {
				s += sc.Sum[ci][i][b]
				n += sc.N[i]
			}
		}
		if n == 0 {
			return 0
		}
		return s / float64(n)
	}
	all := func(int) bool { return true }
	bestAll := 0
	for ci, name := range names {
		cv.PerCand[name] = map[int]float64{}
		for _, b := range budgets {
			cv.PerCand[name][b] = round(recallOn(ci, all, b), 3)
		}
		if recallOn(ci, all, headline) > recallOn(bestAll, all, headline)+1e-12 {
			bestAll = ci
		}
	}
	sums := map[int]float64{}
	n := 0
	for f := 0; f < folds; f++ {
		train := func(i int) bool { return i%folds != f }
		best, bestR := 0, math.Inf(-1)
		for ci := range names {
			if r := recallOn(ci, train, headline); r > bestR+1e-12 {
				best, bestR = ci, r
			}
		}
		fc := FoldChoice{Fold: f + 1, Candidate: names[best], TrainRecall: round(bestR, 3)}
		for i, id := range convIDs {
			if i%folds != f {
				continue
			}
			fc.Conversations = append(fc.Conversations, id)
			n += sc.N[i]
			for _, b := range budgets {
				sums[b] += sc.Sum[best][i][b]
			}
		}
		cv.Chosen = append(cv.Chosen, fc)
	}
	for _, b := range budgets {
		cv.Recall[b] = Cell{Questions: n, Recall: round(sums[b]/float64(max(n, 1)), 3)}
		cv.Best[b] = Cell{Questions: n, Recall: round(recallOn(bestAll, all, b), 3)}
	}
	return cv
}

// WriteCrossValidation prints the cross-validated table.
func WriteCrossValidation(w io.Writer, cv *CrossValidation, budgets []int) {
	fmt.Fprintf(w, "\ncross-validated mneme context (%d folds, settings chosen on the other folds at the headline budget, among %d candidates)\n",
		cv.Folds, len(cv.Candidates))
	fmt.Fprintf(w, "  %-44s", "")
	for _, b := range budgets {
		fmt.Fprintf(w, " %7d", b)
	}
	fmt.Fprintf(w, "\n  %-44s", "cross-validated")
	for _, b := range budgets {
		fmt.Fprintf(w, " %7.3f", cv.Recall[b].Recall)
	}
	fmt.Fprintf(w, "\n  %-44s", "best candidate in hindsight")
	for _, b := range budgets {
		fmt.Fprintf(w, " %7.3f", cv.Best[b].Recall)
	}
	fmt.Fprintln(w)
	for _, c := range cv.Candidates {
		fmt.Fprintf(w, "  %-44s", clip.String(c, 44))
		for _, b := range budgets {
			fmt.Fprintf(w, " %7.3f", cv.PerCand[c][b])
		}
		fmt.Fprintln(w)
	}
	for _, fc := range cv.Chosen {
		fmt.Fprintf(w, "  fold %d (%s): chose %s (%.3f on the other folds)\n", fc.Fold, strings.Join(fc.Conversations, ", "),
			fc.Candidate, fc.TrainRecall)
	}
	if len(cv.Measures) > 0 {
		names := make([]string, 0, len(cv.Measures))
		for n := range cv.Measures {
			names = append(names, n)
		}
		sort.Strings(names)
		fmt.Fprintf(w, "  cross-validated measures at the headline budget:")
		for _, n := range names {
			fmt.Fprintf(w, " %s %.3f", n, cv.Measures[n])
		}
		fmt.Fprintln(w)
	}
}
