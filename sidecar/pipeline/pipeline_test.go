package pipeline

import (
	"fmt"
	"log/slog"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/mneme-memory/mneme/sidecar/jobs"
)

var testSettings = settings{Window: 3, EpisodeMin: 4, EpisodeMax: 14, ShiftSimilarity: 0.10, SummarySents: 2,
	DefaultRating: "hard", Thresholds: map[string]float64{"hard": 0.04, "good": 0.09, "easy": 0.25}}

// topics returns one unit vector per message: topic k is axis k.
func topics(ks ...int) [][]float32 {
	out := make([][]float32, len(ks))
	for i, k := range ks {
		v := make([]float32, 8)
		v[k] = 1
		out[i] = v
	}
	return out
}

func rep(k, n int) []int {
	out := make([]int, n)
	for i := range out {
		out[i] = k
	}
	return out
}

func cat(xs ...[]int) []int {
	var out []int
	for _, x := range xs {
		out = append(out, x...)
	}
	return out
}

func TestCutEpisodesAtTopicShift(t *testing.T) {
	// An open session: six messages on topic 0, then five on topic 1. The
	// shift is cut; the open episode on topic 1 stays queued.
	require.Equal(t, [][2]int{{0, 6}}, cutEpisodes(topics(cat(rep(0, 6), rep(1, 5))...), false, testSettings))
	// Four after it: the boundary one later is not judged with its full
	// window yet (a later message could make it the weaker one): wait.
	require.Empty(t, cutEpisodes(topics(cat(rep(0, 6), rep(1, 4))...), false, testSettings))
	// Only two messages after the shift: not a full window yet, wait.
	require.Empty(t, cutEpisodes(topics(cat(rep(0, 6), rep(1, 2))...), false, testSettings))
	// Forced: both episodes stored.
	require.Equal(t, [][2]int{{0, 6}, {6, 10}}, cutEpisodes(topics(cat(rep(0, 6), rep(1, 4))...), true, testSettings))
	// Forced with a short tail: it joins the episode before it.
	require.Equal(t, [][2]int{{0, 8}}, cutEpisodes(topics(cat(rep(0, 6), rep(1, 2))...), true, testSettings))
	// A shift before episode_min messages is not a cut.
	require.Empty(t, cutEpisodes(topics(cat(rep(0, 2), rep(1, 5))...), false, testSettings))
	// Three topics in a forced cut of 30 messages.
	require.Equal(t, [][2]int{{0, 10}, {10, 20}, {20, 30}}, cutEpisodes(topics(cat(rep(0, 10), rep(1, 10), rep(2, 10))...), true, testSettings))
}

func TestCutEpisodesMaxLength(t *testing.T) {
	// One topic for 20 messages: a check job cuts at episode_max and keeps
	// the rest open; a forced one stores both parts.
	got := cutEpisodes(topics(rep(0, 20)...), false, testSettings)
	require.Len(t, got, 1)
	require.Equal(t, 0, got[0][0])
	require.LessOrEqual(t, got[0][1], 14)
	require.GreaterOrEqual(t, got[0][1], 4)
	got = cutEpisodes(topics(rep(0, 20)...), true, testSettings)
	require.Equal(t, 20, got[len(got)-1][1])
	for _, sp := range got {
		require.LessOrEqual(t, sp[1]-sp[0], 14)
	}
	// An open session of exactly episode_max messages waits: where its
	// weakest boundary is depends on the messages after it.
	require.Empty(t, cutEpisodes(topics(rep(0, 14)...), false, testSettings))
	// Closed, it is one episode.
	require.Equal(t, [][2]int{{0, 14}}, cutEpisodes(topics(rep(0, 14)...), true, testSettings))
}

// TestCutEpisodesIsPrefixStable: a session segmented piece by piece as its
// messages arrive (the open session checked after every arrival, what it
// stores consumed, the rest checked again, then closed) gives the episodes
// of the whole session segmented at once: the offline segmenter's episodes
// depend on the messages, not on when the jobs ran. Random topics with
// noise, random arrival batches, two settings.
func TestCutEpisodesIsPrefixStable(t *testing.T) {
	rng := rand.New(rand.NewPCG(37, 1))
	for _, set := range []settings{testSettings, {Window: 2, EpisodeMin: 4, EpisodeMax: 8, ShiftSimilarity: 0.10},
		{Window: 1, EpisodeMin: 1, EpisodeMax: 3, ShiftSimilarity: 0.5}} {
		for trial := range 300 {
			n := 1 + rng.IntN(60)
			embs := make([][]float32, n)
			topic := 0
			for i := range embs {
				if rng.IntN(6) == 0 {
					topic = rng.IntN(4)
				}
				v := make([]float32, 8)
				v[topic] = 1
				for k := range v {
					v[k] += float32(rng.NormFloat64() * 0.4)
				}
				embs[i] = v
			}
			want := cutEpisodes(embs, true, set)
			var got [][2]int
			start, seen := 0, 0
			for seen < n {
				seen = min(n, seen+1+rng.IntN(6))
				for _, sp := range cutEpisodes(embs[start:seen], false, set) {
					got = append(got, [2]int{start + sp[0], start + sp[1]})
				}
				if len(got) > 0 {
					start = got[len(got)-1][1]
				}
			}
			for _, sp := range cutEpisodes(embs[start:], true, set) {
				got = append(got, [2]int{start + sp[0], start + sp[1]})
			}
			require.Equal(t, want, got, "settings %+v, trial %d, %d messages", set, trial, n)
		}
	}
}

