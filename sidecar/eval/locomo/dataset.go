// Package locomo reads the LoCoMo benchmark (Maharana et al., ACL 2024)
// for the evidence-recall harness (package recall): conversations in
// LoCoMo's JSON format become the harness's conversations, sessions and
// turns, and every question of categories 1 to 4 a question whose evidence
// is the dia_ids it names.
//
// The data is CC BY-NC 4.0 and is read at run time from the file given;
// nothing of it is part of this package.
package locomo

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/mneme-memory/mneme/sidecar/eval/recall"
)

// Categories are LoCoMo's question categories; 5 (adversarial, no answer in
// the conversation) is not evaluated because it has no evidence to recall.
var Categories = map[int]string{
	1: "multi-hop",
	2: "temporal",
	3: "open-domain",
	4: "single-hop",
}

// TurnSpacing is the time between the turns of a session: LoCoMo dates
// sessions, not turns.
const TurnSpacing = 5 * time.Second

// Skip reasons.
const (
	SkipCategory5  = "category 5 (adversarial)"
	SkipNoEvidence = "no evidence"
)

// Load reads a LoCoMo JSON file: a list of samples, as locomo10.json.
func Load(path string) (*recall.Data, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read LoCoMo data: %w", err)
	}
	convs, err := Parse(b)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return &recall.Data{Benchmark: "LoCoMo", Name: filepath.Base(path), Conversations: convs,
		Categories: []string{Categories[1], Categories[2], Categories[3], Categories[4]}}, nil
}

// ErrFormat wraps every complaint about the input's shape.
var ErrFormat = errors.New("not LoCoMo format")

type rawSample struct {
	SampleID     json.RawMessage            `json:"sample_id"`
	Conversation map[string]json.RawMessage `json:"conversation"`
	QA           []rawQA                    `json:"qa"`
}

type rawQA struct {
	Question string          `json:"question"`
	Evidence []string        `json:"evidence"`
	Category json.RawMessage `json:"category"`
	Answer   json.RawMessage `json:"answer"` // a string or a number; absent for adversarial questions
}

type rawTurn struct {
	Speaker     string `json:"speaker"`
	DiaID       string `json:"dia_id"`
	Text        string `json:"text"`
	BlipCaption string `json:"blip_caption"`
}

var sessionKey = regexp.MustCompile(`^session_([0-9]+)$`)

// Parse decodes LoCoMo JSON. Samples without a sample_id are named by
// their position (sample-1, ...).
func Parse(b []byte) ([]recall.Conversation, error) {
	var raw []rawSample
	if err := json.Unmarshal(b, &raw); err != nil {
		return nil, fmt.Errorf("%w: want a JSON list of samples: %v", ErrFormat, err)
	}
	if len(raw) == 0 {
		return nil, fmt.Errorf("%w: no samples", ErrFormat)
	}
	out := make([]recall.Conversation, 0, len(raw))
	seen := map[string]bool{}
	for i, r := range raw {
		c, err := parseSample(i, r)
		if err != nil {
			return nil, err
		}
		if seen[c.ID] {
			return nil, fmt.Errorf("%w: sample_id %q appears twice", ErrFormat, c.ID)
		}
		seen[c.ID] = true
		out = append(out, c)
	}
	return out, nil
}

