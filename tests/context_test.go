package tests

import (
	"context"
	"fmt"
	"math/rand"
	"sort"
	"strings"
	"testing"
	"time"
	"unicode"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/mneme-memory/mneme/sidecar/dbtest"
)

// contextItem is one row of mneme.context_items.
type contextItem struct {
	Item     int
	MemoryID uuid.UUID
	Kind     string
	Messages []int64
	Words    int
	Text     string
}

func (e *pipelineEnv) contextItems(query string, budget int) []contextItem {
	e.t.Helper()
	rows, err := e.db.Pool.Query(context.Background(), `
		SELECT item, memory_id, kind, coalesce(message_ids, '{}'), words, text
		FROM mneme.context_items($1, $2, $3)`, e.conv, query, budget)
	require.NoError(e.t, err)
	items, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (contextItem, error) {
		var c contextItem
		return c, r.Scan(&c.Item, &c.MemoryID, &c.Kind, &c.Messages, &c.Words, &c.Text)
	})
	require.NoError(e.t, err)
	return items
}

// contextConversation is four days of a conversation (several episodes
// each) about distinct topics, and two explicit facts.
func contextConversation(t *testing.T) *pipelineEnv {
	return contextConversationWith(t, [2]string{"user", "assistant"}, func(s string) string { return s })
}

// contextConversationWith is contextConversation with other speakers (a
// name of two words costs two) and every text passed through text (e.g. to
// separate its words by Unicode spaces).
func contextConversationWith(t *testing.T, speakers [2]string, text func(string) string) *pipelineEnv {
	e := newPipelineEnv(t, false)
	if speakers != [2]string{"user", "assistant"} {
		_, err := e.db.Pool.Exec(context.Background(), `SELECT mneme.set_speakers($1, $2)`, e.conv, speakers[:])
		require.NoError(t, err)
	}
	topics := [][]string{
		{"I started learning the violin last month", "My teacher Anna says my bowing is too stiff", "We practise scales in G major every morning", "The recital is planned for the spring", "I rent the violin from a shop in Lyon", "Rosin makes the strings grip the bow"},
		{"We are planning the garden for this year", "Tomatoes and basil go in the south bed", "The soil needs compost before April", "My neighbour gave us rhubarb crowns", "Slugs ate all the lettuce last summer", "We bought a rain barrel for the shed"},
		{"Work is busy with the database migration", "We move the billing tables to PostgreSQL", "The cutover is on a Saturday night", "My manager Priya reviews the runbook", "Rollback means restoring the snapshot", "The old system ran on Oracle for ten years"},
		{"We booked a trip to Lisbon in June", "The hotel is near the Alfama district", "I want to try the custard tarts in Belem", "Flights leave from Geneva at seven", "My sister Clara joins us for three days", "We will take the tram up to the castle"},
	}
	for d, lines := range topics {
		day := day1.Add(time.Duration(d) * 48 * time.Hour)
		for i, line := range lines {
			e.say(day.Add(time.Duration(i)*time.Minute).Format(time.RFC3339), speakers[i%2], text(line))
		}
	}
	e.say(day1.Add(10*24*time.Hour).Format(time.RFC3339), speakers[0], text("see you next week then, bye"))
	_, err := e.db.Pool.Exec(context.Background(), `SELECT mneme.segment_now($1)`, e.conv)
	require.NoError(t, err)
	e.drain()
	for _, f := range []string{"The user is allergic to peanuts", "The user's violin teacher is called Anna"} {
		_, err := e.db.Pool.Exec(context.Background(), `SELECT mneme.remember($1, $2, 'user_profile')`, e.conv, text(f))
		require.NoError(t, err)
	}
	return e
}

