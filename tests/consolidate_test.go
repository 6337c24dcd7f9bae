package tests

import (
	"context"
	"encoding/json"
	"log/slog"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"
	openai "github.com/sashabaranov/go-openai"
	"github.com/stretchr/testify/require"

	"github.com/mneme-memory/mneme/sidecar/config"
	"github.com/mneme-memory/mneme/sidecar/dbtest"
	"github.com/mneme-memory/mneme/sidecar/embed"
	"github.com/mneme-memory/mneme/sidecar/llm"
	"github.com/mneme-memory/mneme/sidecar/llm/llmtest"
	"github.com/mneme-memory/mneme/sidecar/pipeline"
	"github.com/mneme-memory/mneme/sidecar/usage"
)

// missedFacts writes facts whose revise jobs never ran (done without
// running): what write-time revision missed, left for consolidation.
func missedFacts(t *testing.T, db *dbtest.DB, conv uuid.UUID, start time.Time, texts ...string) []uuid.UUID {
	t.Helper()
	ctx := context.Background()
	var ids []uuid.UUID
	for i, text := range texts {
		at := start.Add(time.Duration(i) * 24 * time.Hour)
		ids = append(ids, rememberFact(t, db, conv, text, &at))
	}
	_, err := db.Pool.Exec(ctx, `UPDATE mneme.jobs SET state = 'done', finished_at = now() WHERE kind = 'revise' AND state = 'pending'`)
	require.NoError(t, err)
	return ids
}

type consolidateResult struct {
	Facts            int    `json:"facts"`
	Superseded       int    `json:"superseded"`
	Invalidated      int    `json:"invalidated"`
	Merged           int    `json:"merged"`
	Stale            int    `json:"stale"`
	ByRules          int    `json:"by_rules"`
	ByModel          int    `json:"by_model"`
	Groups           int    `json:"groups"`
	GroupsAsked      int    `json:"groups_asked"`
	UnusableAnswers  int    `json:"unusable_answers"`
	LLMCalls         int64  `json:"llm_calls"`
	PromptTokens     int64  `json:"prompt_tokens"`
	CompletionTokens int64  `json:"completion_tokens"`
	LLMError         string `json:"llm_error"`
}

// consolidateNow enqueues the conversation's consolidate job as the
// application would (mneme.consolidate as mneme_app), drains it with the
// real runner, and returns the job's result.
func consolidateNow(t *testing.T, db *dbtest.DB, deps pipeline.Deps, conv uuid.UUID) (consolidateResult, int) {
	t.Helper()
	ctx := context.Background()
	app, err := pgxpool.New(ctx, db.As(t, "mneme_app"))
	require.NoError(t, err)
	defer app.Close()
	var job int64
	require.NoError(t, app.QueryRow(ctx, `SELECT mneme.consolidate($1)`, conv).Scan(&job))
	drainJobs(t, db.Pool, deps, slog.New(slog.NewTextHandler(testWriter{t}, nil)))
	var state string
	var attempts int
	var raw []byte
	require.NoError(t, db.Pool.QueryRow(ctx, `SELECT state, attempts, result FROM mneme.jobs WHERE id = $1`, job).Scan(&state, &attempts, &raw))
	require.Equal(t, "done", state)
	var r consolidateResult
	require.NoError(t, json.Unmarshal(raw, &r), "result %s", raw)
	return r, attempts
}