func parseSample(i int, r rawSample) (recall.Conversation, error) {
	c := recall.Conversation{ID: fmt.Sprintf("sample-%d", i+1), Spacing: TurnSpacing, Skipped: map[string]int{}}
	if len(r.SampleID) > 0 && string(r.SampleID) != "null" {
		var s string
		if err := json.Unmarshal(r.SampleID, &s); err != nil {
			c.ID = strings.TrimSpace(string(r.SampleID)) // a number
		} else if s != "" {
			c.ID = s
		}
	}
	fail := func(format string, a ...any) error {
		return fmt.Errorf("%w: sample %s: %s", ErrFormat, c.ID, fmt.Sprintf(format, a...))
	}
	if r.Conversation == nil {
		return c, fail(`no "conversation" object`)
	}

	// Sessions in numeric order; date keys of sessions that have no turns
	// (locomo10.json has a few) are ignored.
	var nums []int
	for key := range r.Conversation {
		if m := sessionKey.FindStringSubmatch(key); m != nil {
			n, _ := strconv.Atoi(m[1])
			nums = append(nums, n)
		}
	}
	sort.Ints(nums)
	dia := map[string]bool{}
	for _, n := range nums {
		var turns []rawTurn
		if err := json.Unmarshal(r.Conversation[fmt.Sprintf("session_%d", n)], &turns); err != nil {
			return c, fail("session_%d: want a list of turns: %v", n, err)
		}
		if len(turns) == 0 {
			continue
		}
		dkey := fmt.Sprintf("session_%d_date_time", n)
		var when string
		if v, ok := r.Conversation[dkey]; !ok || json.Unmarshal(v, &when) != nil {
			return c, fail("session_%d has turns but no %s string", n, dkey)
		}
		at, err := ParseSessionTime(when)
		if err != nil {
			return c, fail("%s: %v", dkey, err)
		}
		s := recall.Session{At: at}
		for j, t := range turns {
			t.DiaID = strings.TrimSpace(t.DiaID)
			if t.DiaID == "" {
				return c, fail("session_%d turn %d has no dia_id", n, j+1)
			}
			if dia[t.DiaID] {
				return c, fail("dia_id %s appears twice", t.DiaID)
			}
			dia[t.DiaID] = true
			if strings.TrimSpace(t.Speaker) == "" {
				return c, fail("turn %s has no speaker", t.DiaID)
			}
			s.Turns = append(s.Turns, recall.Turn{ID: t.DiaID, Speaker: strings.TrimSpace(t.Speaker), Text: TurnText(t.Text, t.BlipCaption)})
		}
		c.Sessions = append(c.Sessions, s)
	}
	if len(c.Sessions) == 0 {
		return c, fail("no sessions with turns")
	}

	for qi, q := range r.QA {
		cat, err := parseCategory(q.Category)
		if err != nil {
			return c, fail("qa %d: %v", qi+1, err)
		}
		if cat == 5 {
			c.Skipped[SkipCategory5]++
			continue
		}
		if _, ok := Categories[cat]; !ok {
			return c, fail("qa %d: category %d is not 1 to 5", qi+1, cat)
		}
		ev := SplitEvidence(q.Evidence)
		if len(ev) == 0 {
			c.Skipped[SkipNoEvidence]++
			continue
		}
		// Evidence that names no turn is kept: the harness counts it as
		// missed and lists it.
		question := recall.Question{Index: qi, Text: strings.TrimSpace(q.Question), Category: Categories[cat], Evidence: ev,
			Answer: rawText(q.Answer)}
		if question.Text == "" {
			return c, fail("qa %d has an empty question", qi+1)
		}
		c.Questions = append(c.Questions, question)
	}
	return c, nil
}

func parseCategory(raw json.RawMessage) (int, error) {
	var n int
	if err := json.Unmarshal(raw, &n); err == nil {
		return n, nil
	}
	var s string
	if err := json.Unmarshal(raw, &s); err == nil {
		if n, err := strconv.Atoi(strings.TrimSpace(s)); err == nil {
			return n, nil
		}
	}
	return 0, fmt.Errorf("category %s is not a number", string(raw))
}

// SplitEvidence splits evidence strings on ';' (LoCoMo has a few entries
// like "D8:6; D9:17"), trims them, and drops empties and duplicates.
func SplitEvidence(raw []string) []string {
	var out []string
	seen := map[string]bool{}
	for _, r := range raw {
		for _, part := range strings.Split(r, ";") {
			p := strings.TrimSpace(part)
			if p == "" || seen[p] {
				continue
			}
			seen[p] = true
			out = append(out, p)
		}
	}
	return out
}

// TurnText is the message text of a turn: an image a speaker shared is
// known only by its caption, appended so that it can be recalled.
func TurnText(text, caption string) string {
	text = strings.TrimSpace(text)
	caption = strings.TrimSpace(caption)
	switch {
	case caption == "":
		return text
	case text == "":
		return "[shares " + caption + "]"
	default:
		return text + " [shares " + caption + "]"
	}
}

var sessionLayouts = []string{
	"3:04 pm on 2 January, 2006",
	"3:04 pm on 2 Jan, 2006",
	"3:04 pm on 2 January 2006",
	"3:04pm on 2 January, 2006",
}

// ParseSessionTime parses LoCoMo's session dates, e.g. "1:56 pm on 8 May,
// 2023", as UTC.
func ParseSessionTime(s string) (time.Time, error) {
	// Month names match case-insensitively; "pm" in a layout matches only
	// lower case, so the input is lowered.
	norm := strings.ToLower(strings.Join(strings.Fields(s), " "))
	for _, l := range sessionLayouts {
		if t, err := time.Parse(l, norm); err == nil {
			return t.UTC(), nil
		}
	}
	return time.Time{}, fmt.Errorf("%q is not a date like \"1:56 pm on 8 May, 2023\"", s)
}

// rawText is a JSON string's text, or any other JSON value as written (a
// year given as a number); "" for none.
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