// TestContextWithinBudget: for random queries and budgets (seeded,
// logged), the words never exceed the budget and equal the markdown's
// whitespace-separated words; no turn comes twice; an episode's turns are
// in conversation order within each passage, its passages newest first; the selection is the same on a second call; and
// context_items changes nothing (no pending review).
func TestContextWithinBudget(t *testing.T) {
	t.Parallel()
	seed := rand.Int63()
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewSource(seed))
	// Every space of the conversation becomes a random separator, Unicode
	// White_Space included (no-break, em and ideographic spaces, line
	// separator, NEL), and one speaker's name is two words: the budget
	// counts words as Go's strings.Fields does.
	seps := []string{" ", " ", "  ", "\t", "\u00a0", "\u2003", "\u3000", "\u202f", "\u2028", "\u0085", "\u205f", "\u1680"}
	e := contextConversationWith(t, [2]string{"Anna Maria", "Bob"}, func(s string) string {
		var b strings.Builder
		for i, w := range strings.Split(s, " ") {
			if i > 0 {
				b.WriteString(seps[rng.Intn(len(seps))])
			}
			b.WriteString(w)
		}
		return b.String()
	})
	ctx := context.Background()
	words := strings.Fields("violin teacher garden tomatoes database migration Lisbon trip sister bowing compost rollback " +
		"tram peanuts allergic spring Saturday custard Anna Priya Clara rhubarb the a when who")

	before := e.count(`SELECT count(*) FROM mneme.message_queue WHERE pending_reviews IS NOT NULL`)
	for round := 0; round < 60; round++ {
		var q []string
		for i := 0; i < 1+rng.Intn(5); i++ {
			q = append(q, words[rng.Intn(len(words))])
		}
		query := q[0]
		for _, w := range q[1:] {
			query += seps[rng.Intn(len(seps))] + w
		}
		budget := 1 + rng.Intn(300)
		if round%10 == 0 {
			budget = 1 + rng.Intn(5000)
		}
		items := e.contextItems(query, budget)
		total, seen := 0, map[int64]bool{}
		for i, it := range items {
			require.Equal(t, i+1, it.Item)
			require.Equal(t, len(strings.Fields(it.Text)), it.Words, "%q: item words are the text's words: %q", query, it.Text)
			total += it.Words
			breaks, passageMin := 0, int64(0)
			for j, id := range it.Messages {
				if it.Kind == "episodic" { // a fact's message ids are its provenance, not turns shown
					require.False(t, seen[id], "%q budget %d: message %d twice", query, budget, id)
					seen[id] = true
				}
				switch {
				case j == 0:
					passageMin = id
				case id < it.Messages[j-1]:
					// context_order newest: a passage older than the last
					// (each in conversation order, the newest first).
					require.Less(t, id, passageMin, "%q: passages newest first: %v", query, it.Messages)
					breaks++
					passageMin = id
				}
			}
			if it.Kind == "episodic" {
				require.True(t, strings.HasPrefix(it.Text, "### 2026-"), it.Text)
				require.Len(t, strings.Split(it.Text, "\n"), len(it.Messages)+1+breaks, "a heading, one line per turn, a blank line between passages")
			} else {
				require.True(t, strings.HasPrefix(it.Text, "- "), it.Text)
			}
		}
		require.LessOrEqual(t, total, budget, "%q: %d words over a budget of %d", query, total, budget)
		var md string
		require.NoError(t, e.db.Pool.QueryRow(ctx, `SELECT mneme.context($1, $2, $3, record => false)`, e.conv, query, budget).Scan(&md))
		require.Equal(t, total, len(strings.Fields(md)), "the markdown is the items")
		require.LessOrEqual(t, len(strings.Fields(md)), budget)
		require.Equal(t, items, e.contextItems(query, budget), "%q: deterministic", query)
	}
	require.Equal(t, before, e.count(`SELECT count(*) FROM mneme.message_queue WHERE pending_reviews IS NOT NULL`),
		"context_items and record => false record nothing")
}

