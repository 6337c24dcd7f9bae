package locomo

import (
	"bytes"
	"context"
	"encoding/json"
	"encoding/xml"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/mneme-memory/mneme/sidecar/dbtest"
	"github.com/mneme-memory/mneme/sidecar/embed"
	"github.com/mneme-memory/mneme/sidecar/pipeline"
)

func TestMain(m *testing.M) { dbtest.Main(m) }

func newJobs(t *testing.T, pool *pgxpool.Pool) Jobs {
	t.Helper()
	j, err := PipelineJobs(pool, pipeline.Deps{Embedder: embed.NewHash(256)})
	require.NoError(t, err)
	return j
}

func TestIngestGoesThroughAddMessage(t *testing.T) {
	t.Parallel()
	db := dbtest.New(t)
	ctx := context.Background()
	convs, err := Load(synthetic)
	require.NoError(t, err)
	c := &convs[0]
	// Episodes only: their source spans are what this test checks (facts
	// are tested in tests/revision_test.go).
	_, err = db.Pool.Exec(ctx, `SELECT mneme.set_setting('extract_facts', 'false')`)
	require.NoError(t, err)
	in, err := ingest(ctx, db.Pool, newJobs(t, db.Pool), c, nil, 0)
	require.NoError(t, err)
	require.Equal(t, ConversationUUID("syn-1", "mneme"), in.ConvID)
	require.Len(t, in.DiaByMsg, c.TurnCount())

	// Every turn is a message: role = the speaker, content = text and
	// caption, time = the session's date plus TurnSpacing per turn.
	rows, err := db.Pool.Query(ctx, `SELECT id, role, content, created_at, consumed_at IS NOT NULL, memory_id IS NOT NULL
		FROM mneme.messages WHERE conversation_id = $1 ORDER BY id`, in.ConvID)
	require.NoError(t, err)
	type msg struct {
		id                 int64
		role, content      string
		at                 time.Time
		consumed, inMemory bool
	}
	var got []msg
	for rows.Next() {
		var m msg
		require.NoError(t, rows.Scan(&m.id, &m.role, &m.content, &m.at, &m.consumed, &m.inMemory))
		got = append(got, m)
	}
	require.NoError(t, rows.Err())
	require.Len(t, got, c.TurnCount())
	k := 0
	for _, s := range c.Sessions {
		for i, turn := range s.Turns {
			m := got[k]
			k++
			require.Equal(t, turn.DiaID, in.DiaByMsg[m.id])
			require.Equal(t, turn.Speaker, m.role)
			require.Equal(t, turn.Text, m.content)
			require.True(t, s.At.Add(time.Duration(i)*TurnSpacing).Equal(m.at), "%s at %s", turn.DiaID, m.at)
			require.True(t, m.consumed && m.inMemory, "%s is segmented into a memory", turn.DiaID)
		}
	}

	// The memories' source spans cover every turn exactly once.
	mems, err := loadMemories(ctx, db.Pool, in, CountMemoryText)
	require.NoError(t, err)
	seen := map[string]int{}
	for _, m := range mems {
		require.NotEmpty(t, m.Doc.Turns)
		for _, dt := range m.Doc.Turns {
			seen[dt.DiaID]++
			require.Less(t, dt.End, m.Doc.Words+1)
			// Each turn's text is found inside the memory text, not
			// defaulted to the end of the memory (except the last turn).
			require.True(t, strings.Contains(m.Text, in.Text[dt.DiaID]), "memory text holds %s", dt.DiaID)
		}
	}
	require.Len(t, seen, c.TurnCount())
	for id, n := range seen {
		require.Equal(t, 1, n, id)
	}

	// Ingesting the same conversation into the same database is refused by Run.
	_, err = Run(ctx, db.Pool, convs[:1], Options{Jobs: newJobs(t, db.Pool)})
	require.ErrorContains(t, err, "already in this database")
}

func runSynthetic(t *testing.T, budgets []int) *Report {
	t.Helper()
	db := dbtest.New(t)
	convs, err := Load(synthetic)
	require.NoError(t, err)
	rep, err := Run(context.Background(), db.Pool, convs, Options{Budgets: budgets, Headline: 1000, Jobs: newJobs(t, db.Pool), Data: "synthetic.json"})
	require.NoError(t, err)
	return rep
}