func TestReviewHeuristic(t *testing.T) {
	rust, weather := uuid.New(), uuid.New()
	targets := []target{
		{ID: rust, Summary: "user wants to learn Rust; the borrow checker and lifetimes are hard; reads the Rust book and does rustlings",
			Content: "user: I want to learn Rust. assistant: try rustlings and the book chapter on ownership and lifetimes.", Queries: []string{"rust"}},
		{ID: weather, Summary: "user asked about the weather in Berlin this weekend: sunny, 24 degrees",
			Content: "user: how is the weather in Berlin? assistant: sunny and warm.", Queries: []string{"rust"}},
	}
	convo := []message{
		{Role: "user", Content: "I finished the rustlings exercises on ownership today."},
		{Role: "assistant", Content: "Nice! Lifetimes are next; the book chapter helps."},
		{Role: "user", Content: "The borrow checker finally makes sense."},
	}
	got := reviewHeuristic(convo, targets, testSettings.Thresholds)
	require.Contains(t, []string{"good", "easy"}, got[rust])
	require.Equal(t, "again", got[weather])

	// Query words are not evidence of use: a memory sharing only the
	// query's words with the conversation is "again".
	q := []target{{ID: weather, Summary: "Berlin weather", Content: "weather in Berlin", Queries: []string{"weather Berlin"}}}
	require.Equal(t, "again", reviewHeuristic([]message{{Role: "user", Content: "what about the weather in Berlin?"}}, q, testSettings.Thresholds)[weather])
}

func TestAggregateKeepsEveryQuery(t *testing.T) {
	a, b := uuid.New(), uuid.New()
	order, qs := aggregate([]jobs.PendingReview{
		{Query: "q1", MemoryIDs: []string{a.String(), b.String()}},
		{Query: "q2", MemoryIDs: []string{b.String(), "not-a-uuid"}},
		{Query: "q1", MemoryIDs: []string{a.String()}},
	}, slog.New(slog.DiscardHandler))
	require.Equal(t, []uuid.UUID{a, b}, order)
	require.Equal(t, []string{"q1", "q1"}, qs[a])
	require.Equal(t, []string{"q1", "q2"}, qs[b])
}

func TestReviewMessageFormat(t *testing.T) {
	id := uuid.MustParse("3f1c0d3e-8d6a-4c55-9a59-0f3c2b1a9e77")
	got := reviewMessage([]message{{Role: "user", Content: `say "hi"`}},
		[]target{{ID: id, Summary: "a summary", Queries: []string{"q one", "q two"}}})
	require.Equal(t, "## Conversation Context\n- user: \"say \\\"hi\\\"\"\n\n## Retrieved Memories\n\n"+
		"### Memory 3f1c0d3e-8d6a-4c55-9a59-0f3c2b1a9e77\n**Summary:** a summary\n**Matched queries:** \"q one\", \"q two\"\n", got)
}

func TestSegmentDecisionValidate(t *testing.T) {
	ok := segmentDecision{Action: "create", Summary: "s", Surprise: 0.3, Label: "project_mneme"}
	require.NoError(t, ok.Validate())
	for _, bad := range []segmentDecision{
		{Action: "maybe"},
		{Action: "create", Summary: "", Label: "general"},
		{Action: "create", Summary: "s", Surprise: 1.5, Label: "general"},
	} {
		require.Error(t, bad.Validate(), "%+v", bad)
	}
	// A label outside the vocabulary is not the model's failure: SQL chooses
	// one (tests/labels_test.go TestLLMLabelOutsideVocabulary).
	odd := segmentDecision{Action: "create", Summary: "s", Label: "Project X"}
	require.NoError(t, odd.Validate())
	skip := segmentDecision{Action: "skip"}
	require.NoError(t, skip.Validate())
}

func TestMatchedQueries(t *testing.T) {
	require.Equal(t, `"a" (2 times), "b"`, matchedQueries([]string{"a", "b", "a"}))
	var many []string
	for i := range 25 {
		many = append(many, fmt.Sprint("q", i))
	}
	got := matchedQueries(append(many, "q0"))
	require.True(t, strings.HasPrefix(got, `"q0" (2 times), "q1", `))
	require.True(t, strings.HasSuffix(got, `"q19", and 5 more (26 matches in all)`), got)
}

// TestCutEpisodesOpenMaxMessagesProgresses: with the default settings an
// open session of segment_max_messages (30) messages always has an episode
// the offline segmenter can store, so the job never has to store it whole
// (the one timing-dependent fallback, docs/pipelines.md).
func TestCutEpisodesOpenMaxMessagesProgresses(t *testing.T) {
	rng := rand.New(rand.NewPCG(37, 3))
	defaults := settings{Window: 2, EpisodeMin: 4, EpisodeMax: 8, ShiftSimilarity: 0.10}
	for trial := range 1000 {
		embs := make([][]float32, 30)
		for i := range embs {
			v := make([]float32, 8)
			for k := range v {
				v[k] = float32(rng.NormFloat64())
			}
			embs[i] = v
		}
		require.NotEmpty(t, cutEpisodes(embs, false, defaults), "trial %d", trial)
	}
}
