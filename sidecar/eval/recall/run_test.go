package recall_test

import (
	"bytes"
	"context"
	"encoding/json"
	"encoding/xml"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/mneme-memory/mneme/sidecar/dbtest"
	"github.com/mneme-memory/mneme/sidecar/embed"
	"github.com/mneme-memory/mneme/sidecar/eval/locomo"
	"github.com/mneme-memory/mneme/sidecar/eval/recall"
	"github.com/mneme-memory/mneme/sidecar/pipeline"
)

// synthetic is the LoCoMo reader's test file: the harness is tested on
// what a reader gives it.
const synthetic = "../locomo/testdata/synthetic.json"

func load(t *testing.T) *recall.Data {
	t.Helper()
	d, err := locomo.Load(synthetic)
	require.NoError(t, err)
	return d
}

func TestIngestGoesThroughAddMessage(t *testing.T) {
	t.Parallel()
	db := dbtest.New(t)
	ctx := context.Background()
	d := load(t)
	c := &d.Conversations[0]
	// Episodes only: their source spans are what this test checks (facts
	// are tested in tests/revision_test.go).
	_, err := db.Pool.Exec(ctx, `SELECT mneme.set_setting('extract_facts', 'false')`)
	require.NoError(t, err)
	jobs, err := recall.PipelineJobs(db.Pool, pipeline.Deps{Embedder: embed.NewHash(256)})
	require.NoError(t, err)
	in, err := recall.Ingest(ctx, db.Pool, jobs, c, nil, 0)
	require.NoError(t, err)
	require.Equal(t, recall.ConversationUUID("syn-1", "mneme"), in.ConvID)
	require.Len(t, in.TurnByMsg, c.TurnCount())

	// Every turn is a message: role = the speaker, content = text and
	// caption, time = the session's date plus the spacing per turn.
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
			require.Equal(t, turn.ID, in.TurnByMsg[m.id])
			require.Equal(t, turn.Speaker, m.role)
			require.Equal(t, turn.Text, m.content)
			require.True(t, s.At.Add(time.Duration(i)*locomo.TurnSpacing).Equal(m.at), "%s at %s", turn.ID, m.at)
			require.True(t, m.consumed && m.inMemory, "%s is segmented into a memory", turn.ID)
		}
	}

	// The memories' source spans cover every turn exactly once.
	mems, err := recall.LoadMemories(ctx, db.Pool, in)
	require.NoError(t, err)
	seen := map[string]int{}
	for _, m := range mems {
		require.NotEmpty(t, m.Doc.Turns)
		for _, dt := range m.Doc.Turns {
			seen[dt.ID]++
			require.Less(t, dt.End, m.Doc.Words+1)
			// Each turn's text is found inside the memory text, not
			// defaulted to the end of the memory (except the last turn).
			require.True(t, strings.Contains(m.Text, in.Text[dt.ID]), "memory text holds %s", dt.ID)
		}
	}
	require.Len(t, seen, c.TurnCount())
	for id, n := range seen {
		require.Equal(t, 1, n, id)
	}

	// Ingesting the same conversation into the same database is refused by Run.
	d.Conversations = d.Conversations[:1]
	_, err = recall.Run(ctx, db.Pool, recall.Options{}, d)
	require.ErrorContains(t, err, "already in this database")
}

func runSynthetic(t *testing.T, budgets []int) *recall.Report {
	t.Helper()
	db := dbtest.New(t)
	rep, err := recall.Run(context.Background(), db.Pool, recall.Options{Budgets: budgets, Headline: 1000}, load(t))
	require.NoError(t, err)
	return rep
}