// TestConsolidateOffline: facts far apart that revision missed (a move
// stated in other words, a restated fact, a number changed) are
// reconciled by the consolidate job with the offline rules: superseded
// with their lineage, merged with their sources, each a revised event of
// consolidate:heuristic; a second run changes nothing; unrelated facts
// stay; erase of the kept fact takes its merged copy too.
func TestConsolidateOffline(t *testing.T) {
	t.Parallel()
	db := dbtest.New(t)
	deps := pipeline.Deps{Embedder: embed.NewHash(config.DefaultEmbedDim)}
	conv := uuid.New()
	start := time.Now().Add(-60 * 24 * time.Hour)
	ids := missedFacts(t, db, conv, start,
		"I live in Paris.",
		"I have a dog called Rex.",
		"My sister lives in Rome.",
		"I run 5 km every morning before work.",
		"I use Vim for coding.",
		"I moved to Berlin last month.",
		"I have a dog called Rex.",
		"I run 8 km every morning before work.",
	)
	paris, rex, sister, run5, vim, berlin, rex2, run8 := ids[0], ids[1], ids[2], ids[3], ids[4], ids[5], ids[6], ids[7]
	res, _ := consolidateNow(t, db, deps, conv)
	require.Equal(t, consolidateResult{Facts: 8, Superseded: 2, Merged: 1, ByRules: 3}, res)

	require.Equal(t, "superseded", getBelief(t, db, paris).Status)
	b := getBelief(t, db, berlin)
	require.Equal(t, "active", b.Status)
	require.Equal(t, &paris, b.SupersedesID)
	require.Equal(t, "superseded", getBelief(t, db, run5).Status)
	require.Equal(t, &run5, getBelief(t, db, run8).SupersedesID)
	dup := getBelief(t, db, rex2)
	require.Equal(t, "merged", dup.Status)
	require.Equal(t, &rex, dup.ConfirmsID)
	for _, id := range []uuid.UUID{rex, sister, vim} {
		require.Equal(t, "active", getBelief(t, db, id).Status)
	}
	evs := revisedEvents(t, db, berlin)
	require.Len(t, evs, 1)
	require.Equal(t, "consolidate:heuristic", evs[0].Actor)
	require.True(t, strings.HasPrefix(evs[0].Reason, "SUPERSEDE by consolidate:heuristic: "), evs[0].Reason)
	// Reversible: history shows the lineage from either end.
	var rel []string
	for _, h := range history(t, db, paris) {
		rel = append(rel, h.Relation+" "+h.ID.String())
	}
	require.Contains(t, rel, "replaced_by "+berlin.String())
	var confirmed []uuid.UUID
	for _, h := range history(t, db, rex) {
		if h.Relation == "confirmed_by" {
			confirmed = append(confirmed, h.ID)
		}
	}
	require.Equal(t, []uuid.UUID{rex2}, confirmed)

	again, _ := consolidateNow(t, db, deps, conv)
	require.Equal(t, consolidateResult{Facts: 5}, again, "a second run finds nothing to change")

	// Erase follows the merged copy.
	_, err := db.Pool.Exec(context.Background(), `SELECT mneme.erase($1, 'the user asked')`, rex)
	require.NoError(t, err)
	var left int
	require.NoError(t, db.Pool.QueryRow(context.Background(), `SELECT count(*) FROM mneme.memories WHERE id = ANY ($1)`,
		[]uuid.UUID{rex, rex2}).Scan(&left))
	require.Zero(t, left, "erase of the kept fact erases its merged copy")
}

