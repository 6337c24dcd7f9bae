package recall

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/mneme-memory/mneme/sidecar/progress"
)

// wiring is what a run needs of the pipelines: the job runner that
// segments in process, the question embedder (nil: SQL embeds queries
// with the built-in hash embedder), and how the report names them.
type wiring struct {
	jobs  Jobs
	embed QueryEmbedder
	mode  string
}

// source produces, for one question, one ranking per method it serves.
type source interface {
	methods() []string
	rank(ctx context.Context, question string) ([][]Doc, []time.Duration, error)
}

func run(ctx context.Context, pool *pgxpool.Pool, o Options, d *Data, convs []Conversation, w wiring) (*Report, error) {
	budgets := append([]int(nil), o.Budgets...)
	if len(budgets) == 0 {
		budgets = append(budgets, DefaultBudgets...)
	}
	headline := o.Headline
	if headline == 0 {
		headline = 1000
	}
	if !slices.Contains(budgets, headline) {
		budgets = append(budgets, headline)
	}
	sort.Ints(budgets)
	for _, b := range budgets {
		if b <= 0 {
			return nil, fmt.Errorf("recall: budget %d is not a positive number of words", b)
		}
	}
	for _, c := range convs {
		var n int
		if err := pool.QueryRow(ctx, `SELECT count(*) FROM mneme.messages WHERE conversation_id = $1`,
			ConversationUUID(c.ID, "mneme")).Scan(&n); err != nil {
			return nil, fmt.Errorf("check database: %w", err)
		}
		if n > 0 {
			return nil, fmt.Errorf("recall: conversation %s is already in this database: evaluate on a fresh one", c.ID)
		}
	}

	rep := newReport(d, convs, budgets, headline)
	rep.Mode = w.mode
	if o.Consolidate {
		rep.Mode += ", consolidated after ingest"
	}
	rep.AgentK = o.AgentK
	if o.Questions != nil {
		rep.questions = json.NewEncoder(o.Questions)
	}
	if err := rep.readSettings(ctx, pool); err != nil {
		return nil, err
	}
	turns, questions := 0, 0
	for i := range convs {
		turns += convs[i].TurnCount()
		questions += len(convs[i].Questions)
	}
	ingestBar := progress.New(o.Progress, "ingest", turns)
	ingested := make([]*Ingested, len(convs))
	for i := range convs {
		c := &convs[i]
		ingestBar.Label = "ingest " + c.ID
		in, err := ingest(ctx, pool, w.jobs, c, ingestBar, o.AgentK)
		if err != nil {
			return nil, err
		}
		if o.Consolidate {
			if err := consolidate(ctx, pool, w.jobs, in.ConvID); err != nil {
				return nil, err
			}
		}
		ingested[i] = in
		rep.addConversation(c, in)
	}
	ingestBar.Done()

	qBar := progress.New(o.Progress, "questions", questions)
	for i := range convs {
		c := &convs[i]
		qBar.Label = "questions " + c.ID
		rep.conv = c.ID
		mems, err := loadMemories(ctx, pool, ingested[i])
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
		pgSrc, err := newPGHybridSource(ctx, pool, c, w.embed)
		if err != nil {
			return nil, err
		}
		at := ingested[i].Last // retrievability when a live agent would be asked: never the wall clock
		sources := []source{
			&mnemeSource{pool: pool, conv: ingested[i].ConvID, at: at, memories: mems, embed: w.embed},
			turnsSrc, winSrc, pgSrc,
		}
		ctxSrc := &contextSource{pool: pool, conv: ingested[i].ConvID, at: at, in: ingested[i], embed: w.embed}
		for _, q := range c.Questions {
			for _, b := range budgets {
				inside, words, took, err := ctxSrc.context(ctx, q.Text, b)
				if err != nil {
					return nil, fmt.Errorf("conversation %s question %d: %w", c.ID, q.Index+1, err)
				}
				rep.addContext(MethodContext, &q, b, inside, words)
				if b == headline {
					rep.lat[MethodContext] = append(rep.lat[MethodContext], took)
				}
			}
			for _, src := range sources {
				rankings, took, err := src.rank(ctx, q.Text)
				if err != nil {
					return nil, fmt.Errorf("conversation %s question %d: %w", c.ID, q.Index+1, err)
				}
				for j, m := range src.methods() {
					rep.add(m, &q, rankings[j], took[j])
				}
			}
			qBar.Add(1)
		}
	}
	qBar.Done()
	if rep.dumpErr != nil {
		return nil, fmt.Errorf("recall: write the questions: %w", rep.dumpErr)
	}
	if o.Folds > 1 && len(o.Candidates) > 0 {
		cv, err := crossValidate(ctx, pool, convs, ingested, o, w.embed, budgets, headline)
		if err != nil {
			return nil, err
		}
		rep.CrossValidated = cv
	}
	rep.finish()
	return rep, nil
}
