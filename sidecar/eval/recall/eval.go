package recall

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"strconv"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/mneme-memory/mneme/sidecar/config"
	"github.com/mneme-memory/mneme/sidecar/pipeline"
	"github.com/mneme-memory/mneme/sidecar/progress"
)

// DefaultBudgets are the context budgets, in words, of every report.
var DefaultBudgets = []int{200, 500, 1000, 2000}

// Options are one run's, whatever the benchmark (the flags of `mneme eval
// locomo` and `mneme eval beam` set them).
type Options struct {
	Limit    int   // first N conversations (0: all)
	Budgets  []int // context budgets in words; nil: DefaultBudgets
	Headline int   // the budget of the per-category table; 0: 1000
	// AgentK > 0 simulates a live agent during ingest: mneme.retrieve (k =
	// AgentK) with every turn as the query, so the review pipeline rates
	// what was retrieved. 0: search-only, no reviews.
	AgentK int
	// Folds > 1 with Candidates cross-validates the mneme context's
	// query-time settings (Report.CrossValidated): chosen on some
	// conversations, measured on the others.
	Folds      int
	Candidates []Candidate
	Settings   map[string]json.RawMessage // mneme settings for the run
	// Config is the sidecar's: the server of the scratch database, and the
	// LLM and embedder of the pipelines (offline unless configured).
	Config   config.Config
	Keep     bool         // keep the scratch database
	Citus    bool         // the server is a Citus coordinator: distribute the scratch database
	Log      *slog.Logger // the run's (the scratch database); nil: none
	PipeLog  *slog.Logger // the pipelines' (they log every episode at info); nil: none
	Progress io.Writer    // progress bars; nil: none
	// Questions, when set, receives one JSON line per question, method and
	// budget (QuestionLine): what each method put inside, for comparing
	// them question by question. nil: none.
	Questions io.Writer
	// Consolidate runs mneme.consolidate on each conversation after its
	// ingest (and drains the job) before any question: the consolidation's
	// effect on recall, measured against a run without it.
	Consolidate bool
}

// Run evaluates d against the migrated mneme database behind pool, which
// must hold none of these conversations yet (use a fresh database: the
// numbers are reproducible only from the same start). It applies the
// settings, wires the sidecar's pipelines (pipeline.Configure: offline
// unless o.Config names an LLM or an embedder) and runs their jobs in
// process while it ingests.
func Run(ctx context.Context, pool *pgxpool.Pool, o Options, d *Data) (*Report, error) {
	convs, w, err := prepare(ctx, pool, o, d)
	if err != nil {
		return nil, err
	}
	return run(ctx, pool, o, d, convs, w)
}

// Prepared is the conversations IngestAll ingested.
type Prepared struct {
	Conversations []Conversation
	Ingested      []*Ingested // one per conversation, in the same order
}

// IngestAll prepares the database as Run does (o's settings, the pipelines
// wired from o.Config) and feeds every turn of d's conversations (the
// first o.Limit) through mneme.add_message and the pipelines, for an
// evaluation that asks its own questions (`mneme eval qa`).
func IngestAll(ctx context.Context, pool *pgxpool.Pool, o Options, d *Data) (*Prepared, error) {
	convs, w, err := prepare(ctx, pool, o, d)
	if err != nil {
		return nil, err
	}
	turns := 0
	for i := range convs {
		turns += convs[i].TurnCount()
	}
	bar := progress.New(o.Progress, "ingest", turns)
	p := &Prepared{Conversations: convs}
	for i := range convs {
		bar.Label = "ingest " + convs[i].ID
		in, err := ingest(ctx, pool, w.jobs, &convs[i], bar, o.AgentK)
		if err != nil {
			return nil, err
		}
		if o.Consolidate {
			if err := consolidate(ctx, pool, w.jobs, in.ConvID); err != nil {
				return nil, err
			}
		}
		p.Ingested = append(p.Ingested, in)
	}
	bar.Done()
	return p, nil
}

// prepare applies the run's settings and wires the pipelines.
func prepare(ctx context.Context, pool *pgxpool.Pool, o Options, d *Data) ([]Conversation, wiring, error) {
	convs := d.Conversations
	if o.Limit > 0 && o.Limit < len(convs) {
		convs = convs[:o.Limit]
	}
	for k, v := range o.Settings {
		if _, err := pool.Exec(ctx, `SELECT mneme.set_setting($1, $2::jsonb)`, k, string(v)); err != nil {
			return nil, wiring{}, fmt.Errorf("--set %s: %w", k, err)
		}
	}
	if _, set := o.Settings["message_max_chars"]; !set {
		if err := fitLongestTurn(ctx, pool, convs); err != nil {
			return nil, wiring{}, err
		}
	}
	// A configured embedder embeds memories (pipeline) and questions (here);
	// SQL then skips its hash embedding of queries.
	if o.Config.Embed.Configured() {
		if _, err := pool.Exec(ctx, `SELECT mneme.set_setting('embedder', '"external"')`); err != nil {
			return nil, wiring{}, fmt.Errorf("set embedder: %w", err)
		}
	}
	deps, err := pipeline.Configure(ctx, o.Config, pool, o.PipeLog, nil, nil, nil)
	if err != nil {
		return nil, wiring{}, err
	}
	w := wiring{mode: "offline"}
	if o.Config.Embed.Configured() {
		w.embed = deps.Embedder
		w.mode = "embedder " + o.Config.Embed.Model
	}
	if o.Config.LLM.Configured() {
		w.mode += ", LLM " + o.Config.LLM.Model
	}
	if w.jobs, err = PipelineJobs(pool, deps); err != nil {
		return nil, wiring{}, err
	}
	return convs, w, nil
}

// fitLongestTurn raises message_max_chars to the longest turn of the data
// when mneme's limit would refuse one (BEAM has a message of 348,853
// characters; the default is 100,000): the evaluation loses no turn.
func fitLongestTurn(ctx context.Context, pool *pgxpool.Pool, convs []Conversation) error {
	longest := 0
	for _, c := range convs {
		for _, s := range c.Sessions {
			for _, t := range s.Turns {
				longest = max(longest, len([]rune(t.Text)))
			}
		}
	}
	var limit int
	if err := pool.QueryRow(ctx, `SELECT mneme.setting('message_max_chars')::int`).Scan(&limit); err != nil {
		return fmt.Errorf("read message_max_chars: %w", err)
	}
	if longest <= limit {
		return nil
	}
	if _, err := pool.Exec(ctx, `SELECT mneme.set_setting('message_max_chars', $1::jsonb)`, strconv.Itoa(longest)); err != nil {
		return fmt.Errorf("set message_max_chars: %w", err)
	}
	return nil
}

// consolidate runs the conversation's consolidate job (mneme.consolidate)
// to the end.
func consolidate(ctx context.Context, pool *pgxpool.Pool, jobs Jobs, conv uuid.UUID) error {
	if _, err := pool.Exec(ctx, `SELECT mneme.consolidate($1)`, conv); err != nil {
		return fmt.Errorf("consolidate %s: %w", conv, err)
	}
	if err := jobs.Drain(ctx); err != nil {
		return fmt.Errorf("consolidate %s: %w", conv, err)
	}
	return nil
}
