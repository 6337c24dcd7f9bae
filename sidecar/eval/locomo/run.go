package locomo

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"sort"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
)

// DefaultBudgets are the context budgets, in words, of every report.
var DefaultBudgets = []int{200, 500, 1000, 2000}

// Options tune Run.
type Options struct {
	Budgets  []int // context budgets in words; nil: DefaultBudgets
	Headline int   // the budget of the per-category table; 0: 1000
	Jobs     Jobs  // runs segmentation in process; required
	Embed    QueryEmbedder
	Progress io.Writer // progress bars; nil: none
	Data     string    // the data file's name, for the report
	Mode     string    // offline, or the LLM and embedder used, for the report
	Count    string    // what of a memory counts toward the budget: CountContent (default) or CountMemoryText
	// AgentK > 0 simulates a live agent during ingest: mneme.retrieve (k =
	// AgentK) with every turn as the query, so the review pipeline rates
	// what was retrieved. 0: search-only, no reviews.
	AgentK int
	// AsOf is the time mneme.search evaluates retrievability at (its
	// `at`). Zero: each conversation's last turn, when a live agent would
	// be asked the questions. Never the wall clock: the numbers must not
	// depend on the day they are computed.
	AsOf time.Time
	// Observe, when set, sees every context of every method: the question,
	// the budget and the evidence-bearing turns inside, in context order
	// (the BEAM evaluation measures order and pairs through it).
	Observe func(method string, q *Question, budget int, found []string)
	// Folds > 1 with Candidates cross-validates the mneme context's
	// query-time settings (Report.CrossValidated): chosen on some
	// conversations, measured on the others.
	Folds      int
	Candidates []Candidate
}

// source produces, for one question, one ranking per method it serves.
type source interface {
	methods() []string
	rank(ctx context.Context, question string) ([][]Doc, []time.Duration, error)
}

// Run evaluates convs against the mneme database behind pool, which must
// be migrated and hold none of these conversations yet (use a fresh
// database: the numbers are reproducible only from the same start).
func Run(ctx context.Context, pool *pgxpool.Pool, convs []Conversation, opt Options) (*Report, error) {
	if opt.Jobs == nil {
		return nil, errors.New("locomo: Options.Jobs is required to segment in process")
	}
	budgets := append([]int(nil), opt.Budgets...)
	if len(budgets) == 0 {
		budgets = append(budgets, DefaultBudgets...)
	}
	headline := opt.Headline
	if headline == 0 {
		headline = 1000
	}
	if !slices.Contains(budgets, headline) {
		budgets = append(budgets, headline)
	}
	sort.Ints(budgets)
	for _, b := range budgets {
		if b <= 0 {
			return nil, fmt.Errorf("locomo: budget %d is not a positive number of words", b)
		}
	}
	for _, c := range convs {
		var n int
		if err := pool.QueryRow(ctx, `SELECT count(*) FROM mneme.messages WHERE conversation_id = $1`,
			ConversationUUID(c.ID, "mneme")).Scan(&n); err != nil {
			return nil, fmt.Errorf("check database: %w", err)
		}
		if n > 0 {
			return nil, fmt.Errorf("locomo: conversation %s is already in this database: evaluate on a fresh one", c.ID)
		}
	}

	rep := newReport(opt.Data, budgets, headline)
	rep.Mode = opt.Mode
	rep.Count = opt.Count
	rep.AsOf = "last turn of each conversation"
	if !opt.AsOf.IsZero() {
		rep.AsOf = opt.AsOf.UTC().Format(time.RFC3339)
	}
	rep.AgentK = opt.AgentK
	if rep.Count == "" {
		rep.Count = CountContent
	}
	if err := rep.readSettings(ctx, pool); err != nil {
		return nil, err
	}
	turns, questions := 0, 0
	for i := range convs {
		turns += convs[i].TurnCount()
		questions += len(convs[i].Questions)
	}
	ingestBar := newProgress(opt.Progress, "ingest", turns)
	ingested := make([]*Ingested, len(convs))
	for i := range convs {
		c := &convs[i]
		ingestBar.label = "ingest " + c.ID
		in, err := ingest(ctx, pool, opt.Jobs, c, ingestBar, opt.AgentK)
		if err != nil {
			return nil, err
		}
		ingested[i] = in
		rep.addConversation(c, in)
	}
	ingestBar.done()

	qBar := newProgress(opt.Progress, "questions", questions)
	for i := range convs {
		c := &convs[i]
		qBar.label = "questions " + c.ID
		mems, err := loadMemories(ctx, pool, ingested[i], opt.Count)
		if err != nil {
			return nil, fmt.Errorf("conversation %s: %w", c.ID, err)
		}
		rep.addMemories(mems)
		turnsSrc, err := newBM25Source(ctx, pool, MethodBM25Turns, c, 1)
		if err != nil {
			return nil, err
		}
		winSrc, err := newBM25Source(ctx, pool, MethodBM25Windows, c, 5)
		if err != nil {
			return nil, err
		}
		pgSrc, err := newPGHybridSource(ctx, pool, c, opt.Embed)
		if err != nil {
			return nil, err
		}
		sources := []source{
			&mnemeSource{pool: pool, conv: ingested[i].ConvID, at: asOf(opt.AsOf, ingested[i]), memories: mems, embed: opt.Embed},
			turnsSrc, winSrc, pgSrc,
		}
		ctxSrc := &contextSource{pool: pool, conv: ingested[i].ConvID, at: asOf(opt.AsOf, ingested[i]), in: ingested[i], embed: opt.Embed}
		for _, q := range c.Questions {
			for _, b := range budgets {
				found, words, took, err := ctxSrc.context(ctx, q.Text, b)
				if err != nil {
					return nil, fmt.Errorf("conversation %s question %d: %w", c.ID, q.Index+1, err)
				}
				rep.addFound(ctxSrc.method(), &q, b, setOf(found), words)
				if opt.Observe != nil {
					opt.Observe(ctxSrc.method(), &q, b, found)
				}
				if b == headline {
					rep.lat[ctxSrc.method()] = append(rep.lat[ctxSrc.method()], took)
				}
			}
			for _, src := range sources {
				rankings, took, err := src.rank(ctx, q.Text)
				if err != nil {
					return nil, fmt.Errorf("conversation %s question %d: %w", c.ID, q.Index+1, err)
				}
				for j, m := range src.methods() {
					rep.add(m, &q, rankings[j], took[j])
					if opt.Observe != nil {
						for _, b := range budgets {
							opt.Observe(m, &q, b, TakeOrdered(rankings[j], b))
						}
					}
				}
			}
			qBar.add(1)
		}
	}
	qBar.done()
	if opt.Folds > 1 && len(opt.Candidates) > 0 {
		cv, err := crossValidate(ctx, pool, convs, ingested, opt, budgets, headline)
		if err != nil {
			return nil, err
		}
		rep.CrossValidated = cv
	}
	rep.finish()
	return rep, nil
}

// asOf is the retrievability time of a conversation's questions.
func asOf(fixed time.Time, in *Ingested) time.Time {
	if fixed.IsZero() {
		return in.Last
	}
	return fixed
}

func setOf(ids []string) map[string]bool {
	out := make(map[string]bool, len(ids))
	for _, id := range ids {
		out[id] = true
	}
	return out
}
