package tests

import (
	"context"
	"math"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/mneme-memory/mneme/sidecar/backoff"
	"github.com/mneme-memory/mneme/sidecar/config"
	"github.com/mneme-memory/mneme/sidecar/dbtest"
	"github.com/mneme-memory/mneme/sidecar/embed"
	"github.com/mneme-memory/mneme/sidecar/llm/llmtest"
)

// meaningConcepts are the fake embedder's paraphrase groups: a text that
// holds a word of a group lies close to the group's direction, whatever
// else it says; any other text gets an unrelated vector.
var meaningConcepts = [][]string{
	{"puppy", "dog", "biscuit"},
	{"violin", "fiddle", "bowing"},
}

// conceptVector is the fake embedder: a group's direction (its own axis)
// plus a little of the text's own deterministic vector.
func conceptVector(text string, dim int) []float32 {
	own := llmtest.Vector(text, dim)
	t := strings.ToLower(text)
	for i, words := range meaningConcepts {
		for _, w := range words {
			if strings.Contains(t, w) {
				v := make([]float32, dim)
				var norm float64
				for j := range v {
					v[j] = 0.1 * own[j]
					if j == i {
						v[j] += 1
					}
					norm += float64(v[j]) * float64(v[j])
				}
				for j := range v {
					v[j] /= float32(math.Sqrt(norm))
				}
				return v
			}
		}
	}
	return own
}

// meaningSessions: four days of talk; on the third, in the middle of a long
// episode, the one turn that says what the question asks, in words the
// question does not use.
var meaningSessions = [][][2]string{
	{{"user", "The billing tables move to PostgreSQL on Saturday night"}, {"assistant", "Is the runbook reviewed?"},
		{"user", "Priya reviews the runbook tomorrow morning"}, {"assistant", "Rollback restores the snapshot"},
		{"user", "The old system ran on Oracle for ten years"}, {"assistant", "Quite a migration then"}},
	{{"user", "Tomatoes and basil go in the south bed this year"}, {"assistant", "The soil wants compost before April"},
		{"user", "My neighbour gave us rhubarb crowns"}, {"assistant", "Rhubarb likes a sunny corner"},
		{"user", "Slugs ate all the lettuce last summer"}, {"assistant", "Copper tape keeps slugs away"}},
	{{"user", "We drove to the coast on the weekend"}, {"assistant", "How was the weather there?"},
		{"user", "Windy but bright, the kids flew kites"}, {"assistant", "Kites love a steady breeze"},
		{"user", "We finally brought home a little puppy and named him Biscuit"}, {"assistant", "Congratulations, what breed?"},
		{"user", "A beagle mix from the shelter near the harbour"}, {"assistant", "Beagles are friendly and curious"}},
	{{"user", "The quarterly report is due next Friday"}, {"assistant", "Which numbers are still missing?"},
		{"user", "Sales for March and the marketing spend"}, {"assistant", "Finance sends those on Wednesday"},
		{"user", "Then I write the summary on Thursday"}, {"assistant", "That leaves a day for review"}},
}

// meaningConversation writes the sessions a day apart and segments them.
func meaningConversation(e *pipelineEnv) {
	ctx := context.Background()
	_, err := e.db.Pool.Exec(ctx, `SELECT mneme.set_setting('segment_shift_similarity', '-1')`)
	require.NoError(e.t, err)
	for i, s := range meaningSessions {
		e.session(day1.Add(time.Duration(i)*24*time.Hour), s)
	}
	_, err = e.db.Pool.Exec(ctx, `SELECT mneme.segment_now($1)`, e.conv)
	require.NoError(e.t, err)
	e.drain()
	require.Zero(e.t, e.count(`SELECT count(*) FROM mneme.jobs WHERE state = 'failed'`))
}

