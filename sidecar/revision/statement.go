package revision

import (
	"regexp"
	"strings"

	"github.com/mneme-memory/mneme/sidecar/stem"
)

// Statement is what the offline classifier reads in a fact: who it is about
// (Subject), which attribute it sets (Attribute; subject and attribute make
// its slot), the value it gives, and whether it retracts (Negated: "no
// longer", "not ... anymore", "stopped", "quit", "moved out of").
type Statement struct {
	Subject   string
	Attribute string
	Value     string
	Negated   bool
	// Retracted is, for a retraction, what it retracts as its first
	// content word ("I stopped calling my sister": "call"); a retraction
	// matched by words must name it in the fact it retracts.
	Retracted string
}

// Slot is "subject|attribute", or "" when the statement fills no known slot.
func (s Statement) Slot() string {
	if s.Subject == "" || s.Attribute == "" {
		return ""
	}
	return s.Subject + "|" + s.Attribute
}

// slotPattern is one documented slot: a regular expression over the
// statement's predicate (the text after its subject, lower-cased, with
// fillers such as "now" and "currently" removed). Group "v" is the value;
// group "a", when present, refines the attribute (favourite_<a>,
// uses_for_<a>).
type slotPattern struct {
	attribute string
	re        *regexp.Regexp
}

// The slot patterns, in order (the first that matches wins). docs/revision.md
// lists them; statement_test.go has an example of each.
var slotPatterns = []slotPattern{
	{"lives_in", regexp.MustCompile(`^(?:am |is |are )?(?:live|lives|living|reside|resides|residing|stay|stays|staying) in (?P<v>.+)$`)},
	{"lives_in", regexp.MustCompile(`^(?:have |has |had |just )?(?:moved|relocated|moving|relocating|move|relocate)(?: back| over)? to (?P<v>.+)$`)},
	{"lives_in", regexp.MustCompile(`^(?:am|is|are) (?:based|settled) in (?P<v>.+)$`)},
	{"works_at", regexp.MustCompile(`^(?:am |is |are )?(?:work|works|working) (?:at|for) (?P<v>.+)$`)},
	{"works_at", regexp.MustCompile(`^(?:am|is|are) employed (?:at|by) (?P<v>.+)$`)},
	{"works_at", regexp.MustCompile(`^(?:have |has |just )?(?:joined|started at|started working at|started working for|got a job at|took a job at|have a job at|has a job at) (?P<v>.+)$`)},
	{"job_title", regexp.MustCompile(`^(?:am |is |are )?(?:work|works|working) as (?:a |an )?(?P<v>.+)$`)},
	{"job_title", regexp.MustCompile(`^(?:am|is|are) (?:a|an) (?P<v>[a-z -]+?) (?:by profession|by trade)$`)},
	{"name", regexp.MustCompile(`^(?:am|is) called (?P<v>.+)$`)},
	{"name", regexp.MustCompile(`^(?:go|goes) by (?P<v>.+)$`)},
	{"married_to", regexp.MustCompile(`^(?:am |is |are |got |just got )?married to (?P<v>.+)$`)},
	{"age", regexp.MustCompile(`^(?:am|is|turned|just turned) (?P<v>\d{1,3})(?: years old| years of age)?$`)},
	{"drives", regexp.MustCompile(`^(?:drive|drives|driving) (?:a |an )?(?P<v>.+)$`)},
	{"uses_for", regexp.MustCompile(`^(?:use|uses|using|have switched to|switched to|switch to|rely on|relies on) (?P<v>.+?) (?:for|to) (?P<a>[a-z ]+)$`)},
	{"studies", regexp.MustCompile(`^(?:am |is )?(?:study|studies|studying|majoring in|major in) (?P<v>.+)$`)},
	{"studies", regexp.MustCompile(`^(?:have |has )?(?:switched|changed) (?:my |his |her |their )?major to (?P<v>.+)$`)},
	{"favourite", regexp.MustCompile(`^(?:favourite|favorite|fave) (?P<a>[a-z ]{2,40}?) is (?P<v>.+)$`)},
}

