package revision

import (
	"context"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"
)

// One example per documented slot pattern and negation cue (docs/revision.md).
func TestParseSlots(t *testing.T) {
	cases := []struct {
		text, slot, value string
		negated           bool
	}{
		{"I live in Paris.", "user|lives_in", "paris", false},
		{"I'm living in Berlin now", "user|lives_in", "berlin", false},
		{"I moved to Lisbon last week.", "user|lives_in", "lisbon", false},
		{"We relocated to Porto", "user|lives_in", "porto", false},
		{"I am based in Madrid", "user|lives_in", "madrid", false},
		{"I work at Acme Corp.", "user|works_at", "acme corp", false},
		{"I'm employed by Globex", "user|works_at", "globex", false},
		{"I joined Initech in March", "user|works_at", "initech in march", false},
		{"I work as a nurse", "user|job_title", "nurse", false},
		{"My job title is senior engineer", "user|job_title", "senior engineer", false},
		{"My name is Sam.", "user|name", "sam", false},
		{"I'm married to Alex", "user|married_to", "alex", false},
		{"My wife is Dana", "user|married_to", "dana", false},
		{"My favourite colour is blue", "user|favourite_colour", "blue", false},
		{"My favorite food is now sushi!", "user|favourite_food", "sushi", false},
		{"I own a Honda Civic", "", "", false}, // owns is many-valued: no slot
		{"Actually, my favourite colour is purple.", "user|favourite_colour", "purple", false},
		{"My favorite color is red", "user|favourite_colour", "red", false},
		{"My favorite movie is Heat", "user|favourite_film", "heat", false},
		{"My sister moved to Milan", "user's sister|lives_in", "milan", false},
		{"Caroline: My brother works at Globex", "caroline's brother|works_at", "globex", false},
		{"My new phone number is 555-0199", "user|phone_number", "555-0199", false},
		{"I live in a small flat near the canal", "", "", false},
		{"I live in a flat in Lisbon.", "user|lives_in", "lisbon", false},
		{"I work at home on Fridays", "", "", false},
		{"I switched my major to economics", "user|studies", "economics", false},
		{"I sold my Honda Civic", "user|drives", "honda civic", true},
		{"I drive a Tesla", "user|drives", "tesla", false},
		{"I use Vim for coding", "user|uses_for_coding", "vim", false},
		{"I switched to Emacs for coding", "user|uses_for_coding", "emacs", false},
		{"I am 34 years old", "user|age", "34", false},
		{"Caroline: I moved to Sweden.", "caroline|lives_in", "sweden", false},
		{"Melanie works at the library.", "melanie|works_at", "library", false},
		{"Melanie's favorite book is Dune", "melanie|favourite_book", "dune", false},
		{"I no longer live in Paris.", "user|lives_in", "paris", true},
		{"I don't work at Acme anymore", "user|works_at", "acme", true},
		{"I moved out of Berlin", "user|lives_in", "berlin", true},
		{"I quit my job at Globex", "user|works_at", "globex", true},
		{"I left my job at Initech", "user|works_at", "initech", true},
		{"I left my job", "user|works_at", "", true},
		{"I stopped using Vim for coding", "user|uses_for_coding", "vim", true},
		{"I stopped working at Initech", "user|works_at", "initech", true},
		{"The weather is nice.", "", "", false},
		{"I had pasta for dinner", "", "", false},
		{"My kids are so excited about the trip", "", "", false},
		{"My dog is so cute when he sleeps", "", "", false},
		{"My phone number is 555 0101", "user|phone_number", "555 0101", false},
	}
	for _, c := range cases {
		st := Parse(c.text)
		require.Equal(t, c.slot, st.Slot(), c.text)
		if c.slot != "" {
			require.Equal(t, c.value, st.Value, c.text)
		}
		require.Equal(t, c.negated, st.Negated, c.text)
	}
}

func TestHeuristicActions(t *testing.T) {
	ctx := context.Background()
	t0 := time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC)
	cand := func(text string, days int) Candidate {
		return Candidate{ID: uuid.New(), Content: text, At: t0.AddDate(0, 0, days)}
	}
	set := Settings{DuplicateSimilarity: 0.8}
	paris, acme, vim, notes := cand("I live in Paris", 0), cand("I work at Acme", 1), cand("I use Vim for coding", 2), cand("I use Notion for notes", 3)
	cands := []Candidate{paris, acme, vim, notes}
	cases := []struct {
		text   string
		action string
		target uuid.UUID
	}{
		{"I moved to Berlin", ActionSupersede, paris.ID},
		{"I live in Paris.", ActionNoop, paris.ID},
		{"I now work at Globex", ActionSupersede, acme.ID},
		{"I no longer work at Acme", ActionInvalidate, acme.ID},
		{"I quit my job", ActionInvalidate, acme.ID},
		{"I use Obsidian for notes", ActionSupersede, notes.ID},
		{"I use Emacs for coding", ActionSupersede, vim.ID},
		{"I have a dog named Rex", ActionAdd, uuid.Nil},
		{"My sister lives in Rome", ActionAdd, uuid.Nil},
	}
	for _, c := range cases {
		d, err := Heuristic{}.Classify(ctx, Fact{ID: uuid.New(), Content: c.text, At: t0.AddDate(0, 0, 10)}, cands, set)
		require.NoError(t, err)
		require.Equal(t, c.action, d.Action, c.text)
		require.Equal(t, c.target, d.Target, c.text)
	}
}