// TestContextSelection: the matched turn is in, with its neighbour; turns
// of other topics are not; a fact comes whole; the best match comes first;
// context records a pending review of the memories it used.
func TestContextSelection(t *testing.T) {
	t.Parallel()
	e := contextConversation(t)
	ctx := context.Background()
	// The best match first: items in the order they got room.
	_, err := e.db.Pool.Exec(ctx, `SELECT mneme.set_setting('context_order', '"rank"')`)
	require.NoError(t, err)

	items := e.contextItems("when is the database cutover?", 60)
	require.NotEmpty(t, items)
	require.Equal(t, "episodic", items[0].Kind)
	require.Contains(t, items[0].Text, "The cutover is on a Saturday night")
	require.NotContains(t, items[0].Text, "violin")

	items = e.contextItems("peanuts allergy", 50)
	require.Equal(t, "semantic", items[0].Kind)
	require.Equal(t, "- The user is allergic to peanuts", items[0].Text)

	// A fact that does not fit whole is left out, never cut.
	items = e.contextItems("peanuts allergy", 3)
	for _, it := range items {
		require.NotEqual(t, "semantic", it.Kind)
	}

	var md string
	require.NoError(t, e.db.Pool.QueryRow(ctx, `SELECT mneme.context($1, 'Lisbon trip tram castle', 200)`, e.conv).Scan(&md))
	require.Contains(t, md, "We will take the tram up to the castle")
	require.Contains(t, md, "user: ")
	var reviews string
	require.NoError(t, e.db.Pool.QueryRow(ctx, `SELECT mneme.take_pending_reviews($1)::text`, e.conv).Scan(&reviews))
	require.Contains(t, reviews, "Lisbon trip tram castle", "context records a pending review")

}

// TestContextBadArguments: clear errors, nothing recorded.
func TestContextBadArguments(t *testing.T) {
	t.Parallel()
	e := contextConversation(t)
	ctx := context.Background()
	for _, c := range []struct {
		q    string
		args []any
		code string
	}{
		{`SELECT mneme.context($1, 'violin', 0)`, nil, "22023"},
		{`SELECT mneme.context($1, 'violin', -5)`, nil, "22023"},
		{`SELECT mneme.context($1, 'violin', 100001)`, nil, "22023"},
		{`SELECT mneme.context($1, 'violin', NULL)`, nil, "22004"},
		{`SELECT mneme.context($1, NULL, 100)`, nil, "22004"},
		{`SELECT mneme.context($1, '   ', 100)`, nil, "22023"},
		{`SELECT mneme.context(NULL, 'violin', 100)`, nil, "22004"},
		{`SELECT mneme.context($1, 'violin', 100, record => NULL)`, nil, "22004"},
		{`SELECT mneme.context($1, 'violin', 100, scope => 'galaxy')`, nil, "22023"},
		{`SELECT mneme.context($1, 'violin', 100, scope => NULL)`, nil, "22004"},
		{`SELECT mneme.context($1, 'violin', 100, since => now(), until => now() - interval '1 day')`, nil, "22023"},
		{`SELECT * FROM mneme.context_items($1, 'violin', 0)`, nil, "22023"},
		{`SELECT * FROM mneme.context_items($1, 'violin', 100, ARRAY[1,2,3]::real[])`, nil, "22023"},
	} {
		args := append([]any{e.conv}, c.args...)
		if !strings.Contains(c.q, "$1") {
			args = nil
			if dbtest.OnCitus() {
				t.Logf("skipped on Citus: %s (a NULL distribution argument of a delegated call crashes the Citus 13.2.2 coordinator; docs/scale.md)", c.q)
				continue
			}
		}
		_, err := e.db.Pool.Exec(ctx, c.q, args...)
		require.Error(t, err, c.q)
		require.Equal(t, c.code, sqlState(t, err), "%s: %v", c.q, err)
		require.Less(t, len(err.Error()), 400, c.q)
	}
	require.Zero(t, e.count(`SELECT count(*) FROM mneme.message_queue WHERE pending_reviews IS NOT NULL`))
	// An unknown conversation has no context, and no error.
	var md string
	require.NoError(t, e.db.Pool.QueryRow(ctx, `SELECT mneme.context($1, 'violin', 100)`, uuid.New()).Scan(&md))
	require.Equal(t, "", md)
}