// TestConsolidateBadInput: the SQL entry points refuse bad input with
// their codes and write nothing.
func TestConsolidateBadInput(t *testing.T) {
	t.Parallel()
	db := dbtest.New(t)
	ctx := context.Background()
	conv := uuid.New()
	ids := missedFacts(t, db, conv, time.Now().Add(-48*time.Hour), "I live in Paris.", "I live in Berlin.")
	a, b := ids[0], ids[1]
	for _, c := range []struct {
		sql   string
		args  []any
		state string
	}{
		{`SELECT mneme.consolidate(NULL)`, nil, "22004"},
		{`SELECT mneme.consolidate($1)`, []any{uuid.New()}, "P0002"},
		{`SELECT mneme.apply_consolidation(NULL, $1, $2, 'r', 'heuristic')`, []any{b, a}, "22004"},
		{`SELECT mneme.apply_consolidation('REPLACE', $1, $2, 'r', 'heuristic')`, []any{b, a}, "22023"},
		{`SELECT mneme.apply_consolidation('MERGE', $1, $1, 'r', 'heuristic')`, []any{a}, "22023"},
		{`SELECT mneme.apply_consolidation('MERGE', $1, $2, 'r', 'oracle')`, []any{b, a}, "22023"},
		{`SELECT mneme.apply_consolidation('SUPERSEDE', $1, $2, 'an older statement', 'heuristic')`, []any{a, b}, "22023"},
		{`SELECT mneme.apply_consolidation('MERGE', $1, $2, 'r', 'heuristic')`, []any{b, uuid.New()}, "P0002"},
		{`SELECT mneme.finish_consolidation(1, $1, '[]')`, []any{conv}, "22023"},
		{`SELECT mneme.finish_consolidation(NULL, $1, '{}')`, []any{conv}, "22004"},
		{`SELECT * FROM mneme.consolidation_facts($1, 0)`, []any{conv}, "22023"},
	} {
		_, err := db.Pool.Exec(ctx, c.sql, c.args...)
		require.Error(t, err, c.sql)
		require.Equal(t, c.state, sqlState(t, err), "%s: %v", c.sql, err)
	}
	for _, id := range ids {
		require.Equal(t, "active", getBelief(t, db, id).Status, "nothing written")
	}
	// Another tenant's job may not touch these facts.
	other := uuid.New()
	_, err := db.Pool.Exec(ctx, `SELECT mneme.create_tenant('other')`)
	require.NoError(t, err)
	var job int64
	tx, err := db.Pool.Begin(ctx)
	require.NoError(t, err)
	_, err = tx.Exec(ctx, `SELECT mneme.set_tenant('other')`)
	require.NoError(t, err)
	_, err = tx.Exec(ctx, `SELECT mneme.add_message($1, 'user', 'hello')`, other)
	require.NoError(t, err)
	require.NoError(t, tx.QueryRow(ctx, `SELECT mneme.consolidate($1)`, other).Scan(&job))
	require.NoError(t, tx.Commit(ctx))
	_, err = db.Pool.Exec(ctx, `SELECT mneme.apply_consolidation('SUPERSEDE', $1, $2, 'r', 'heuristic', $3)`, ids[1], ids[0], job)
	require.Error(t, err)
	require.Equal(t, "42501", sqlState(t, err))
	require.Equal(t, "active", getBelief(t, db, ids[0]).Status)
}

// TestConsolidationSchedule: a conversation whose facts were revised gets
// a consolidate job once quiet (consolidate_quiet), one pending at a time;
// none while it is not quiet yet, none with the setting null.
func TestConsolidationSchedule(t *testing.T) {
	t.Parallel()
	db := dbtest.New(t)
	ctx := context.Background()
	conv := uuid.New()
	missedFacts(t, db, conv, time.Now().Add(-48*time.Hour), "I live in Paris.", "I live in Berlin.")
	due := func() []int64 {
		t.Helper()
		rows, err := db.Pool.Query(ctx, `SELECT * FROM mneme.schedule_consolidation()`)
		require.NoError(t, err)
		var ids []int64
		for rows.Next() {
			var id int64
			require.NoError(t, rows.Scan(&id))
			ids = append(ids, id)
		}
		require.NoError(t, rows.Err())
		return ids
	}
	require.Empty(t, due(), "revised just now: not quiet for 10 minutes yet")
	_, err := db.Pool.Exec(ctx, `UPDATE mneme.jobs SET finished_at = now() - interval '11 minutes' WHERE kind = 'revise'`)
	require.NoError(t, err)
	first := due()
	require.Len(t, first, 1)
	require.Empty(t, due(), "scheduled once: nothing revised since")
	var kind string
	var jobConv uuid.UUID
	require.NoError(t, db.Pool.QueryRow(ctx, `SELECT kind, conversation_id FROM mneme.jobs WHERE id = $1`, first[0]).Scan(&kind, &jobConv))
	require.Equal(t, "consolidate", kind)
	require.Equal(t, conv, jobConv)
	_, err = db.Pool.Exec(ctx, `UPDATE mneme.jobs SET state = 'done', finished_at = now() WHERE id = $1`, first[0])
	require.NoError(t, err)
	require.Empty(t, due(), "nothing revised since")
	_, err = db.Pool.Exec(ctx, `SELECT mneme.set_setting('consolidate_quiet', 'null')`)
	require.NoError(t, err)
	_, err = db.Pool.Exec(ctx, `UPDATE mneme.jobs SET created_at = now() - interval '1 day' WHERE kind = 'consolidate'`)
	require.NoError(t, err)
	require.Empty(t, due(), "consolidate_quiet null: on demand only")
}

