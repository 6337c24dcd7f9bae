package revision

import (
	"context"
	"strings"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/mneme-memory/mneme/sidecar/config"
	"github.com/mneme-memory/mneme/sidecar/dbtest"
	"github.com/mneme-memory/mneme/sidecar/eval/recall"
	"github.com/mneme-memory/mneme/sidecar/revision"
)

func TestMain(m *testing.M) { dbtest.Main(m) }

// The suite's size is what the docs say, and its labels are consistent.
func TestSuite(t *testing.T) {
	suite := Suite()
	require.NoError(t, Check(suite))
	writes, questions := 0, 0
	perAction := map[string]int{}
	for _, c := range suite {
		writes += len(c.Writes)
		questions += len(c.Questions)
		for _, w := range c.Writes {
			perAction[w.Expect]++
		}
	}
	require.GreaterOrEqual(t, len(suite), 15)
	require.LessOrEqual(t, len(suite), 25)
	require.GreaterOrEqual(t, writes, 80)
	require.LessOrEqual(t, writes, 150)
	for _, a := range Actions {
		require.GreaterOrEqual(t, perAction[a], 8, a)
	}
	require.GreaterOrEqual(t, questions, len(suite))
}

func TestCheckRejects(t *testing.T) {
	for name, c := range map[string]Conversation{
		"repeated key":     {Name: "x", Writes: []Write{add("a", 0, "x"), add("a", 1, "y")}},
		"later target":     {Name: "x", Writes: []Write{supersede("a", 0, "x", "b"), add("b", 1, "y")}},
		"ADD with target":  {Name: "x", Writes: []Write{add("a", 0, "x"), {Key: "b", Text: "y", Expect: "ADD", Target: "a"}}},
		"unknown action":   {Name: "x", Writes: []Write{{Key: "a", Text: "x", Expect: "MERGE"}}},
		"unknown question": {Name: "x", Writes: []Write{add("a", 0, "x")}, Questions: []Question{q("?", "b")}},
	} {
		require.ErrorIs(t, Check([]Conversation{c}), ErrSuite, name)
	}
}

// The labels resolve NOOPs to what they confirm, give the final statuses
// mneme.apply_revision's rules give, and a question's stale values are
// its belief's lineage.
func TestLabels(t *testing.T) {
	c := Conversation{Name: "x", Writes: []Write{
		add("a", 10, "I live in A."),
		noop("a2", 11, "I live in A.", "a"),
		supersede("b", 20, "I live in B.", "a2"),
		supersede("old", 5, "I live in O.", "b"), // older: stored superseded
		add("other", 21, "I use Vim for coding."),
		invalidate("nob", 30, "I no longer live in B.", "b"),
	}}
	l := newLabels(&c)
	require.Equal(t, "a", l.canon("a2"))
	require.Equal(t, []string{"superseded", "merged", "invalidated", "superseded", "active", "active"}, l.wantStatus())
	require.Equal(t, map[string]bool{"a": true, "a2": true, "b": true, "old": true}, l.stale("nob"))
	require.Empty(t, l.stale("other"))
}

func TestParseRevised(t *testing.T) {
	id := uuid.New()
	a, target := parseRevised("SUPERSEDE by heuristic: lives_in changes [target " + id.String() + "]")
	require.Equal(t, revision.ActionSupersede, a)
	require.Equal(t, id, target)
	a, target = parseRevised("ADD (SUPERSEDE of " + id.String() + " no longer applies: the target is superseded)")
	require.Equal(t, revision.ActionAdd, a)
	require.Equal(t, uuid.Nil, target)
	a, _ = parseRevised("something else")
	require.Equal(t, None, a)
}

