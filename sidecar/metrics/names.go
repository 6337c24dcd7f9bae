package metrics

// Every metric the sidecar exports, in one place: its name, type, help and
// labels. Registry methods take a name from here (an undeclared name
// panics, which the package's tests reach); docs/sidecar.md lists the same
// names and TestMetricNamesDocumented holds the two together. A new metric
// is a line here.

// Metric types.
const (
	typeCounter   = "counter"
	typeHistogram = "histogram"
	typeGauge     = "gauge"
)

type def struct {
	typ    string
	help   string
	labels []string
}

// The names.
const (
	JobsClaimed          = "mneme_jobs_claimed_total"
	JobsDone             = "mneme_jobs_done_total"
	JobsFailed           = "mneme_jobs_failed_total"
	JobsRetried          = "mneme_jobs_retried_total"
	JobsLost             = "mneme_jobs_lost_total"
	JobsReleased         = "mneme_jobs_released_total"
	JobClaimWait         = "mneme_job_claim_wait_seconds"
	JobRun               = "mneme_job_run_seconds"
	LLMRequest           = "mneme_llm_request_seconds"
	LLMErrors            = "mneme_llm_errors_total"
	EmbedRequest         = "mneme_embed_request_seconds"
	EmbedErrors          = "mneme_embed_errors_total"
	LLMCalls             = "mneme_llm_calls_total"
	LLMCallFailures      = "mneme_llm_call_failures_total"
	LLMTokens            = "mneme_llm_tokens_total"
	Jobs                 = "mneme_jobs"
	SlotRetainedWALBytes = "mneme_replication_slot_retained_wal_bytes"
	BuildInfo            = "mneme_build_info"
	VectorIndexPending   = "mneme_vector_index_pending"
	VectorIndexBuild     = "mneme_vector_index_build_progress"
	VectorIndexSteps     = "mneme_vector_index_steps_total"
)

// usageLabels are the labels of the per-call usage counters; a registry
// made WithTenantLabel adds "tenant" at the end.
var usageLabels = []string{"kind", "model"}

var defs = map[string]def{
	JobsClaimed:  {typeCounter, "Jobs claimed, by kind.", []string{"kind"}},
	JobsDone:     {typeCounter, "Job runs that ended done, by kind.", []string{"kind"}},
	JobsFailed:   {typeCounter, "Job runs that ended failed, by kind.", []string{"kind"}},
	JobsRetried:  {typeCounter, "Job runs that ended retried, by kind.", []string{"kind"}},
	JobsLost:     {typeCounter, "Job runs that ended lost, by kind.", []string{"kind"}},
	JobsReleased: {typeCounter, "Job runs that ended released, by kind.", []string{"kind"}},
	JobClaimWait: {typeHistogram,
		"From a job becoming ready (created_at, the enqueuing transaction's start, or run_at for a retry) to its claim: the event-to-claim latency.",
		[]string{"kind"}},
	JobRun:       {typeHistogram, "Handler run time including its commit, by kind and outcome.", []string{"kind", "outcome"}},
	LLMRequest:   {typeHistogram, "Latency of each llm HTTP attempt.", []string{"op"}},
	LLMErrors:    {typeCounter, "Failed llm HTTP attempts (each retry counts).", []string{"op"}},
	EmbedRequest: {typeHistogram, "Latency of each embed HTTP attempt.", []string{"op"}},
	EmbedErrors:  {typeCounter, "Failed embed HTTP attempts (each retry counts).", []string{"op"}},
	LLMCalls: {typeCounter,
		"Model calls (chat and embedding; the HTTP retries inside a call not counted), by job kind (none: outside a job) and model.",
		usageLabels},
	LLMCallFailures: {typeCounter, "Model calls that ended without a usable answer, by job kind and model.", usageLabels},
	LLMTokens: {typeCounter,
		"Tokens of model calls as the endpoint reported them (else estimated at 4 characters a token), by job kind, model and side (prompt, completion).",
		[]string{"kind", "model", "side"}},
	Jobs:                 {typeGauge, "Jobs in mneme.jobs by kind and state (pending = queue depth).", []string{"kind", "state"}},
	SlotRetainedWALBytes: {typeGauge, "WAL the replication slot keeps (0 samples: no slot); an inactive slot keeps it until dropped.", []string{"slot", "active"}},
	VectorIndexPending: {typeGauge,
		"Per-scope HNSW index statements (mneme.vector_index_plan) the sidecar's last pass found still to run, by action (create, drop).",
		[]string{"action"}},
	VectorIndexBuild: {typeGauge,
		"The per-scope HNSW index being built: the share done of its current phase (pg_stat_progress_create_index); no sample when none is.",
		[]string{"index", "phase"}},
	VectorIndexSteps: {typeCounter, "Per-scope HNSW index statements the sidecar ran, by action (create, drop) and result (done, failed).",
		[]string{"action", "result"}},
	BuildInfo: {typeGauge, "The sidecar's version, the SQL API it speaks and the database's SQL API at start (value 1).",
		[]string{"version", "sql_api", "database_sql_api"}},
}

// Names lists every declared metric name.
func Names() []string {
	out := make([]string, 0, len(defs))
	for n := range defs {
		out = append(out, n)
	}
	return out
}
