package recall

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/mneme-memory/mneme/sidecar/dbtest"
)

func TestMain(m *testing.M) { dbtest.Main(m) }

func TestBM25Baseline(t *testing.T) {
	t.Parallel()
	db := dbtest.New(t)
	ctx := context.Background()
	texts := []string{
		"the cat sat on the mat",
		"dogs and cats play",
		"a dog barks",
		"the weather is nice",
	}
	docs := make([]Doc, len(texts))
	for i, s := range texts {
		docs[i] = Doc{Words: Words(s), Turns: []DocTurn{{ID: string(rune('A' + i)), End: Words(s)}}}
	}
	ix, err := newBM25Index(ctx, db.Pool, texts, docs)
	require.NoError(t, err)
	ids := func(q string) string {
		ranked, err := ix.rank(ctx, q)
		require.NoError(t, err)
		var s string
		for _, d := range ranked {
			s += d.Turns[0].ID
		}
		return s
	}
	require.Equal(t, "AB", ids("cats"), "stemmed: cats meets cat; a tie keeps document order")
	require.Equal(t, "CB", ids("dog"), "the shorter document wins a tie in tf and idf")
	require.Equal(t, "", ids("the of and"), "stop words match nothing")
	require.Equal(t, "BCA", ids("dog cat play"), "all three terms first; then the shorter of two equal matches")
}
