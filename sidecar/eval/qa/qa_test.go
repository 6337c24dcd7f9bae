package qa_test

import (
	"context"
	"encoding/json"
	"flag"
	"io"
	"log/slog"
	"os"
	"strings"
	"testing"
	"time"

	openai "github.com/sashabaranov/go-openai"
	"github.com/stretchr/testify/require"

	"github.com/mneme-memory/mneme/sidecar/backoff"
	"github.com/mneme-memory/mneme/sidecar/cli"
	"github.com/mneme-memory/mneme/sidecar/config"
	"github.com/mneme-memory/mneme/sidecar/dbtest"
	"github.com/mneme-memory/mneme/sidecar/eval/qa"
	"github.com/mneme-memory/mneme/sidecar/eval/recall"
	"github.com/mneme-memory/mneme/sidecar/llm"
	"github.com/mneme-memory/mneme/sidecar/llm/llmtest"
)

// TestEvaluate: the mechanics of `mneme eval qa` end to end on the
// synthetic LoCoMo fixture, with the real go-openai client against the
// scripted model: each question with a reference answer costs an answer
// call (the system prompt AnswerPrompt, the user message mneme's context
// and the question) and a judge call (JudgePrompt, the question, the
// reference answer and the model's answer); a question without a reference
// answer is skipped and counted; an unusable judgement counts as wrong, in
// Failed; accuracy is per category and in total.
func TestEvaluate(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := dbtest.New(t)
	d, err := qa.Load("../locomo/testdata/synthetic.json")
	require.NoError(t, err)
	p, err := recall.IngestAll(ctx, db.Pool, recall.Options{}, d)
	require.NoError(t, err)
	// A question without a reference answer (BEAM's rubric-only abilities).
	for i, q := range p.Conversations[0].Questions {
		if strings.Contains(q.Text, "Where does the cat sleep") {
			p.Conversations[0].Questions[i].Answer = ""
		}
	}

	// The scripted model answers with the first context line that names
	// the question's subject (its last capitalised word or "cat"), and
	// judges an answer correct when it contains the reference; the judge's
	// reply to the pottery question is malformed.
	srv := llmtest.New(t)
	srv.Default(func(req openai.ChatCompletionRequest) llmtest.Reply {
		system, user := req.Messages[0].Content, req.Messages[1].Content
		switch req.ResponseFormat.JSONSchema.Name {
		case "qa_answer":
			require.Equal(t, qa.AnswerPrompt, system)
			q := user[strings.LastIndex(user, "Question: ")+len("Question: "):]
			ans := "I do not know"
			for _, line := range strings.Split(user, "\n") {
				if strings.Contains(line, "Pixel") && strings.Contains(q, "cat") && strings.Contains(q, "name") {
					ans = "Pixel"
				}
			}
			b, _ := json.Marshal(map[string]string{"answer": ans})
			return llmtest.Reply{Content: string(b)}
		case "qa_judgement":
			require.Equal(t, qa.JudgePrompt, system)
			if strings.Contains(user, "pottery") {
				return llmtest.Reply{Content: `{"correct": tru`}
			}
			ref := between(user, "Reference answer: ", "\n")
			got := user[strings.LastIndex(user, "Answer to judge: ")+len("Answer to judge: "):]
			b, _ := json.Marshal(map[string]any{"correct": strings.EqualFold(ref, got), "reason": "compared"})
			return llmtest.Reply{Content: string(b)}
		}
		t.Errorf("unexpected schema %q", req.ResponseFormat.JSONSchema.Name)
		return llmtest.Reply{Status: 400}
	})
	model := llm.New(config.Endpoint{BaseURL: srv.URL(), Model: "scripted", APIKey: "k"}, 10*time.Second,
		llm.WithAttempts(2), llm.WithBackoff(backoff.Policy{Base: time.Millisecond, Max: time.Millisecond}))
	rep, err := qa.Evaluate(ctx, db.Pool, p, d, model, "scripted", qa.Options{Budget: 200})
	require.NoError(t, err)

	withAnswer, without := 0, 0
	for _, c := range p.Conversations {
		for _, q := range c.Questions {
			if q.Answer == "" {
				without++
			} else {
				withAnswer++
			}
		}
	}
	require.Equal(t, 1, without)
	require.Equal(t, without, rep.NoAnswer)
	require.Equal(t, withAnswer, rep.Total.Questions)
	require.Equal(t, 2*withAnswer, rep.Calls)
	require.Len(t, srv.Requests(), 2*withAnswer, "two calls per question, no retries")

	// What the model was shown: mneme's context (a turn naming Pixel for
	// the cat question) and, to the judge, the reference answer.
	var sawContext, sawReference bool
	for _, r := range srv.Requests() {
		u := r.Messages[1].Content
		if r.ResponseFormat.JSONSchema.Name == "qa_answer" && strings.Contains(u, "name of Ana's cat") {
			require.True(t, strings.HasPrefix(u, "Memory context:\n\n### "), "the context under its dates: %q", u)
			sawContext = strings.Contains(u, "Pixel")
		}
		if r.ResponseFormat.JSONSchema.Name == "qa_judgement" && strings.Contains(u, "name of Ana's cat") {
			sawReference = strings.Contains(u, "Reference answer: Pixel\n") && strings.HasSuffix(u, "Answer to judge: Pixel")
		}
	}
	require.True(t, sawContext, "the cat question's context holds the turn about Pixel")
	var sawNumber bool
	for _, r := range srv.Requests() {
		sawNumber = sawNumber || strings.Contains(r.Messages[1].Content, "sister study?\nReference answer: 7\n")
	}
	require.True(t, sawNumber, "a reference answer given as a JSON number is judged as its text")
	require.True(t, sawReference)

	// Per category: the cat question right, the pottery judgement failed,
	// the rest answered "I do not know" and judged wrong.
	cats := map[string]qa.Category{}
	for _, c := range rep.Categories {
		cats[c.Name] = c
		require.InDelta(t, float64(c.Correct)/float64(c.Questions), c.Accuracy, 1e-12)
	}
	require.GreaterOrEqual(t, rep.Total.Correct, 1)
	require.Equal(t, 1, rep.Total.Failed, "the malformed judgement")
	sumQ, sumC := 0, 0
	for _, c := range rep.Categories {
		sumQ += c.Questions
		sumC += c.Correct
	}
	require.Equal(t, rep.Total.Questions, sumQ)
	require.Equal(t, rep.Total.Correct, sumC)
	require.InDelta(t, float64(rep.Total.Correct)/float64(rep.Total.Questions), rep.Total.Accuracy, 1e-12)
	require.Equal(t, d.Categories[0], rep.Categories[0].Name, "categories in the data's order")

	var out strings.Builder
	require.NoError(t, rep.WriteTable(&out))
	require.Contains(t, out.String(), "total")
	require.Contains(t, out.String(), "judged by scripted")
}

