package metrics

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/mneme-memory/mneme/sidecar/jobs"
)

func TestTextFormat(t *testing.T) {
	r := New()
	s := Sidecar{R: r}
	s.Claimed("segment", 3*time.Millisecond)
	s.Finished("segment", jobs.OutcomeDone, 20*time.Millisecond)
	s.Finished("segment", jobs.OutcomeRetried, time.Second)
	s.LLM("chat", 2*time.Second, errors.New("503"))
	r.Gauge("mneme_jobs", "Jobs by kind and state.", []string{"kind", "state"}, func() ([]Sample, error) {
		return []Sample{{Labels: []string{"segment", "pending"}, Value: 4}}, nil
	})
	var b strings.Builder
	require.NoError(t, r.Write(&b))
	out := b.String()
	for _, want := range []string{
		"# TYPE mneme_jobs_claimed_total counter\nmneme_jobs_claimed_total{kind=\"segment\"} 1\n",
		"mneme_jobs_done_total{kind=\"segment\"} 1\n",
		"mneme_jobs_retried_total{kind=\"segment\"} 1\n",
		"# TYPE mneme_job_claim_wait_seconds histogram\n",
		"mneme_job_claim_wait_seconds_bucket{kind=\"segment\",le=\"0.0025\"} 0\n",
		"mneme_job_claim_wait_seconds_bucket{kind=\"segment\",le=\"0.005\"} 1\n",
		"mneme_job_claim_wait_seconds_bucket{kind=\"segment\",le=\"+Inf\"} 1\n",
		"mneme_job_claim_wait_seconds_count{kind=\"segment\"} 1\n",
		"mneme_llm_errors_total{op=\"chat\"} 1\n",
		"mneme_llm_request_seconds_sum{op=\"chat\"} 2\n",
		"# TYPE mneme_jobs gauge\nmneme_jobs{kind=\"segment\",state=\"pending\"} 4\n",
	} {
		require.Contains(t, out, want)
	}
	require.Equal(t, 1.0, r.Counter("mneme_jobs_done_total", "segment"))
}
