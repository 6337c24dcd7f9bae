package bench

import (
	"context"
	"fmt"
	mrand "math/rand/v2"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/mneme-memory/mneme/sidecar/pghybrid"
)

// ContextResult times mneme.context_items on a conversation of episodes
// (each with its messages), the way the segment pipeline leaves one.
type ContextResult struct {
	Episodes  int       `json:"episodes"`
	Messages  int       `json:"messages_per_episode"`
	Budget    int       `json:"budget_words"`
	MeanWords float64   `json:"mean_words"`
	Items     Latencies `json:"context_items"`
	Markdown  Latencies `json:"context_markdown"` // mneme.context, record => false
	// Hybrid is the baseline of the evaluations (package pghybrid): the
	// hybrid_search people copy, over the same conversation's messages,
	// top HybridK turns, the query embedded in SQL like context_items's.
	// Search is mneme.search for the context's candidates (setting
	// context_candidates): the part of context_items that ranks memories.
	Search       Latencies `json:"search_candidates"`
	Hybrid       Latencies `json:"pg_hybrid"`
	HybridK      int       `json:"pg_hybrid_match_count"`
	HybridVector string    `json:"pg_hybrid_vector"` // pgvector or array
}

// contextMessages is the length of a benchmark episode.
const contextMessages = 6

// hybridMatchCount is the hybrid baseline's match_count: the evaluations'
// (more turns than a 1,000-word context holds).
const hybridMatchCount = 100

// runContextBench adds a conversation of `episodes` episodes of
// contextMessages messages (words of the corpus's memories, one hour
// apart) through add_message and mneme.create_episode, then times a
// 1,000-word context for queries drawn like the retrieval queries.
func runContextBench(ctx context.Context, conn *pgx.Conn, c *benchCorpus, episodes, queries int) (*ContextResult, error) {
	out := &ContextResult{Episodes: episodes, Messages: contextMessages, Budget: 1000}
	conv := uuid.New()
	r := mrand.New(mrand.NewPCG(11, 11))
	start := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	var words []string // the words the conversation uses, for its queries
	for e := 0; e < episodes; e++ {
		err := pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
			ids := make([]int64, contextMessages)
			var lines []string
			for m := range ids {
				w := c.words[r.IntN(len(c.words))]
				text := strings.Join(w, " ")
				words = append(words, w...)
				role := []string{"user", "assistant"}[m%2]
				at := start.Add(time.Duration(e)*time.Hour + time.Duration(m)*time.Minute)
				if err := tx.QueryRow(ctx, `SELECT mneme.add_message($1, $2, $3, $4)`, conv, role, text, at).Scan(&ids[m]); err != nil {
					return fmt.Errorf("add_message: %w", err)
				}
				lines = append(lines, role+": "+text)
			}
			content := strings.Join(lines, "\n")
			_, err := tx.Exec(ctx, `SELECT mneme.create_episode($1, $2, $3, $4, mneme.hash_embed($3), 0, 'general', false, 900, 5)`,
				conv, ids, content, lines[0])
			return err
		})
		if err != nil {
			return nil, fmt.Errorf("context conversation: %w", err)
		}
	}
	if _, err := conn.Exec(ctx, `DELETE FROM mneme.jobs WHERE conversation_id = $1`, conv); err != nil {
		return nil, err
	}
	if _, err := conn.Exec(ctx, `VACUUM ANALYZE mneme.messages`); err != nil {
		return nil, err
	}
	// The hybrid baseline over the same messages, in its own table.
	hybrid, err := pghybrid.New(ctx, conn, nil)
	if err != nil {
		return nil, err
	}
	rows, err := conn.Query(ctx, `SELECT id::text, role, content FROM mneme.messages WHERE conversation_id = $1 ORDER BY id`, conv)
	if err != nil {
		return nil, fmt.Errorf("context conversation messages: %w", err)
	}
	turns, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (pghybrid.Turn, error) {
		var t pghybrid.Turn
		return t, r.Scan(&t.DiaID, &t.Speaker, &t.Content)
	})
	if err != nil {
		return nil, fmt.Errorf("context conversation messages: %w", err)
	}
	if err := hybrid.Add(ctx, conv.String(), turns); err != nil {
		return nil, err
	}
	if _, err := conn.Exec(ctx, `VACUUM ANALYZE eval_baseline.turns`); err != nil {
		return nil, err
	}
	out.HybridK, out.HybridVector = hybridMatchCount, hybrid.Vector
	warmup := min(10, 1+queries/5)
	var cands int
	if err := conn.QueryRow(ctx, `SELECT mneme.setting('context_candidates')::int`).Scan(&cands); err != nil {
		return nil, fmt.Errorf("read setting context_candidates: %w", err)
	}
	var items, md, hyb, search []float64
	totalWords := 0
	for i := 0; i < queries+warmup; i++ {
		q := strings.Join([]string{words[r.IntN(len(words))], words[r.IntN(len(words))], words[r.IntN(len(words))]}, " ")
		t0 := time.Now()
		var n int
		if err := conn.QueryRow(ctx, `SELECT coalesce(sum(words), 0) FROM mneme.context_items($1, $2, 1000)`, conv, q).Scan(&n); err != nil {
			return nil, fmt.Errorf("context_items: %w", err)
		}
		t1 := time.Now()
		var s string
		if err := conn.QueryRow(ctx, `SELECT mneme.context($1, $2, 1000, record => false)`, conv, q).Scan(&s); err != nil {
			return nil, fmt.Errorf("context: %w", err)
		}
		t2 := time.Now()
		if _, err := hybrid.Search(ctx, conv.String(), q, hybridMatchCount); err != nil {
			return nil, err
		}
		t3 := time.Now()
		if _, err := conn.Exec(ctx, `SELECT count(*) FROM mneme.search($1, $2, $3)`, conv, q, cands); err != nil {
			return nil, fmt.Errorf("search: %w", err)
		}
		if i >= warmup {
			items = append(items, float64(t1.Sub(t0).Microseconds())/1000)
			md = append(md, float64(t2.Sub(t1).Microseconds())/1000)
			hyb = append(hyb, float64(t3.Sub(t2).Microseconds())/1000)
			search = append(search, float64(time.Since(t3).Microseconds())/1000)
			totalWords += n
		}
	}
	if err := hybrid.Delete(ctx, conv.String()); err != nil {
		return nil, err
	}
	// Gone again: a kept database holds the retrieval benchmark's memories only.
	for _, q := range []string{`DELETE FROM mneme.memories WHERE conversation_id = $1`,
		`DELETE FROM mneme.message_queue WHERE id = $1`} {
		if _, err := conn.Exec(ctx, q, conv); err != nil {
			return nil, fmt.Errorf("context conversation: %w", err)
		}
	}
	out.Items, out.Markdown, out.Hybrid, out.Search = percentiles(items), percentiles(md), percentiles(hyb), percentiles(search)
	out.MeanWords = float64(totalWords) / float64(queries)
	return out, nil
}