func between(s, a, b string) string {
	i := strings.Index(s, a)
	if i < 0 {
		return ""
	}
	s = s[i+len(a):]
	if j := strings.Index(s, b); j >= 0 {
		return s[:j]
	}
	return s
}

// TestCommandNeedsTheModel: without --llm, or without MNEME_LLM_*, eval qa
// is a usage error that says what to set, and asks nothing.
func TestCommandNeedsTheModel(t *testing.T) {
	t.Setenv("MNEME_LLM_BASE_URL", "")
	t.Setenv("MNEME_LLM_MODEL", "")
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	for _, args := range [][]string{
		{"--data", "../locomo/testdata/synthetic.json"},
		{"--data", "../locomo/testdata/synthetic.json", "--llm"},
		{"--llm"},
	} {
		err := qa.Command(context.Background(), log, flag.NewFlagSet("eval qa", flag.ContinueOnError), args)
		require.ErrorIs(t, err, cli.ErrUsage, "%v", args)
		require.Contains(t, err.Error(), "--", "%v", args)
	}
}

// TestJudgePromptDocumented: docs/eval.md quotes both prompts as sent.
func TestJudgePromptDocumented(t *testing.T) {
	b, err := os.ReadFile("../../../docs/eval.md")
	require.NoError(t, err)
	require.Contains(t, string(b), "> "+qa.AnswerPrompt+"\n")
	require.Contains(t, string(b), "> "+qa.JudgePrompt+"\n")
}
