package revision

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/mneme-memory/mneme/sidecar/clip"
	"github.com/mneme-memory/mneme/sidecar/jobs"
	"github.com/mneme-memory/mneme/sidecar/llm"
	"github.com/mneme-memory/mneme/sidecar/pgtime"
	"github.com/mneme-memory/mneme/sidecar/usage"
)

// ActionMerge is a consolidation's merge of a duplicate into the fact kept
// (mneme.apply_consolidation): the copy becomes merged, like a NOOP's.
const ActionMerge = "MERGE"

// Bounds of a consolidation run's model calls: facts shown per call, and
// characters per fact shown (the prompt stays bounded whatever is stored).
const (
	consolidateGroupMax   = 12
	consolidateFactChars  = 300
	consolidateCandidates = 20 // older facts the rules compare each fact with
)

// ConsolidationFact is an active fact a consolidation looks at
// (mneme.consolidation_facts).
type ConsolidationFact struct {
	ID      uuid.UUID
	Content string
	At      time.Time // when it was said
	Slot    string
	Reviews int
}

// Change is one consolidation decision: Memory acts on Target. SUPERSEDE
// and INVALIDATE: Memory is the later statement; MERGE: Memory is the copy
// merged into Target, the fact kept.
type Change struct {
	Action     string
	Memory     uuid.UUID
	Target     uuid.UUID
	Reason     string
	Classifier string // heuristic or llm
}

// ConsolidationResult is what a run did, stored in mneme.jobs.result.
type ConsolidationResult struct {
	Facts            int    `json:"facts"`
	Superseded       int    `json:"superseded"`
	Invalidated      int    `json:"invalidated"`
	Merged           int    `json:"merged"`
	Stale            int    `json:"stale"`
	ByRules          int    `json:"by_rules"`
	ByModel          int    `json:"by_model"`
	Groups           int    `json:"groups"`           // groups of related facts that rules left unresolved
	GroupsAsked      int    `json:"groups_asked"`     // of them, asked of the model (at most consolidate_llm_max_calls)
	UnusableAnswers  int    `json:"unusable_answers"` // model answers dropped (malformed, out of range, unsure)
	LLMCalls         int64  `json:"llm_calls"`        // calls recorded for this attempt (usage ledger)
	PromptTokens     int64  `json:"prompt_tokens"`
	CompletionTokens int64  `json:"completion_tokens"`
	LLMError         string `json:"llm_error,omitempty"` // the last attempt's model error, when it went on with rules only
}

// Consolidator is the consolidate job's handler. Offline (Model nil) it
// decides by the offline classifier's rules over every active fact of the
// scope; with a model it then asks about the groups of related facts the
// rules left alone, at most MaxCalls (setting consolidate_llm_max_calls)
// calls a run, each showing at most 12 facts of at most 300 characters.
type Consolidator struct {
	Model         chatJSON
	Log           *slog.Logger
	MinConfidence float64
}

// ScheduleConsolidations calls mneme.schedule_consolidation every `every`
// until ctx ends: the conversations whose facts were revised and that went
// quiet (setting consolidate_quiet) get a consolidate job. Several
// sidecars may run it: a conversation has one pending consolidate job at
// a time. Errors are logged and tried again at the next tick.
func ScheduleConsolidations(ctx context.Context, db jobs.Querier, every time.Duration, log *slog.Logger) {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		var n int
		if err := db.QueryRow(ctx, `SELECT count(*) FROM mneme.schedule_consolidation()`).Scan(&n); err != nil {
			if ctx.Err() == nil {
				log.Warn("schedule consolidation", "err", err)
			}
			continue
		}
		if n > 0 {
			log.Info("consolidation scheduled", "conversations", n)
		}
	}
}

