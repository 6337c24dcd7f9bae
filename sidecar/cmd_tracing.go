package main

import (
	"context"
	"log/slog"
	"time"

	"github.com/mneme-memory/mneme/sidecar/tracing"
)

// startTracing installs OpenTelemetry tracing for a serving command when
// OTEL_EXPORTER_OTLP_ENDPOINT is set (sidecar/tracing); the returned stop
// flushes what is buffered. Off, it costs nothing.
func startTracing(ctx context.Context, log *slog.Logger, service string) (stop func(), err error) {
	shutdown, err := tracing.Setup(ctx, service, log)
	if err != nil {
		return nil, err
	}
	return func() {
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		if err := shutdown(sctx); err != nil {
			log.Warn("flushing traces", "err", err)
		}
	}, nil
}
