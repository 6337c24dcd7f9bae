package tracing

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/require"
)

// Off (no OTLP endpoint in the environment): nothing is installed, every
// span is a no-op one that records nothing, and the middleware passes the
// request through.
func TestOffCostsNothing(t *testing.T) {
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "")
	t.Setenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "")
	require.False(t, Enabled())
	shutdown, err := Setup(context.Background(), "test", nil)
	require.NoError(t, err)
	require.NoError(t, shutdown(context.Background()))
	require.NoError(t, shutdown(context.Background()), "safe twice")
	ctx, span := Tracer().Start(context.Background(), "job segment")
	require.False(t, span.IsRecording())
	require.Equal(t, "", TraceID(ctx))
	span.End()
	allocs := testing.AllocsPerRun(100, func() {
		_, s := Tracer().Start(context.Background(), "job segment")
		s.End()
	})
	require.LessOrEqual(t, allocs, 1.0, "a span costs at most an allocation when off")

	rec := httptest.NewRecorder()
	Middleware("ui", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusTeapot) })).
		ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/x", nil))
	require.Equal(t, http.StatusTeapot, rec.Code)
}

// Set but disabled by the standard switch: still off.
func TestDisabledBySDKSwitch(t *testing.T) {
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:1")
	t.Setenv("OTEL_SDK_DISABLED", "true")
	require.False(t, Enabled())
}