// TestContextFindsTurnsByMeaning: a question that shares no word with the
// turn that answers it finds that turn when an external embedder is
// configured (the segment job embeds every message of its episodes, the
// context ranks the turns by cosine beside BM25), and does not offline.
func TestContextFindsTurnsByMeaning(t *testing.T) {
	t.Parallel()
	const question = "Does the family own a dog?"
	const budget = 40
	ctx := context.Background()
	holds := func(items []contextItem, id int64) bool {
		for _, it := range items {
			if slices.Contains(it.Messages, id) {
				return true
			}
		}
		return false
	}
	evidence := func(e *pipelineEnv) int64 {
		var id int64
		require.NoError(t, e.db.Pool.QueryRow(ctx, `SELECT id FROM mneme.messages WHERE conversation_id = $1 AND content LIKE '%puppy%'`,
			e.conv).Scan(&id))
		return id
	}

	for _, variant := range variants(t) {
		t.Run(variant, func(t *testing.T) {
			t.Parallel()
			// With the embedder: the real go-openai client against a fake server.
			e := newPipelineEnv(t, false, dbtest.WithVector(variant))
			srv := llmtest.New(t)
			srv.Vectors(conceptVector)
			e.deps.Embedder = embed.NewOpenAI(config.Endpoint{BaseURL: srv.URL(), Model: "fake-embed", APIKey: "k"}, config.DefaultEmbedDim)
			_, err := e.db.Pool.Exec(ctx, `SELECT mneme.set_setting('embedder', '"external"')`)
			require.NoError(t, err)
			meaningConversation(e)
			require.Zero(t, e.count(`SELECT count(*) FROM mneme.messages WHERE conversation_id = $1 AND embedding IS NULL`, e.conv),
				"every message of an episode has its embedding")
			id := evidence(e)
			rows, err := e.db.Pool.Query(ctx, `
				SELECT item, memory_id, kind, coalesce(message_ids, '{}'), words, text
				FROM mneme.context_items($1, $2, $3, query_embedding => $4)`, e.conv, question, budget, conceptVector(question, config.DefaultEmbedDim))
			require.NoError(t, err)
			items, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (contextItem, error) {
				var c contextItem
				return c, r.Scan(&c.Item, &c.MemoryID, &c.Kind, &c.Messages, &c.Words, &c.Text)
			})
			require.NoError(t, err)
			require.True(t, holds(items, id), "found by meaning: %+v", items)
			require.Contains(t, items[0].Text, "puppy", "and placed first")

			// Offline (the built-in hash embedder): no message embeddings,
			// and the same question does not reach the turn.
			off := newPipelineEnv(t, false, dbtest.WithVector(variant))
			meaningConversation(off)
			require.Equal(t, len(off.memories()), len(e.memories()), "the same episodes")
			require.Zero(t, off.count(`SELECT count(*) FROM mneme.messages WHERE embedding IS NOT NULL`))
			require.False(t, holds(off.contextItems(question, budget), evidence(off)), "no shared word, no embedder: not found")
		})
	}
}

// TestMessageEmbeddingFailuresLoseNothing: when the embedder fails, the
// segment job fails before writing anything and is retried; once the
// embedder answers, every message becomes part of an episode with its
// embedding, and none is lost or duplicated.
func TestMessageEmbeddingFailuresLoseNothing(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := newPipelineEnv(t, false)
	srv := llmtest.New(t)
	srv.Vectors(conceptVector)
	// Four failures: every HTTP attempt of the job's first try.
	fail := llmtest.Reply{Status: 500, Content: "overloaded"}
	srv.ScriptEmbed(fail, fail, fail, fail)
	e.deps.Embedder = embed.NewOpenAI(config.Endpoint{BaseURL: srv.URL(), Model: "fake-embed", APIKey: "k"}, config.DefaultEmbedDim,
		embed.WithBackoff(backoff.Policy{Base: time.Millisecond, Max: 2 * time.Millisecond}))
	_, err := e.db.Pool.Exec(ctx, `SELECT mneme.set_setting('embedder', '"external"')`)
	require.NoError(t, err)
	meaningConversation(e)
	var n int
	for _, s := range meaningSessions {
		n += len(s)
	}
	require.Equal(t, n, e.count(`SELECT count(*) FROM mneme.messages WHERE conversation_id = $1 AND memory_id IS NOT NULL AND embedding IS NOT NULL`, e.conv))
	require.GreaterOrEqual(t, e.count(`SELECT count(*) FROM mneme.jobs WHERE kind = 'segment' AND attempts > 1`), 1, "the job whose embedding failed was retried")
	require.Zero(t, e.count(`SELECT count(*) FROM (SELECT x.id FROM (SELECT unnest(source_message_ids) AS id FROM mneme.memories
		WHERE conversation_id = $1 AND kind = 'episodic') x GROUP BY x.id HAVING count(*) > 1) d`, e.conv), "no message in two episodes")
}

// TestSetMessageEmbeddingBadInput: NULLs, a wrong dimension, a non-finite
// value and an unknown message are refused with their SQLSTATE, and the
// message keeps what it had.
func TestSetMessageEmbeddingBadInput(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := newPipelineEnv(t, false)
	id := e.say(day1.Format(time.RFC3339), "user", "hello there, this is a message")
	good := conceptVector("hello", config.DefaultEmbedDim)
	_, err := e.db.Pool.Exec(ctx, `SELECT mneme.set_message_embedding($1, $2)`, id, good)
	require.NoError(t, err)
	nan := slices.Clone(good)
	nan[3] = float32(math.NaN())
	for _, c := range []struct {
		id    any
		emb   any
		state string
	}{
		{nil, good, "22004"},
		{id, nil, "22004"},
		{id, good[:10], "22023"},
		{id, nan, "22023"},
		{int64(1 << 40), good, "P0002"},
	} {
		_, err := e.db.Pool.Exec(ctx, `SELECT mneme.set_message_embedding($1, $2)`, c.id, c.emb)
		require.Equal(t, c.state, sqlState(t, err))
	}
	var sim float64
	require.NoError(t, e.db.Pool.QueryRow(ctx, `SELECT 1 - mneme.cosine_distance(embedding::real[], $2) FROM mneme.messages WHERE id = $1`,
		id, good).Scan(&sim))
	require.InDelta(t, 1, sim, 1e-5, "the stored embedding is unchanged")
}