func TestRunSynthetic(t *testing.T) {
	t.Parallel()
	rep := runSynthetic(t, []int{12, 2000})
	require.Equal(t, []string{"syn-1", "syn-2"}, rep.Conversations)
	require.Equal(t, 22, rep.Turns)
	require.Equal(t, 6, rep.Questions)
	require.Equal(t, map[string]int{SkipCategory5: 1, SkipNoEvidence: 1}, rep.Skipped)
	require.Equal(t, EvidenceStats{IDs: 8, Invalid: 1, InvalidIDs: []string{"syn-1/D9:99"}, QuestionsWithInvalid: 1}, rep.Evidence)
	require.Equal(t, []int{12, 1000, 2000}, rep.Budgets, "the headline budget is always reported")
	require.Len(t, rep.Methods, len(Methods))

	// 2000 words hold both conversations whole: every method that ranks
	// every item finds all evidence that exists; the invalid id of
	// question 4 stays missed (recall 0.5 there).
	want := (1 + 1 + 1 + 0.5 + 1 + 1) / 6.0
	for _, m := range []string{MethodMneme, MethodMnemeNoR, MethodMnemeVector} {
		res := rep.Result(m, 2000)
		require.InDelta(t, want, res.Overall.Recall, 1e-4, m)
		require.Equal(t, 1.0, res.Overall.AnyFound, m)
		require.Equal(t, 6, res.Overall.Questions)
		require.Equal(t, 5, res.ByCategory["single-hop"].Questions+res.ByCategory["multi-hop"].Questions+res.ByCategory["temporal"].Questions)
		require.Equal(t, 1, res.ByCategory["open-domain"].Questions)
	}

	// At 12 words the raw-turn baseline holds exactly its first turn: for
	// "Where is Cleo travelling by train?" that is D1:1 ("Cleo: I booked a
	// train to Lisbon for the conference.", 10 words), so single-hop recall
	// counts it. Syn-2 is one 5-turn window, cut at 12 words: its first
	// turn (D1:1) ends at word 10, inside the cut, so it counts too.
	turns := rep.Result(MethodBM25Turns, 12)
	require.Greater(t, turns.Overall.Recall, 0.0)
	require.LessOrEqual(t, turns.Overall.MeanWords, 12.0)
	win := rep.Result(MethodBM25Windows, 12)
	require.Greater(t, win.Overall.Recall, 0.0)
	require.Equal(t, 12.0, win.Overall.MeanWords, "every question fills the 12 words")

	// Recall never falls as the budget grows.
	for _, m := range rep.Methods {
		for i := 1; i < len(m.Results); i++ {
			require.GreaterOrEqual(t, m.Results[i].Overall.Recall, m.Results[i-1].Overall.Recall, m.Name)
		}
	}

	var table bytes.Buffer
	require.NoError(t, rep.WriteTable(&table))
	for _, m := range Methods {
		require.Contains(t, table.String(), m.Label)
	}
	require.Contains(t, table.String(), "syn-1/D9:99")

	var plot bytes.Buffer
	require.NoError(t, rep.WritePlot(&plot, "test"))
	var svg struct {
		XMLName   xml.Name   `xml:"svg"`
		Polylines []struct{} `xml:"polyline"`
	}
	require.NoError(t, xml.Unmarshal(plot.Bytes(), &svg), plot.String())
	require.Len(t, svg.Polylines, len(Methods))
}

func TestRunIsDeterministic(t *testing.T) {
	t.Parallel()
	a, b := runSynthetic(t, DefaultBudgets), runSynthetic(t, DefaultBudgets)
	strip := func(r *Report) map[string]any {
		var buf bytes.Buffer
		require.NoError(t, r.WriteJSON(&buf))
		var m map[string]any
		require.NoError(t, json.Unmarshal(buf.Bytes(), &m))
		require.Contains(t, m, "timing")
		delete(m, "timing")
		return m
	}
	require.Equal(t, strip(a), strip(b))
}

