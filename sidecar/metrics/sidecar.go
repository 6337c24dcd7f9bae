package metrics

import (
	"time"

	"github.com/mneme-memory/mneme/sidecar/jobs"
	"github.com/mneme-memory/mneme/sidecar/usage"
)

// Sidecar adapts a Registry to the hooks of the job runner and the LLM and
// embedding clients, under mneme_* names.
type Sidecar struct{ R *Registry }

var _ jobs.Observer = Sidecar{}

// Claimed implements jobs.Observer.
func (s Sidecar) Claimed(kind string, wait time.Duration) {
	s.R.Add("mneme_jobs_claimed_total", "Jobs claimed, by kind.", []string{"kind"}, []string{kind}, 1)
	s.R.Observe("mneme_job_claim_wait_seconds",
		"From a job becoming ready (created_at, the enqueuing transaction's start, or run_at for a retry) to its claim: the event-to-claim latency.",
		[]string{"kind"}, []string{kind}, wait)
}

// Finished implements jobs.Observer.
func (s Sidecar) Finished(kind, outcome string, d time.Duration) {
	name := map[string]string{
		jobs.OutcomeDone:     "mneme_jobs_done_total",
		jobs.OutcomeFailed:   "mneme_jobs_failed_total",
		jobs.OutcomeRetried:  "mneme_jobs_retried_total",
		jobs.OutcomeLost:     "mneme_jobs_lost_total",
		jobs.OutcomeReleased: "mneme_jobs_released_total",
	}[outcome]
	if name == "" {
		return
	}
	s.R.Add(name, "Job runs that ended "+outcome+", by kind.", []string{"kind"}, []string{kind}, 1)
	s.R.Observe("mneme_job_run_seconds", "Handler run time including its commit, by kind and outcome.",
		[]string{"kind", "outcome"}, []string{kind, outcome}, d)
}

// LLM is an llm.Observer: latency of every HTTP attempt and errors.
func (s Sidecar) LLM(op string, d time.Duration, err error) { s.call("llm", op, d, err) }

// Embed is an llm.Observer for the embedding client.
func (s Sidecar) Embed(op string, d time.Duration, err error) { s.call("embed", op, d, err) }

func (s Sidecar) call(client, op string, d time.Duration, err error) {
	s.R.Observe("mneme_"+client+"_request_seconds", "Latency of each "+client+" HTTP attempt.",
		[]string{"op"}, []string{op}, d)
	if err != nil {
		s.R.Add("mneme_"+client+"_errors_total", "Failed "+client+" HTTP attempts (each retry counts).",
			[]string{"op"}, []string{op}, 1)
	}
}

// Usage is a usage.Sink: every model call, by job kind and model (calls,
// tokens by side, failed calls).
func (s Sidecar) Usage(c usage.Call) {
	labels := []string{"kind", "model"}
	values := []string{c.JobKind, c.Model}
	s.R.Add("mneme_llm_calls_total", "Model calls (chat and embedding, retries inside a call not counted), by job kind and model.",
		labels, values, 1)
	if c.Outcome != usage.OutcomeOK {
		s.R.Add("mneme_llm_call_failures_total", "Model calls that ended without an answer, by job kind and model.", labels, values, 1)
	}
	s.R.Add("mneme_llm_tokens_total", "Tokens of model calls (reported by the endpoint, else estimated), by job kind, model and side (prompt, completion).",
		[]string{"kind", "model", "side"}, []string{c.JobKind, c.Model, "prompt"}, float64(c.PromptTokens))
	s.R.Add("mneme_llm_tokens_total", "Tokens of model calls (reported by the endpoint, else estimated), by job kind, model and side (prompt, completion).",
		[]string{"kind", "model", "side"}, []string{c.JobKind, c.Model, "completion"}, float64(c.CompletionTokens))
}