// The offline classifier on the suite, with floors a little under what it
// measured (docs/revision.md): a regression of its rules, of the revise
// job or of apply_revision fails here.
func TestOffline(t *testing.T) {
	db := dbtest.New(t)
	rep, err := RunOffline(context.Background(), db.Pool, config.Config{}, nil, nil)
	require.NoError(t, err)
	require.Equal(t, "offline classifier", rep.Mode)
	require.Zero(t, rep.FailedJobs)
	require.Zero(t, rep.PendingJobs)
	require.Equal(t, rep.Writes, sum(rep.Confusion), "every write is in the confusion matrix")
	require.Zero(t, column(rep.Confusion, None), "every write was revised")

	// Measured (docs/revision.md, bin/mneme eval revision): accuracy 0.962;
	// ADD P 0.947 R 0.986; NOOP P 0.909 R 0.833; SUPERSEDE P 1.000 R 0.941;
	// INVALIDATE P 1.000 R 1.000; current first 0.797, stale first 0.000,
	// current in top 5 0.983; 1 current belief retired. The floors sit at
	// what is measured (a hundredth below, for ties in the ranking), so a
	// rule that regresses fails here.
	require.GreaterOrEqual(t, rep.Accuracy, 0.96)
	floors := map[string][2]float64{ // precision, recall
		revision.ActionAdd:        {0.94, 0.98},
		revision.ActionNoop:       {0.90, 0.83},
		revision.ActionSupersede:  {0.99, 0.94},
		revision.ActionInvalidate: {0.99, 0.99},
	}
	for a, f := range floors {
		s := rep.Score(a)
		require.GreaterOrEqual(t, s.Precision, f[0], "%s precision", a)
		require.GreaterOrEqual(t, s.Recall, f[1], "%s recall", a)
	}
	require.GreaterOrEqual(t, rep.CurrentFirst, 0.78)
	require.LessOrEqual(t, rep.StaleFirst, 0.02)
	require.GreaterOrEqual(t, rep.CurrentInTopK, 0.98)
	require.LessOrEqual(t, rep.Final.WronglyRetired, 1)
	// Lookalikes of retractions retract nothing.
	for _, id := range []string{"lookalikes/visit", "lookalikes/calls", "lookalikes/house",
		"held out: lookalikes and retractions/aunt", "held out: lookalikes and retractions/emails",
		"held out: lookalikes and retractions/bike", "held out: lookalikes and retractions/door"} {
		require.Equal(t, revision.ActionAdd, rep.outcomes[id].applied, id)
	}

	// An older write never replaces the newer fact it would supersede or
	// retract: it ends superseded itself.
	for _, id := range []string{"moves out of order/leeds", "moves out of order/sheffield", "drinks (out of order)/chai",
		"profile (out of order)/email3", "profile (out of order)/nogym"} {
		o := rep.outcomes[id]
		if o.applied != revision.ActionAdd {
			require.Equal(t, "superseded", o.status, id)
		}
	}
	require.Equal(t, "superseded", rep.outcomes["moves out of order/leeds"].status)
	require.Equal(t, "superseded", rep.outcomes["drinks (out of order)/chai"].status)
	require.Equal(t, "active", rep.outcomes["moves out of order/hull"].status)
}

// The LLM classifier through the real go-openai client against the
// scripted model: every right answer is applied as given, every bad one
// (malformed, out of range, unknown action, low confidence) becomes an
// ADD, and an HTTP 500 is retried into the right answer.
func TestScriptedModel(t *testing.T) {
	db := dbtest.New(t)
	rep, llm, err := runScripted(t, context.Background(), db.Pool, nil, nil)
	require.NoError(t, err)
	var table strings.Builder
	require.NoError(t, rep.WriteTable(&table))
	llm.write(&table)
	t.Log("\n" + table.String()) // go test -v -run TestScriptedModel prints what docs/revision.md shows
	require.Zero(t, rep.FailedJobs)
	require.Zero(t, rep.PendingJobs)
	require.Zero(t, column(rep.Confusion, None))

	garbage, http500 := 0, 0
	for _, b := range llm.Bad {
		require.Positive(t, b.Count, b.Kind)
		if b.Kind == BadHTTP500 {
			http500 = b.Count
			require.Equal(t, b.Count, b.Right, "a 500 is retried and then answered well")
			continue
		}
		garbage += b.Count
		require.Equal(t, map[string]int{revision.ActionAdd: b.Count}, b.Became, b.Kind)
		require.Zero(t, b.Right, "%s: only non-ADD decisions get bad answers", b.Kind)
	}
	require.Equal(t, llm.Decisions+http500, llm.Requests, "one retry per 500, none otherwise")
	require.LessOrEqual(t, llm.NotOffered, 2, "the labelled target is among the candidates")
	// Wrong are exactly the garbage answers (and targets not shown).
	require.LessOrEqual(t, len(rep.WrongWrites), garbage+llm.NotOffered)
	require.GreaterOrEqual(t, len(rep.WrongWrites), garbage)
	require.Zero(t, rep.Final.WronglyRetired, "a scripted model never retires a current belief")
	for _, a := range Actions[1:] {
		require.Equal(t, 1.0, rep.Score(a).Precision, "%s: what the model says is applied as said", a)
	}
	require.Equal(t, 1.0, rep.Score(revision.ActionAdd).Recall, "nothing labelled ADD replaced anything")
	// Measured 2026-11-24 (docs/revision.md): current first 0.759, stale
	// first 0.037 (a stale fact a bad answer left active), current in top 5
	// 1.000.
	require.GreaterOrEqual(t, rep.CurrentFirst, 0.65)
	require.LessOrEqual(t, rep.StaleFirst, 0.10)
	require.GreaterOrEqual(t, rep.CurrentInTopK, 0.90)
}