// possessive attributes: "my <attribute> is <value>" (and "<Name>'s ...").
// The value must be short and not a description ("my kids are so
// excited" fills no slot): at most six words, not opening with an adverb
// of degree.
var possessiveRE = regexp.MustCompile(`^(?P<a>[a-z][a-z ']{1,40}?) (?:is|was changed to|changed to|has changed to) (?:now )?(?P<v>.+)$`)

var degreeRE = regexp.MustCompile(`^(?:so|very|really|too|such|quite|pretty|a bit|a little|kind of|sort of|always|never|not|still|getting|being|going)\b`)

// attribute synonyms of "my X is": one slot for each.
var attributeSynonyms = map[string]string{
	"job": "job_title", "job title": "job_title", "title": "job_title", "role": "job_title", "position": "job_title",
	"occupation": "job_title", "profession": "job_title",
	"name": "name", "full name": "name",
	"wife": "married_to", "husband": "married_to", "spouse": "married_to",
	"partner": "partner", "girlfriend": "partner", "boyfriend": "partner",
	"employer": "works_at", "company": "works_at", "workplace": "works_at",
	"home": "lives_in", "hometown": "hometown", "address": "address", "city": "lives_in",
	"age": "age",
}

// fillers are dropped before matching: they say when, not what.
var fillerRE = regexp.MustCompile(`\b(?:now|currently|recently|actually|also|again|still|finally|officially|really|just|presently|these days|nowadays|at the moment|right now)\b`)

// negation cues. Each rewrites a retraction into the statement it retracts.
var negations = []struct {
	re   *regexp.Regexp
	repl string
}{
	{regexp.MustCompile(`\bno longer\b`), ""},
	{regexp.MustCompile(`\b(?:do not|don't|does not|doesn't|did not|didn't|am not|'m not|is not|isn't|are not|aren't)\b(.*)\b(?:anymore|any more|any longer)\b`), "$1"},
	{regexp.MustCompile(`\bmoved out of\b`), "live in"},
	{regexp.MustCompile(`\bmoved away from\b`), "live in"},
	{regexp.MustCompile(`\bstopped (?:working (?:at|for)|my job at)\b`), "work at"},
	{regexp.MustCompile(`\b(?:quit|left) (?:my job at|my job with|my job for|working at|working for|the job at)\b`), "work at"},
	{regexp.MustCompile(`\b(?:left|quit) my job\b`), "work at " + anyValue},
	// Selling a vehicle retracts driving it; the value decides which
	// (selling a house names no vehicle anyone drives).
	{regexp.MustCompile(`\b(?:sold|got rid of|gave away)\b`), "drive"},
	// Closing one's own business; "closed the window" closes nothing held.
	{regexp.MustCompile(`\bclosed (?:down )?(?:my|our|his|her|their) `), "my "},
	// "stopped" retracts a habit only with a gerund ("stopped smoking");
	// "stopped by" and "stopped at" are visits.
	{regexp.MustCompile(`\bstopped (\p{L}+ing)\b`), "$1"},
	{regexp.MustCompile(`\bquit\b`), ""},
	{regexp.MustCompile(`\b(?:got divorced from|divorced)\b`), "married to"},
}

// speakerRE is an extracted fact's speaker prefix ("Caroline: I ..."),
// written by the offline extractor.
var speakerRE = regexp.MustCompile(`^(` + speakerPattern + `): (.+)$`)

// speakerPattern is a speaker as the extractor writes one: one to three
// capitalised words.
const speakerPattern = `[A-Z][\p{L}'.-]*(?: [A-Z][\p{L}'.-]*){0,2}`

var (
	spaceRE      = regexp.MustCompile(`\s+`)
	trailingRE   = regexp.MustCompile(`[\s.,;:!?"')\]]+$`)
	leadingArtRE = regexp.MustCompile(`^(?:the|a|an|my|our|his|her|their) `)
	// A named subject: a capitalised word (or two) and a verb after it.
	namedRE = regexp.MustCompile(`^([A-Z][\p{L}-]+(?: [A-Z][\p{L}-]+)?)(?:'s| )(.+)$`)
)

