package ui

import (
	"bytes"
	"context"
	"fmt"
	"html/template"
	"math"
	"net/http"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/mneme-memory/mneme/client"
	"github.com/mneme-memory/mneme/sidecar/plot"
)

// The LLM usage page (/usage) and the per-conversation usage line: what
// the model calls of the sidecar's jobs cost, from mneme.llm_usage and
// mneme.conversation_llm_usage (docs/sidecar.md, "LLM usage ledger"). An
// admin bound to no tenant that chose none sees every tenant; with a
// tenant chosen, or as a bound login, that tenant.

// UsageRow is one row of mneme.llm_usage.
type UsageRow struct {
	Key              string
	Calls            int64
	FailedCalls      int64
	EstimatedCalls   int64
	PromptTokens     int64
	CompletionTokens int64
	AvgLatencyMS     *float64
	EstimatedCost    float64
}

// ConversationUsage is one conversation's line.
type ConversationUsage struct {
	Calls, FailedCalls, PromptTokens, CompletionTokens int64
	EstimatedCost                                      float64
}

type usageData struct {
	Days                             int
	Since, Until                     time.Time
	Total                            UsageRow
	ByTenant, ByKind, ByModel, ByDay []UsageRow
	Tables                           []usageTable
	Plot                             template.HTML
}

// usageTable is one of the page's tables: its element id, heading, rows.
type usageTable struct {
	ID, Head string
	Rows     []UsageRow
}

// usageDays is how far back the page looks: ?days= (1 to 366), else 30.
func usageDays(r *http.Request) int {
	var n int
	if _, err := fmt.Sscanf(r.URL.Query().Get("days"), "%d", &n); err != nil || n < 1 || n > 366 {
		return 30
	}
	return n
}

func (s *Server) pageUsage(w http.ResponseWriter, r *http.Request) {
	d := usageData{Days: usageDays(r), Until: s.now().UTC()}
	d.Since = d.Until.Truncate(24*time.Hour).AddDate(0, 0, 1-d.Days)
	err := s.inTx(r.Context(), r, true, func(tx pgx.Tx) error {
		for _, g := range []struct {
			by  string
			out *[]UsageRow
		}{{"tenant", &d.ByTenant}, {"kind", &d.ByKind}, {"model", &d.ByModel}, {"day", &d.ByDay}} {
			var err error
			if *g.out, err = readUsage(r.Context(), tx, d.Since, d.Until, g.by); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		s.fail(w, r, err)
		return
	}
	for _, u := range d.ByTenant {
		d.Total.Calls += u.Calls
		d.Total.FailedCalls += u.FailedCalls
		d.Total.EstimatedCalls += u.EstimatedCalls
		d.Total.PromptTokens += u.PromptTokens
		d.Total.CompletionTokens += u.CompletionTokens
		d.Total.EstimatedCost += u.EstimatedCost
	}
	d.Tables = []usageTable{{"by-tenant", "tenant", d.ByTenant}, {"by-kind", "job kind", d.ByKind},
		{"by-model", "model", d.ByModel}, {"by-day", "day (UTC)", d.ByDay}}
	if len(d.ByDay) > 0 {
		if d.Plot, err = usagePlot(d.ByDay, d.Since, d.Until); err != nil {
			s.fail(w, r, err)
			return
		}
	}
	s.render(w, r, http.StatusOK, "usage", page{Title: "LLM usage", Data: d})
}

func readUsage(ctx context.Context, tx pgx.Tx, since, until time.Time, by string) ([]UsageRow, error) {
	rows, err := client.InTx(tx).LLMUsage(ctx, since, until, by)
	if err != nil {
		return nil, fmt.Errorf("llm usage by %s: %w", by, err)
	}
	out := make([]UsageRow, len(rows))
	for i, u := range rows {
		out[i] = UsageRow{Key: u.Key, Calls: u.Calls, FailedCalls: u.FailedCalls, EstimatedCalls: u.EstimatedCalls,
			PromptTokens: u.PromptTokens, CompletionTokens: u.CompletionTokens, AvgLatencyMS: u.AvgLatencyMS,
			EstimatedCost: u.EstimatedCost}
	}
	return out, nil
}

// conversationUsage is the conversation's usage line (nil: no model call).
func conversationUsage(ctx context.Context, tx pgx.Tx, id uuid.UUID) (*ConversationUsage, error) {
	c, err := client.InTx(tx).ConversationLLMUsage(ctx, id)
	if err != nil {
		return nil, fmt.Errorf("conversation llm usage: %w", err)
	}
	if c.Calls == 0 {
		return nil, nil
	}
	return &ConversationUsage{Calls: c.Calls, FailedCalls: c.FailedCalls, PromptTokens: c.PromptTokens,
		CompletionTokens: c.CompletionTokens, EstimatedCost: c.EstimatedCost}, nil
}

// usagePlot draws prompt and completion tokens per day (UTC), a day with
// no call at 0.
func usagePlot(days []UsageRow, since, until time.Time) (template.HTML, error) {
	byDay := map[string]UsageRow{}
	for _, u := range days {
		byDay[u.Key] = u
	}
	var prompt, completion plot.Series
	prompt.Label, completion.Label = "prompt tokens", "completion tokens"
	var xticks []float64
	top := 0.0
	n := int(until.Sub(since).Hours()/24) + 1
	step := max(1, n/8)
	for i := 0; i < n; i++ {
		u := byDay[since.AddDate(0, 0, i).Format("2006-01-02")]
		x := float64(i)
		prompt.X, prompt.Y = append(prompt.X, x), append(prompt.Y, float64(u.PromptTokens))
		completion.X, completion.Y = append(completion.X, x), append(completion.Y, float64(u.CompletionTokens))
		top = math.Max(top, math.Max(float64(u.PromptTokens), float64(u.CompletionTokens)))
		if i%step == 0 {
			xticks = append(xticks, x)
		}
	}
	c := plot.Chart{
		Title: "LLM tokens per day (UTC)", XLabel: "day", YLabel: "tokens",
		XTicks: xticks, YTicks: niceTicks(top),
		XFormat: func(v float64) string { return since.AddDate(0, 0, int(v)).Format("01-02") },
		YFormat: func(v float64) string { return fmt.Sprintf("%.0f", v) },
		Series:  []plot.Series{prompt, completion},
	}
	var b bytes.Buffer
	if err := c.WriteSVG(&b); err != nil {
		return "", err
	}
	return template.HTML(b.String()), nil // plot escapes every text it writes
}

// niceTicks are 0 and five steps of 1, 2 or 5 times a power of ten up to
// at least top.
func niceTicks(top float64) []float64 {
	if top <= 0 {
		return []float64{0, 1}
	}
	raw := top / 5
	p := math.Pow(10, math.Floor(math.Log10(raw)))
	step := p * 10
	for _, m := range []float64{1, 2, 5} {
		if m*p >= raw {
			step = m * p
			break
		}
	}
	var out []float64
	for v := 0.0; v < top+step; v += step {
		out = append(out, v)
	}
	return out
}