// TestSearchNewestOfSlotFirst: two active facts of one slot that disagree
// (consolidation has not run): the one said later ranks first, whatever
// the order they were stored in, though the older one matches the query
// better.
func TestSearchNewestOfSlotFirst(t *testing.T) {
	t.Parallel()
	db := dbtest.New(t)
	ctx := context.Background()
	conv := uuid.New()
	said := time.Now().Add(-24 * time.Hour)
	earlier := said.Add(-30 * 24 * time.Hour)
	// Stored first: the newer statement; then the older one, late.
	newer := rememberFact(t, db, conv, "I live in Berlin.", &said)
	older := rememberFact(t, db, conv, "I live in Paris, the city where I live with my cat and where I live well.", &earlier)
	_, err := db.Pool.Exec(ctx, `UPDATE mneme.jobs SET state = 'done' WHERE kind = 'revise'`)
	require.NoError(t, err)
	for _, id := range []uuid.UUID{newer, older} {
		_, err := db.Pool.Exec(ctx, `SELECT mneme.apply_revision($1, 'ADD', NULL, 'test', 'heuristic', 'user|lives_in')`, id)
		require.NoError(t, err)
	}
	rows, err := db.Pool.Query(ctx, `SELECT memory_id, rrf FROM mneme.search($1, 'where do I live', 5)`, conv)
	require.NoError(t, err)
	var order []uuid.UUID
	rrf := map[uuid.UUID]float64{}
	for rows.Next() {
		var id uuid.UUID
		var r float64
		require.NoError(t, rows.Scan(&id, &r))
		order = append(order, id)
		rrf[id] = r
	}
	require.NoError(t, rows.Err())
	require.Equal(t, []uuid.UUID{newer, older}, order)
	require.Greater(t, rrf[older], rrf[newer], "the older one matches the query better: only the rule puts the newer first")
}

// TestSearchWithoutSlotsRanksAlike: a scope with no active memory that
// has a slot is ranked by a statement without the newest-of-slot ranking
// (issue 49: its cost, paid where it changes nothing). Both statements must
// name the same candidates and scores: their candidate and scoring parts
// are the same text, and a search gives the same rows whichever runs (an
// expired memory with a slot, never a candidate, turns the other one on).
func TestSearchWithoutSlotsRanksAlike(t *testing.T) {
	t.Parallel()
	src, err := os.ReadFile("../sql/130-search.sql")
	require.NoError(t, err)
	body := string(src)
	body = body[strings.Index(body, "CREATE OR REPLACE FUNCTION mneme.search("):]
	body = body[:strings.Index(body, "\n$$;")]
	var parts []string
	for rest := body; ; {
		i := strings.Index(rest, "SELECT * FROM mneme._search_candidates(")
		if i < 0 {
			break
		}
		j := strings.Index(rest[i:], "AND m.conversation_id = ANY (v_convs)")
		require.Positive(t, j, "the candidates' part ends with their conversations")
		var words []string
		for _, line := range strings.Split(rest[i:i+j], "\n") {
			if c := strings.Index(line, "--"); c >= 0 {
				line = line[:c]
			}
			words = append(words, strings.Fields(line)...)
		}
		parts = append(parts, strings.Join(words, " "))
		rest = rest[i+j:]
	}
	require.Len(t, parts, 2, "search has two statements, with and without the slot ranking")
	require.Equal(t, parts[1], parts[0], "the two statements' candidates and scores are the same text")

	db := dbtest.New(t)
	ctx := context.Background()
	conv := uuid.New()
	for i, text := range []string{"I live in a small flat in Lisbon.", "My sister lives in Porto and bakes bread.",
		"We talked about where to live next year.", "The cat sleeps on the sofa all day.", "I like to live near the sea."} {
		at := time.Now().Add(-time.Duration(10-i) * 24 * time.Hour)
		rememberFact(t, db, conv, text, &at)
	}
	_, err = db.Pool.Exec(ctx, `UPDATE mneme.jobs SET state = 'done' WHERE kind = 'revise'`)
	require.NoError(t, err)
	now := time.Now()
	ranked := func() string {
		var out string
		require.NoError(t, db.Pool.QueryRow(ctx, `SELECT string_agg(format('%s %s %s %s %s %s', s.memory_id, s.score, s.rrf,
		        s.bm25_rank, s.vector_rank, s.retrievability), E'\n') FROM mneme.search($1, 'where do I live', 10, at => $2) s`, conv, now).Scan(&out))
		return out
	}
	count := func(q string) (n int) {
		require.NoError(t, db.Pool.QueryRow(ctx, q, conv).Scan(&n))
		return n
	}
	require.Zero(t, count(`SELECT count(*) FROM mneme.memories WHERE conversation_id = $1 AND slot IS NOT NULL`))
	without := ranked()
	require.Equal(t, 5, strings.Count(without, "\n")+1)

	at := time.Now().Add(-48 * time.Hour)
	gone := rememberFact(t, db, conv, "I live in Madrid.", &at)
	_, err = db.Pool.Exec(ctx, `UPDATE mneme.jobs SET state = 'done' WHERE kind = 'revise'`)
	require.NoError(t, err)
	_, err = db.Pool.Exec(ctx, `SELECT mneme.apply_revision($1, 'ADD', NULL, 'test', 'heuristic', 'user|lives_in')`, gone)
	require.NoError(t, err)
	_, err = db.Pool.Exec(ctx, `UPDATE mneme.memories SET valid_until = now() - interval '1 hour' WHERE id = $1`, gone)
	require.NoError(t, err)
	require.Equal(t, 1, count(`SELECT count(*) FROM mneme.memories WHERE conversation_id = $1 AND slot IS NOT NULL AND status = 'active'`))
	require.Equal(t, without, ranked(), "the same rows, scores and ranks from the statement with the slot ranking")
}

