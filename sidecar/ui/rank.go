package ui

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/mneme-memory/mneme/client"
)

// rankData answers "why wasn't it retrieved?" for one memory and one
// query: where mneme.search would rank it among its top 100 with each
// factor of its score, its place in the BM25 leg, and whether
// mneme.context_items would keep it within the budget.
type rankData struct {
	Query, Scope string
	// Position in search's top 100, 0: not in them.
	Position, Of int
	Hit          *Hit
	// The factors of the score (search's formula).
	RRFK, RW, CW  float64
	RPow, ConfFac float64
	Top           *Hit // search's first, for comparison
	BM25Rank      int  // in the conversation's BM25 leg (top 1,000), 0: no query word in it
	Candidates    int  // retrieve_candidates: what each leg hands to the fusion
	ContextItem   int  // 0: not in the context
	Budget        int
	Why           []string
}

func rankMemory(ctx context.Context, tx pgx.Tx, m Memory, q, scope string, now time.Time) (*rankData, error) {
	d := &rankData{Query: q, Scope: scope, Budget: 1000}
	hits, err := readSearch(ctx, tx, m.Conversation, q, 100, scope)
	if err != nil {
		return nil, err
	}
	d.Of = len(hits)
	if len(hits) > 0 {
		d.Top = &hits[0]
	}
	if d.RRFK, err = settingOf[float64](ctx, tx, "rrf_k"); err != nil {
		return nil, err
	}
	if d.RW, err = settingOf[float64](ctx, tx, "retrievability_weight"); err != nil {
		return nil, err
	}
	if d.CW, err = settingOf[float64](ctx, tx, "confidence_weight"); err != nil {
		return nil, err
	}
	if d.Candidates, err = settingOf[int](ctx, tx, "retrieve_candidates"); err != nil {
		return nil, err
	}
	raw, err := settingOf[[]byte](ctx, tx, "label_weights")
	if err != nil {
		return nil, err
	}
	weights := map[string]float64{}
	if err := json.Unmarshal(raw, &weights); err != nil {
		return nil, fmt.Errorf("setting label_weights: %w", err)
	}
	for i := range hits {
		hits[i].LabelWeight = labelWeight(weights, hits[i].Label)
		if hits[i].ID == m.ID {
			d.Position = i + 1
			d.Hit = &hits[i]
			d.RPow = math.Pow(hits[i].Retrievability, d.RW)
			d.ConfFac = math.Pow(math.Min(math.Max(float64(hits[i].Confidence), 1e-6), 1), d.CW)
		}
	}
	if d.Top != nil {
		d.Top.LabelWeight = labelWeight(weights, d.Top.Label)
	}
	leg, err := client.InTx(tx).BM25Search(ctx, m.Conversation, q, 1000)
	if err != nil {
		return nil, fmt.Errorf("bm25 rank: %w", err)
	}
	for _, h := range leg {
		if h.MemoryID == m.ID {
			d.BM25Rank = int(h.Rank)
		}
	}
	// The context chooses among search's top context_candidates: a memory
	// ranked below them is not in it (and the call is spared).
	cands, err := settingOf[int](ctx, tx, "context_candidates")
	if err != nil {
		return nil, err
	}
	if d.Position > 0 && d.Position <= cands {
		items, err := readContext(ctx, tx, m.Conversation, q, d.Budget, scope)
		if err != nil {
			return nil, err
		}
		for _, it := range items {
			if it.MemoryID == m.ID {
				d.ContextItem = it.Item
			}
		}
	}
	if m.Status != "active" {
		d.Why = append(d.Why, "it is "+m.Status+": search and context return active memories only")
	}
	if m.ValidUntil != nil && m.ValidUntil.Before(now) {
		d.Why = append(d.Why, "it expired (valid until "+m.ValidUntil.UTC().Format("2006-01-02 15:04 UTC")+")")
	}
	if d.Hit == nil && m.Status == "active" {
		switch {
		case d.BM25Rank == 0:
			d.Why = append(d.Why, "no word of the query is in it (BM25), and the vector leg did not bring it into the top 100")
		case d.BM25Rank > d.Candidates:
			d.Why = append(d.Why, fmt.Sprintf("its BM25 rank %d is beyond the %d candidates each leg hands to the fusion (retrieve_candidates)", d.BM25Rank, d.Candidates))
		default:
			d.Why = append(d.Why, "other memories scored higher: it is below search's top 100")
		}
	}
	switch {
	case d.Hit != nil && d.ContextItem == 0 && d.Position > cands:
		d.Why = append(d.Why, fmt.Sprintf("search ranks it %d; the context chooses among the top %d (context_candidates)", d.Position, cands))
	case d.Hit != nil && d.ContextItem == 0:
		d.Why = append(d.Why, fmt.Sprintf("search ranks it %d; the context of %d words was full before it (or it was a duplicate of an item)", d.Position, d.Budget))
	}
	return d, nil
}
