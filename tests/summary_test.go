package tests

import (
	"context"
	"strings"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/mneme-memory/mneme/sidecar/dbtest"
)

// TestExtractiveSummary: an episode's offline summary is its most
// informative sentences by the search's own term weights (tf-idf: words
// the episode repeats and the conversation's memories rarely use): the
// sentences with the places and the numbers, not small talk nor what the
// conversation says all the time; in the order said, with speakers; a long
// sentence cut at a word; deterministic; bad input refused.
func TestExtractiveSummary(t *testing.T) {
	t.Parallel()
	db := dbtest.New(t)
	ctx := context.Background()
	conv := uuid.New()
	// What the conversation talks about all the time: the weather.
	for _, s := range []string{
		"The weather was nice today, the weather report said so.",
		"What is the weather like? The weather is fine.",
		"Weather again: the weather stays fine this week.",
	} {
		addMemory(t, db, conv, s, nil)
	}
	roles := []string{"user", "assistant", "user", "user"}
	contents := []string{
		"What is the weather this weekend? Tell me about the weather.",
		"Sunny on Saturday, around 24 degrees.\nRain on Sunday afternoon in Grimsby, about 12 millimetres.",
		"Ok, thanks!",
		"Then I will take the ferry to Cleethorpes on Saturday at 9.",
	}
	summary := func(k any) (string, error) {
		var s *string
		err := db.Pool.QueryRow(ctx, `SELECT mneme.extractive_summary($1, $2, $3, $4)`, conv, roles, contents, k).Scan(&s)
		if s == nil {
			return "", err
		}
		return *s, err
	}
	s, err := summary(2)
	require.NoError(t, err)
	require.Equal(t, "assistant: Sunny on Saturday, around 24 degrees. … "+
		"user: Then I will take the ferry to Cleethorpes on Saturday at 9.", s,
		"the episode's own words, numbers and places, not the question about the weather the conversation always asks")
	s3, err := summary(3)
	require.NoError(t, err)
	require.Equal(t, "assistant: Sunny on Saturday, around 24 degrees. … "+
		"assistant: Rain on Sunday afternoon in Grimsby, about 12 millimetres. … "+
		"user: Then I will take the ferry to Cleethorpes on Saturday at 9.", s3, "in the order said")
	again, err := summary(2)
	require.NoError(t, err)
	require.Equal(t, s, again, "deterministic")
	s, err = summary(nil)
	require.NoError(t, err)
	require.Equal(t, 2, strings.Count(s, ": "), "k defaults to segment_summary_sentences (2)")
	require.NotContains(t, s, "thanks")

	long := strings.Repeat("Grimsby harbour ferries ", 20) + "Cleethorpes"
	var cut string
	require.NoError(t, db.Pool.QueryRow(ctx, `SELECT mneme.extractive_summary($1, ARRAY['user'], ARRAY[$2], 1)`, conv, long).Scan(&cut))
	body, ok := strings.CutSuffix(strings.TrimPrefix(cut, "user: "), " …")
	require.True(t, ok, "a cut sentence ends in an ellipsis: %q", cut)
	require.True(t, strings.HasPrefix(long, body+" "), "cut after a whole word: %q", cut)
	require.LessOrEqual(t, len([]rune(cut)), len("user: ")+200+2)

	var none *string
	require.NoError(t, db.Pool.QueryRow(ctx, `SELECT mneme.extractive_summary($1, ARRAY['user', 'assistant'], ARRAY['It is!', 'So do I.'])`, conv).Scan(&none))
	require.Nil(t, none, "no sentence with a word the search indexes: no summary")

	for _, c := range []struct {
		q    string
		args []any
		code string
	}{
		{`SELECT mneme.extractive_summary(NULL, ARRAY['user'], ARRAY['hi'])`, nil, "22004"},
		{`SELECT mneme.extractive_summary($1, ARRAY['user'], NULL)`, []any{conv}, "22004"},
		{`SELECT mneme.extractive_summary($1, ARRAY['user', 'assistant'], ARRAY['hi'])`, []any{conv}, "22023"},
		{`SELECT mneme.extractive_summary($1, ARRAY['user'], ARRAY['hi'], 0)`, []any{conv}, "22023"},
		{`SELECT mneme.extractive_summary($1, ARRAY['user'], ARRAY['hi'], 101)`, []any{conv}, "22023"},
	} {
		_, err := db.Pool.Exec(ctx, c.q, c.args...)
		require.Equal(t, c.code, sqlState(t, err), c.q)
	}
}

// The offline segment job gives each episode the extractive summary of its
// messages (all of a job's episodes in one query).
func TestSegmentedEpisodesGetExtractiveSummaries(t *testing.T) {
	t.Parallel()
	e := newPipelineEnv(t, false)
	e.session(day1, rustSession)
	e.segmentNow()
	e.drain()
	n := e.count(`SELECT count(*) FROM mneme.memories WHERE conversation_id = $1 AND kind = 'episodic'`, e.conv)
	require.Positive(t, n)
	require.Equal(t, n, e.count(`SELECT count(*) FROM mneme.memories m WHERE m.conversation_id = $1 AND m.kind = 'episodic'
		AND m.summary IS NOT DISTINCT FROM mneme.extractive_summary(m.conversation_id,
			ARRAY(SELECT msg.role FROM mneme.messages msg WHERE msg.conversation_id = m.conversation_id AND msg.id = ANY (m.source_message_ids) ORDER BY msg.id),
			ARRAY(SELECT msg.content FROM mneme.messages msg WHERE msg.conversation_id = m.conversation_id AND msg.id = ANY (m.source_message_ids) ORDER BY msg.id))
		AND m.summary IS NOT NULL`, e.conv), "every episode carries its extractive summary")
}