// Handle reads the scope's active facts, decides with no transaction open,
// then applies every change in one transaction (mneme.apply_consolidation
// re-checks each under its row locks: a fact changed meanwhile is STALE and
// left alone) and stores the run's counts in the job's result.
func (c Consolidator) Handle(ctx context.Context, db jobs.Store, job jobs.Job) error {
	if !job.ConversationID.Valid {
		return fmt.Errorf("consolidate job %d: no conversation: %w", job.ID, jobs.ErrPermanent)
	}
	conv := job.ConversationID.UUID
	log := c.log().With("job", job.ID, "conversation", conv)
	var set Settings
	var maxCalls int
	if err := db.QueryRow(ctx, `SELECT (mneme.setting('revision_duplicate_similarity') #>> '{}')::float8,
		(mneme.setting('consolidate_llm_max_calls') #>> '{}')::int`).Scan(&set.DuplicateSimilarity, &maxCalls); err != nil {
		return fmt.Errorf("consolidate job %d: read settings: %w", job.ID, err)
	}
	facts, err := readConsolidationFacts(ctx, db, conv)
	if err != nil {
		return fmt.Errorf("consolidate job %d: %w", job.ID, err)
	}
	res := ConsolidationResult{Facts: len(facts)}
	changes := PlanRules(facts, set)
	res.ByRules = len(changes)
	if c.Model != nil && maxCalls > 0 {
		more, err := c.askModel(ctx, facts, changes, maxCalls, &res)
		switch {
		case err != nil && job.Attempts < forceAttempt:
			return fmt.Errorf("consolidate job %d: %w", job.ID, err)
		case err != nil:
			// The last tries go on without the model: the rules' changes
			// are worth keeping, the error is in the result.
			log.Warn("consolidate: the model failed again, applying the rules' changes only", "err", err)
			res.LLMError = clip.String(err.Error(), 300)
		}
		changes = append(changes, more...)
	}
	tot := usage.FromContext(ctx).Totals()
	res.LLMCalls, res.PromptTokens, res.CompletionTokens = tot.Calls, tot.PromptTokens, tot.CompletionTokens
	return db.Commit(ctx, func(tx pgx.Tx) error {
		r := res
		for _, ch := range changes {
			var applied string
			if err := tx.QueryRow(ctx, `SELECT mneme.apply_consolidation($1, $2, $3, $4, $5, $6)`,
				ch.Action, ch.Memory, ch.Target, ch.Reason, ch.Classifier, nullJob(job.ID)).Scan(&applied); err != nil {
				return fmt.Errorf("consolidate job %d: apply %s of %s on %s: %w", job.ID, ch.Action, ch.Memory, ch.Target, err)
			}
			switch applied {
			case ActionSupersede:
				r.Superseded++
			case ActionInvalidate:
				r.Invalidated++
			case ActionMerge:
				r.Merged++
			default:
				r.Stale++
			}
		}
		if job.ID != 0 {
			b, err := json.Marshal(r)
			if err != nil {
				return fmt.Errorf("consolidate job %d: result: %w", job.ID, err)
			}
			if _, err := tx.Exec(ctx, `SELECT mneme.finish_consolidation($1, $2, $3)`, job.ID, conv, b); err != nil {
				return fmt.Errorf("consolidate job %d: store result: %w", job.ID, err)
			}
		}
		log.Info("consolidate", "facts", r.Facts, "superseded", r.Superseded, "invalidated", r.Invalidated,
			"merged", r.Merged, "stale", r.Stale, "llm_calls", r.LLMCalls, "prompt_tokens", r.PromptTokens,
			"completion_tokens", r.CompletionTokens)
		return nil
	})
}

func readConsolidationFacts(ctx context.Context, db jobs.Querier, conv uuid.UUID) ([]ConsolidationFact, error) {
	rows, err := db.Query(ctx, `SELECT id, content, at, coalesce(slot, ''), review_count FROM mneme.consolidation_facts($1)`, conv)
	if err != nil {
		return nil, fmt.Errorf("read facts: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (ConsolidationFact, error) {
		var f ConsolidationFact
		return f, row.Scan(&f.ID, &f.Content, pgtime.Finite{T: &f.At}, &f.Slot, &f.Reviews)
	})
	if err != nil {
		return nil, fmt.Errorf("read facts: %w", err)
	}
	return out, nil
}

