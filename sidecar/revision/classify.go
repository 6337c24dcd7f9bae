package revision

import (
	"context"
	"fmt"
	"regexp"
	"sort"
	"strings"
	"time"
	"unicode"

	"github.com/google/uuid"

	"github.com/mneme-memory/mneme/sidecar/stem"
)

// The actions of a revision (mneme.apply_revision).
const (
	ActionAdd        = "ADD"
	ActionNoop       = "NOOP"
	ActionSupersede  = "SUPERSEDE"
	ActionInvalidate = "INVALIDATE"
)

// Candidate is an active fact a new one is compared with
// (mneme.revision_candidates).
type Candidate struct {
	ID      uuid.UUID
	Content string
	At      time.Time
	Slot    string // stored by an earlier revision, or ""
	Score   float64
}

// Fact is the new memory under revision.
type Fact struct {
	ID      uuid.UUID
	Content string
	At      time.Time
}

// Decision is a classifier's answer: the action, its target (zero for
// ADD), a reason kept in the event log, and the new fact's slot if known.
type Decision struct {
	Action string
	Target uuid.UUID
	Reason string
	Slot   string
}

// Classifier decides how a new fact revises what is believed. It runs with
// no transaction open. Name is "llm" or "heuristic" (kept with the event).
type Classifier interface {
	Name() string
	Classify(ctx context.Context, f Fact, cands []Candidate, s Settings) (Decision, error)
}

// Settings are the tunables a classifier reads.
type Settings struct {
	// DuplicateSimilarity is the Jaccard overlap of normalised word sets at
	// or above which the offline classifier calls two facts the same
	// (setting revision_duplicate_similarity).
	DuplicateSimilarity float64
}

// Heuristic is the offline classifier, deterministic:
//  1. a retraction ("no longer", "not ... anymore", "stopped", "quit",
//     "moved out of") INVALIDATEs the candidate of the same slot (and value,
//     when it names one), or failing a slot the candidate that shares most
//     of its words;
//  2. a fact that fills a slot NOOPs a candidate of the same slot and value
//     and SUPERSEDEs the newest one of the same slot with another value (or
//     a retraction of it);
//  3. a fact that says what a candidate says with another number
//     (valueChange: the same words, the numbers changed) SUPERSEDEs it;
//  4. a near-duplicate (normalised word sets overlapping at least
//     DuplicateSimilarity) is a NOOP of the closest;
//  5. anything else is an ADD.
type Heuristic struct{}

func (Heuristic) Name() string { return "heuristic" }

func (Heuristic) Classify(_ context.Context, f Fact, cands []Candidate, s Settings) (Decision, error) {
	st := Parse(f.Content)
	ps := make([]parsedCandidate, 0, len(cands))
	for _, c := range cands {
		ps = append(ps, parsedCandidate{c, Parse(c.Content)})
	}
	// Newest first among equals: a slot's current value is its latest.
	sort.SliceStable(ps, func(i, j int) bool { return ps[i].At.After(ps[j].At) })
	d := Decision{Slot: st.Slot()}
	switch {
	case st.Negated:
		d.Action, d.Target, d.Reason = retraction(f, st, ps)
	default:
		var ok bool
		if d.Action, d.Target, d.Reason, ok = slotChange(f, st, ps); !ok {
			if d.Action, d.Target, d.Reason, ok = valueChange(f, ps); !ok {
				d.Action, d.Target, d.Reason = nearDuplicate(f, ps, s)
			}
		}
	}
	return d, nil
}

// parsedCandidate is a candidate with its statement parsed.
type parsedCandidate struct {
	Candidate
	st Statement
}

// retraction is step 1: the candidate a retraction retracts (INVALIDATE),
// else ADD.
func retraction(f Fact, st Statement, ps []parsedCandidate) (string, uuid.UUID, string) {
	if st.Slot() != "" {
		for _, c := range ps {
			if c.st.Negated || c.st.Slot() != st.Slot() {
				continue
			}
			if st.Value == "" || sameValue(st.Value, c.st.Value) || strings.Contains(c.st.Value, st.Value) {
				return ActionInvalidate, c.ID, fmt.Sprintf("retracts %s = %q", st.Slot(), c.st.Value)
			}
		}
	}
	// No slot: the candidate saying most of what is retracted (at least
	// retractionOverlap of its words are in the retraction), or else the
	// one holding every word the retraction names ("I quit smoking" and "I
	// smoke every day"), the newest first.
	words := contentWords(f.Content)
	best, bestScore, whole := uuid.Nil, 0.0, uuid.Nil
	for _, c := range ps {
		if c.st.Negated {
			continue
		}
		cw := contentWords(c.Content)
		if st.Retracted != "" && !cw[st.Retracted] {
			continue // it says nothing of what is retracted
		}
		if sc := containment(words, cw); sc > bestScore {
			best, bestScore = c.ID, sc
		}
		if whole == uuid.Nil && len(words) > 0 && containment(cw, words) == 1 {
			whole = c.ID
		}
	}
	if bestScore >= retractionOverlap {
		return ActionInvalidate, best, fmt.Sprintf("retraction sharing %.0f%% of its words with the fact", 100*bestScore)
	}
	if whole != uuid.Nil {
		return ActionInvalidate, whole, "retraction of a fact holding every word it names"
	}
	return ActionAdd, uuid.Nil, "a retraction of nothing believed"
}

