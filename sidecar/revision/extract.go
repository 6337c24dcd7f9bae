package revision

import (
	"regexp"
	"strings"
	"unicode"
)

// Message is one conversation message as the extractor reads it.
type Message struct {
	ID      int64
	Speaker string // the role or speaker name
	Content string
}

// Extracted is one fact with the messages it comes from.
type Extracted struct {
	Text       string
	MessageIDs []int64
}

// The offline extractor keeps declarative statements a speaker makes about
// themself or about a named person, as self-contained sentences prefixed
// with the speaker ("Caroline: I moved to Berlin."):
//   - first person: the sentence opens with I, I'm, I've, My, We or Our;
//     or a named person: a capitalised name that is not a sentence opener,
//     followed by a verb of state or change (is, lives, works, moved, ...);
//   - declarative: not a question, no hedge or modal (would, could, might,
//     maybe, think, hope, wish, if, ...), no request;
//   - 4 to 40 words.
//
// Deterministic; it never invents text, it only keeps and attributes it.
var (
	sentenceRE   = regexp.MustCompile(`[^.!?\n]+[.!?]*`)
	firstRE      = regexp.MustCompile(`^(?:I|I'm|I’m|I've|I’ve|My|We|Our|We're|We’re)\b`)
	namedFactRE  = regexp.MustCompile(`^([A-Z][\p{L}'-]+)(?:'s [a-z]+(?: [a-z]+)? is| (?:is|was|has|had|lives|lived|works|worked|moved|married|got|owns|studies|joined|started|left|quit|loves|likes|prefers|uses|drives|became|turned|went|visited|bought|adopted))\b`)
	hedgeRE      = regexp.MustCompile(`(?i)\b(?:would|could|might|should|maybe|perhaps|think|guess|hope|wish|wonder|if|unless|let me|let's|can you|could you|please|not sure|i'll|i’ll|i will|gonna|going to|want to|plan to|planning to|i'd|i’d)\b`)
	fillerOnlyRE = regexp.MustCompile(`(?i)^(?:i (?:see|know|agree|understand|mean|bet|feel you)|i'm (?:glad|happy|sorry|so happy|so glad)|my pleasure|we'll see)\b`)
)

// stateVerbRE: a first-person sentence carries a fact when it says what
// someone is, has, does or did (not only feelings about the conversation),
// or a habit they have (smoke, drink, eat, go to, run, ...: "I smoke
// cigarettes again" is the belief a retraction before it no longer holds).
var stateVerbRE = regexp.MustCompile(`(?i)\b(?:am|is|are|was|were|have|has|had|live|lived|living|reside|resides|relocated|work|worked|working|moved|move|married|got|own|owns|study|studied|studying|joined|started|left|quit|stopped|love|loves|like|likes|prefer|prefers|use|uses|using|drive|drives|became|turned|went|visited|bought|adopted|born|grew|graduated|play|plays|played|name|favourite|favorite|job|no longer|anymore|` +
	habitVerbs + `)\b`)

// habitVerbs are what a person does regularly, in the first person's
// present tense; with stateVerbRE's other verbs they make a sentence a fact.
const habitVerbs = `smoke|drink|eat|go to|run|swim|cycle|bike|walk|train|practise|practice|cook|bake|teach|speak|volunteer|attend|meditate|vape`

// ExtractFacts returns the facts the messages state, in message order,
// each once (case-insensitive).
func ExtractFacts(msgs []Message) []Extracted {
	var out []Extracted
	seen := map[string]bool{}
	for _, m := range msgs {
		speaker := speakerName(m.Speaker)
		for _, s := range sentenceRE.FindAllString(m.Content, -1) {
			s = strings.TrimSpace(s)
			var keep []string
			if isFactSentence(s) {
				keep = []string{s}
			} else {
				keep = updateClauses(s)
			}
			for _, f := range keep {
				if !strings.ContainsAny(f[len(f)-1:], ".!") {
					f += "."
				}
				text := speaker + ": " + f
				key := strings.ToLower(text)
				if seen[key] {
					continue
				}
				seen[key] = true
				out = append(out, Extracted{Text: text, MessageIDs: []int64{m.ID}})
			}
		}
	}
	return out
}

// Updates said in passing: a long or hedged request often carries a
// changed number in one of its clauses ("I'm trying to ..., and I've
// recently extended my study sessions to 4 hours, but ..."). Such a clause
// is kept as a fact of its own when it is first person, states a change
// (recently, now, new, increased, extended, adjusted, reached, ...) and
// holds a number.
var (
	clauseRE     = regexp.MustCompile(`\s*(?:[,;:]\s*(?:and |but |so |which |because |as )?|\s(?:and|but|so|because)\s)`)
	clauseOpenRE = regexp.MustCompile(`^(?i:(?:now|also|then|recently|and) )?(?i:I|I've|I’ve|I'm|I’m|my|we|we've|our)\b`)
	changeRE     = regexp.MustCompile(`(?i)\b(?:recently|now|new|newly|increased|extended|adjusted|reduced|decreased|reached|grown|grew|changed|updated|raised|lowered|moved|switched|total of|up to|down to)\b`)
	digitRE      = regexp.MustCompile(`\d`)
)

func updateClauses(s string) []string {
	var out []string
	for _, c := range clauseRE.Split(strings.TrimRight(s, ".!?"), -1) {
		c = strings.TrimSpace(c)
		n := len(strings.Fields(c))
		if n < 4 || n > 30 || !clauseOpenRE.MatchString(c) || !changeRE.MatchString(c) || !digitRE.MatchString(c) ||
			strings.Contains(c, "?") {
			continue
		}
		c = strings.ToUpper(c[:1]) + c[1:] // the clause as said, as a sentence
		out = append(out, c)
	}
	return out
}

func isFactSentence(s string) bool {
	if s == "" || strings.HasSuffix(s, "?") {
		return false
	}
	n := len(strings.Fields(s))
	if n < 4 || n > 40 {
		return false
	}
	if hedgeRE.MatchString(s) || fillerOnlyRE.MatchString(s) {
		return false
	}
	if firstRE.MatchString(s) {
		return stateVerbRE.MatchString(s)
	}
	m := namedFactRE.FindStringSubmatch(s)
	return m != nil && !notNames[strings.ToLower(m[1])]
}

// speakerName is how a fact names its speaker: the role as given,
// capitalised ("user" becomes "User"), so the slot parser reads it as the
// subject of "I".
func speakerName(role string) string {
	role = strings.TrimSpace(role)
	if role == "" {
		return "User"
	}
	r := []rune(role)
	r[0] = unicode.ToUpper(r[0])
	return string(r)
}