// PlanRules is the offline consolidation: each fact, in the order said, is
// classified by the offline classifier (Heuristic) against the older facts
// still active that share its slot or at least two content words (the 20
// newest of them), whatever their distance in the conversation. A
// SUPERSEDE or INVALIDATE of an older fact is kept as is; a NOOP becomes a
// MERGE that keeps the copy with more reviews (the older one on a tie).
func PlanRules(facts []ConsolidationFact, s Settings) []Change {
	words := make([]map[string]bool, len(facts))
	slots := make([]string, len(facts))
	for i, f := range facts {
		words[i] = contentWords(f.Content)
		// (a fact whose revise job has not run yet has no slot stored)
		if slots[i] = f.Slot; slots[i] == "" {
			slots[i] = Parse(f.Content).Slot()
		}
	}
	retired := map[uuid.UUID]bool{}
	var out []Change
	for i, f := range facts {
		if retired[f.ID] {
			continue
		}
		var cands []Candidate
		for j := i - 1; j >= 0 && len(cands) < consolidateCandidates; j-- {
			o := facts[j]
			if retired[o.ID] || o.At.After(f.At) {
				continue
			}
			if (slots[i] != "" && slots[i] == slots[j]) || shared(words[i], words[j]) >= 2 {
				cands = append(cands, Candidate{ID: o.ID, Content: o.Content, At: o.At, Slot: o.Slot})
			}
		}
		if len(cands) == 0 {
			continue
		}
		d, _ := Heuristic{}.Classify(context.Background(), Fact{ID: f.ID, Content: f.Content, At: f.At}, cands, s)
		switch d.Action {
		case ActionSupersede, ActionInvalidate:
			out = append(out, Change{Action: d.Action, Memory: f.ID, Target: d.Target, Reason: d.Reason, Classifier: "heuristic"})
			retired[d.Target] = true
		case ActionNoop:
			keep, dup := d.Target, f.ID
			if f.Reviews > reviewsOf(facts, d.Target) {
				keep, dup = f.ID, d.Target
			}
			out = append(out, Change{Action: ActionMerge, Memory: dup, Target: keep, Reason: d.Reason, Classifier: "heuristic"})
			retired[dup] = true
		}
	}
	return out
}

func reviewsOf(facts []ConsolidationFact, id uuid.UUID) int {
	for _, f := range facts {
		if f.ID == id {
			return f.Reviews
		}
	}
	return 0
}

func shared(a, b map[string]bool) int {
	n := 0
	for w := range a {
		if b[w] {
			n++
		}
	}
	return n
}

// Groups are the related facts the rules left active: facts joined by a
// shared slot or a content-word overlap (Jaccard) of at least 0.25, each
// group at most consolidateGroupMax facts (its newest), newest group first.
// Only groups of two or more facts are returned.
func Groups(facts []ConsolidationFact, retired map[uuid.UUID]bool) [][]ConsolidationFact {
	var live []ConsolidationFact
	for _, f := range facts {
		if !retired[f.ID] {
			live = append(live, f)
		}
	}
	parent := make([]int, len(live))
	for i := range parent {
		parent[i] = i
	}
	var find func(int) int
	find = func(i int) int {
		for parent[i] != i {
			parent[i] = parent[parent[i]]
			i = parent[i]
		}
		return i
	}
	words := make([]map[string]bool, len(live))
	for i, f := range live {
		words[i] = contentWords(f.Content)
	}
	for i := range live {
		for j := i + 1; j < len(live); j++ {
			if (live[i].Slot != "" && live[i].Slot == live[j].Slot) || jaccard(words[i], words[j]) >= 0.25 {
				parent[find(i)] = find(j)
			}
		}
	}
	byRoot := map[int][]ConsolidationFact{}
	for i, f := range live {
		r := find(i)
		byRoot[r] = append(byRoot[r], f)
	}
	var out [][]ConsolidationFact
	for _, g := range byRoot {
		if len(g) < 2 {
			continue
		}
		sort.Slice(g, func(a, b int) bool { return g[a].At.Before(g[b].At) })
		if len(g) > consolidateGroupMax {
			g = g[len(g)-consolidateGroupMax:]
		}
		out = append(out, g)
	}
	sort.Slice(out, func(a, b int) bool {
		ta, tb := out[a][len(out[a])-1].At, out[b][len(out[b])-1].At
		if !ta.Equal(tb) {
			return ta.After(tb)
		}
		return out[a][0].ID.String() < out[b][0].ID.String()
	})
	return out
}

const consolidateSystemPrompt = `You maintain the beliefs of a long-term memory. Below are related facts that are all
currently believed, numbered, with the date each was said, oldest first. Find what is no longer true
or is said twice:
- SUPERSEDE: fact "fact" (said later) gives a new value for what fact "target" (said earlier) said about
  the same subject and attribute (a new city, a new employer, a changed preference or number).
- INVALIDATE: fact "fact" (said later) retracts fact "target" without a new value ("no longer", "quit").
- MERGE: fact "fact" says the same as fact "target" (a restatement); "fact" is folded into "target".
Facts about different subjects, or different attributes of the same subject, stay: list nothing for them.
When unsure, list nothing. Return changes: a list (possibly empty) of {action, fact, target, reason, confidence}.`

