// Package metrics is the sidecar's Prometheus exposition, through
// github.com/prometheus/client_golang: the counters and latency histograms
// of the job runner and the model clients, gauges read from the database
// at scrape time, the standard process and Go runtime collectors, and
// exemplars carrying the trace id of the job or call a sample came from
// (when tracing is on). Every metric name is declared in names.go.
package metrics

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	dto "github.com/prometheus/client_model/go"
)

// Buckets (seconds) shared by every latency histogram: 1ms to 2 minutes.
var Buckets = []float64{0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120}

// Registry holds every metric of one process.
type Registry struct {
	reg         *prometheus.Registry
	tenantLabel bool
	traceID     func(context.Context) string

	mu       sync.Mutex
	counters map[string]*prometheus.CounterVec
	hists    map[string]*prometheus.HistogramVec
}

// Sample is one gauge value with its label values.
type Sample struct {
	Labels []string
	Value  float64
}

// Option tunes New.
type Option func(*Registry)

// WithTenantLabel adds a tenant label to the model usage counters
// (mneme_llm_calls_total, mneme_llm_call_failures_total,
// mneme_llm_tokens_total): one series per tenant, so off by default
// (MNEME_METRICS_TENANT_LABEL).
func WithTenantLabel(on bool) Option { return func(r *Registry) { r.tenantLabel = on } }

// WithExemplars makes traceID (the trace id of a context's span, "" for
// none) the exemplar of the samples recorded with a context.
func WithExemplars(traceID func(context.Context) string) Option {
	return func(r *Registry) { r.traceID = traceID }
}

// tenantable are the metrics WithTenantLabel labels by tenant.
var tenantable = []string{LLMCalls, LLMCallFailures, LLMTokens}

// New returns a registry with the process and Go runtime collectors.
func New(opts ...Option) *Registry {
	r := &Registry{reg: prometheus.NewRegistry(), counters: map[string]*prometheus.CounterVec{},
		hists: map[string]*prometheus.HistogramVec{}}
	for _, o := range opts {
		o(r)
	}
	r.reg.MustRegister(collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}), collectors.NewGoCollector())
	return r
}

// TenantLabel reports whether the usage counters carry a tenant label.
func (r *Registry) TenantLabel() bool { return r.tenantLabel }

func (r *Registry) labels(name string) []string {
	d := lookup(name)
	if r.tenantLabel && slices.Contains(tenantable, name) {
		return append(slices.Clone(d.labels), "tenant")
	}
	return d.labels
}

func lookup(name string) def {
	d, ok := defs[name]
	if !ok {
		panic(fmt.Sprintf("metrics: %s is not declared in names.go", name))
	}
	return d
}

func (r *Registry) counter(name string) *prometheus.CounterVec {
	r.mu.Lock()
	defer r.mu.Unlock()
	if v, ok := r.counters[name]; ok {
		return v
	}
	d := lookup(name)
	if d.typ != typeCounter {
		panic(fmt.Sprintf("metrics: %s is a %s, not a counter", name, d.typ))
	}
	v := prometheus.NewCounterVec(prometheus.CounterOpts{Name: name, Help: d.help}, r.labels(name))
	r.reg.MustRegister(v)
	r.counters[name] = v
	return v
}

func (r *Registry) histogram(name string) *prometheus.HistogramVec {
	r.mu.Lock()
	defer r.mu.Unlock()
	if v, ok := r.hists[name]; ok {
		return v
	}
	d := lookup(name)
	if d.typ != typeHistogram {
		panic(fmt.Sprintf("metrics: %s is a %s, not a histogram", name, d.typ))
	}
	v := prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: name, Help: d.help, Buckets: Buckets}, r.labels(name))
	r.reg.MustRegister(v)
	r.hists[name] = v
	return v
}

func (r *Registry) exemplar(ctx context.Context) prometheus.Labels {
	if r.traceID == nil {
		return nil
	}
	if id := r.traceID(ctx); id != "" {
		return prometheus.Labels{"trace_id": id}
	}
	return nil
}

// Add increments counter name{values} by v; ctx's trace id, if any,
// becomes the exemplar.
func (r *Registry) Add(ctx context.Context, name string, values []string, v float64) {
	c := r.counter(name).WithLabelValues(values...)
	if ex := r.exemplar(ctx); ex != nil {
		c.(prometheus.ExemplarAdder).AddWithExemplar(v, ex)
		return
	}
	c.Add(v)
}

// Observe records d in histogram name{values}, with ctx's trace id as the
// exemplar if any.
func (r *Registry) Observe(ctx context.Context, name string, values []string, d time.Duration) {
	h := r.histogram(name).WithLabelValues(values...)
	if ex := r.exemplar(ctx); ex != nil {
		h.(prometheus.ExemplarObserver).ObserveWithExemplar(d.Seconds(), ex)
		return
	}
	h.Observe(d.Seconds())
}

// Gauge registers a gauge computed at scrape time (queue depth). A collect
// error leaves the gauge out of that scrape (the others are served).
func (r *Registry) Gauge(name string, collect func() ([]Sample, error)) {
	d := lookup(name)
	if d.typ != typeGauge {
		panic(fmt.Sprintf("metrics: %s is a %s, not a gauge", name, d.typ))
	}
	r.reg.MustRegister(&gaugeFunc{desc: prometheus.NewDesc(name, d.help, d.labels, nil), collect: collect})
}

type gaugeFunc struct {
	desc    *prometheus.Desc
	collect func() ([]Sample, error)
}

func (g *gaugeFunc) Describe(ch chan<- *prometheus.Desc) { ch <- g.desc }

func (g *gaugeFunc) Collect(ch chan<- prometheus.Metric) {
	samples, err := g.collect()
	if err != nil {
		ch <- prometheus.NewInvalidMetric(g.desc, err)
		return
	}
	for _, s := range samples {
		m, err := prometheus.NewConstMetric(g.desc, prometheus.GaugeValue, s.Value, s.Labels...)
		if err != nil {
			m = prometheus.NewInvalidMetric(g.desc, err)
		}
		ch <- m
	}
}

// Handler serves the registry: the Prometheus text format, or
// OpenMetrics (with the exemplars) when the scraper asks for it.
func (r *Registry) Handler() http.Handler {
	return promhttp.HandlerFor(r.reg, promhttp.HandlerOpts{
		EnableOpenMetrics: true,
		ErrorHandling:     promhttp.ContinueOnError,
	})
}

// Counter returns the current value of counter name{values} (tests).
func (r *Registry) Counter(name string, values ...string) float64 {
	var m dto.Metric
	c, err := r.counter(name).GetMetricWithLabelValues(values...)
	if err != nil {
		return 0
	}
	if err := c.Write(&m); err != nil {
		return 0
	}
	return m.GetCounter().GetValue()
}
