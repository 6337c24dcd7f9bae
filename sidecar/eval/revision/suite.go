package revision

import "github.com/mneme-memory/mneme/sidecar/revision"

// Write is one mneme.remember of the suite, labelled with the revision it
// should cause.
type Write struct {
	Key  string  `json:"key"`  // names it within its conversation
	Text string  `json:"text"` // the memory's content
	Day  float64 `json:"day"`  // when it was stated: days after the suite's start (remember's at)
	// Expect is the right action (ADD, NOOP, SUPERSEDE, INVALIDATE) and
	// Target the key of the earlier write it acts on (not for ADD). A
	// target that was itself a NOOP stands for what it confirmed.
	Expect string `json:"expect"`
	Target string `json:"target,omitempty"`
}

// Question asks for a current value: Current is the key of the write that
// holds it (a NOOP write counts as its target).
type Question struct {
	Query   string `json:"query"`
	Current string `json:"current"`
}

// Conversation is one scripted conversation: its writes in the order they
// are remembered (their days may go back: out-of-order writes), then its
// questions.
type Conversation struct {
	Name      string     `json:"name"`
	Writes    []Write    `json:"writes"`
	Questions []Question `json:"questions"`
}

func add(key string, day float64, text string) Write {
	return Write{Key: key, Text: text, Day: day, Expect: revision.ActionAdd}
}

func noop(key string, day float64, text, target string) Write {
	return Write{Key: key, Text: text, Day: day, Expect: revision.ActionNoop, Target: target}
}

func supersede(key string, day float64, text, target string) Write {
	return Write{Key: key, Text: text, Day: day, Expect: revision.ActionSupersede, Target: target}
}

func invalidate(key string, day float64, text, target string) Write {
	return Write{Key: key, Text: text, Day: day, Expect: revision.ActionInvalidate, Target: target}
}

func q(query, current string) Question { return Question{Query: query, Current: current} }