func sum(m map[string]map[string]int) int {
	n := 0
	for _, row := range m {
		for _, v := range row {
			n += v
		}
	}
	return n
}

func column(m map[string]map[string]int, col string) int {
	n := 0
	for _, row := range m {
		n += row[col]
	}
	return n
}

// TestCrossValidation: --folds runs the suite once per candidate, each in a
// scratch database of its own with the candidate's settings, and scores
// every write of every fold with the candidate chosen on the other folds.
func TestCrossValidation(t *testing.T) {
	db := dbtest.New(t)
	o := Options{Config: config.Config{DatabaseURL: db.URL, Vector: db.Variant}, Folds: 2,
		Candidates: []recall.Candidate{{"revision_duplicate_similarity": "0.8"}, {"revision_duplicate_similarity": "1"}}}
	cv, err := crossValidate(context.Background(), o, nil)
	require.NoError(t, err)
	writes := 0
	for _, c := range Suite() {
		writes += len(c.Writes)
	}
	require.Len(t, cv.Chosen, 2)
	require.Equal(t, writes, cv.Recall[0].Questions, "every write scored once")
	for _, f := range cv.Chosen {
		require.Contains(t, cv.Candidates, f.Candidate)
		require.NotEmpty(t, f.Conversations)
	}
	for _, c := range cv.Candidates {
		require.Greater(t, cv.PerCand[c][0], 0.8, "%s: the suite ran with it", c)
	}
	require.Greater(t, cv.Recall[0].Recall, 0.8)
}

func add(key string, day float64, text string) Write {
	return Write{Key: key, Text: text, Day: day, Expect: revision.ActionAdd}
}

func noop(key string, day float64, text, target string) Write {
	return Write{Key: key, Text: text, Day: day, Expect: revision.ActionNoop, Target: target}
}

func supersede(key string, day float64, text, target string) Write {
	return Write{Key: key, Text: text, Day: day, Expect: revision.ActionSupersede, Target: target}
}

func invalidate(key string, day float64, text, target string) Write {
	return Write{Key: key, Text: text, Day: day, Expect: revision.ActionInvalidate, Target: target}
}

func q(query, current string) Question { return Question{Query: query, Current: current} }

// Score returns the score of an action (zero if unknown).
func (r *Report) Score(action string) Score {
	if s := r.score(action); s != nil {
		return *s
	}
	return Score{}
}

// TestContradictions: the contradiction suite offline (docs/revision.md,
// bin/mneme eval revision): measured 0.875 of its 24 beliefs with the
// current one first among their facts, before and after consolidation
// (the offline consolidation finds nothing the revise jobs missed here),
// a stale one first 0.042. The floors sit at what is measured.
func TestContradictions(t *testing.T) {
	db := dbtest.New(t)
	rep, err := RunContradictionsOffline(context.Background(), db.Pool, config.Config{}, nil, nil)
	require.NoError(t, err)
	require.Equal(t, 24, rep.Cases)
	require.GreaterOrEqual(t, rep.Before.CurrentFirst, 0.87)
	require.GreaterOrEqual(t, rep.After.CurrentFirst, rep.Before.CurrentFirst, "consolidation never puts a stale belief first")
	require.LessOrEqual(t, rep.After.StaleFirst, 0.05)
	require.Equal(t, 1.0, rep.After.ByKind["negation"])
}