// consolidateAnswer is the model's structured output.
type consolidateAnswer struct {
	Changes []consolidateChange `json:"changes" description:"the changes, possibly none"`
}

type consolidateChange struct {
	Action     string  `json:"action" enum:"SUPERSEDE,INVALIDATE,MERGE" description:"the change"`
	Fact       int     `json:"fact" description:"the number of the fact that replaces, retracts or is merged"`
	Target     int     `json:"target" description:"the number of the fact replaced, retracted or kept"`
	Reason     string  `json:"reason" description:"one short sentence"`
	Confidence float64 `json:"confidence" description:"0 to 1"`
}

// Validate rejects answers outside the schema's meaning (ranges are checked
// per group, which knows its size).
func (a *consolidateAnswer) Validate() error {
	for i, ch := range a.Changes {
		switch ch.Action {
		case ActionSupersede, ActionInvalidate, ActionMerge:
		default:
			return fmt.Errorf("change %d: action %q: want SUPERSEDE, INVALIDATE or MERGE", i+1, ch.Action)
		}
		if !(ch.Confidence >= 0 && ch.Confidence <= 1) {
			return fmt.Errorf("change %d: confidence %v: want 0 to 1", i+1, ch.Confidence)
		}
	}
	return nil
}

// askModel asks about the groups the rules left, newest first, at most
// maxCalls of them. An unusable answer (malformed, a number not listed,
// a later fact replaced by an earlier one, a fact acted on twice, a
// confidence under MinConfidence) drops that change or group, never writes
// it; a transport error or timeout is returned.
func (c Consolidator) askModel(ctx context.Context, facts []ConsolidationFact, ruled []Change, maxCalls int,
	res *ConsolidationResult) ([]Change, error) {
	retired := map[uuid.UUID]bool{}
	for _, ch := range ruled {
		if ch.Action == ActionMerge {
			retired[ch.Memory] = true
		} else {
			retired[ch.Target] = true
		}
	}
	groups := Groups(facts, retired)
	res.Groups = len(groups)
	var out []Change
	for gi, g := range groups {
		if gi >= maxCalls {
			break
		}
		res.GroupsAsked++
		var b strings.Builder
		b.WriteString("## Facts\n")
		for i, f := range g {
			fmt.Fprintf(&b, "%d. [%s] %q\n", i+1, f.At.UTC().Format("2006-01-02"), clip.String(f.Content, consolidateFactChars))
		}
		var ans consolidateAnswer
		err := c.Model.JSON(ctx, consolidateSystemPrompt, b.String(), "consolidation", &ans)
		if errors.Is(err, llm.ErrInvalidOutput) {
			c.log().Warn("consolidate: unusable model answer, group left as it is", "error", err)
			res.UnusableAnswers++
			continue
		}
		if err != nil {
			return out, fmt.Errorf("llm consolidation: %w", err)
		}
		used := map[int]bool{}
		for _, ch := range ans.Changes {
			ok := ch.Fact >= 1 && ch.Fact <= len(g) && ch.Target >= 1 && ch.Target <= len(g) && ch.Fact != ch.Target &&
				!used[ch.Fact] && !used[ch.Target] && ch.Confidence >= c.MinConfidence
			if ok && ch.Action != ActionMerge && g[ch.Fact-1].At.Before(g[ch.Target-1].At) {
				ok = false // an earlier statement never replaces a later one
			}
			if !ok {
				res.UnusableAnswers++
				continue
			}
			// The fact replaced, retracted or merged is acted on once; the
			// one that acts may act again (a move retires two old cities).
			if ch.Action == ActionMerge {
				used[ch.Fact] = true
			} else {
				used[ch.Target] = true
			}
			out = append(out, Change{Action: ch.Action, Memory: g[ch.Fact-1].ID, Target: g[ch.Target-1].ID,
				Reason: clip.String(ch.Reason, 500), Classifier: "llm"})
			res.ByModel++
		}
	}
	return out, nil
}

func (c Consolidator) log() *slog.Logger {
	if c.Log == nil {
		return slog.New(slog.DiscardHandler)
	}
	return c.Log
}