// openerRE: discourse markers before a statement ("Actually, my favourite
// colour is purple").
var openerRE = regexp.MustCompile(`^(?i:actually|well|so|oh|by the way|btw|just so you know|fyi|anyway|update|correction|now|ok|okay)[,:!]?\s+`)

// relativeRE: a relative of the speaker as the subject ("My sister moved
// to Milan" is the sister's move, not the speaker's), when a verb follows.
var relativeRE = regexp.MustCompile(`^my ((?:older |younger |little |big )?(?:sister|brother|mother|mom|mum|father|dad|son|daughter|wife|husband|partner|girlfriend|boyfriend|grandmother|grandma|grandfather|grandpa|aunt|uncle|cousin|niece|nephew|best friend|friend|boss|manager|roommate|neighbour|neighbor)) ((?:is |are |was )?(?:lives?|living|moved|works?|working|joined|started|studies|studying|drives?|married|got|resides|relocated|quit|stopped|no longer|doesn't|does not|isn't|is not).*)$`)

// thingSynonyms: one name per kind of favourite thing.
var thingSynonyms = map[string]string{"color": "colour", "movie": "film", "flick": "film", "tv show": "show",
	"series": "show", "tune": "song", "musician": "artist", "singer": "artist", "band": "artist", "meal": "food",
	"dish": "food", "cuisine": "food", "author": "writer", "novel": "book", "sport": "sport", "team": "team"}

// notNames are capitalised sentence openers that are not a person.
var notNames = map[string]bool{
	"the": true, "this": true, "that": true, "it": true, "there": true, "we": true, "they": true, "he": true,
	"she": true, "you": true, "what": true, "when": true, "where": true, "why": true, "how": true, "yes": true,
	"no": true, "my": true, "our": true, "his": true, "her": true, "their": true, "today": true, "yesterday": true,
	"last": true, "next": true, "after": true, "before": true, "so": true, "and": true, "but": true, "i": true,
	"i'm": true, "i've": true, "i'd": true, "i'll": true, "also": true, "just": true, "then": true, "if": true,
}

// Parse reads a fact's subject, slot, value and polarity. An unparsed
// statement has an empty Slot. It reads in four steps: the text cleaned
// (cleanText), its subject and predicate (splitSubject), a retraction
// turned into what it retracts (readRetraction), and the slot the
// predicate fills (fillSlot).
func Parse(text string) Statement {
	speaker, t := cleanText(text)
	if t == "" {
		return Statement{}
	}
	st, pred, ok := splitSubject(t, speaker)
	if !ok {
		return Statement{}
	}
	st, pred = readRetraction(st, pred)
	return fillSlot(st, pred)
}

// cleanText collapses white space and strips an extracted fact's speaker
// prefix (returned lower-cased, "" for none), trailing punctuation and an
// opening discourse marker.
func cleanText(text string) (speaker, t string) {
	t = strings.TrimSpace(spaceRE.ReplaceAllString(text, " "))
	if m := speakerRE.FindStringSubmatch(t); m != nil {
		speaker, t = strings.ToLower(m[1]), m[2]
	}
	t = trailingRE.ReplaceAllString(t, "")
	return speaker, openerRE.ReplaceAllString(t, "")
}

