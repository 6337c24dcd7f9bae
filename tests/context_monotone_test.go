package tests

import (
	"context"
	"fmt"
	"math/rand"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestContextBudgetMonotone: a larger budget never loses evidence a smaller
// one had. For randomized conversations (turns of 1 to 60 words from a
// small vocabulary, so that many turns match a query, and facts), random
// queries and random budgets B (seeded, logged), every turn and every
// fact of mneme.context_items at budget B is also in it at budget 2B.
// Greedy packing that leaves out what does not fit was not monotone: with
// 2B a long turn fits early and crowds out a short one B had taken.
func TestContextBudgetMonotone(t *testing.T) {
	t.Parallel()
	seed := rand.Int63()
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewSource(seed))
	vocab := strings.Fields(`violin garden tomato database migration lisbon hotel flight sister teacher
		recital compost billing postgres runbook tram castle basil rhubarb oracle snapshot bow rosin scale
		morning evening week june april summer manager cutover shed barrel lettuce slug custard district`)
	filler := strings.Fields(`the a and of to in we it is was for on with my our that this then so very`)
	sentence := func(n int) string {
		w := make([]string, n)
		for i := range w {
			if rng.Intn(3) == 0 {
				w[i] = vocab[rng.Intn(len(vocab))]
			} else {
				w[i] = filler[rng.Intn(len(filler))]
			}
		}
		return strings.Join(w, " ")
	}
	const conversations = 3
	for c := 0; c < conversations; c++ {
		e := newPipelineEnv(t, false)
		day := day1
		for d := 0; d < 3+rng.Intn(3); d++ {
			turns := 6 + rng.Intn(14)
			for i := 0; i < turns; i++ {
				n := 1 + rng.Intn(20)
				if rng.Intn(5) == 0 {
					n = 20 + rng.Intn(40) // some long turns
				}
				e.say(day.Add(time.Duration(i)*time.Minute).Format(time.RFC3339), []string{"user", "assistant"}[i%2], sentence(n))
			}
			day = day.Add(36 * time.Hour)
		}
		_, err := e.db.Pool.Exec(context.Background(), `SELECT mneme.segment_now($1)`, e.conv)
		require.NoError(t, err)
		e.drain()
		for f := 0; f < 2+rng.Intn(4); f++ {
			_, err := e.db.Pool.Exec(context.Background(), `SELECT mneme.remember($1, $2)`, e.conv, sentence(3+rng.Intn(25)))
			require.NoError(t, err)
		}
		for q := 0; q < 8; q++ {
			query := strings.Join([]string{vocab[rng.Intn(len(vocab))], vocab[rng.Intn(len(vocab))], vocab[rng.Intn(len(vocab))]}, " ")
			b := 100 + rng.Intn(600) // the guarantee holds from 100 words (sql/140-context.sql)
			small, large := evidence(e.contextItems(query, b)), evidence(e.contextItems(query, 2*b))
			for k := range small {
				require.True(t, large[k], "conversation %d, query %q: %s is in the context at %d words and not at %d (seed %d)",
					c, query, k, b, 2*b, seed)
			}
		}
	}
}

// evidence is what a context holds: its turns (message ids) and its facts
// (memory ids).
func evidence(items []contextItem) map[string]bool {
	out := map[string]bool{}
	for _, it := range items {
		if it.Kind == "episodic" {
			for _, m := range it.Messages {
				out[fmt.Sprintf("turn %d", m)] = true
			}
		} else {
			out["fact "+it.MemoryID.String()] = true
		}
	}
	return out
}