// Suite is the revision suite: conversations written for it (no benchmark
// data) in which facts change. The labels are what a careful reader would
// decide, not what the offline classifier does: the writes marked
// "offline: wrong" below are ones its rules get wrong, on purpose (a
// synonym, a paraphrase, a retraction cue it does not know, a multi-valued
// attribute it treats as single-valued), so the suite measures it rather
// than flatters it. 13 of the 18 were fixed by general rules added after the
// first measurement (marked "was wrong"): the offline numbers since are
// optimistic for these writes (docs/revision.md says which rules).
func Suite() []Conversation {
	return []Conversation{
		{Name: "moves", Writes: []Write{
			add("lisbon", 0, "I live in Lisbon."),
			supersede("porto", 40, "I moved to Porto in February.", "lisbon"),
			supersede("madrid", 120, "We relocated to Madrid last spring.", "porto"),
			supersede("valencia", 200, "I'm based in Valencia these days.", "madrid"),
			noop("valencia2", 230, "I live in Valencia.", "valencia"),
			add("coffee", 231, "I drink my coffee black."),
		}, Questions: []Question{
			q("Where do I live?", "valencia"),
			q("How do I take my coffee?", "coffee"),
		}},
		{Name: "moves out of order", Writes: []Write{
			add("york", 100, "I live in York."),
			// Stated before York: it must not replace it (stored superseded).
			supersede("leeds", 20, "I live in Leeds.", "york"),
			noop("york2", 150, "I currently live in York", "york"),
			supersede("hull", 300, "I moved to Hull.", "york"),
			supersede("sheffield", 250, "I moved to Sheffield.", "hull"), // older than Hull
		}, Questions: []Question{
			q("Which city do I live in?", "hull"),
		}},
		{Name: "job changes", Writes: []Write{
			add("acme", 0, "I work at Acme Corp as a data analyst."),
			supersede("globex", 90, "I joined Globex in June.", "acme"),
			add("title", 91, "My job title is product manager."),
			supersede("title2", 200, "My title is now senior product manager.", "title"),
			supersede("initech", 300, "I started working at Initech.", "globex"),
			// offline: was wrong in the first measurement; a rule added after it fixes it. "work at X" reads as an employer: it supersedes Initech.
			add("fridays", 301, "I work at home on Fridays."),
		}, Questions: []Question{
			q("Which company do I work at?", "initech"),
			q("What is my job title?", "title2"),
			q("Where do I work on Fridays?", "fridays"),
		}},
		{Name: "job quit", Writes: []Write{
			add("bakery", 0, "I work at the bakery on Elm Street."),
			noop("bakery2", 10, "I work at the bakery.", "bakery"),
			invalidate("quit", 60, "I quit my job at the bakery.", "bakery"),
			add("nurse", 61, "I work as a nurse."),
			// offline: wrong. "I'm a X" fills no slot pattern: an ADD.
			supersede("teacher", 200, "I'm a teacher now.", "nurse"),
		}, Questions: []Question{
			q("What is my job?", "teacher"),
			q("Do I still work at the bakery?", "quit"),
		}},
		{Name: "favourite colour", Writes: []Write{
			add("green", 0, "My favourite colour is green."),
			supersede("blue", 30, "My favourite colour is blue now.", "green"),
			// offline: was wrong in the first measurement; a rule added after it fixes it. The leading "Actually," hides the slot: an ADD.
			supersede("purple", 90, "Actually, my favourite colour is purple.", "blue"),
			// offline: was wrong (wrong target) in the first measurement; a rule added after it fixes it. It supersedes blue, the last value it could read.
			supersede("red", 150, "My favourite colour is red.", "purple"),
			noop("red2", 151, "My favourite colour is red.", "red"),
		}, Questions: []Question{
			q("What is my favourite colour?", "red"),
		}},
		{Name: "favourite film", Writes: []Write{
			add("alien", 0, "My favourite film is Alien."),
			// offline: was wrong in the first measurement; a rule added after it fixes it. favorite movie is another slot than favourite film.
			supersede("heat", 40, "My favorite movie is Heat.", "alien"),
			noop("heat2", 80, "My favourite movie is Heat.", "heat"),
			add("dune", 81, "My favourite book is Dune."),
			supersede("middlemarch", 160, "My favourite book is Middlemarch now.", "dune"),
		}, Questions: []Question{
			q("What is my favourite film?", "heat"),
			q("What is my favourite book?", "middlemarch"),
		}},
		{Name: "Caroline (extracted facts)", Writes: []Write{
			add("sweden", 0, "Caroline: I moved to Sweden last month."),
			add("counselor", 1, "Caroline: I work as a counselor for trans youth."),
			noop("sweden2", 30, "Caroline: I live in Sweden now.", "sweden"),
			supersede("stockholm", 120, "Caroline: I moved to Stockholm.", "sweden"),
			add("cbook", 121, "Caroline: My favourite book is Becoming."),
			add("mbook", 122, "Melanie: My favourite book is Charlotte's Web."),
		}, Questions: []Question{
			q("Where does Caroline live?", "stockholm"),
			q("What is Caroline's favourite book?", "cbook"),
			q("What is Melanie's favourite book?", "mbook"),
			q("What does Caroline work as?", "counselor"),
		}},
		{Name: "Melanie (named person)", Writes: []Write{
			add("library", 0, "Melanie works at the library."),
			add("paints", 1, "Melanie paints landscapes on weekends."),
			supersede("hospital", 100, "Melanie: I started working at the hospital.", "library"),
			invalidate("left", 200, "Melanie no longer works at the hospital.", "hospital"),
			supersede("library2", 250, "Melanie works at the library again.", "left"),
		}, Questions: []Question{
			q("Where does Melanie work?", "library2"),
			q("What does Melanie paint?", "paints"),
		}},
		{Name: "tools (similar, unrelated)", Writes: []Write{
			add("vim", 0, "I use Vim for coding."),
			add("notion", 1, "I use Notion for notes."),
			add("kindle", 2, "I use a Kindle for reading."),
			supersede("obsidian", 100, "I switched to Obsidian for notes.", "notion"),
			supersede("helix", 200, "I use Helix for coding now.", "vim"),
		}, Questions: []Question{
			q("What do I use for coding?", "helix"),
			q("What do I use for notes?", "obsidian"),
			q("What do I use for reading?", "kindle"),
		}},
		{Name: "family places", Writes: []Write{
			add("sister", 0, "My sister lives in Rome."),
			add("paris", 1, "I live in Paris."),
			add("brother", 2, "My brother lives in Berlin."),
			// offline: was wrong in the first measurement; a rule added after it fixes it. "live in" a flat reads as a new city: Paris is retired.
			add("flat", 30, "I live in a small flat near the canal."),
			// offline: was wrong in the first measurement; a rule added after it fixes it. "my sister moved to" fills no slot: an ADD.
			supersede("milan", 90, "My sister moved to Milan.", "sister"),
		}, Questions: []Question{
			q("Which city do I live in?", "paris"),
			q("Where does my sister live?", "milan"),
			q("Where does my brother live?", "brother"),
		}},
		{Name: "habits retracted", Writes: []Write{
			add("smoke", 0, "I smoke cigarettes every day."),
			add("piano", 1, "I play the piano."),
			// offline: was wrong in the first measurement; a rule added after it fixes it. "smoking" shares too few words with the fact: an ADD.
			invalidate("quitsmoking", 60, "I quit smoking.", "smoke"),
			invalidate("nopiano", 90, "I stopped playing the piano.", "piano"),
			add("veg", 100, "I am vegetarian."),
			invalidate("noveg", 300, "I'm not vegetarian anymore.", "veg"),
		}, Questions: []Question{
			q("Do I smoke?", "quitsmoking"),
			q("Do I play the piano?", "nopiano"),
			q("Am I vegetarian?", "noveg"),
		}},
		{Name: "marriage and age", Writes: []Write{
			add("married", 0, "I'm married to Sam."),
			add("age", 1, "I am 34 years old."),
			supersede("age2", 370, "I just turned 35.", "age"),
			invalidate("divorced", 400, "I got divorced from Sam.", "married"),
			add("partner", 500, "My partner is Alex."),
		}, Questions: []Question{
			q("How old am I?", "age2"),
			q("Who is my partner?", "partner"),
			q("Am I still married to Sam?", "divorced"),
		}},
		{Name: "duplicates", Writes: []Write{
			add("dog", 0, "I have a dog named Rex."),
			noop("dog2", 5, "I have a dog named Rex.", "dog"),
			add("peanuts", 6, "I'm allergic to peanuts."),
			// offline: wrong. "I'm" and "I am" are different words to it: an ADD.
			noop("peanuts2", 50, "I am allergic to peanuts!", "peanuts"),
			add("cat", 60, "I have a cat named Luna."),
			// offline: wrong. One word changed of six is under the overlap threshold: an ADD.
			noop("dog3", 90, "I have a dog called Rex.", "dog"),
		}, Questions: []Question{
			q("What is my dog's name?", "dog"),
			q("What am I allergic to?", "peanuts"),
			q("What is my cat called?", "cat"),
		}},
		{Name: "children", Writes: []Write{
			add("son", 0, "My son plays the violin in the school orchestra on Wednesdays."),
			// offline: wrong. Nine words of eleven shared: a NOOP of the son's.
			add("daughter", 10, "My daughter plays the violin in the school orchestra on Wednesdays."),
			add("school", 20, "My son goes to Hillside Primary."),
			// offline: wrong. No slot pattern for schools: an ADD.
			supersede("school2", 250, "My son goes to Oakwood Secondary now.", "school"),
		}, Questions: []Question{
			q("Does my daughter play an instrument?", "daughter"),
			q("Which school does my son go to?", "school2"),
		}},
		{Name: "cars", Writes: []Write{
			add("golf", 0, "I drive a Volkswagen Golf."),
			add("civic", 1, "I own a Honda Civic."),
			supersede("kia", 200, "I drive an electric Kia now.", "golf"),
			// offline: was wrong in the first measurement; a rule added after it fixes it. "sold" is no retraction cue: an ADD.
			invalidate("sold", 210, "I sold my Honda Civic.", "civic"),
			// offline: was wrong in the first measurement; a rule added after it fixes it. "owns" is one value to it: the bike supersedes the Civic.
			add("bike", 211, "I own a road bike."),
		}, Questions: []Question{
			q("What car do I drive?", "kia"),
			q("Do I still have the Honda Civic?", "sold"),
			q("Do I own a bike?", "bike"),
		}},
		{Name: "studies", Writes: []Write{
			add("law", 0, "I'm studying law at King's College."),
			// offline: was wrong in the first measurement; a rule added after it fixes it. "switched my major to" fills no slot: an ADD.
			supersede("econ", 150, "I switched my major to economics.", "law"),
			// offline: was wrong in the first measurement; a rule added after it fixes it. It supersedes law, still active for it, instead of confirming econ.
			noop("econ2", 151, "I am majoring in economics.", "econ"),
			add("grad", 400, "I graduated in 2025."),
		}, Questions: []Question{
			q("What do I study?", "econ"),
			q("When did I graduate?", "grad"),
		}},
		{Name: "Jon and Melanie", Writes: []Write{
			add("jteam", 0, "Jon's favorite team is the Celtics."),
			add("mteam", 1, "Melanie's favorite team is the Lakers."),
			supersede("jteam2", 100, "Jon: My favorite team is the Knicks now.", "jteam"),
			add("studio", 101, "Jon opened a dance studio."),
			// offline: was wrong in the first measurement; a rule added after it fixes it. "closed" is no retraction cue: an ADD.
			invalidate("closed", 200, "Jon closed his dance studio for good.", "studio"),
		}, Questions: []Question{
			q("What is Jon's favorite team?", "jteam2"),
			q("What is Melanie's favorite team?", "mteam"),
			q("Does Jon have a dance studio?", "closed"),
		}},
		{Name: "drinks (out of order)", Writes: []Write{
			add("tea", 10, "My favourite drink is green tea."),
			supersede("espresso", 100, "My favourite drink is espresso.", "tea"),
			supersede("chai", 50, "My favourite drink is chai.", "espresso"), // older than espresso
			supersede("mate", 200, "My favourite drink is yerba mate.", "espresso"),
			add("ramen", 201, "My favourite food is ramen."),
		}, Questions: []Question{
			q("What is my favourite drink?", "mate"),
			q("What is my favourite food?", "ramen"),
		}},
		{Name: "profile (out of order)", Writes: []Write{
			add("name", 0, "My name is Robert Smith."),
			add("gym", 100, "I go to the gym."),
			// Older than the fact it retracts: kept, retired; the gym stays.
			invalidate("nogym", 50, "I don't go to the gym anymore.", "gym"),
			noop("name2", 120, "My full name is Robert Smith.", "name"),
			add("email", 130, "My email address is rob@example.com."),
			supersede("email2", 300, "My email address is robert.smith@example.org.", "email"),
			supersede("email3", 140, "My email address is rsmith@example.net.", "email2"), // older than email2
		}, Questions: []Question{
			q("Do I go to the gym?", "gym"),
			q("What is my email address?", "email2"),
			q("What is my name?", "name"),
		}},
		{Name: "employers (similar, unrelated)", Writes: []Write{
			add("me", 0, "I work for Acme as an engineer."),
			add("husband", 1, "My husband works for Globex."),
			add("dana", 2, "My friend Dana works for Acme too."),
			supersede("umbrella", 150, "I now work for Umbrella.", "me"),
			invalidate("husband2", 160, "My husband no longer works for Globex.", "husband"),
		}, Questions: []Question{
			q("Who do I work for?", "umbrella"),
			q("Does my husband work for Globex?", "husband2"),
			q("Where does Dana work?", "dana"),
		}},
		{Name: "moved out and back", Writes: []Write{
			add("paris", 0, "I live in Paris."),
			invalidate("out", 100, "I moved out of Paris.", "paris"),
			add("louvre", 101, "I work at the Louvre."),
			supersede("back", 200, "I moved back to Paris.", "out"),
		}, Questions: []Question{
			q("Where do I live?", "back"),
			q("Where do I work?", "louvre"),
		}},
		{Name: "phone numbers", Writes: []Write{
			add("phone", 0, "My phone number is 555-0100."),
			noop("phone2", 10, "My phone number is 555-0100.", "phone"),
			// offline: was wrong in the first measurement; a rule added after it fixes it. "new phone number" is another attribute than "phone number": an ADD.
			supersede("phone3", 200, "My new phone number is 555-0199.", "phone"),
			add("work", 201, "My work phone number is 555-0150."),
		}, Questions: []Question{
			q("What is my phone number?", "phone3"),
			q("What is my work phone number?", "work"),
		}},
		// Lookalikes of retractions, from an audit of the offline rules:
		// the rules for stopped, closed and sold were narrowed with these
		// in view, so they are not held out.
		{Name: "lookalikes", Writes: []Write{
			add("bakery", 0, "I work at the bakery on Elm Street."),
			add("visit", 10, "I stopped by the bakery on Elm Street."),
			add("sister", 20, "My sister lives in Porto."),
			add("calls", 30, "I stopped calling my sister in Porto."),
			add("car", 40, "I drive a Tesla."),
			add("house", 50, "I sold my house."),
		}, Questions: []Question{
			q("Where do I work?", "bakery"),
			q("Where does my sister live?", "sister"),
			q("What do I drive?", "car"),
		}},
		// Held out: written after the rules above, measured once, and no
		// rule was changed for them (docs/revision.md).
		{Name: "held out: lookalikes and retractions", Writes: []Write{
			add("hospital", 0, "I work at the hospital in Leeds."),
			add("aunt", 5, "I stopped at the hospital to visit my aunt."),
			add("oslo", 10, "My brother lives in Oslo."),
			add("emails", 15, "I stopped emailing my brother in Oslo."),
			add("volvo", 20, "I drive a Volvo."),
			add("bike", 25, "I gave away my bicycle."),
			invalidate("novolvo", 30, "I got rid of my Volvo.", "volvo"),
			add("bookshop", 35, "I run a bookshop in York."),
			add("door", 40, "I closed the bookshop door behind me."),
			invalidate("shut", 45, "We closed down our bookshop in York.", "bookshop"),
			add("chess", 50, "I play chess on Tuesdays."),
			invalidate("nochess", 55, "I don't play chess anymore.", "chess"),
			add("swim", 60, "I swim in the lake every morning."),
			invalidate("noswim", 65, "I stopped swimming in the lake.", "swim"),
		}, Questions: []Question{
			q("Where do I work?", "hospital"),
			q("Where does my brother live?", "oslo"),
		}},
	}
}
