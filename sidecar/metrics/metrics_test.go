package metrics

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/mneme-memory/mneme/sidecar/jobs"
	"github.com/mneme-memory/mneme/sidecar/usage"
)

func scrape(t *testing.T, r *Registry, accept string) string {
	t.Helper()
	srv := httptest.NewServer(r.Handler())
	defer srv.Close()
	req, err := http.NewRequest(http.MethodGet, srv.URL, nil)
	require.NoError(t, err)
	if accept != "" {
		req.Header.Set("Accept", accept)
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return string(b)
}

// Every metric name of the hand-written exposition (before client_golang)
// still scrapes, with its type and labels, and the standard process and
// Go collectors are there.
func TestOldNamesStillScrape(t *testing.T) {
	r := New()
	s := Sidecar{R: r}
	s.Claimed("segment", 3*time.Millisecond)
	s.Finished("segment", jobs.OutcomeDone, 20*time.Millisecond)
	s.Finished("segment", jobs.OutcomeRetried, time.Second)
	s.Finished("review", jobs.OutcomeFailed, time.Second)
	s.Finished("review", jobs.OutcomeLost, time.Second)
	s.Finished("review", jobs.OutcomeReleased, time.Second)
	s.LLM("chat", 2*time.Second, errors.New("503"))
	s.Embed("embed", time.Second, errors.New("503"))
	r.Gauge(Jobs, func() ([]Sample, error) {
		return []Sample{{Labels: []string{"segment", "pending"}, Value: 4}}, nil
	})
	r.Gauge(SlotRetainedWALBytes, func() ([]Sample, error) {
		return []Sample{{Labels: []string{"mneme", "true"}, Value: 1024}}, nil
	})
	out := scrape(t, r, "")
	for _, want := range []string{
		"# TYPE mneme_jobs_claimed_total counter\nmneme_jobs_claimed_total{kind=\"segment\"} 1\n",
		"mneme_jobs_done_total{kind=\"segment\"} 1\n",
		"mneme_jobs_retried_total{kind=\"segment\"} 1\n",
		"mneme_jobs_failed_total{kind=\"review\"} 1\n",
		"mneme_jobs_lost_total{kind=\"review\"} 1\n",
		"mneme_jobs_released_total{kind=\"review\"} 1\n",
		"# TYPE mneme_job_claim_wait_seconds histogram\n",
		"mneme_job_claim_wait_seconds_bucket{kind=\"segment\",le=\"0.0025\"} 0\n",
		"mneme_job_claim_wait_seconds_bucket{kind=\"segment\",le=\"0.005\"} 1\n",
		"mneme_job_claim_wait_seconds_bucket{kind=\"segment\",le=\"+Inf\"} 1\n",
		"mneme_job_claim_wait_seconds_count{kind=\"segment\"} 1\n",
		"mneme_job_run_seconds_count{kind=\"segment\",outcome=\"done\"} 1\n",
		"mneme_llm_errors_total{op=\"chat\"} 1\n",
		"mneme_llm_request_seconds_sum{op=\"chat\"} 2\n",
		"mneme_embed_errors_total{op=\"embed\"} 1\n",
		"mneme_embed_request_seconds_count{op=\"embed\"} 1\n",
		"# TYPE mneme_jobs gauge\nmneme_jobs{kind=\"segment\",state=\"pending\"} 4\n",
		"mneme_replication_slot_retained_wal_bytes{active=\"true\",slot=\"mneme\"} 1024\n",
		"# TYPE process_cpu_seconds_total counter\n",
		"# TYPE go_goroutines gauge\n",
	} {
		require.Contains(t, out, want)
	}
	require.Equal(t, 1.0, r.Counter(JobsDone, "segment"))
}

// The usage counters: calls, failures and tokens by kind and model; a
// tenant label only when asked for; label values escaped.
func TestUsageCounters(t *testing.T) {
	for _, tenant := range []bool{false, true} {
		r := New(WithTenantLabel(tenant))
		s := Sidecar{R: r}
		s.Usage(context.Background(), usage.Call{JobKind: "segment", Model: `m"1`, Tenant: "acme", Outcome: usage.OutcomeOK,
			PromptTokens: 100, CompletionTokens: 7})
		s.Usage(context.Background(), usage.Call{JobKind: "segment", Model: `m"1`, Tenant: "acme", Outcome: usage.OutcomeTimeout,
			PromptTokens: 50})
		out := scrape(t, r, "")
		suffix := ""
		if tenant {
			suffix = `,tenant="acme"`
		}
		require.Contains(t, out, `mneme_llm_calls_total{kind="segment",model="m\"1"`+suffix+`} 2`)
		require.Contains(t, out, `mneme_llm_call_failures_total{kind="segment",model="m\"1"`+suffix+`} 1`)
		require.Contains(t, out, `mneme_llm_tokens_total{kind="segment",model="m\"1",side="prompt"`+suffix+`} 150`)
		require.Contains(t, out, `mneme_llm_tokens_total{kind="segment",model="m\"1",side="completion"`+suffix+`} 7`)
		require.Equal(t, tenant, strings.Contains(out, "tenant="))
	}
}

// With a trace id in the context, OpenMetrics scrapes carry it as the
// exemplar.
func TestExemplars(t *testing.T) {
	type key struct{}
	r := New(WithExemplars(func(ctx context.Context) string { s, _ := ctx.Value(key{}).(string); return s }))
	ctx := context.WithValue(context.Background(), key{}, "4bf92f3577b34da6a3ce929d0e0e4736")
	Sidecar{R: r}.Usage(ctx, usage.Call{JobKind: "review", Model: "m", Outcome: usage.OutcomeOK, PromptTokens: 3})
	r.Observe(ctx, JobRun, []string{"review", "done"}, time.Second)
	out := scrape(t, r, "application/openmetrics-text; version=1.0.0")
	require.Contains(t, out, `mneme_llm_calls_total{kind="review",model="m"} 1.0 # {trace_id="4bf92f3577b34da6a3ce929d0e0e4736"} 1.0`)
	require.Contains(t, out, `mneme_job_run_seconds_bucket{kind="review",outcome="done",le="1.0"} 1 # {trace_id="4bf92f3577b34da6a3ce929d0e0e4736"} 1.0`)
}

// A gauge whose query fails is left out of that scrape; the rest is served.
func TestGaugeErrorKeepsTheRest(t *testing.T) {
	r := New()
	r.Gauge(Jobs, func() ([]Sample, error) { return nil, errors.New("database unreachable") })
	Sidecar{R: r}.Claimed("segment", time.Millisecond)
	out := scrape(t, r, "")
	require.Contains(t, out, "mneme_jobs_claimed_total")
	require.NotContains(t, out, "mneme_jobs{")
}

// An undeclared name is a programming error, caught here.
func TestUndeclaredNamePanics(t *testing.T) {
	require.Panics(t, func() { New().Add(context.Background(), "mneme_nope_total", nil, 1) })
	require.Panics(t, func() { New().Observe(context.Background(), JobsDone, []string{"x"}, time.Second) })
}

// docs/sidecar.md names every metric of names.go.
func TestMetricNamesDocumented(t *testing.T) {
	doc, err := os.ReadFile("../../docs/sidecar.md")
	require.NoError(t, err)
	for _, n := range Names() {
		require.True(t, strings.Contains(string(doc), "`"+n+"`"), "docs/sidecar.md, Metrics, does not name %s", n)
	}
}

// docs/grafana-mneme.json is a dashboard whose every query names declared
// metrics only.
func TestGrafanaDashboard(t *testing.T) {
	b, err := os.ReadFile("../../docs/grafana-mneme.json")
	require.NoError(t, err)
	var d struct {
		Panels []struct {
			Title   string `json:"title"`
			Targets []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
	}
	require.NoError(t, json.Unmarshal(b, &d))
	require.NotEmpty(t, d.Panels)
	name := regexp.MustCompile(`\bmneme_[a-z_]+`)
	declared := map[string]bool{}
	for _, n := range Names() {
		declared[n] = true
	}
	used := map[string]bool{}
	for _, p := range d.Panels {
		require.NotEmpty(t, p.Targets, p.Title)
		for _, tg := range p.Targets {
			for _, n := range name.FindAllString(tg.Expr, -1) {
				base := strings.TrimSuffix(strings.TrimSuffix(strings.TrimSuffix(n, "_bucket"), "_count"), "_sum")
				require.True(t, declared[base], "%s: %s is not a metric of names.go", p.Title, n)
				used[base] = true
			}
		}
	}
	for _, n := range []string{JobClaimWait, Jobs, JobsFailed, LLMTokens, LLMCalls, LLMCallFailures} {
		require.True(t, used[n], "the dashboard shows %s", n)
	}
}