func TestRunSynthetic(t *testing.T) {
	t.Parallel()
	rep := runSynthetic(t, []int{12, 2000})
	require.Equal(t, []string{"syn-1", "syn-2"}, rep.Conversations)
	require.Equal(t, 22, rep.Turns)
	require.Equal(t, 6, rep.Questions)
	require.Equal(t, "LoCoMo", rep.Benchmark)
	require.Equal(t, "synthetic.json", rep.Data)
	require.Equal(t, map[string]int{locomo.SkipCategory5: 1, locomo.SkipNoEvidence: 1}, rep.Skipped)
	require.Equal(t, recall.EvidenceStats{IDs: 8, Invalid: 1, InvalidIDs: []string{"syn-1/D9:99"}, QuestionsWithInvalid: 1}, rep.Evidence)
	require.Equal(t, []int{12, 1000, 2000}, rep.Budgets, "the headline budget is always reported")
	require.Len(t, rep.Methods, len(recall.Methods))
	require.Empty(t, rep.Measures, "LoCoMo has no extra measures")

	// 2000 words hold both conversations whole: every method that ranks
	// every item finds all evidence that exists; the invalid id of
	// question 4 stays missed (recall 0.5 there).
	want := (1 + 1 + 1 + 0.5 + 1 + 1) / 6.0
	for _, m := range []string{recall.MethodMneme, recall.MethodMnemeNoR, recall.MethodMnemeVector} {
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
	turns := rep.Result(recall.MethodBM25Turns, 12)
	require.Greater(t, turns.Overall.Recall, 0.0)
	require.LessOrEqual(t, turns.Overall.MeanWords, 12.0)
	win := rep.Result(recall.MethodBM25Windows, 12)
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
	for _, m := range recall.Methods {
		require.Contains(t, table.String(), m.Label)
	}
	require.Contains(t, table.String(), "syn-1/D9:99")

	var plot bytes.Buffer
	require.NoError(t, rep.WritePlot(&plot))
	var svg struct {
		XMLName   xml.Name   `xml:"svg"`
		Polylines []struct{} `xml:"polyline"`
	}
	require.NoError(t, xml.Unmarshal(plot.Bytes(), &svg), plot.String())
	require.Len(t, svg.Polylines, len(recall.Methods))
}

func TestRunIsDeterministic(t *testing.T) {
	t.Parallel()
	a, b := runSynthetic(t, recall.DefaultBudgets), runSynthetic(t, recall.DefaultBudgets)
	strip := func(r *recall.Report) map[string]any {
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

// A session dated before the previous one (add_message appends in time
// order) is moved to just after it, and counted.
func TestIngestClampsOutOfOrderSessions(t *testing.T) {
	t.Parallel()
	db := dbtest.New(t)
	convs, err := locomo.Parse([]byte(`[{"sample_id": "order", "conversation": {
		"speaker_a": "Ana", "speaker_b": "Ben",
		"session_1_date_time": "1:00 pm on 2 May, 2023",
		"session_1": [{"speaker": "Ana", "dia_id": "D1:1", "text": "first"}, {"speaker": "Ben", "dia_id": "D1:2", "text": "second"}],
		"session_2_date_time": "9:00 am on 1 May, 2023",
		"session_2": [{"speaker": "Ana", "dia_id": "D2:1", "text": "third"}, {"speaker": "Ben", "dia_id": "D2:2", "text": "fourth"}]},
		"qa": [{"question": "What came third?", "evidence": ["D2:1"], "category": 4}]}]`))
	require.NoError(t, err)
	jobs, err := recall.PipelineJobs(db.Pool, pipeline.Deps{Embedder: embed.NewHash(256)})
	require.NoError(t, err)
	in, err := recall.Ingest(context.Background(), db.Pool, jobs, &convs[0], nil, 0)
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
	run := func(shift time.Duration, opt recall.Options) map[string]any {
		db := dbtest.New(t)
		d := load(t)
		for i := range d.Conversations {
			for j := range d.Conversations[i].Sessions {
				d.Conversations[i].Sessions[j].At = d.Conversations[i].Sessions[j].At.Add(shift)
			}
		}
		opt.Budgets = []int{12, 30, 1000}
		rep, err := recall.Run(context.Background(), db.Pool, opt, d)
		require.NoError(t, err)
		var buf bytes.Buffer
		require.NoError(t, rep.WriteJSON(&buf))
		var m map[string]any
		require.NoError(t, json.Unmarshal(buf.Bytes(), &m))
		delete(m, "timing")
		return m
	}
	const years = 7 * 365 * 24 * time.Hour
	base := run(0, recall.Options{})
	require.Equal(t, base, run(-years, recall.Options{}))
}

// With AgentK, ingest retrieves for every turn like a live agent, and the
// pipeline reviews what was retrieved.
func TestRunAgentRetrievals(t *testing.T) {
	t.Parallel()
	db := dbtest.New(t)
	ctx := context.Background()
	rep, err := recall.Run(ctx, db.Pool, recall.Options{Budgets: []int{1000}, AgentK: 3}, load(t))
	require.NoError(t, err)
	require.Equal(t, 3, rep.AgentK)
	var reviews int
	require.NoError(t, db.Pool.QueryRow(ctx, `SELECT count(*) FROM mneme.review_log`).Scan(&reviews))
	require.Positive(t, reviews)
	var table bytes.Buffer
	require.NoError(t, rep.WriteTable(&table))
	require.Contains(t, table.String(), "mneme.retrieve k=3 for every turn")
}

// Retrievability is evaluated at the last turn: a question about the first
// session, a year before the second, whose memory matches the question
// better. By relevance alone its memory comes first; at the last turn a
// year later the fresh second session outranks it by retrievability.
func TestRunLastTurnDrivesRetrievability(t *testing.T) {
	t.Parallel()
	convs, err := locomo.Parse([]byte(`[{"sample_id": "asof", "conversation": {
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
	run := func() float64 {
		db := dbtest.New(t)
		// Memories that fade in days (the shipped stabilities are months to
		// years: docs/forgetting.md), so a year decides.
		_, err := db.Pool.Exec(context.Background(), `SELECT mneme.set_setting('initial_stability_days',
			'{"trivial": 3, "temporary": 3, "general": 3, "project": 3, "user_profile": 3, "important": 3}'),
			mneme.set_setting('extract_facts', 'false')`)
		require.NoError(t, err)
		rep, err := recall.Run(context.Background(), db.Pool, recall.Options{Budgets: []int{40}, Headline: 40},
			&recall.Data{Benchmark: "LoCoMo", Conversations: convs})
		require.NoError(t, err)
		require.Equal(t, 2, rep.Memories.Count, "one memory per session")
		require.Equal(t, 1.0, rep.Result(recall.MethodMnemeNoR, 40).Overall.Recall, "by relevance alone, the first session comes first")
		return rep.Result(recall.MethodMneme, 40).Overall.Recall
	}
	require.Equal(t, 0.0, run())
}

// TestRunWritesQuestions: Options.Questions gets one JSON line per
// question, method and budget, whose recall agrees with the report.
func TestRunWritesQuestions(t *testing.T) {
	t.Parallel()
	db := dbtest.New(t)
	var out bytes.Buffer
	rep, err := recall.Run(context.Background(), db.Pool, recall.Options{Budgets: []int{12, 2000}, Headline: 1000, Questions: &out}, load(t))
	require.NoError(t, err)
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	methods := len(recall.Methods)
	require.Len(t, lines, rep.Questions*methods*len(rep.Budgets))
	sum := map[string]float64{}
	n := map[string]int{}
	for _, l := range lines {
		var q recall.QuestionLine
		require.NoError(t, json.Unmarshal([]byte(l), &q), l)
		require.Contains(t, []string{"syn-1", "syn-2"}, q.Conversation)
		require.NotEmpty(t, q.Text)
		require.NotEmpty(t, q.Evidence)
		require.Contains(t, rep.Budgets, q.Budget)
		require.LessOrEqual(t, q.Words, q.Budget)
		key := q.Method + "/" + strconv.Itoa(q.Budget)
		sum[key] += q.Recall
		n[key]++
	}
	for _, m := range rep.Methods {
		for _, r := range m.Results {
			key := m.Name + "/" + strconv.Itoa(r.Budget)
			require.Equal(t, rep.Questions, n[key], key)
			require.InDelta(t, r.Overall.Recall, sum[key]/float64(n[key]), 1e-3, key)
		}
	}
}