// TestConsolidateLLM: with a model, consolidation asks about the groups of
// related facts the rules left, at most consolidate_llm_max_calls, through
// the real go-openai client against the fake server: an applied answer, a
// malformed one (dropped, nothing written), one naming a fact not listed
// (dropped); its calls and tokens are in the job's result. A model that
// times out fails the attempt; the last attempts apply the rules alone and
// say why.
func TestConsolidateLLM(t *testing.T) {
	t.Parallel()
	srv := llmtest.New(t)
	db := dbtest.New(t)
	ctx := context.Background()
	newDeps := func(timeout time.Duration) pipeline.Deps {
		return pipeline.Deps{Embedder: embed.NewHash(config.DefaultEmbedDim),
			LLM: llm.New(config.Endpoint{BaseURL: srv.URL(), Model: "fake", APIKey: "k"}, timeout, llm.WithAttempts(1),
				llm.WithRecorder(usage.NewRecorder(nil)))}
	}
	conv := uuid.New()
	ids := missedFacts(t, db, conv, time.Now().Add(-40*24*time.Hour),
		"I play the piano on Sundays with my piano teacher.",
		"My piano teacher moved the lessons to Saturdays.",
		"I grow tomatoes in my garden every summer.",
		"I usually take the bus to work.",
		"This summer my garden has peppers instead of tomatoes.",
		"These days I cycle to work instead of taking the bus.",
	)
	bus, cycle := ids[3], ids[5]
	srv.Default(func(req openai.ChatCompletionRequest) llmtest.Reply {
		u := req.Messages[len(req.Messages)-1].Content
		switch {
		case strings.Contains(u, "bus"):
			return llmtest.Reply{Content: `{"changes": [{"action": "SUPERSEDE", "fact": 2, "target": 1, "reason": "cycles to work now", "confidence": 0.9}]}`}
		case strings.Contains(u, "garden"):
			return llmtest.Reply{Content: `{"changes": [{"action": "SUPERSEDE", "fact": 2`}
		default:
			return llmtest.Reply{Content: `{"changes": [{"action": "MERGE", "fact": 7, "target": 1, "reason": "x", "confidence": 0.9}]}`}
		}
	})
	_, err := db.Pool.Exec(ctx, `SELECT mneme.set_setting('consolidate_llm_max_calls', '2')`)
	require.NoError(t, err)
	res, _ := consolidateNow(t, db, newDeps(5*time.Second), conv)
	require.Equal(t, 3, res.Groups, "%+v", res)
	require.Equal(t, 2, res.GroupsAsked, "the newest two groups: bounded by consolidate_llm_max_calls")
	require.Equal(t, 1, res.ByModel)
	require.Equal(t, 1, res.UnusableAnswers)
	require.Equal(t, 1, res.Superseded)
	require.EqualValues(t, 2, res.LLMCalls)
	require.Positive(t, res.PromptTokens)
	require.Positive(t, res.CompletionTokens)
	require.Len(t, srv.Requests(), 2)
	require.Equal(t, "superseded", getBelief(t, db, bus).Status)
	require.Equal(t, &bus, getBelief(t, db, cycle).SupersedesID)
	evs := revisedEvents(t, db, cycle)
	require.Len(t, evs, 1)
	require.Equal(t, "consolidate:llm", evs[0].Actor)
	for _, id := range ids[:3] {
		require.Equal(t, "active", getBelief(t, db, id).Status, "malformed and unlisted answers write nothing")
	}
	var calls int
	require.NoError(t, db.Pool.QueryRow(ctx, `SELECT count(*) FROM mneme.llm_calls c JOIN mneme.jobs j ON j.id = c.job_id
		WHERE j.kind = 'consolidate' AND c.purpose = 'consolidation'`).Scan(&calls))
	require.Equal(t, 2, calls, "the usage ledger has the run's calls")

	// A model that times out.
	conv2 := uuid.New()
	ids2 := missedFacts(t, db, conv2, time.Now().Add(-10*24*time.Hour),
		"I live in Paris.", "I usually take the bus to work.", "I live in Lyon.", "These days I cycle to work instead of taking the bus.")
	srv.Default(func(openai.ChatCompletionRequest) llmtest.Reply {
		return llmtest.Reply{Delay: 2 * time.Second, Content: `{"changes": []}`}
	})
	res2, attempts := consolidateNow(t, db, newDeps(200*time.Millisecond), conv2)
	require.Equal(t, 3, attempts, "two attempts fail on the model; the third applies the rules alone")
	require.NotEmpty(t, res2.LLMError)
	require.Equal(t, 1, res2.Superseded, "the rules' change (Paris, then Lyon) is applied")
	require.Equal(t, "superseded", getBelief(t, db, ids2[0]).Status)
	require.Equal(t, "active", getBelief(t, db, ids2[1]).Status)
}

