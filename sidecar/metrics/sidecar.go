package metrics

import (
	"context"
	"time"

	"github.com/mneme-memory/mneme/sidecar/jobs"
	"github.com/mneme-memory/mneme/sidecar/usage"
)

// Sidecar adapts a Registry to the hooks of the job runner and the LLM and
// embedding clients.
type Sidecar struct{ R *Registry }

var _ jobs.Observer = Sidecar{}

// Claimed implements jobs.Observer.
func (s Sidecar) Claimed(kind string, wait time.Duration) {
	s.R.Add(context.Background(), JobsClaimed, []string{kind}, 1)
	s.R.Observe(context.Background(), JobClaimWait, []string{kind}, wait)
}

var outcomeNames = map[string]string{
	jobs.OutcomeDone:     JobsDone,
	jobs.OutcomeFailed:   JobsFailed,
	jobs.OutcomeRetried:  JobsRetried,
	jobs.OutcomeLost:     JobsLost,
	jobs.OutcomeReleased: JobsReleased,
}

// Finished implements jobs.Observer.
func (s Sidecar) Finished(kind, outcome string, d time.Duration) {
	name := outcomeNames[outcome]
	if name == "" {
		return
	}
	s.R.Add(context.Background(), name, []string{kind}, 1)
	s.R.Observe(context.Background(), JobRun, []string{kind, outcome}, d)
}

// LLM is an llm.Observer: latency of every HTTP attempt and errors.
func (s Sidecar) LLM(op string, d time.Duration, err error) {
	s.R.Observe(context.Background(), LLMRequest, []string{op}, d)
	if err != nil {
		s.R.Add(context.Background(), LLMErrors, []string{op}, 1)
	}
}

// Embed is an llm.Observer for the embedding client.
func (s Sidecar) Embed(op string, d time.Duration, err error) {
	s.R.Observe(context.Background(), EmbedRequest, []string{op}, d)
	if err != nil {
		s.R.Add(context.Background(), EmbedErrors, []string{op}, 1)
	}
}

// Usage is a usage.Sink: every model call, by job kind and model (and
// tenant, WithTenantLabel): calls, failed calls, tokens by side. The
// call's trace id, if traced, is the exemplar.
func (s Sidecar) Usage(ctx context.Context, c usage.Call) {
	values := []string{c.JobKind, c.Model}
	side := func(name string) []string { return append([]string{c.JobKind, c.Model}, name) }
	tenant := func(v []string) []string {
		if s.R.TenantLabel() {
			return append(v, c.Tenant)
		}
		return v
	}
	s.R.Add(ctx, LLMCalls, tenant(values), 1)
	if c.Outcome != usage.OutcomeOK {
		s.R.Add(ctx, LLMCallFailures, tenant(values), 1)
	}
	s.R.Add(ctx, LLMTokens, tenant(side("prompt")), float64(c.PromptTokens))
	s.R.Add(ctx, LLMTokens, tenant(side("completion")), float64(c.CompletionTokens))
}