// slotChange is step 2: a fact that fills a slot against the newest
// candidate of the same slot (NOOP of the same value, SUPERSEDE of another
// or of a retraction); ok is false when no candidate has its slot.
// A fact said before the candidate it meets (a late write) is what that
// candidate changed, and the reason says so in that direction.
func slotChange(f Fact, st Statement, ps []parsedCandidate) (action string, target uuid.UUID, reason string, ok bool) {
	if st.Slot() == "" {
		return "", uuid.Nil, "", false
	}
	for _, c := range ps {
		slot := c.st.Slot()
		if slot == "" {
			slot = c.Slot
		}
		if slot != st.Slot() {
			continue
		}
		switch {
		case c.st.Negated:
			return ActionSupersede, c.ID, fmt.Sprintf("%s = %q again, after a retraction", st.Slot(), st.Value), true
		case sameValue(st.Value, c.st.Value):
			return ActionNoop, c.ID, fmt.Sprintf("restates %s = %q", st.Slot(), st.Value), true
		case said(f).Before(c.At):
			return ActionSupersede, c.ID, fmt.Sprintf("%s was %q before it changed to %q", st.Slot(), st.Value, c.st.Value), true
		default:
			return ActionSupersede, c.ID, fmt.Sprintf("%s changes from %q to %q", st.Slot(), c.st.Value, st.Value), true
		}
	}
	return "", uuid.Nil, "", false
}

// valueChange is step 3: an update found by comparing statements, not by
// its phrasing. The newest candidate whose words other than numbers are
// the fact's (at least valueChangeOverlap of them shared, and at least
// valueChangeMinWords) while its numbers differ is the same statement with
// another value: "I run 5 km every morning" then "I run 10 km every
// morning", "My study sessions are 2 hours long" then "... 4 hours long".
// Two statements that name different days or months are two events, not
// an update, and are left alone.
func valueChange(f Fact, ps []parsedCandidate) (string, uuid.UUID, string, bool) {
	words, nums := splitNumbers(contentWords(f.Content))
	if len(nums) == 0 || len(words) < valueChangeMinWords {
		return "", uuid.Nil, "", false
	}
	for _, c := range ps {
		if c.st.Negated {
			continue
		}
		cwords, cnums := splitNumbers(contentWords(c.Content))
		if len(cnums) == 0 || sameSet(nums, cnums) || jaccard(words, cwords) < valueChangeOverlap ||
			differsInDates(words, cwords) {
			continue
		}
		if said(f).Before(c.At) {
			return ActionSupersede, c.ID, fmt.Sprintf("the same statement with other numbers (%s, before they became %s)",
				joinSorted(nums), joinSorted(cnums)), true
		}
		return ActionSupersede, c.ID, fmt.Sprintf("the same statement with other numbers (%s, was %s)",
			joinSorted(nums), joinSorted(cnums)), true
	}
	return "", uuid.Nil, "", false
}

// said is when the fact was stated; a fact without a time is taken as said
// now (after every candidate).
func said(f Fact) time.Time {
	if f.At.IsZero() {
		return time.Now()
	}
	return f.At
}

// valueChangeOverlap and valueChangeMinWords: how alike two statements'
// words other than numbers must be for one to update the other's numbers.
// At 0.75 the other words must be nearly all the same: "my commute takes
// 40 minutes by bus" against "... 25 minutes by train" shares 4 of 6 and
// is not an update; fewer than three words say too little to be the same
// statement.
const (
	valueChangeOverlap  = 0.75
	valueChangeMinWords = 3
)

// splitNumbers separates the words holding a digit from the others.
func splitNumbers(ws map[string]bool) (words, nums map[string]bool) {
	words, nums = map[string]bool{}, map[string]bool{}
	for w := range ws {
		if strings.IndexFunc(w, unicode.IsDigit) >= 0 {
			nums[w] = true
		} else {
			words[w] = true
		}
	}
	return words, nums
}