// TestContextTermsMatchTokeniser: the per-message terms and word counts the
// context scores with (generated columns of goose 00046 and 00048, which
// cannot call mneme's functions) equal mneme.bm25_tsvector and
// mneme._words, and the word counts equal Go's strings.Fields: words are
// separated by Unicode White_Space, and characters that are not
// White_Space (zero-width space, BOM, Mongolian vowel separator, the ASCII
// information separators) join them.
func TestContextTermsMatchTokeniser(t *testing.T) {
	t.Parallel()
	e := newPipelineEnv(t, false)
	texts := []string{"Hello, World!", "  leading and trailing\twhitespace \n", "The quick brown foxes jumped",
		"naïve café — résumé", strings.Repeat("word ", 3000), "x", "tabs\tand\nnewlines\r\nmixed", "émoji 🎻 violin",
		"alpha\u00a0beta\u00a0gamma delta", "vertical\vtab\fform\rfeed",
		"en\u2000quad\u2001em\u2002en\u2003em\u2004three\u2005four\u2006six\u2007figure\u2008punct\u2009thin\u200ahair",
		"line\u2028separator\u2029paragraph\u0085next\u1680ogham\u202fnarrow\u205fmath\u3000ideographic",
		"\u00a0\u3000 leading and trailing Unicode spaces\u2003\u00a0",
		"zero\u200bwidth\ufeffbom\u180emongolian\u200cjoiners\u200d\u2060stay one word",
		"information\u001cseparators\u001dare\u001enot\u001fspaces", "nbsp\u00a0\u00a0\u00a0runs  of\u2003\u3000 mixed"}
	for i, s := range texts {
		e.say(day1.Add(time.Duration(i)*time.Minute).Format(time.RFC3339), "user", s)
	}
	// Every Unicode character Go calls a space splits a word in SQL too,
	// and none of the others up to U+3000 does.
	var split, joined []string
	for r := rune(1); r <= 0x3000; r++ {
		if r >= 0xd800 && r <= 0xdfff {
			continue
		}
		if unicode.IsSpace(r) {
			split = append(split, fmt.Sprintf("a%cb", r))
		} else if !unicode.IsPrint(r) || r < 0x80 {
			joined = append(joined, fmt.Sprintf("a%cb", r))
		}
	}
	var badSplit, badJoin []string
	require.NoError(t, e.db.Pool.QueryRow(context.Background(), `
		SELECT coalesce(array_agg(s) FILTER (WHERE mneme._words(s) <> 2), '{}') FROM unnest($1::text[]) s`, split).Scan(&badSplit))
	require.Empty(t, badSplit, "Unicode White_Space separates words")
	require.NoError(t, e.db.Pool.QueryRow(context.Background(), `
		SELECT coalesce(array_agg(s) FILTER (WHERE mneme._words(s) <> 1), '{}') FROM unnest($1::text[]) s`, joined).Scan(&badJoin))
	require.Empty(t, badJoin, "characters that are not White_Space join words")
	require.Zero(t, e.count(`SELECT count(*) FROM mneme.messages
		WHERE terms IS DISTINCT FROM mneme.bm25_tsvector(content) OR words IS DISTINCT FROM mneme._words(content)`))
	rows, err := e.db.Pool.Query(context.Background(), `SELECT content, words FROM mneme.messages`)
	require.NoError(t, err)
	got, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (string, error) {
		var s string
		var w int
		if err := r.Scan(&s, &w); err != nil {
			return "", err
		}
		if w != len(strings.Fields(s)) {
			return "", fmt.Errorf("%q: %d words, Go counts %d", s[:min(len(s), 40)], w, len(strings.Fields(s)))
		}
		return s, nil
	})
	require.NoError(t, err)
	require.Len(t, got, len(texts))
}