// TestConsolidateTenantScope: with revision_scope 'tenant' a
// conversation's consolidation reads the facts of every conversation of
// its tenant: a move told in one conversation supersedes the city told in
// another; another tenant's facts are never read.
func TestConsolidateTenantScope(t *testing.T) {
	t.Parallel()
	db := dbtest.New(t)
	ctx := context.Background()
	deps := pipeline.Deps{Embedder: embed.NewHash(config.DefaultEmbedDim)}
	_, err := db.Pool.Exec(ctx, `SELECT mneme.set_setting('revision_scope', '"tenant"')`)
	require.NoError(t, err)
	one, two, other := uuid.New(), uuid.New(), uuid.New()
	start := time.Now().Add(-30 * 24 * time.Hour)
	paris := missedFacts(t, db, one, start, "I live in Paris.")[0]
	berlin := missedFacts(t, db, two, start.Add(10*24*time.Hour), "I moved to Berlin.")[0]
	_, err = db.Pool.Exec(ctx, `SELECT mneme.create_tenant('acme')`)
	require.NoError(t, err)
	tx, err := db.Pool.Begin(ctx)
	require.NoError(t, err)
	_, err = tx.Exec(ctx, `SELECT mneme.set_tenant('acme')`)
	require.NoError(t, err)
	var rome uuid.UUID
	require.NoError(t, tx.QueryRow(ctx, `SELECT mneme.remember($1, 'I live in Rome.', at => $2)`, other, start.Add(20*24*time.Hour)).Scan(&rome))
	require.NoError(t, tx.Commit(ctx))
	_, err = db.Pool.Exec(ctx, `UPDATE mneme.jobs SET state = 'done', finished_at = now() WHERE kind = 'revise' AND state = 'pending'`)
	require.NoError(t, err)

	res, _ := consolidateNow(t, db, deps, two)
	require.Equal(t, 2, res.Facts, "the tenant's two facts, not acme's")
	require.Equal(t, 1, res.Superseded)
	require.Equal(t, "superseded", getBelief(t, db, paris).Status)
	require.Equal(t, &paris, getBelief(t, db, berlin).SupersedesID)
	require.Equal(t, "active", getBelief(t, db, rome).Status)
}
