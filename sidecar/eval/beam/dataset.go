// Package beam reads BEAM (Tavakoli et al., 2025, "Beyond a Million
// Tokens") for the evidence-recall harness (package recall): each
// conversation folder's chat.json batches become sessions, its messages
// turns (named by their id), and every probing question with
// source_chat_ids a question of its memory ability, with BEAM's measures
// of knowledge updates and contradictions (measures.go). The data is read
// from where it lies (../shared/data/beam/...) and never copied.
package beam

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/mneme-memory/mneme/sidecar/cli"
	"github.com/mneme-memory/mneme/sidecar/eval/recall"
)

// Abilities are BEAM's memory abilities, in report order.
var Abilities = []string{"information_extraction", "multi_session_reasoning", "knowledge_update", "temporal_reasoning",
	"event_ordering", "contradiction_resolution", "summarization", "preference_following", "instruction_following", "abstention"}

// Skip reasons.
const (
	SkipNoEvidence = "no source_chat_ids"
	SkipBadIDs     = "source_chat_ids name no message"
)

// AnchorLayout is BEAM's time_anchor format, e.g. March-15-2024.
const AnchorLayout = "January-02-2006"

// Spacing is the time between two messages of a batch: BEAM dates batches,
// not messages.
const Spacing = time.Minute

// Load reads a conversation folder (chat.json and probing_questions.json,
// or probing_questions/probing_questions.json) or a folder of such folders
// (a tier such as 100K), in numeric order of their names. Conversation
// ids are beam-<folder>.
func Load(dir string) (*recall.Data, error) {
	if st, err := os.Stat(dir); err != nil || !st.IsDir() {
		return nil, fmt.Errorf("%w: --data %q: want a folder of BEAM conversations", cli.ErrUsage, dir)
	}
	d := &recall.Data{Benchmark: "BEAM", Name: filepath.Base(filepath.Clean(dir)), Categories: Abilities, Measures: Measures}
	if _, err := os.Stat(filepath.Join(dir, "chat.json")); err == nil {
		c, err := loadConversation(dir)
		if err != nil {
			return nil, err
		}
		d.Conversations = []recall.Conversation{c}
		return d, nil
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("beam: %w", err)
	}
	var names []string
	for _, e := range entries {
		if e.IsDir() {
			if _, err := os.Stat(filepath.Join(dir, e.Name(), "chat.json")); err == nil {
				names = append(names, e.Name())
			}
		}
	}
	if len(names) == 0 {
		return nil, fmt.Errorf("beam: %s holds no chat.json, nor folders that do", dir)
	}
	sort.Slice(names, func(i, j int) bool {
		a, errA := strconv.Atoi(names[i])
		b, errB := strconv.Atoi(names[j])
		if errA == nil && errB == nil {
			return a < b
		}
		return names[i] < names[j]
	})
	for _, n := range names {
		c, err := loadConversation(filepath.Join(dir, n))
		if err != nil {
			return nil, err
		}
		d.Conversations = append(d.Conversations, c)
	}
	return d, nil
}

type rawMessage struct {
	Role       string `json:"role"`
	ID         *int   `json:"id"`
	Content    string `json:"content"`
	TimeAnchor string `json:"time_anchor"`
}

type rawBatch struct {
	TimeAnchor *string        `json:"time_anchor"`
	Turns      [][]rawMessage `json:"turns"`
}

func loadConversation(dir string) (recall.Conversation, error) {
	name := filepath.Base(dir)
	c := recall.Conversation{ID: "beam-" + name, Spacing: Spacing, Skipped: map[string]int{}}
	b, err := os.ReadFile(filepath.Join(dir, "chat.json"))
	if err != nil {
		return c, fmt.Errorf("beam: %w", err)
	}
	var raw []rawBatch
	if err := json.Unmarshal(b, &raw); err != nil {
		return c, fmt.Errorf("beam: %s/chat.json: %w", name, err)
	}
	ids := map[int]bool{}
	var prev time.Time
	for bi, rb := range raw {
		s := recall.Session{}
		anchor := ""
		if rb.TimeAnchor != nil {
			anchor = *rb.TimeAnchor
		}
		for _, turn := range rb.Turns {
			for _, m := range turn {
				if anchor == "" && m.TimeAnchor != "" {
					anchor = m.TimeAnchor
				}
				if m.ID == nil || m.Role == "" || strings.TrimSpace(m.Content) == "" {
					return c, fmt.Errorf("beam: %s/chat.json batch %d: a message without id, role or content", name, bi+1)
				}
				if ids[*m.ID] {
					return c, fmt.Errorf("beam: %s/chat.json: message id %d twice", name, *m.ID)
				}
				ids[*m.ID] = true
				s.Turns = append(s.Turns, recall.Turn{ID: strconv.Itoa(*m.ID), Speaker: m.Role, Text: m.Content})
			}
		}
		switch t, err := time.Parse(AnchorLayout, anchor); {
		case anchor == "" && !prev.IsZero():
			s.At = prev.Add(24 * time.Hour) // undated: the day after the previous batch
		case err != nil:
			return c, fmt.Errorf("beam: %s/chat.json batch %d: time_anchor %q: want e.g. March-15-2024", name, bi+1, anchor)
		default:
			s.At = t.UTC()
		}
		prev = s.At
		c.Sessions = append(c.Sessions, s)
	}
	qpath := filepath.Join(dir, "probing_questions.json")
	if _, err := os.Stat(qpath); errors.Is(err, os.ErrNotExist) {
		qpath = filepath.Join(dir, "probing_questions", "probing_questions.json")
	}
	b, err = os.ReadFile(qpath)
	if err != nil {
		return c, fmt.Errorf("beam: %w", err)
	}
	var qs map[string][]struct {
		Question string          `json:"question"`
		Source   json.RawMessage `json:"source_chat_ids"`
		// The reference answer: answer, or ideal_answer / ideal_response
		// (contradiction resolution, abstention); none for the abilities
		// judged by rubric only.
		Answer        json.RawMessage `json:"answer"`
		IdealAnswer   string          `json:"ideal_answer"`
		IdealResponse string          `json:"ideal_response"`
	}
	if err := json.Unmarshal(b, &qs); err != nil {
		return c, fmt.Errorf("beam: %s: %w", qpath, err)
	}
	for _, ability := range abilitiesIn(qs) {
		for i, rq := range qs[ability] {
			src, err := parseSources(rq.Source)
			if err != nil {
				return c, fmt.Errorf("beam: %s %s question %d: %w", name, ability, i+1, err)
			}
			if len(src.evidence) == 0 || strings.TrimSpace(rq.Question) == "" {
				c.Skipped[SkipNoEvidence]++
				continue
			}
			known := true
			for _, id := range src.evidence {
				known = known && ids[id]
			}
			if !known {
				c.Skipped[SkipBadIDs]++
				continue
			}
			c.Questions = append(c.Questions, recall.Question{Index: i, Text: rq.Question, Category: ability,
				Evidence: turnIDs(src.evidence), Measure: measure(ability, turnIDs(src.old), turnIDs(src.new)),
				Answer: firstText(rawText(rq.Answer), rq.IdealAnswer, rq.IdealResponse)})
		}
	}
	return c, nil
}