func TestBM25Baseline(t *testing.T) {
	t.Parallel()
	db := dbtest.New(t)
	ctx := context.Background()
	texts := []string{
		"the cat sat on the mat",
		"dogs and cats play",
		"a dog barks",
		"the weather is nice",
	}
	docs := make([]Doc, len(texts))
	for i, s := range texts {
		docs[i] = Doc{Words: Words(s), Turns: []DocTurn{{DiaID: string(rune('A' + i)), End: Words(s)}}}
	}
	ix, err := newBM25Index(ctx, db.Pool, texts, docs)
	require.NoError(t, err)
	ids := func(q string) string {
		ranked, err := ix.rank(ctx, q)
		require.NoError(t, err)
		var s string
		for _, d := range ranked {
			s += d.Turns[0].DiaID
		}
		return s
	}
	require.Equal(t, "AB", ids("cats"), "stemmed: cats meets cat; a tie keeps document order")
	require.Equal(t, "CB", ids("dog"), "the shorter document wins a tie in tf and idf")
	require.Equal(t, "", ids("the of and"), "stop words match nothing")
	require.Equal(t, "BCA", ids("dog cat play"), "all three terms first; then the shorter of two equal matches")
}

// A session dated before the previous one (add_message appends in time
// order) is moved to just after it, and counted.
func TestIngestClampsOutOfOrderSessions(t *testing.T) {
	t.Parallel()
	db := dbtest.New(t)
	convs, err := Parse([]byte(`[{"sample_id": "order", "conversation": {
		"speaker_a": "Ana", "speaker_b": "Ben",
		"session_1_date_time": "1:00 pm on 2 May, 2023",
		"session_1": [{"speaker": "Ana", "dia_id": "D1:1", "text": "first"}, {"speaker": "Ben", "dia_id": "D1:2", "text": "second"}],
		"session_2_date_time": "9:00 am on 1 May, 2023",
		"session_2": [{"speaker": "Ana", "dia_id": "D2:1", "text": "third"}, {"speaker": "Ben", "dia_id": "D2:2", "text": "fourth"}]},
		"qa": [{"question": "What came third?", "evidence": ["D2:1"], "category": 4}]}]`))
	require.NoError(t, err)
	in, err := ingest(context.Background(), db.Pool, newJobs(t, db.Pool), &convs[0], nil, 0)
	require.NoError(t, err)
	require.Equal(t, 2, in.Clamped)
	var ordered bool
	require.NoError(t, db.Pool.QueryRow(context.Background(), `
		SELECT bool_and(created_at > prev) FROM (
			SELECT created_at, lag(created_at) OVER (ORDER BY id) AS prev FROM mneme.messages WHERE conversation_id = $1) x
		WHERE prev IS NOT NULL`, in.ConvID).Scan(&ordered))
	require.True(t, ordered)
}

// The numbers do not depend on the wall clock: retrievability is evaluated
// at each conversation's last turn, so the same conversations moved years
// into the past (which is what running the evaluation years later does to
// now() - created_at) give the same report.
func TestRunIgnoresWallClock(t *testing.T) {
	t.Parallel()
	run := func(shift time.Duration, opt Options) map[string]any {
		db := dbtest.New(t)
		convs, err := Load(synthetic)
		require.NoError(t, err)
		for i := range convs {
			for j := range convs[i].Sessions {
				convs[i].Sessions[j].At = convs[i].Sessions[j].At.Add(shift)
			}
		}
		opt.Jobs, opt.Budgets = newJobs(t, db.Pool), []int{12, 30, 1000}
		rep, err := Run(context.Background(), db.Pool, convs, opt)
		require.NoError(t, err)
		var buf bytes.Buffer
		require.NoError(t, rep.WriteJSON(&buf))
		var m map[string]any
		require.NoError(t, json.Unmarshal(buf.Bytes(), &m))
		delete(m, "timing")
		return m
	}
	const years = 7 * 365 * 24 * time.Hour
	base := run(0, Options{})
	require.Equal(t, "last turn of each conversation", base["retrievability_as_of"])
	require.Equal(t, base, run(-years, Options{}))
	// A fixed as-of moved with the data ranks alike too.
	at := time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC)
	fixed := run(0, Options{AsOf: at})
	require.Equal(t, "2024-01-01T00:00:00Z", fixed["retrievability_as_of"])
	shifted := run(-years, Options{AsOf: at.Add(-years)})
	shifted["retrievability_as_of"] = fixed["retrievability_as_of"]
	require.Equal(t, fixed, shifted)
}

