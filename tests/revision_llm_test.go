package tests

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/sashabaranov/go-openai"
	"github.com/stretchr/testify/require"

	"github.com/mneme-memory/mneme/sidecar/llm/llmtest"
)

// decisionReply is a scripted revision_decision answer.
func decisionReply(action string, target int, reason string, confidence float64) llmtest.Reply {
	b, _ := json.Marshal(map[string]any{"action": action, "target": target, "reason": reason, "confidence": confidence})
	return llmtest.Reply{Content: string(b)}
}

// schemaName is the structured-output schema a request asked for.
func schemaName(req openai.ChatCompletionRequest) string {
	if req.ResponseFormat == nil || req.ResponseFormat.JSONSchema == nil {
		return ""
	}
	return req.ResponseFormat.JSONSchema.Name
}

// llmRevisionEnv: a conversation with one fact, revised already (nothing to
// compare it with: no model call), and a second fact written, its revise
// job pending.
func llmRevisionEnv(t *testing.T) (e *pipelineEnv, first, second uuid.UUID) {
	e = newPipelineEnv(t, true)
	first = rememberFact(t, e.db, e.conv, "The user lives in Paris", nil)
	e.drain()
	require.Empty(t, e.srv.Requests(), "no candidates: no model call")
	requireOneRevised(t, e.db, first, "ADD", "llm")
	second = rememberFact(t, e.db, e.conv, "The user moved to Berlin", nil)
	return e, first, second
}

// TestRevisionLLM: the LLM classifier through the real go-openai client
// and the fake server. A scripted SUPERSEDE of fact 1 is applied; the
// model sees numbered facts, never ids. Anything malformed or unsure is an
// ADD (no garbage written, the job done); an HTTP 500 is retried.
func TestRevisionLLM(t *testing.T) {
	t.Parallel()
	t.Run("supersede", func(t *testing.T) {
		t.Parallel()
		e, paris, berlin := llmRevisionEnv(t)
		e.srv.Script(decisionReply("SUPERSEDE", 1, "the user moved from Paris to Berlin", 0.9))
		e.drain()
		require.Zero(t, e.count(`SELECT count(*) FROM mneme.jobs WHERE state <> 'done'`))
		reqs := e.srv.Requests()
		require.Len(t, reqs, 1)
		require.Equal(t, "revision_decision", schemaName(reqs[0]))
		require.Contains(t, reqs[0].Messages[0].Content, "You maintain the beliefs of a long-term memory")
		user := reqs[0].Messages[1].Content
		require.Contains(t, user, "## Existing facts\n1. [")
		require.Contains(t, user, `"The user lives in Paris"`)
		require.Contains(t, user, "## New fact\n[")
		require.Contains(t, user, `"The user moved to Berlin"`)
		require.NotContains(t, user, paris.String(), "ids are never shown")
		require.NotContains(t, user, "2. [", "one candidate")
		ev := requireOneRevised(t, e.db, berlin, "SUPERSEDE", "llm")
		require.Contains(t, ev.Reason, "the user moved from Paris to Berlin")
		p, b := getBelief(t, e.db, paris), getBelief(t, e.db, berlin)
		require.Equal(t, "superseded", p.Status)
		require.True(t, p.ValidUntil.Equal(b.CreatedAt))
		require.Equal(t, paris, *b.SupersedesID)
		require.Equal(t, "active", b.Status)
	})

	garbage := []struct {
		name  string
		reply llmtest.Reply
		why   string
	}{
		{"malformed JSON", llmtest.Reply{Content: `{"action": "SUPERSEDE", "target": 1,`}, "model answer unusable"},
		{"not JSON", llmtest.Reply{Content: "I think the user moved."}, "model answer unusable"},
		{"target out of range", decisionReply("SUPERSEDE", 7, "moved", 0.9), "not listed"},
		{"target zero", decisionReply("INVALIDATE", 0, "moved", 0.9), "not listed"},
		{"negative target", decisionReply("NOOP", -1, "same", 0.9), "not listed"},
		{"unknown action", decisionReply("MERGE", 1, "moved", 0.9), "model answer unusable"},
		{"lower-case action", decisionReply("supersede", 1, "moved", 0.9), "model answer unusable"},
		{"confidence out of range", decisionReply("SUPERSEDE", 1, "moved", 3), "model answer unusable"},
		{"low confidence", decisionReply("SUPERSEDE", 1, "maybe moved", 0.2), "model unsure"},
	}
	for _, g := range garbage {
		t.Run(g.name, func(t *testing.T) {
			t.Parallel()
			e, paris, berlin := llmRevisionEnv(t)
			before := getBelief(t, e.db, paris)
			e.srv.Script(g.reply)
			e.drain()
			require.Zero(t, e.count(`SELECT count(*) FROM mneme.jobs WHERE state <> 'done'`), "an unusable answer does not fail the job")
			require.Len(t, e.srv.Requests(), 1, "not asked again")
			ev := requireOneRevised(t, e.db, berlin, "ADD", "llm")
			require.Contains(t, ev.Reason, g.why)
			require.Equal(t, before, getBelief(t, e.db, paris), "the candidate is untouched")
			b := getBelief(t, e.db, berlin)
			require.Equal(t, "active", b.Status)
			require.Nil(t, b.SupersedesID)
			require.Nil(t, b.ConfirmsID)
			require.Nil(t, b.InvalidatesID)
			require.Equal(t, 2, e.count(`SELECT count(*) FROM mneme.memories WHERE status = 'active'`))
			require.Zero(t, e.count(`SELECT count(*) FROM mneme.review_log`))
		})
	}

	t.Run("HTTP 500 retried", func(t *testing.T) {
		t.Parallel()
		e, paris, berlin := llmRevisionEnv(t)
		e.srv.Script(llmtest.Reply{Status: http.StatusInternalServerError, Content: "overloaded"},
			decisionReply("SUPERSEDE", 1, "moved", 0.9))
		e.drain()
		var state string
		var attempts int
		require.NoError(t, e.db.Pool.QueryRow(context.Background(), `SELECT state, attempts FROM mneme.jobs
			WHERE kind = 'revise' AND payload->>'memory_id' = $1`, berlin.String()).Scan(&state, &attempts))
		require.Equal(t, "done", state)
		require.Equal(t, 2, attempts, "the failed attempt was retried")
		require.Len(t, e.srv.Requests(), 2)
		requireOneRevised(t, e.db, berlin, "SUPERSEDE", "llm")
		require.Equal(t, "superseded", getBelief(t, e.db, paris).Status)
	})

	t.Run("NOOP", func(t *testing.T) {
		t.Parallel()
		e, paris, berlin := llmRevisionEnv(t)
		before := getBelief(t, e.db, paris)
		e.srv.Script(decisionReply("NOOP", 1, "the same fact", 0.8))
		e.drain()
		requireOneRevised(t, e.db, berlin, "NOOP", "llm")
		b, p := getBelief(t, e.db, berlin), getBelief(t, e.db, paris)
		require.Equal(t, "merged", b.Status)
		require.Equal(t, paris, *b.ConfirmsID)
		require.Equal(t, before.Reviews+1, p.Reviews)
		require.InDelta(t, min(1, before.Confidence+0.1), p.Confidence, 1e-6)
		var reviewer string
		require.NoError(t, e.db.Pool.QueryRow(context.Background(), `SELECT reviewer FROM mneme.review_log WHERE memory_id = $1 AND rating = 'good'`,
			paris).Scan(&reviewer))
		require.Equal(t, "llm", reviewer)
	})
}

