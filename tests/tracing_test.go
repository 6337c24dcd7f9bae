package tests

import (
	"context"
	"encoding/hex"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/require"
	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/proto"

	"github.com/mneme-memory/mneme/sidecar/mcpserver"
	"github.com/mneme-memory/mneme/sidecar/tracing"
)

// otlpReceiver is an in-process OTLP/HTTP trace receiver: it decodes each
// export request (protobuf) and keeps the spans.
type otlpReceiver struct {
	srv      *httptest.Server
	mu       sync.Mutex
	spans    []*tracepb.Span
	services []string
}

func newOTLPReceiver(t *testing.T) *otlpReceiver {
	r := &otlpReceiver{}
	r.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if req.URL.Path != "/v1/traces" || req.Header.Get("Content-Type") != "application/x-protobuf" {
			http.Error(w, "want POST /v1/traces, application/x-protobuf", http.StatusBadRequest)
			return
		}
		body, err := io.ReadAll(req.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		var in coltracepb.ExportTraceServiceRequest
		if err := proto.Unmarshal(body, &in); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		r.mu.Lock()
		for _, rs := range in.ResourceSpans {
			for _, a := range rs.GetResource().GetAttributes() {
				if a.Key == "service.name" {
					r.services = append(r.services, a.GetValue().GetStringValue())
				}
			}
			for _, ss := range rs.ScopeSpans {
				r.spans = append(r.spans, ss.Spans...)
			}
		}
		r.mu.Unlock()
		out, _ := proto.Marshal(&coltracepb.ExportTraceServiceResponse{})
		w.Header().Set("Content-Type", "application/x-protobuf")
		_, _ = w.Write(out)
	}))
	t.Cleanup(r.srv.Close)
	return r
}

func (r *otlpReceiver) byName(prefix string) []*tracepb.Span {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []*tracepb.Span
	for _, s := range r.spans {
		if strings.HasPrefix(s.Name, prefix) {
			out = append(out, s)
		}
	}
	return out
}

func spanAttr(s *tracepb.Span, key string) any {
	for _, a := range s.Attributes {
		if a.Key == key {
			switch v := a.Value.Value.(type) {
			case *commonpb.AnyValue_StringValue:
				return v.StringValue
			case *commonpb.AnyValue_IntValue:
				return v.IntValue
			}
			return a.Value.String()
		}
	}
	return nil
}

// With OTEL_EXPORTER_OTLP_ENDPOINT set, the sidecar exports its spans
// over OTLP/HTTP: a span per job with the tenant, kind and tokens, a child
// per model call (tokens, model) and per database transaction; an MCP
// tool call and a UI request are traced too. Without it nothing is sent.
func TestTracesReachOTLPReceiver(t *testing.T) {
	recv := newOTLPReceiver(t)
	ctx := context.Background()

	// Off: no endpoint, no provider, nothing received.
	shutdown, err := tracing.Setup(ctx, "mneme test", nil)
	require.NoError(t, err)
	require.False(t, tracing.Enabled())
	require.NoError(t, shutdown(ctx))

	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", recv.srv.URL)
	t.Setenv("OTEL_BSP_SCHEDULE_DELAY", "50")
	shutdown, err = tracing.Setup(ctx, "mneme test", nil)
	require.NoError(t, err)
	defer func() { _ = shutdown(ctx) }()

	e := newUsageEnv(t, 5*time.Second)
	lines := []string{"My name is Dana and I live in Lisbon.", "Nice to meet you, Dana.", "I moved there from Porto.",
		"Lisbon is lovely.", "I work as a nurse.", "That sounds rewarding."}
	for i, line := range lines {
		e.say(day1.Add(time.Duration(i)*time.Minute).Format(time.RFC3339), []string{"user", "assistant"}[i%2], line)
	}
	_, err = e.db.Pool.Exec(ctx, `SELECT mneme.segment_now($1)`, e.conv)
	require.NoError(t, err)
	e.drain()

	// An MCP tool call and a UI-style HTTP request.
	st, ct := mcp.NewInMemoryTransports()
	ss, err := mcpserver.New(mcpserver.Options{Pool: e.db.Pool}).Connect(ctx, st, nil)
	require.NoError(t, err)
	defer ss.Close()
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "1"}, nil).Connect(ctx, ct, nil)
	require.NoError(t, err)
	defer cs.Close()
	_, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: "recall", Arguments: map[string]any{
		"conversation_id": e.conv.String(), "query": "where does Dana live"}})
	require.NoError(t, err)
	web := httptest.NewServer(tracing.Middleware("mneme ui", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusTeapot)
	})))
	defer web.Close()
	resp, err := http.Get(web.URL + "/conversations")
	require.NoError(t, err)
	resp.Body.Close()

	require.NoError(t, shutdown(ctx), "flush")

	// The segment job that stored the episode (with its embeddings call).
	childrenOf := func(p *tracepb.Span) map[string]*tracepb.Span {
		out := map[string]*tracepb.Span{}
		for _, s := range recv.byName("") {
			if string(s.TraceId) == string(p.TraceId) && string(s.ParentSpanId) == string(p.SpanId) {
				out[s.Name] = s
			}
		}
		return out
	}
	var job *tracepb.Span
	var children map[string]*tracepb.Span
	for _, s := range recv.byName("job segment") {
		if c := childrenOf(s); c["embedding embedding"] != nil {
			job, children = s, c
		}
	}
	if job == nil {
		byID := map[string]string{}
		for _, s := range recv.byName("") {
			byID[string(s.SpanId)] = s.Name
		}
		for _, s := range recv.byName("") {
			t.Logf("span %q parent %q", s.Name, byID[string(s.ParentSpanId)])
		}
	}
	require.NotNil(t, job, "a segment job's span with its embeddings call as a child")
	require.Equal(t, "default", spanAttr(job, "mneme.tenant"))
	require.Equal(t, "segment", spanAttr(job, "mneme.job.kind"))
	require.Equal(t, "done", spanAttr(job, "mneme.job.outcome"))
	require.Positive(t, spanAttr(job, "gen_ai.usage.input_tokens"))
	require.Contains(t, recv.services, "mneme test")

	chat := children["chat segment_decision"]
	require.NotNil(t, chat, "the model call is a child of the job's span: %v", keys(children))
	require.Equal(t, "fake-chat", spanAttr(chat, "gen_ai.request.model"))
	require.Positive(t, spanAttr(chat, "gen_ai.usage.input_tokens"))
	require.Equal(t, "ok", spanAttr(chat, "mneme.llm.outcome"))
	require.NotNil(t, children["db commit"], "the job's transaction")
	require.GreaterOrEqual(t, chat.StartTimeUnixNano, job.StartTimeUnixNano)
	require.LessOrEqual(t, chat.EndTimeUnixNano, job.EndTimeUnixNano)

	revise := recv.byName("job revise")
	require.NotEmpty(t, revise, "every job has its span")
	require.NotEqual(t, hex.EncodeToString(revise[0].TraceId), hex.EncodeToString(job.TraceId), "a job is a trace of its own")

	mcpSpans := recv.byName("mcp tools/call recall")
	require.Len(t, mcpSpans, 1)
	require.Equal(t, "recall", spanAttr(mcpSpans[0], "mcp.tool"))

	ui := recv.byName("GET mneme ui")
	require.Len(t, ui, 1)
	require.Equal(t, "/conversations", spanAttr(ui[0], "url.path"))
	require.Equal(t, int64(http.StatusTeapot), spanAttr(ui[0], "http.response.status_code"))
}

func keys(m map[string]*tracepb.Span) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}
