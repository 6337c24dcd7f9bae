package pghybrid

import (
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/mneme-memory/mneme/sidecar/dbtest"
)

func TestMain(m *testing.M) { dbtest.Main(m) }

var pgHybridTurns = []Turn{
	{"D1:1", "Cleo", "I booked a train to Lisbon for the conference"},
	{"D1:2", "Ada", "The weather in Lisbon is sunny in May"},
	{"D1:3", "Cleo", "My cat likes fish and sleeps all day"},
	{"D1:4", "Ada", "We painted the kitchen yellow last weekend"},
}

func dias(ts []Turn) string {
	var out []string
	for _, t := range ts {
		out = append(out, t.DiaID)
	}
	return strings.Join(out, " ")
}

// TestPGHybridVectorLeg: the baseline fuses a full-text leg and a cosine
// leg. A question whose words are not all in one turn (websearch_to_tsquery
// ANDs them) matches no turn in full text, and the cosine leg still ranks
// the conversation's turns, nearest first; a question that matches in full
// text puts that turn first; other conversations never come back; the
// same question ranks alike twice.
func TestPGHybridVectorLeg(t *testing.T) {
	t.Parallel()
	db := dbtest.New(t)
	ctx := context.Background()
	h, err := New(ctx, db.Pool, nil)
	require.NoError(t, err)
	want := "array"
	if dbtest.HasPgvector(t) {
		want = "pgvector"
	}
	require.Equal(t, want, h.Vector)
	require.NoError(t, h.Add(ctx, "a", pgHybridTurns))
	require.NoError(t, h.Add(ctx, "b", []Turn{{"D1:1", "Bo", "train train Lisbon conference tickets"}}))

	var fullText int
	require.NoError(t, db.Pool.QueryRow(ctx, `SELECT count(*) FROM eval_baseline.turns
		WHERE conv = 'a' AND fts @@ websearch_to_tsquery('english', 'which train tickets to Lisbon did Cleo book?')`).Scan(&fullText))
	require.Zero(t, fullText, "every word of the question is required: no turn matches in full text")
	got, err := h.Search(ctx, "a", "which train tickets to Lisbon did Cleo book?", 10)
	require.NoError(t, err)
	require.Len(t, got, 4, "the cosine leg ranks every turn of the conversation, and only of it")
	require.Equal(t, "D1:1", got[0].DiaID, "nearest by the hash embedder: shares train, Lisbon, book")
	again, err := h.Search(ctx, "a", "which train tickets to Lisbon did Cleo book?", 10)
	require.NoError(t, err)
	require.Equal(t, got, again)

	got, err = h.Search(ctx, "a", "Lisbon weather", 10)
	require.NoError(t, err)
	require.Equal(t, "D1:2", got[0].DiaID, "first in both legs")
	got, err = h.Search(ctx, "a", "Lisbon weather", 2)
	require.NoError(t, err)
	require.Len(t, got, 2, "match_count")
}

// axisEmbedder embeds a text on the axis of the first topic it names (a
// kitchen is a place for cooking): the baseline must use the evaluation's
// embedder, not the hash one.
type axisEmbedder struct{ dim int }

func (e axisEmbedder) Embed(_ context.Context, texts []string) ([][]float32, error) {
	out := make([][]float32, len(texts))
	for i, s := range texts {
		v := make([]float32, e.dim)
		v[e.dim-1] = 0.01
	topics:
		for axis, kws := range [][]string{{"kitchen", "cooking"}, {"cat"}, {"Lisbon"}} {
			for _, kw := range kws {
				if strings.Contains(s, kw) {
					v[axis] = 1
					break topics
				}
			}
		}
		out[i] = v
	}
	return out, nil
}

func TestPGHybridUsesTheEmbedder(t *testing.T) {
	t.Parallel()
	db := dbtest.New(t)
	ctx := context.Background()
	var dim int
	require.NoError(t, db.Pool.QueryRow(ctx, `SELECT mneme.setting('embedding_dim')::int`).Scan(&dim))
	h, err := New(ctx, db.Pool, axisEmbedder{dim: dim})
	require.NoError(t, err)
	require.NoError(t, h.Add(ctx, "a", pgHybridTurns))
	// No turn says "cooking" (no full-text match); the embedder puts the
	// question on the kitchen turn's axis.
	got, err := h.Search(ctx, "a", "where is the cooking done?", 10)
	require.NoError(t, err)
	require.Len(t, got, 4)
	require.Equal(t, "D1:4", got[0].DiaID, "the embedder's nearest turn: %s", dias(got))
	got, err = h.Search(ctx, "a", "a cat", 10)
	require.NoError(t, err)
	require.Equal(t, "D1:3", got[0].DiaID, "full text and the embedder agree: %s", dias(got))
}

// TestPGHybridAddRows: turns added by a query in one statement (NULL
// embedding: the hash embedder in SQL) rank as the same turns added one by
// one do; a query that fails adds nothing and says so.
func TestPGHybridAddRows(t *testing.T) {
	t.Parallel()
	db := dbtest.New(t)
	ctx := context.Background()
	h, err := New(ctx, db.Pool, nil)
	require.NoError(t, err)
	require.NoError(t, h.Add(ctx, "a", pgHybridTurns))
	n, err := h.AddRows(ctx, `SELECT 'b', dia_id, speaker, content, NULL::real[] FROM eval_baseline.turns WHERE conv = $1`, "a")
	require.NoError(t, err)
	require.EqualValues(t, len(pgHybridTurns), n)
	for _, q := range []string{"which train tickets to Lisbon did Cleo book?", "Lisbon weather", "the cat"} {
		a, err := h.Search(ctx, "a", q, 10)
		require.NoError(t, err)
		b, err := h.Search(ctx, "b", q, 10)
		require.NoError(t, err)
		require.Equal(t, dias(a), dias(b), q)
	}
	_, err = h.AddRows(ctx, `SELECT 'c', 'x', 'y', 'z', NULL::real[] FROM no_such_table`)
	require.ErrorContains(t, err, "pg_hybrid: add rows")
	var c int
	require.NoError(t, db.Pool.QueryRow(ctx, `SELECT count(*) FROM eval_baseline.turns WHERE conv = 'c'`).Scan(&c))
	require.Zero(t, c)
}