// TestLLMSegmenterFacts: the LLM segmenter's facts are stored with the ids
// of the messages they name; a fact naming a message number that was not
// shown (or none, or blank) is dropped, never stored with made-up
// provenance.
func TestLLMSegmenterFacts(t *testing.T) {
	t.Parallel()
	e := newPipelineEnv(t, true)
	facts := []map[string]any{
		{"text": "Dana lives in Lisbon.", "messages": []int{1}},
		{"text": "Dana works as a nurse.", "messages": []int{9}},
		{"text": "Dana was born in Porto.", "messages": []int{0}},
		{"text": "Dana has a cat.", "messages": []int{-1}},
		{"text": "Dana has a dog.", "messages": []int{1, 7}},
		{"text": "   ", "messages": []int{2}},
		{"text": "Dana likes the sea.", "messages": []int{}},
		{"text": strings.Repeat("long ", 500), "messages": []int{1}},
		{"text": "Dana moved to Lisbon from Porto.", "messages": []int{1, 3}},
	}
	b, _ := json.Marshal(map[string]any{"action": "create", "summary": "Dana introduces herself: Lisbon, Porto, nursing.",
		"surprise": 0.5, "label": "user_profile", "pinned": false, "facts": facts})
	e.srv.Script(llmtest.Reply{Content: string(b)})
	e.srv.Default(func(req openai.ChatCompletionRequest) llmtest.Reply {
		if schemaName(req) == "revision_decision" {
			return decisionReply("ADD", 0, "new information", 0.9)
		}
		return llmtest.Reply{Content: `{"action":"skip","summary":"","surprise":0,"label":"general","pinned":false,"facts":[]}`}
	})
	var ids []int64
	for i, line := range []string{"My name is Dana and I live in Lisbon.", "Nice to meet you, Dana.",
		"I moved there from Porto.", "Lisbon is lovely.", "I work as a nurse.", "That sounds rewarding."} {
		ids = append(ids, e.say(day1.Add(time.Duration(i)*time.Minute).Format(time.RFC3339), []string{"user", "assistant"}[i%2], line))
	}
	_, err := e.db.Pool.Exec(context.Background(), `SELECT mneme.segment_now($1)`, e.conv)
	require.NoError(t, err)
	e.drain()
	require.Zero(t, e.count(`SELECT count(*) FROM mneme.jobs WHERE state <> 'done'`))
	eps := e.episodes()
	require.Len(t, eps, 1)
	got := map[string][]int64{}
	for _, f := range e.extractedFacts() {
		got[f.Content] = f.SourceIDs
		require.Equal(t, fmt.Sprintf("episode %s messages %s", eps[0].ID, joinIDs(f.SourceIDs)), f.SourceRef)
		require.Len(t, revisedEvents(t, e.db, f.ID), 1)
	}
	require.Equal(t, map[string][]int64{
		"Dana lives in Lisbon.":            {ids[0]},
		"Dana moved to Lisbon from Porto.": {ids[0], ids[2]},
	}, got)
}