// TestContextNewestFirst: by default (setting context_order newest) the
// items chosen by rank are shown newest first, by the latest turn shown (a
// fact: its time), so a later statement is read before an earlier one it
// may contradict; with context_order rank the same items come in the order
// they got room.
func TestContextNewestFirst(t *testing.T) {
	t.Parallel()
	e := contextConversation(t)
	ctx := context.Background()
	latest := func(it contextItem) time.Time {
		var at time.Time
		require.NoError(t, e.db.Pool.QueryRow(ctx, `
			SELECT CASE WHEN m.kind = 'episodic' THEN (SELECT max(g.created_at) FROM mneme.messages g WHERE g.id = ANY ($2))
			            ELSE coalesce(m.source_last_at, m.created_at) END
			FROM mneme.memories m WHERE m.id = $1`, it.MemoryID, it.Messages).Scan(&at))
		return at
	}
	query := "violin garden database Lisbon sister peanuts"
	newest := e.contextItems(query, 400)
	require.Greater(t, len(newest), 3)
	for i := 1; i < len(newest); i++ {
		require.False(t, latest(newest[i]).After(latest(newest[i-1])), "item %d is newer than item %d", i+1, i)
	}
	_, err := e.db.Pool.Exec(ctx, `SELECT mneme.set_setting('context_order', '"rank"')`)
	require.NoError(t, err)
	ranked := e.contextItems(query, 400)
	key := func(items []contextItem) []string {
		var out []string
		for _, it := range items {
			out = append(out, it.MemoryID.String()+it.Text)
		}
		sort.Strings(out)
		return out
	}
	require.Equal(t, key(ranked), key(newest), "the same items, in another order")
	require.NotEqual(t, ranked, newest, "the orders differ on this conversation")
}

// TestContextPassagesNewestFirst: where an update is said a few turns after
// the value it replaces, in the same episode but not in the same passage,
// context_order newest lists the episode's later passage first (each in
// conversation order, a blank line between them), so the update is read
// first; context_order rank keeps the episode's turns in conversation order.
func TestContextPassagesNewestFirst(t *testing.T) {
	t.Parallel()
	e := newPipelineEnv(t, false)
	ctx := context.Background()
	lines := []string{
		"My dentist appointment is on March 3 at 9 AM",
		"Noted, the dentist on March 3",
		"Can you suggest a recipe for lentil soup",
		"Onion, carrots, lentils and cumin make a good soup",
		"How long should the soup simmer",
		"About thirty minutes until the lentils are soft",
		"The dentist moved my appointment to March 5 at 2 PM",
		"Noted, the dentist on March 5",
	}
	var ids []int64
	for i, line := range lines {
		role := []string{"user", "assistant"}[i%2]
		ids = append(ids, e.say(day1.Add(time.Duration(i)*time.Minute).Format(time.RFC3339), role, line))
	}
	_, err := e.db.Pool.Exec(ctx, `SELECT mneme.segment_now($1)`, e.conv)
	require.NoError(t, err)
	e.drain()
	_, err = e.db.Pool.Exec(ctx, `SELECT mneme.set_setting('context_window', '0')`)
	require.NoError(t, err)
	_, err = e.db.Pool.Exec(ctx, `SELECT mneme.set_setting('extract_facts', 'false')`)
	require.NoError(t, err)
	episode := func(items []contextItem) contextItem {
		for _, it := range items {
			if it.Kind == "episodic" && len(it.Messages) > 1 {
				return it
			}
		}
		t.Fatalf("no episode with two turns among %v", items)
		return contextItem{}
	}
	newest := episode(e.contextItems("dentist appointment", 200))
	require.Equal(t, []int64{ids[6], ids[7], ids[0], ids[1]}, newest.Messages, "the later passage first")
	require.Contains(t, newest.Text, "user: "+lines[6]+"\nassistant: "+lines[7]+"\n\nuser: "+lines[0])
	require.Less(t, strings.Index(newest.Text, "March 5"), strings.Index(newest.Text, "March 3"))
	_, err = e.db.Pool.Exec(ctx, `SELECT mneme.set_setting('context_order', '"rank"')`)
	require.NoError(t, err)
	ranked := episode(e.contextItems("dentist appointment", 200))
	require.Equal(t, []int64{ids[0], ids[1], ids[6], ids[7]}, ranked.Messages, "rank order: conversation order")
	require.NotContains(t, ranked.Text, "\n\n")
}

