// Package qa is the answer-level evaluation (`mneme eval qa --llm`): for a
// user with a model, each benchmark question is answered by that model from
// mneme's context (mneme.context at a word budget) and the answer judged
// against the benchmark's reference answer by the same model, with the
// judge prompt of docs/eval.md. It reports accuracy per category, the way
// the peers publish LLM-judged scores, so that a user can compare mneme on
// the same footing with their own model. Its tests check its mechanics
// with a scripted model, never its numbers.
package qa

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sort"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/mneme-memory/mneme/sidecar/eval/recall"
	"github.com/mneme-memory/mneme/sidecar/llm"
	"github.com/mneme-memory/mneme/sidecar/progress"
)

// Model is what the evaluation needs of a chat model: one structured
// answer (llm.Client.JSON). Declared here, where it is used.
type Model interface {
	JSON(ctx context.Context, system, user, name string, out any) error
}

// AnswerPrompt is the system prompt of the answering call. The user
// message is the context, then the question (docs/eval.md).
const AnswerPrompt = `You answer a question about a long conversation between a user and an assistant, using only the memory context given (excerpts of the conversation under their dates, and facts). Answer in a short phrase: a name, a date, a number or one sentence. If the context does not hold the answer, say that you do not know.`

// JudgePrompt is the system prompt of the judging call (docs/eval.md
// quotes it). The user message holds the question, the reference answer
// and the answer to judge.
const JudgePrompt = `You judge whether an answer to a question about a conversation is correct, given the reference answer. Be generous with wording: the answer is correct when it states the same thing as the reference (the same person, place, thing, number, or a date or period that refers to the same time, in any format), even if it is longer or phrased differently. It is wrong when it contradicts the reference, misses its point, or says it does not know while the reference gives an answer. Reply with correct true or false and a one-sentence reason.`

// answer and judgement are the structured outputs.
type answer struct {
	Answer string `json:"answer" description:"the answer, a short phrase"`
}

type judgement struct {
	Correct bool   `json:"correct" description:"whether the answer states what the reference answer states"`
	Reason  string `json:"reason" description:"one sentence"`
}

// Options are a run's.
type Options struct {
	Budget   int       // words of mneme.context; 0: 1000
	Progress io.Writer // progress bar; nil: none
}

// Category is one category's result.
type Category struct {
	Name      string  `json:"name"`
	Questions int     `json:"questions"` // asked (with a reference answer)
	Correct   int     `json:"correct"`
	Failed    int     `json:"failed"` // the model's answer or judgement unusable: counted wrong
	Accuracy  float64 `json:"accuracy"`
}

// Report is a run's result.
type Report struct {
	Benchmark  string     `json:"benchmark"`
	Data       string     `json:"data"`
	Model      string     `json:"model"`
	Budget     int        `json:"budget"`
	Categories []Category `json:"categories"` // the data's order, then any other
	Total      Category   `json:"total"`
	NoAnswer   int        `json:"no_reference_answer"` // questions skipped: the benchmark gives no answer
	Calls      int        `json:"model_calls"`
	Duration   string     `json:"duration"`
}