// abilitiesIn orders the file's abilities: the known ones in report order,
// then any other, by name.
func abilitiesIn[V any](qs map[string]V) []string {
	var out []string
	for _, a := range Abilities {
		if _, ok := qs[a]; ok {
			out = append(out, a)
		}
	}
	var other []string
	for a := range qs {
		if !slices.Contains(Abilities, a) {
			other = append(other, a)
		}
	}
	sort.Strings(other)
	return append(out, other...)
}

// sources are a question's source_chat_ids: every id, distinct, in file
// order; and knowledge_update's original_info and updated_info, or
// contradiction_resolution's first_statement and second_statement.
type sources struct {
	evidence, old, new []int
}

// parseSources reads source_chat_ids: absent or null, a list of ids
// (possibly nested: [1, 2, [3, 4]]), or an object of such lists
// (original_info/updated_info, first_statement/second_statement, or any
// other keys, all evidence).
func parseSources(raw json.RawMessage) (sources, error) {
	var src sources
	if len(raw) == 0 || string(raw) == "null" {
		return src, nil
	}
	var v any
	if err := json.Unmarshal(raw, &v); err != nil {
		return src, fmt.Errorf("source_chat_ids: %v", err)
	}
	obj, isObj := v.(map[string]any)
	if !isObj {
		ids, err := flatten(v)
		src.evidence = distinct(ids)
		return src, err
	}
	keys := make([]string, 0, len(obj))
	for k := range obj {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	lists := map[string][]int{}
	var all []int
	for _, k := range keys {
		ids, err := flatten(obj[k])
		if err != nil {
			return src, fmt.Errorf("%s: %w", k, err)
		}
		lists[k] = distinct(ids)
		all = append(all, ids...)
	}
	src.evidence = distinct(all)
	switch {
	case lists["original_info"] != nil || lists["updated_info"] != nil:
		src.old, src.new = lists["original_info"], lists["updated_info"]
	case lists["first_statement"] != nil || lists["second_statement"] != nil:
		src.old, src.new = lists["first_statement"], lists["second_statement"]
	}
	return src, nil
}

// flatten reads a message id or a (nested) list of them.
func flatten(v any) ([]int, error) {
	switch x := v.(type) {
	case float64:
		if x != float64(int(x)) || x < 0 {
			return nil, fmt.Errorf("source_chat_ids: %v is not a message id", x)
		}
		return []int{int(x)}, nil
	case []any:
		var out []int
		for _, e := range x {
			ids, err := flatten(e)
			if err != nil {
				return nil, err
			}
			out = append(out, ids...)
		}
		return out, nil
	case nil:
		return nil, nil
	}
	return nil, fmt.Errorf("source_chat_ids: want message ids, got %T", v)
}

func distinct(xs []int) []int {
	seen := map[int]bool{}
	var out []int
	for _, x := range xs {
		if !seen[x] {
			seen[x] = true
			out = append(out, x)
		}
	}
	return out
}

// turnIDs are message ids as turn ids.
func turnIDs(ids []int) []string {
	out := make([]string, len(ids))
	for i, id := range ids {
		out[i] = strconv.Itoa(id)
	}
	return out
}

// rawText is a JSON string's text, or any other JSON value as written; ""
// for none.
func rawText(r json.RawMessage) string {
	var str string
	if json.Unmarshal(r, &str) == nil {
		return strings.TrimSpace(str)
	}
	if len(r) == 0 || string(r) == "null" {
		return ""
	}
	return strings.TrimSpace(string(r))
}

// firstText is the first of its arguments that is not blank.
func firstText(s ...string) string {
	for _, x := range s {
		if x = strings.TrimSpace(x); x != "" {
			return x
		}
	}
	return ""
}