// TestContextCandidatesAreSearchAndContextItems: mneme.context_candidates
// (mneme ui's search page, one search) returns search's top
// context_candidates, every column as search returns it, in search's order,
// and the items context_items returns for the same arguments, each on its
// memory's row; a wrong budget is refused before anything is read.
func TestContextCandidatesAreSearchAndContextItems(t *testing.T) {
	t.Parallel()
	e := contextConversation(t)
	ctx := context.Background()
	// One transaction: now(), the default `at`, is the same for every call.
	tx, err := e.db.Pool.Begin(ctx)
	require.NoError(t, err)
	defer tx.Rollback(ctx) //nolint:errcheck
	for _, c := range []struct {
		q      string
		budget int
		scope  string
	}{{"when is the database cutover?", 60, "conversation"}, {"violin teacher Anna", 1000, "conversation"},
		{"the garden and the trip", 120, "tenant"}, {"peanuts", 3, "conversation"}} {
		rows, err := tx.Query(ctx, `SELECT s::text FROM mneme.search($1, $2, mneme.setting('context_candidates')::int, scope => $3) s`,
			e.conv, c.q, c.scope)
		require.NoError(t, err)
		search, err := pgx.CollectRows(rows, pgx.RowTo[string])
		require.NoError(t, err)
		require.NotEmpty(t, search, c.q)
		rows, err = tx.Query(ctx, `SELECT item::text || ' ' || memory_id || ' ' || score || ' ' || words || ' ' || text
			FROM mneme.context_items($1, $2, $3, scope => $4) ORDER BY item`, e.conv, c.q, c.budget, c.scope)
		require.NoError(t, err)
		items, err := pgx.CollectRows(rows, pgx.RowTo[string])
		require.NoError(t, err)

		rows, err = tx.Query(ctx, `SELECT ROW(memory_id, kind, summary, content, created_at, score, rrf, bm25_rank, vector_rank,
			       retrievability, title, label, pinned, bm25_score, vector_distance, status, confidence_score)::mneme.retrieval::text,
			       item::text || ' ' || memory_id || ' ' || item_score || ' ' || words || ' ' || text
			FROM mneme.context_candidates($1, $2, $3, scope => $4)`, e.conv, c.q, c.budget, c.scope)
		require.NoError(t, err)
		var hits []string
		got := map[string]string{}
		for rows.Next() {
			var h string
			var it *string
			require.NoError(t, rows.Scan(&h, &it))
			hits = append(hits, h)
			if it != nil {
				got[strings.SplitN(*it, " ", 2)[0]] = *it
			}
		}
		require.NoError(t, rows.Err())
		require.Equal(t, search, hits, "%q: search's rows, in its order", c.q)
		require.Len(t, got, len(items), c.q)
		for _, it := range items {
			require.Equal(t, it, got[strings.SplitN(it, " ", 2)[0]], c.q)
		}
	}
	for _, budget := range []int{0, 100001} {
		_, err := e.db.Pool.Exec(ctx, `SELECT * FROM mneme.context_candidates($1, 'violin', $2)`, e.conv, budget)
		require.Error(t, err)
		require.Equal(t, "22023", sqlState(t, err), "budget %d: %v", budget, err)
	}
}