// Evaluate asks every question of the ingested conversations that has a
// reference answer: mneme.context (record => false, as of the
// conversation's last turn) at the budget, the model's answer from it, the
// model's judgement of that answer. An unusable answer or judgement (a
// malformed reply, a refused schema) counts as wrong and is counted in
// Failed; a transport error after the client's retries, or the caller's
// cancellation, ends the run.
func Evaluate(ctx context.Context, pool *pgxpool.Pool, p *recall.Prepared, d *recall.Data, m Model, modelName string,
	o Options) (*Report, error) {
	start := time.Now()
	if o.Budget == 0 {
		o.Budget = 1000
	}
	rep := &Report{Benchmark: d.Benchmark, Data: d.Name, Model: modelName, Budget: o.Budget}
	byName := map[string]*Category{}
	order := append([]string(nil), d.Categories...)
	total := 0
	for _, c := range p.Conversations {
		total += len(c.Questions)
	}
	bar := progress.New(o.Progress, "questions", total)
	for i, c := range p.Conversations {
		in := p.Ingested[i]
		bar.Label = "questions " + c.ID
		for _, q := range c.Questions {
			bar.Add(1)
			if strings.TrimSpace(q.Answer) == "" {
				rep.NoAnswer++
				continue
			}
			cat := byName[q.Category]
			if cat == nil {
				cat = &Category{Name: q.Category}
				byName[q.Category] = cat
			}
			cat.Questions++
			var md string
			if err := pool.QueryRow(ctx, `SELECT mneme.context($1, $2, $3, at => $4, record => false)`,
				in.ConvID, q.Text, o.Budget, in.Last).Scan(&md); err != nil {
				return nil, fmt.Errorf("qa: conversation %s question %d: mneme.context: %w", c.ID, q.Index+1, err)
			}
			ok, err := ask(ctx, m, md, q, &rep.Calls)
			switch {
			case errors.Is(err, llm.ErrInvalidOutput):
				cat.Failed++
			case err != nil:
				return nil, fmt.Errorf("qa: conversation %s question %d: %w", c.ID, q.Index+1, err)
			case ok:
				cat.Correct++
			}
		}
	}
	bar.Done()
	for name := range byName {
		found := false
		for _, n := range order {
			found = found || n == name
		}
		if !found {
			order = append(order, name)
		}
	}
	sort.SliceStable(order[len(d.Categories):], func(i, j int) bool {
		return order[len(d.Categories)+i] < order[len(d.Categories)+j]
	})
	rep.Total.Name = "total"
	for _, n := range order {
		cat := byName[n]
		if cat == nil {
			continue
		}
		cat.Accuracy = ratio(cat.Correct, cat.Questions)
		rep.Categories = append(rep.Categories, *cat)
		rep.Total.Questions += cat.Questions
		rep.Total.Correct += cat.Correct
		rep.Total.Failed += cat.Failed
	}
	rep.Total.Accuracy = ratio(rep.Total.Correct, rep.Total.Questions)
	rep.Duration = time.Since(start).Round(time.Millisecond).String()
	return rep, nil
}

// ask is one question's two calls: the answer from the context, then the
// judgement of that answer against the reference.
func ask(ctx context.Context, m Model, md string, q recall.Question, calls *int) (bool, error) {
	if strings.TrimSpace(md) == "" {
		md = "(no memory matched the question)"
	}
	var a answer
	*calls++
	if err := m.JSON(ctx, AnswerPrompt, "Memory context:\n\n"+md+"\n\nQuestion: "+q.Text, "qa_answer", &a); err != nil {
		return false, fmt.Errorf("answer: %w", err)
	}
	var j judgement
	*calls++
	user := "Question: " + q.Text + "\nReference answer: " + q.Answer + "\nAnswer to judge: " + a.Answer
	if err := m.JSON(ctx, JudgePrompt, user, "qa_judgement", &j); err != nil {
		return false, fmt.Errorf("judge: %w", err)
	}
	return j.Correct, nil
}

func ratio(a, b int) float64 {
	if b == 0 {
		return 0
	}
	return float64(a) / float64(b)
}

// WriteTable prints the report as a table.
func (r *Report) WriteTable(w io.Writer) error {
	var b strings.Builder
	fmt.Fprintf(&b, "%s answer accuracy (%s), judged by %s; mneme.context at %d words\n\n", r.Benchmark, r.Data, r.Model, r.Budget)
	fmt.Fprintf(&b, "  %-28s %9s %8s %7s %9s\n", "category", "questions", "correct", "failed", "accuracy")
	for _, c := range append(append([]Category(nil), r.Categories...), r.Total) {
		fmt.Fprintf(&b, "  %-28s %9d %8d %7d %9.3f\n", c.Name, c.Questions, c.Correct, c.Failed, c.Accuracy)
	}
	fmt.Fprintf(&b, "\nquestions without a reference answer (skipped): %d; model calls: %d; %s\n", r.NoAnswer, r.Calls, r.Duration)
	_, err := io.WriteString(w, b.String())
	return err
}
