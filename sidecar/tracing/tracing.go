// Package tracing owns the sidecar's OpenTelemetry traces: with
// OTEL_EXPORTER_OTLP_ENDPOINT (or OTEL_EXPORTER_OTLP_TRACES_ENDPOINT) set,
// Setup installs the official Go SDK's tracer provider with the OTLP HTTP
// exporter, configured by the standard OTEL_* variables (headers, timeout,
// service name, sampler); unset, nothing is installed and every span below
// is OpenTelemetry's no-op one. The spans: one per job (the job runner),
// children per model call (sidecar/usage) and per database transaction of
// the job (its commit, or the record of its failure), and one per request
// of the MCP server and the UI (Middleware).
package tracing

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"strings"
	"sync/atomic"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"
)

// Name is the instrumentation scope of mneme's spans.
const Name = "github.com/mneme-memory/mneme"

// installed: Setup installed the SDK's provider (and has not shut it down).
var installed atomic.Bool

var noopTracer = noop.NewTracerProvider().Tracer(Name)

// Tracer is mneme's tracer: the installed provider's, or, when tracing is
// off, OpenTelemetry's no-op one directly (an allocation a span, for the
// context that carries it).
func Tracer() trace.Tracer {
	if !installed.Load() {
		return noopTracer
	}
	return otel.Tracer(Name)
}

// Enabled reports whether the environment asks for traces.
func Enabled() bool {
	if strings.EqualFold(os.Getenv("OTEL_SDK_DISABLED"), "true") || strings.EqualFold(os.Getenv("OTEL_TRACES_EXPORTER"), "none") {
		return false
	}
	return os.Getenv("OTEL_EXPORTER_OTLP_ENDPOINT") != "" || os.Getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") != ""
}

// Setup installs the tracer provider when Enabled; the returned shutdown
// flushes and stops it (a no-op when nothing was installed; safe twice).
// service names the process (OTEL_SERVICE_NAME overrides it).
func Setup(ctx context.Context, service string, log *slog.Logger) (shutdown func(context.Context) error, err error) {
	if !Enabled() {
		return func(context.Context) error { return nil }, nil
	}
	exp, err := otlptracehttp.New(ctx)
	if err != nil {
		return nil, fmt.Errorf("OpenTelemetry OTLP exporter (OTEL_EXPORTER_OTLP_*): %w", err)
	}
	// (OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES, read last, win)
	res, err := resource.New(ctx, resource.WithTelemetrySDK(),
		resource.WithAttributes(attribute.String("service.name", service)), resource.WithFromEnv())
	if err != nil {
		return nil, fmt.Errorf("OpenTelemetry resource (OTEL_RESOURCE_ATTRIBUTES): %w", err)
	}
	tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp), sdktrace.WithResource(res))
	otel.SetTracerProvider(tp)
	otel.SetTextMapPropagator(propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{}))
	installed.Store(true)
	if log != nil {
		log.Info("OpenTelemetry traces on", "exporter", "otlp http")
	}
	var done bool
	return func(ctx context.Context) error {
		if done {
			return nil
		}
		done = true
		installed.Store(false)
		return errors.Join(tp.ForceFlush(ctx), tp.Shutdown(ctx))
	}, nil
}

// TraceID is the trace id of ctx's recording span, or "".
func TraceID(ctx context.Context) string {
	sc := trace.SpanContextFromContext(ctx)
	if !sc.IsValid() || !sc.IsSampled() {
		return ""
	}
	return sc.TraceID().String()
}

// End ends span, marking it an error when err is not nil.
func End(span trace.Span, err error) {
	if err != nil {
		span.RecordError(err)
		span.SetStatus(codes.Error, err.Error())
	}
	span.End()
}

// Middleware traces every request of h: a server span named after the
// method and the route pattern, continuing the caller's trace
// (traceparent), with its status code.
func Middleware(server string, h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ctx := otel.GetTextMapPropagator().Extract(r.Context(), propagation.HeaderCarrier(r.Header))
		ctx, span := Tracer().Start(ctx, r.Method+" "+server, trace.WithSpanKind(trace.SpanKindServer),
			trace.WithAttributes(
				attribute.String("http.request.method", r.Method),
				attribute.String("url.path", r.URL.Path),
				attribute.String("mneme.server", server)))
		defer span.End()
		if !span.IsRecording() {
			h.ServeHTTP(w, r.WithContext(ctx))
			return
		}
		sw := &statusWriter{ResponseWriter: w, status: http.StatusOK}
		h.ServeHTTP(sw, r.WithContext(ctx))
		span.SetAttributes(attribute.Int("http.response.status_code", sw.status))
		if sw.status >= 500 {
			span.SetStatus(codes.Error, http.StatusText(sw.status))
		}
	})
}

type statusWriter struct {
	http.ResponseWriter
	status int
}

func (w *statusWriter) WriteHeader(code int) {
	w.status = code
	w.ResponseWriter.WriteHeader(code)
}

// Flush passes streaming responses (the MCP server's SSE) through.
func (w *statusWriter) Flush() {
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// Unwrap lets http.ResponseController reach the writer underneath.
func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }
