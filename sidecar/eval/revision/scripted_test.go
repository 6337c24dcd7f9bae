package revision

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	openai "github.com/sashabaranov/go-openai"

	"github.com/mneme-memory/mneme/sidecar/config"
	"github.com/mneme-memory/mneme/sidecar/llm/llmtest"
	"github.com/mneme-memory/mneme/sidecar/revision"
)

// The kinds of bad answer the scripted model sends.
const (
	BadMalformed     = "malformed JSON"
	BadOutOfRange    = "target out of range"
	BadUnknownAction = "unknown action"
	BadLowConfidence = "low confidence"
	BadHTTP500       = "HTTP 500"
)

// BadKinds in the order the scripted model cycles through them.
var BadKinds = []string{BadMalformed, BadOutOfRange, BadUnknownAction, BadLowConfidence, BadHTTP500}

// badEvery: of the decisions whose labelled answer is not ADD (and whose
// target is among the candidates shown), every badEvery-th gets a bad
// answer (the 2nd, 6th, 10th, ...), the kinds in turn. ADD decisions are
// left alone: a bad answer that becomes ADD there would prove nothing.
const badEvery = 4

// BadStats is one kind of bad answer: how many were sent and what the
// writes they answered became (applied action: count). Right counts those
// that became the labelled action (an HTTP 500 is retried by the client
// and then answered well).
type BadStats struct {
	Kind   string         `json:"kind"`
	Count  int            `json:"count"`
	Became map[string]int `json:"became"`
	Right  int            `json:"right"`
}

// LLMStats is what the scripted model saw and sent.
type LLMStats struct {
	Decisions  int        `json:"decisions"`   // revision_decision requests, first attempts
	Requests   int        `json:"requests"`    // HTTP requests, retries included
	NotOffered int        `json:"not_offered"` // labelled target not among the candidates: answered ADD
	Bad        []BadStats `json:"bad"`
}

// Scripted is a model behind the tests' fake OpenAI-compatible endpoint
// (llmtest) that answers each
// revision_decision request from the suite's labels: it reads the numbered
// candidates in the prompt and names the labelled target's number. A
// deterministic share of its answers are bad (BadKinds). The sidecar
// reaches it through the real go-openai client.
type Scripted struct {
	srv *llmtest.Server

	mu       sync.Mutex
	conv     *Conversation
	labels   labels
	idx      int
	attempts map[string]int
	nonAdd   int
	sent     []badSent
	stats    LLMStats
	errs     []error
}

type badSent struct{ conv, key, kind string }

// newScripted starts the model's server, which t stops.
func newScripted(t testing.TB) *Scripted {
	s := &Scripted{attempts: map[string]int{}, srv: llmtest.New(t)}
	s.srv.Default(s.respond)
	return s
}

func (s *Scripted) revising(c *Conversation, i int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.conv != c {
		s.conv, s.labels = c, newLabels(c)
	}
	s.idx = i
}

// Err reports requests the model could not make sense of (a prompt in an
// unknown format, a fact that is not the write under revision): the
// evaluation's numbers would not mean what they say.
func (s *Scripted) Err() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return errors.Join(s.errs...)
}

var (
	candidateRE = regexp.MustCompile(`(?m)^(\d+)\. \[[^\]]*\] (".*")$`)
	newFactRE   = regexp.MustCompile(`(?m)^## New fact\n\[[^\]]*\] (".*")$`)
)

type decision struct {
	Action     string  `json:"action"`
	Target     int     `json:"target"`
	Reason     string  `json:"reason"`
	Confidence float64 `json:"confidence"`
}

func answer(d decision) llmtest.Reply {
	b, _ := json.Marshal(d)
	return llmtest.Reply{Content: string(b)}
}

func (s *Scripted) respond(req openai.ChatCompletionRequest) llmtest.Reply {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.stats.Requests++
	add := answer(decision{Action: revision.ActionAdd, Reason: "scripted: new information", Confidence: 0.9})
	if req.ResponseFormat == nil || req.ResponseFormat.JSONSchema == nil || req.ResponseFormat.JSONSchema.Name != "revision_decision" {
		s.errs = append(s.errs, fmt.Errorf("scripted model: a request that is not a revision_decision"))
		return llmtest.Reply{Status: http.StatusBadRequest, Content: "the scripted model answers revision_decision only"}
	}
	var user string
	for _, m := range req.Messages {
		if m.Role == openai.ChatMessageRoleUser {
			user = m.Content
		}
	}
	if s.conv == nil {
		s.errs = append(s.errs, fmt.Errorf("scripted model: a request before any write"))
		return add
	}
	w := s.conv.Writes[s.idx]
	m := newFactRE.FindStringSubmatch(user)
	if m == nil {
		s.errs = append(s.errs, fmt.Errorf("scripted model: no new fact in the prompt of %s/%s", s.conv.Name, w.Key))
		return add
	}
	if text, err := strconv.Unquote(m[1]); err != nil || text != w.Text {
		s.errs = append(s.errs, fmt.Errorf("scripted model: asked about %s, revising %s/%s", m[1], s.conv.Name, w.Key))
		return add
	}
	id := s.conv.Name + "/" + w.Key
	attempt := s.attempts[id]
	s.attempts[id]++
	if attempt == 0 {
		s.stats.Decisions++
	}
	if w.Expect == revision.ActionAdd {
		return add
	}
	// The labelled target's number: the first candidate whose text is a
	// write standing for the same belief.
	target := s.labels.canon(w.Target)
	cands := candidateRE.FindAllStringSubmatch(user, -1)
	n := 0
	for _, c := range cands {
		text, err := strconv.Unquote(c[2])
		if err != nil {
			s.errs = append(s.errs, fmt.Errorf("scripted model: candidate %s: %w", c[2], err))
			continue
		}
		for _, cw := range s.conv.Writes {
			if cw.Text == text && s.labels.canon(cw.Key) == target && n == 0 {
				n, _ = strconv.Atoi(c[1])
			}
		}
	}
	if n == 0 {
		if attempt == 0 {
			s.stats.NotOffered++
		}
		return add
	}
	good := decision{Action: w.Expect, Target: n, Reason: "scripted: the labelled answer", Confidence: 0.9}
	if attempt == 0 {
		k := s.nonAdd
		s.nonAdd++
		if k%badEvery == 1 {
			kind := BadKinds[(k/badEvery)%len(BadKinds)]
			s.sent = append(s.sent, badSent{conv: s.conv.Name, key: w.Key, kind: kind})
			switch kind {
			case BadMalformed:
				return llmtest.Reply{Content: fmt.Sprintf(`{"action": %q, "target": %d, "reason": "cut o`, w.Expect, n)}
			case BadOutOfRange:
				bad := good
				bad.Target = len(cands) + 1
				return answer(bad)
			case BadUnknownAction:
				bad := good
				bad.Action = "REPLACE"
				return answer(bad)
			case BadLowConfidence:
				bad := good
				bad.Confidence = 0.2
				return answer(bad)
			case BadHTTP500:
				return llmtest.Reply{Status: http.StatusInternalServerError, Content: "scripted outage"}
			}
		}
	}
	return answer(good)
}

// Stats is what the model saw and sent, and what its bad answers became
// in rep.
func (s *Scripted) Stats(rep *Report) *LLMStats {
	s.mu.Lock()
	defer s.mu.Unlock()
	st := s.stats
	st.Bad = nil
	for _, kind := range BadKinds {
		b := BadStats{Kind: kind, Became: map[string]int{}}
		for _, sent := range s.sent {
			if sent.kind != kind {
				continue
			}
			b.Count++
			o := rep.outcomes[sent.conv+"/"+sent.key]
			b.Became[o.applied]++
			if o.right {
				b.Right++
			}
		}
		st.Bad = append(st.Bad, b)
	}
	return &st
}

// runScripted runs the suite with the LLM classifier against the scripted
// model: the report, and what the model saw and sent.
func runScripted(t testing.TB, ctx context.Context, pool *pgxpool.Pool, log *slog.Logger, progress io.Writer) (*Report, *LLMStats, error) {
	model := newScripted(t)
	cfg := config.Config{LLM: config.Endpoint{BaseURL: model.srv.URL(), APIKey: "scripted", Model: "scripted"}, LLMTimeout: 30 * time.Second}
	rep, err := runPipelines(ctx, pool, cfg, log, progress, model)
	if err != nil {
		return nil, nil, err
	}
	if err := model.Err(); err != nil {
		return nil, nil, err
	}
	rep.Mode = "LLM classifier, scripted model"
	return rep, model.Stats(rep), nil
}

func (s *LLMStats) write(w io.Writer) {
	fmt.Fprintf(w, "\nscripted model: %d decisions asked, %d HTTP requests, %d labelled targets not among the candidates shown (answered ADD)\n",
		s.Decisions, s.Requests, s.NotOffered)
	fmt.Fprintf(w, "  %-22s %6s  %s\n", "bad answer", "count", "became")
	for _, b := range s.Bad {
		var parts []string
		keys := make([]string, 0, len(b.Became))
		for k := range b.Became {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			parts = append(parts, fmt.Sprintf("%s %d", k, b.Became[k]))
		}
		extra := ""
		if b.Kind == BadHTTP500 {
			extra = fmt.Sprintf(" (retried by the client; %d the labelled action)", b.Right)
		}
		fmt.Fprintf(w, "  %-22s %6d  %s%s\n", b.Kind, b.Count, strings.Join(parts, ", "), extra)
	}
}