var dateWords = func() map[string]bool {
	m := map[string]bool{}
	for _, w := range strings.Fields(`monday tuesday wednesday thursday friday saturday sunday january february march
april may june july august september october november december yesterday today tomorrow`) {
		m[stem.Word(w)] = true
	}
	return m
}()

// differsInDates: one statement names a day or month the other does not.
func differsInDates(a, b map[string]bool) bool {
	for w := range a {
		if dateWords[w] && !b[w] {
			return true
		}
	}
	for w := range b {
		if dateWords[w] && !a[w] {
			return true
		}
	}
	return false
}

func sameSet(a, b map[string]bool) bool {
	if len(a) != len(b) {
		return false
	}
	for w := range a {
		if !b[w] {
			return false
		}
	}
	return true
}

func joinSorted(m map[string]bool) string {
	out := make([]string, 0, len(m))
	for w := range m {
		out = append(out, w)
	}
	sort.Strings(out)
	return strings.Join(out, " ")
}

// nearDuplicate is steps 4 and 5: a NOOP of the closest candidate that is
// not a retraction when their word sets overlap at least
// DuplicateSimilarity, else ADD.
func nearDuplicate(f Fact, ps []parsedCandidate, s Settings) (string, uuid.UUID, string) {
	words := wordSet(f.Content)
	best, bestScore := uuid.Nil, 0.0
	for _, c := range ps {
		if c.st.Negated {
			continue
		}
		if sc := jaccard(words, wordSet(c.Content)); sc > bestScore {
			best, bestScore = c.ID, sc
		}
	}
	if bestScore >= s.DuplicateSimilarity && bestScore > 0 {
		return ActionNoop, best, fmt.Sprintf("near-duplicate (word overlap %.2f)", bestScore)
	}
	return ActionAdd, uuid.Nil, "new information"
}

var (
	wordRE     = regexp.MustCompile(`[\p{L}\p{N}']+`)
	speakerCut = regexp.MustCompile(`^` + speakerPattern + `: `)
)

// wordSet is a fact's normalised words: lower-case, the speaker prefix and
// fillers dropped.
func wordSet(s string) map[string]bool {
	s = speakerCut.ReplaceAllString(strings.TrimSpace(s), "")
	s = fillerRE.ReplaceAllString(strings.ToLower(s), " ")
	out := map[string]bool{}
	for _, w := range wordRE.FindAllString(s, -1) {
		out[strings.Trim(w, "'")] = true
	}
	delete(out, "")
	return out
}

// retractionOverlap is the share of a fact's content words a retraction
// that fills no slot must repeat to retract it ("I don't go climbing at the
// gym anymore" repeats 3 of the 4 of "I go climbing at the gym on Fridays").
// Below it the retraction names only part of the fact, such as the place of
// something else; the fact must also hold what is retracted (Retracted).
const retractionOverlap = 0.6

// retractionWords are left out when a retraction is matched by words.
var retractionWords = map[string]bool{"no": true, "longer": true, "not": true, "anymore": true, "any": true, "more": true,
	"stopped": true, "quit": true, "don't": true, "doesn't": true, "didn't": true, "do": true, "does": true, "did": true,
	"i": true, "i'm": true, "my": true, "am": true, "is": true, "are": true, "the": true, "a": true, "an": true, "to": true,
	"of": true, "in": true, "at": true, "out": true, "moved": true, "for": true, "and": true, "we": true, "it": true}

// contentWords: wordSet less the words every retraction has, their endings
// trimmed by stem.Word ("smoking" meets "smoke").
func contentWords(s string) map[string]bool {
	out := map[string]bool{}
	for w := range wordSet(s) {
		if retractionWords[w] {
			continue
		}
		out[stem.Word(w)] = true
	}
	return out
}

func jaccard(a, b map[string]bool) float64 {
	if len(a) == 0 || len(b) == 0 {
		return 0
	}
	inter := 0
	for w := range a {
		if b[w] {
			inter++
		}
	}
	return float64(inter) / float64(len(a)+len(b)-inter)
}

// containment: the share of b's words that a has (a retraction names most
// of the fact it retracts).
func containment(a, b map[string]bool) float64 {
	if len(a) == 0 || len(b) == 0 {
		return 0
	}
	inter := 0
	for w := range b {
		if a[w] {
			inter++
		}
	}
	return float64(inter) / float64(len(b))
}
