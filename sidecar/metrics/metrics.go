// Package metrics keeps the sidecar's counters and latency histograms and
// writes them in the Prometheus text exposition format. It is hand-written
// (a few dozen lines) rather than a dependency: mneme needs counters and
// histograms with labels, nothing more.
package metrics

import (
	"fmt"
	"io"
	"math"
	"sort"
	"strings"
	"sync"
	"time"
)

// Registry holds every metric of one process.
type Registry struct {
	mu       sync.Mutex
	counters map[string]*family
	hists    map[string]*family
	gauges   []gaugeFunc
}

type family struct {
	help   string
	labels []string
	series map[string]*series // by joined label values
}

type series struct {
	values []string
	count  float64   // counter value, or histogram count
	sum    float64   // histogram sum
	bucket []float64 // histogram cumulative counts per bound
}

type gaugeFunc struct {
	name, help string
	labels     []string
	collect    func() ([]Sample, error)
}

// Sample is one gauge value with its label values.
type Sample struct {
	Labels []string
	Value  float64
}

// Buckets (seconds) shared by every latency histogram: 1ms to 2 minutes.
var Buckets = []float64{0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120}

// New returns an empty registry.
func New() *Registry {
	return &Registry{counters: map[string]*family{}, hists: map[string]*family{}}
}

// Add increments counter name{labels} by v, declaring it on first use.
func (r *Registry) Add(name, help string, labels []string, values []string, v float64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	s := get(r.counters, name, help, labels, values, 0)
	s.count += v
}

// Observe records d in histogram name{labels}.
func (r *Registry) Observe(name, help string, labels []string, values []string, d time.Duration) {
	r.mu.Lock()
	defer r.mu.Unlock()
	s := get(r.hists, name, help, labels, values, len(Buckets))
	sec := d.Seconds()
	s.count++
	s.sum += sec
	for i, b := range Buckets {
		if sec <= b {
			s.bucket[i]++
		}
	}
}

// Gauge registers a gauge computed at scrape time (queue depth).
func (r *Registry) Gauge(name, help string, labels []string, collect func() ([]Sample, error)) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.gauges = append(r.gauges, gaugeFunc{name, help, labels, collect})
}

func get(m map[string]*family, name, help string, labels, values []string, nb int) *series {
	f, ok := m[name]
	if !ok {
		f = &family{help: help, labels: labels, series: map[string]*series{}}
		m[name] = f
	}
	key := strings.Join(values, "\x00")
	s, ok := f.series[key]
	if !ok {
		s = &series{values: append([]string(nil), values...), bucket: make([]float64, nb)}
		f.series[key] = s
	}
	return s
}

// Counter returns the current value of counter name{values} (tests).
func (r *Registry) Counter(name string, values ...string) float64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	if f, ok := r.counters[name]; ok {
		if s, ok := f.series[strings.Join(values, "\x00")]; ok {
			return s.count
		}
	}
	return 0
}

// Write renders every metric in the Prometheus text format.
func (r *Registry) Write(w io.Writer) error {
	r.mu.Lock()
	var b strings.Builder
	for _, name := range sortedKeys(r.counters) {
		f := r.counters[name]
		fmt.Fprintf(&b, "# HELP %s %s\n# TYPE %s counter\n", name, f.help, name)
		for _, s := range sortedSeries(f) {
			fmt.Fprintf(&b, "%s%s %s\n", name, labelText(f.labels, s.values, "", ""), num(s.count))
		}
	}
	for _, name := range sortedKeys(r.hists) {
		f := r.hists[name]
		fmt.Fprintf(&b, "# HELP %s %s\n# TYPE %s histogram\n", name, f.help, name)
		for _, s := range sortedSeries(f) {
			for i, bound := range Buckets {
				fmt.Fprintf(&b, "%s_bucket%s %s\n", name, labelText(f.labels, s.values, "le", num(bound)), num(s.bucket[i]))
			}
			fmt.Fprintf(&b, "%s_bucket%s %s\n", name, labelText(f.labels, s.values, "le", "+Inf"), num(s.count))
			fmt.Fprintf(&b, "%s_sum%s %s\n", name, labelText(f.labels, s.values, "", ""), num(s.sum))
			fmt.Fprintf(&b, "%s_count%s %s\n", name, labelText(f.labels, s.values, "", ""), num(s.count))
		}
	}
	gauges := append([]gaugeFunc(nil), r.gauges...)
	r.mu.Unlock()
	for _, g := range gauges {
		samples, err := g.collect()
		if err != nil {
			fmt.Fprintf(&b, "# %s unavailable: %s\n", g.name, strings.ReplaceAll(err.Error(), "\n", " "))
			continue
		}
		fmt.Fprintf(&b, "# HELP %s %s\n# TYPE %s gauge\n", g.name, g.help, g.name)
		for _, s := range samples {
			fmt.Fprintf(&b, "%s%s %s\n", g.name, labelText(g.labels, s.Labels, "", ""), num(s.Value))
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}

func sortedKeys(m map[string]*family) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

func sortedSeries(f *family) []*series {
	out := make([]*series, 0, len(f.series))
	for _, s := range f.series {
		out = append(out, s)
	}
	sort.Slice(out, func(i, j int) bool {
		return strings.Join(out[i].values, "\x00") < strings.Join(out[j].values, "\x00")
	})
	return out
}

func labelText(names, values []string, extraName, extraValue string) string {
	var parts []string
	for i, n := range names {
		v := ""
		if i < len(values) {
			v = values[i]
		}
		parts = append(parts, fmt.Sprintf(`%s="%s"`, n, escape(v)))
	}
	if extraName != "" {
		parts = append(parts, fmt.Sprintf(`%s="%s"`, extraName, extraValue))
	}
	if len(parts) == 0 {
		return ""
	}
	return "{" + strings.Join(parts, ",") + "}"
}

func escape(s string) string {
	return strings.NewReplacer(`\`, `\\`, `"`, `\"`, "\n", `\n`).Replace(s)
}

func num(f float64) string {
	if math.IsInf(f, 1) {
		return "+Inf"
	}
	return fmt.Sprintf("%g", f)
}
