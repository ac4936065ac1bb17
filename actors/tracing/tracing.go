// Package tracing exports turbo's spans (one per handler attempt, see
// actors.Options.TracerProvider) over OTLP/HTTP with the OpenTelemetry SDK.
//
// Start builds the SDK's TracerProvider from the tracing section of the
// configuration: an OTLP/HTTP protobuf exporter (plain HTTP for an http://
// endpoint), a batch span processor whose limits are fixed here (so the
// OTEL_BSP_* variables cannot lift them), and a service.name resource.
// Spans are sampled as their parent was (a record's traceparent flags); a
// record without trace context starts a sampled trace.
//
// The SDK reports what goes wrong (an unreachable collector, a refused
// export, a full queue) through a process-wide error handler and logger:
// Start routes both to zerolog, each distinct message at most once per
// errorEvery, and never with the SDK's key/value details (they can hold
// header values from the OTEL_EXPORTER_OTLP_HEADERS variable).
package tracing

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"sync"
	"time"

	"github.com/rs/zerolog"
	"github.com/turbokafka/turbo/config"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
)

// Batch span processor limits. A span is a few hundred bytes, so the queue
// holds at most about a megabyte; spans beyond it are dropped (and the SDK
// says so once), never blocking a handler.
const (
	// MaxQueueSize is the most spans waiting for export.
	MaxQueueSize = 2048
	// MaxExportBatchSize is the most spans in one export request.
	MaxExportBatchSize = 512
	// BatchTimeout is the longest a finished span waits before its batch is
	// sent.
	BatchTimeout = 5 * time.Second
	// ExportTimeout bounds one export, retries included.
	ExportTimeout = 30 * time.Second
	// RequestTimeout bounds one OTLP/HTTP request.
	RequestTimeout = 10 * time.Second
)

// DefaultServiceName is the service.name of the spans when the
// configuration names none.
const DefaultServiceName = "turbo"

// tracesPath is where an OTLP/HTTP collector takes spans.
const tracesPath = "/v1/traces"

// ErrStart is wrapped by Start's errors.
var ErrStart = errors.New("tracing: cannot start the span exporter")

// Provider is a running span exporter. Its methods are safe for concurrent
// use.
type Provider struct {
	tp       *sdktrace.TracerProvider
	endpoint string
	logGen   uint64 // its logger's generation in sdkLog

	once sync.Once
	err  error
}

// Start builds the provider cfg asks for, or returns (nil, nil) when
// cfg.OTLPEndpoint is empty: then no spans are made, and callers pass no
// TracerProvider to actors.Start. cfg is expected to have passed
// config validation. Nothing is dialled until the first export; an
// unreachable collector shows in log, never as an error here.
func Start(cfg config.Tracing, log zerolog.Logger) (*Provider, error) {
	if cfg.OTLPEndpoint == "" {
		return nil, nil
	}
	endpoint, err := exportURL(cfg.OTLPEndpoint)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrStart, err)
	}
	name := cfg.ServiceName
	if name == "" {
		name = DefaultServiceName
	}
	log = log.With().Str("component", "tracing").Logger()
	gen := routeErrors(log)
	exp, err := otlptracehttp.New(context.Background(),
		otlptracehttp.WithEndpointURL(endpoint),
		otlptracehttp.WithTimeout(RequestTimeout))
	if err != nil {
		sdkLog.release(gen)
		return nil, fmt.Errorf("%w: %w", ErrStart, err)
	}
	res, err := resource.Merge(resource.Default(), resource.NewSchemaless(attribute.String("service.name", name)))
	if err != nil {
		// Only conflicting schema URLs fail a merge, and ours has none.
		sdkLog.release(gen)
		return nil, fmt.Errorf("%w: resource: %w", ErrStart, err)
	}
	tp := sdktrace.NewTracerProvider(
		sdktrace.WithResource(res),
		sdktrace.WithBatcher(exp,
			sdktrace.WithMaxQueueSize(MaxQueueSize),
			sdktrace.WithMaxExportBatchSize(MaxExportBatchSize),
			sdktrace.WithBatchTimeout(BatchTimeout),
			sdktrace.WithExportTimeout(ExportTimeout)),
	)
	log.Info().Str("otlp_endpoint", endpoint).Str("service_name", name).Msg("exporting spans")
	return &Provider{tp: tp, endpoint: endpoint, logGen: gen}, nil
}

// exportURL is the URL spans are posted to: the endpoint as configured, with
// /v1/traces when it has no path (as OTEL_EXPORTER_OTLP_ENDPOINT is read).
// The exporter drops a query string, so the result has none.
func exportURL(endpoint string) (string, error) {
	u, err := url.Parse(endpoint)
	if err != nil {
		// url.Parse's error quotes the URL: validation already vouched that
		// it holds no credentials, but say less anyway.
		return "", errors.New("tracing.otlp_endpoint is not a URL")
	}
	if u.Scheme != "http" && u.Scheme != "https" || u.Host == "" || u.User != nil {
		return "", errors.New("tracing.otlp_endpoint must be an http:// or https:// URL with a host and no credentials")
	}
	if u.Path == "" || u.Path == "/" {
		u.Path = tracesPath
	}
	u.RawPath, u.RawQuery, u.Fragment = "", "", ""
	return u.String(), nil
}

// TracerProvider returns what actors.Options.TracerProvider takes.
func (p *Provider) TracerProvider() trace.TracerProvider { return p.tp }

// Endpoint returns the URL spans are posted to.
func (p *Provider) Endpoint() string { return p.endpoint }

// ForceFlush exports the spans finished so far, within ctx. A failed export
// is logged like the background ones (rate-limited) as well as returned.
func (p *Provider) ForceFlush(ctx context.Context) error {
	if err := p.tp.ForceFlush(ctx); err != nil {
		sdkLog.Handle(err)
		return fmt.Errorf("tracing: flushing spans: %w", err)
	}
	return nil
}

// Shutdown exports the spans still queued and stops the exporter. It
// returns when done or when ctx ends (spans not sent by then are lost), is
// idempotent, and every call returns the first call's result. Spans ended
// afterwards are dropped, and the SDK's reports no longer reach the logger
// Start was given.
func (p *Provider) Shutdown(ctx context.Context) error {
	p.once.Do(func() {
		if err := p.tp.Shutdown(ctx); err != nil {
			p.err = fmt.Errorf("tracing: shutting the span exporter down: %w", err)
		}
		sdkLog.release(p.logGen)
	})
	return p.err
}