// splitSubject reads the subject (first person: the speaker, or "user" for
// an explicit write; a relative of theirs; or a named person opening the
// sentence) and returns it with the lower-cased predicate after it, its
// verb in a form the slot patterns read; false when t has no subject.
func splitSubject(t, speaker string) (Statement, string, bool) {
	var st Statement
	var pred string
	lower := strings.ToLower(t)
	firstPerson := speaker
	if firstPerson == "" {
		firstPerson = "user"
	}
	switch {
	case strings.HasPrefix(lower, "i'm "):
		st.Subject, pred = firstPerson, "am "+lower[4:]
	case strings.HasPrefix(lower, "i've "):
		st.Subject, pred = firstPerson, "have "+lower[5:]
	case strings.HasPrefix(lower, "i "):
		st.Subject, pred = firstPerson, lower[2:]
	case strings.HasPrefix(lower, "we "):
		st.Subject, pred = firstPerson, lower[3:]
	case relativeRE.MatchString(lower):
		m := relativeRE.FindStringSubmatch(lower)
		st.Subject, pred = firstPerson+"'s "+m[1], m[2]
	case strings.HasPrefix(lower, "my "):
		st.Subject, pred = firstPerson, "my "+lower[3:]
	case strings.HasPrefix(lower, "our "):
		st.Subject, pred = firstPerson, "my "+lower[4:]
	case strings.HasPrefix(lower, "the user's "):
		st.Subject, pred = "user", "my "+lower[len("the user's "):]
	case strings.HasPrefix(lower, "the user "):
		st.Subject, pred = "user", lower[len("the user "):]
	default:
		m := namedRE.FindStringSubmatch(t)
		if m == nil || notNames[strings.ToLower(strings.Fields(m[1])[0])] {
			return st, "", false
		}
		st.Subject = strings.ToLower(m[1])
		rest := strings.ToLower(m[2])
		if strings.HasPrefix(t[len(m[1]):], "'s ") {
			rest = "my " + rest
		}
		pred = rest
	}
	return st, pred, true
}

// readRetraction turns a retraction into the statement it retracts: the
// first negation cue that matches marks st Negated, with the first content
// word of what it retracts, and is rewritten out of the predicate.
func readRetraction(st Statement, pred string) (Statement, string) {
	for _, n := range negations {
		if loc := n.re.FindStringSubmatchIndex(pred); loc != nil {
			// What is retracted follows the cue, or is the cue's group
			// ("don't <play tennis> anymore", "stopped <calling>").
			rest := pred[loc[1]:]
			if len(loc) > 2 && loc[2] >= 0 {
				rest = pred[loc[2]:loc[3]] + " " + rest
			}
			st.Negated, st.Retracted = true, firstContentWord(rest)
			return st, n.re.ReplaceAllString(pred, n.repl)
		}
	}
	return st, pred
}

// fillSlot reads the attribute and value the predicate sets, its fillers
// dropped: "my <attribute> is <value>", or the first slot pattern that
// matches. A predicate that fills no slot keeps the subject and the
// retraction (the classifier matches a retraction by words).
func fillSlot(st Statement, pred string) Statement {
	noSlot := Statement{Subject: st.Subject, Negated: st.Negated, Retracted: st.Retracted}
	pred = strings.TrimSpace(spaceRE.ReplaceAllString(fillerRE.ReplaceAllString(pred, " "), " "))
	pred = strings.TrimPrefix(pred, "to ")
	if strings.HasPrefix(pred, "my ") {
		m := possessiveRE.FindStringSubmatch(pred[3:])
		if m == nil || degreeRE.MatchString(m[2]) || len(strings.Fields(m[2])) > 6 {
			return noSlot
		}
		attr := strings.TrimSpace(adjectiveRE.ReplaceAllString(m[1], ""))
		switch {
		case strings.HasPrefix(attr, "favourite ") || strings.HasPrefix(attr, "favorite ") || strings.HasPrefix(attr, "fave "):
			attr = "favourite_" + favouriteThing(attr[strings.Index(attr, " ")+1:])
		case attributeSynonyms[attr] != "":
			attr = attributeSynonyms[attr]
		default:
			attr = strings.ReplaceAll(attr, " ", "_")
		}
		st.Attribute, st.Value = attr, normValue(m[2])
		return finish(st)
	}
	for _, p := range slotPatterns {
		m := p.re.FindStringSubmatch(pred)
		if m == nil {
			continue
		}
		st.Attribute = p.attribute
		for i, name := range p.re.SubexpNames() {
			switch name {
			case "v":
				st.Value = normValue(m[i])
			case "a":
				if p.attribute == "favourite" {
					st.Attribute = "favourite_" + favouriteThing(m[i])
				} else {
					st.Attribute = p.attribute + "_" + strings.ReplaceAll(strings.TrimSpace(m[i]), " ", "_")
				}
			}
		}
		if st.Attribute == "lives_in" {
			// "a flat in Lisbon": the place is after the dwelling
			// ("a small flat near the canal" names none: no slot).
			if m := dwellingInRE.FindStringSubmatch(st.Value); m != nil {
				st.Value = normValue(m[1])
			}
		}
		if notAValue(st) {
			return noSlot
		}
		return finish(st)
	}
	return noSlot
}

