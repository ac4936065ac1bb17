package main

import (
	"context"
	"time"

	"github.com/rs/zerolog"
	"github.com/turbokafka/turbo/actors/tracing"
	"github.com/turbokafka/turbo/config"
	"go.opentelemetry.io/otel/trace"
)

// tracingShutdown bounds the flush of the spans still queued when turbo
// stops: a collector that does not answer must not hold the exit up.
const tracingShutdown = 5 * time.Second

// startTracing starts the span exporter tracing.otlp_endpoint asks for. tp is
// what actors.Options.TracerProvider takes: nil (no spans) when no endpoint
// is configured. stop flushes and stops the exporter within tracingShutdown;
// call it once the consumers have stopped (their last attempts' spans are
// then queued), and always — it is a no-op without an exporter.
func startTracing(cfg config.Tracing, log zerolog.Logger) (tp trace.TracerProvider, stop func(), err error) {
	p, err := tracing.Start(cfg, log)
	if err != nil || p == nil {
		// A nil interface, not a nil *Provider inside one: actors.Start
		// tells "no spans" by a nil TracerProvider.
		return nil, func() {}, err
	}
	stop = func() {
		ctx, cancel := context.WithTimeout(context.Background(), tracingShutdown)
		defer cancel()
		if err := p.Shutdown(ctx); err != nil {
			log.Warn().Err(err).Msg("spans not exported before the exit are lost")
		}
	}
	return p.TracerProvider(), stop, nil
}