// With AgentK, ingest retrieves for every turn like a live agent, and the
// pipeline reviews what was retrieved.
func TestRunAgentRetrievals(t *testing.T) {
	t.Parallel()
	db := dbtest.New(t)
	ctx := context.Background()
	convs, err := Load(synthetic)
	require.NoError(t, err)
	rep, err := Run(ctx, db.Pool, convs, Options{Budgets: []int{1000}, Jobs: newJobs(t, db.Pool), AgentK: 3})
	require.NoError(t, err)
	require.Equal(t, 3, rep.AgentK)
	var reviews int
	require.NoError(t, db.Pool.QueryRow(ctx, `SELECT count(*) FROM mneme.review_log`).Scan(&reviews))
	require.Positive(t, reviews)
	var table bytes.Buffer
	require.NoError(t, rep.WriteTable(&table))
	require.Contains(t, table.String(), "mneme.retrieve k=3 for every turn")
}

// The as-of time is what retrievability uses: a question about the first
// session, a year before the second, whose memory matches the question
// better. Asked right after the first session, its memory comes first; at
// the last turn a year later the fresh second session outranks it by
// retrievability alone.
func TestRunAsOfDrivesRetrievability(t *testing.T) {
	t.Parallel()
	convs, err := Parse([]byte(`[{"sample_id": "asof", "conversation": {
		"speaker_a": "Ana", "speaker_b": "Ben",
		"session_1_date_time": "1:00 pm on 2 May, 2022",
		"session_1": [{"speaker": "Ana", "dia_id": "D1:1", "text": "I adopted a grey kitten called Pixel from the shelter."},
			{"speaker": "Ben", "dia_id": "D1:2", "text": "A kitten called Pixel, lovely. Grey ones are the best."},
			{"speaker": "Ana", "dia_id": "D1:3", "text": "The shelter said Pixel loves string."},
			{"speaker": "Ben", "dia_id": "D1:4", "text": "Send me a photo of Pixel soon."},
			{"speaker": "Ana", "dia_id": "D1:5", "text": "I will, once Pixel settles in."}],
		"session_2_date_time": "1:00 pm on 2 May, 2023",
		"session_2": [{"speaker": "Ben", "dia_id": "D2:1", "text": "My sister found a kitten at the park yesterday."},
			{"speaker": "Ana", "dia_id": "D2:2", "text": "Did she keep it?"},
			{"speaker": "Ben", "dia_id": "D2:3", "text": "Yes, she is buying it a bed this weekend."},
			{"speaker": "Ana", "dia_id": "D2:4", "text": "A kitten needs toys too."},
			{"speaker": "Ben", "dia_id": "D2:5", "text": "I will tell her that."}]},
		"qa": [{"question": "What did Ana call the grey kitten she adopted from the shelter?", "evidence": ["D1:1"], "category": 4}]}]`))
	require.NoError(t, err)
	run := func(at time.Time) float64 {
		db := dbtest.New(t)
		// Memories that fade in days (the shipped stabilities are months to
		// years: docs/forgetting.md), so a year decides.
		_, err := db.Pool.Exec(context.Background(), `SELECT mneme.set_setting('initial_stability_days',
			'{"trivial": 3, "temporary": 3, "general": 3, "project": 3, "user_profile": 3, "important": 3}'),
			mneme.set_setting('extract_facts', 'false')`)
		require.NoError(t, err)
		rep, err := Run(context.Background(), db.Pool, convs, Options{Budgets: []int{40}, Headline: 40, Jobs: newJobs(t, db.Pool), AsOf: at})
		require.NoError(t, err)
		require.Equal(t, 2, rep.Memories.Count, "one memory per session")
		require.Equal(t, 1.0, rep.Result(MethodMnemeNoR, 40).Overall.Recall, "by relevance alone, the first session comes first")
		return rep.Result(MethodMneme, 40).Overall.Recall
	}
	require.Equal(t, 1.0, run(time.Date(2022, 5, 2, 14, 0, 0, 0, time.UTC)))
	require.Equal(t, 0.0, run(time.Time{}))
}