func TestExtractFacts(t *testing.T) {
	got := ExtractFacts([]Message{
		{ID: 1, Speaker: "Caroline", Content: "Hey! I moved to Sweden last month. Do you like it there?"},
		{ID: 2, Speaker: "Melanie", Content: "I think I might visit. Melanie is great. My favorite book is Dune."},
		{ID: 3, Speaker: "user", Content: "ok thanks"},
		{ID: 4, Speaker: "user", Content: "We relocated to Hull last spring."},
		{ID: 5, Speaker: "user", Content: "I smoke cigarettes again. I go to the gym three times a week."},
	})
	require.Equal(t, []Extracted{
		{Text: "Caroline: I moved to Sweden last month.", MessageIDs: []int64{1}},
		{Text: "Melanie: My favorite book is Dune.", MessageIDs: []int64{2}},
		{Text: "User: We relocated to Hull last spring.", MessageIDs: []int64{4}},
		{Text: "User: I smoke cigarettes again.", MessageIDs: []int64{5}},
		{Text: "User: I go to the gym three times a week.", MessageIDs: []int64{5}},
	}, got)
}

func TestExtractUpdateClauses(t *testing.T) {
	got := ExtractFacts([]Message{{ID: 7, Speaker: "user", Content: "I'm trying to deepen my understanding of probability, " +
		"and I've recently extended my study sessions to 4 hours, but I'm having trouble with dice problems, can you help?"},
		{ID: 8, Speaker: "user", Content: "I'm trying to update my gallery, I've added two new projects, so now I have a total of 10 cards, " +
			"and I want to make sure they're all displayed correctly."}})
	require.Equal(t, []Extracted{
		{Text: "User: I've recently extended my study sessions to 4 hours.", MessageIDs: []int64{7}},
		{Text: "User: Now I have a total of 10 cards.", MessageIDs: []int64{8}},
	}, got)
}

// Lookalikes of retractions that retract nothing stay ADD: a visit is not
// quitting ("stopped by"), a call is not where someone lives, selling a
// house is not selling a car, closing a window closes no business.
func TestHeuristicLookalikesStayAdd(t *testing.T) {
	ctx := context.Background()
	t0 := time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC)
	cand := func(text string, days int) Candidate {
		return Candidate{ID: uuid.New(), Content: text, At: t0.AddDate(0, 0, days)}
	}
	set := Settings{DuplicateSimilarity: 0.8}
	bakery, sister, tesla, shop := cand("I work at the bakery on Elm Street.", 0), cand("My sister lives in Porto.", 1),
		cand("I drive a Tesla.", 2), cand("I run a flower shop in Leeds.", 3)
	cands := []Candidate{bakery, sister, tesla, shop}
	for _, c := range []struct {
		text   string
		action string
		target uuid.UUID
	}{
		{"I stopped by the bakery on Elm Street.", ActionAdd, uuid.Nil},
		{"I stopped at the bakery on Elm Street for bread.", ActionAdd, uuid.Nil},
		{"I stopped calling my sister in Porto.", ActionAdd, uuid.Nil},
		{"I sold my house.", ActionAdd, uuid.Nil},
		{"I gave away my old sofa.", ActionAdd, uuid.Nil},
		{"I closed the window in the shop.", ActionAdd, uuid.Nil},
		{"I closed the deal with the flower supplier in Leeds.", ActionAdd, uuid.Nil},
		// and the real ones still retract
		{"I sold my Tesla.", ActionInvalidate, tesla.ID},
		{"I stopped working at the bakery on Elm Street.", ActionInvalidate, bakery.ID},
		{"I closed my flower shop in Leeds.", ActionInvalidate, shop.ID},
	} {
		d, err := Heuristic{}.Classify(ctx, Fact{ID: uuid.New(), Content: c.text, At: t0.AddDate(0, 0, 10)}, cands, set)
		require.NoError(t, err)
		require.Equal(t, c.action, d.Action, "%s: %s", c.text, d.Reason)
		require.Equal(t, c.target, d.Target, c.text)
	}
}

// Updates found by comparing statements: the same words with other
// numbers SUPERSEDE, whatever the phrasing; other days, other words or the
// same numbers do not.
func TestHeuristicValueChange(t *testing.T) {
	ctx := context.Background()
	t0 := time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC)
	cand := func(text string, days int) Candidate {
		return Candidate{ID: uuid.New(), Content: text, At: t0.AddDate(0, 0, days)}
	}
	set := Settings{DuplicateSimilarity: 0.8}
	run, study, commute, race := cand("User: I run 5 km every morning.", 0), cand("User: My study sessions are 2 hours long.", 1),
		cand("User: My commute takes 40 minutes by bus.", 2), cand("User: I ran 10 km on Monday.", 3)
	cands := []Candidate{run, study, commute, race}
	for _, c := range []struct {
		text   string
		action string
		target uuid.UUID
	}{
		{"User: I run 8 km every morning.", ActionSupersede, run.ID},
		{"User: My study sessions are 4 hours long now.", ActionSupersede, study.ID},
		{"User: My commute takes 25 minutes by train.", ActionAdd, uuid.Nil},
		{"User: I ran 12 km on Tuesday.", ActionAdd, uuid.Nil},
		{"User: I run 5 km every morning.", ActionNoop, run.ID},
		{"User: I swim 2 km every evening.", ActionAdd, uuid.Nil},
	} {
		d, err := Heuristic{}.Classify(ctx, Fact{ID: uuid.New(), Content: c.text, At: t0.AddDate(0, 0, 10)}, cands, set)
		require.NoError(t, err)
		require.Equal(t, c.action, d.Action, "%s: %s", c.text, d.Reason)
		require.Equal(t, c.target, d.Target, c.text)
	}
}