// firstContentWord is the first word of a predicate that is not one every
// retraction has, its ending trimmed as contentWords trims it.
func firstContentWord(pred string) string {
	for _, w := range strings.Fields(strings.ToLower(pred)) {
		w = strings.Trim(w, ".,;:!?\"'()")
		if w != "" && !retractionWords[w] {
			return stem.Word(w)
		}
	}
	return ""
}

// anyValue stands for "whatever it was" in a retraction that names no
// value ("I quit my job"): it retracts the slot's current value.
const anyValue = "anyvalue"

// adjectiveRE: "my new phone number" fills the slot of "my phone number".
var adjectiveRE = regexp.MustCompile(`^(?:new|current|present|latest|old|former|previous|usual|main)\s+`)

func favouriteThing(thing string) string {
	thing = strings.TrimSpace(thing)
	if syn, ok := thingSynonyms[thing]; ok {
		thing = syn
	}
	return strings.ReplaceAll(thing, " ", "_")
}

// notAValue: what a slot pattern matched but is not the slot's value: a
// home that is a kind of dwelling ("I live in a small flat"), working at
// home (a place of work, not an employer).
func notAValue(st Statement) bool {
	switch st.Attribute {
	case "lives_in":
		return strings.HasPrefix(st.Value, "a ") || strings.HasPrefix(st.Value, "an ") || dwellingRE.MatchString(st.Value)
	case "works_at":
		return st.Value == "home" || strings.HasPrefix(st.Value, "home ") || strings.HasPrefix(st.Value, "a ") ||
			strings.HasPrefix(st.Value, "an ")
	}
	return false
}

// dwellingInRE: a dwelling in a place ("a flat in lisbon", "an apartment
// in new york").
var dwellingInRE = regexp.MustCompile(`^(?:(?:a|an|the|my|our) )?(?:small |big |tiny |new |shared )?(?:flat|apartment|house|studio|room|dorm|condo|cabin|bungalow) in ([a-z].*)$`)

var dwellingRE = regexp.MustCompile(`^(?:small |big |tiny |new |shared )?(?:flat|apartment|house|studio|room|dorm|condo|cabin|bungalow)\b`)

func finish(st Statement) Statement {
	switch {
	case st.Negated && st.Value == anyValue:
		st.Value = ""
	case st.Value == "":
		st.Attribute = ""
	}
	return st
}

// normValue is a value as compared: lower-case, no article, no trailing
// time phrase or punctuation.
func normValue(v string) string {
	v = strings.TrimSpace(trailingRE.ReplaceAllString(strings.ToLower(v), ""))
	for _, cut := range []string{" since ", " for the past ", " for ", " last ", " this ", " next ", " in 19", " in 20", " from ", " because ", " as of ", " with ", " and ", ", "} {
		if i := strings.Index(v, cut); i > 0 {
			v = v[:i]
		}
	}
	v = leadingArtRE.ReplaceAllString(strings.TrimSpace(v), "")
	return strings.TrimSpace(v)
}

// sameValue: equal, or one names the other ("berlin" and "berlin, germany"
// were cut to "berlin" already; "new york city" contains "new york").
func sameValue(a, b string) bool {
	if a == "" || b == "" {
		return false
	}
	if a == b {
		return true
	}
	return strings.HasPrefix(a, b+" ") || strings.HasPrefix(b, a+" ")
}
