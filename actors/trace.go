package actors

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
)

// Trace context (W3C, https://www.w3.org/TR/trace-context/) travels in a
// record's headers under the names HTTP uses: traceparent and tracestate.
// New wraps every consumer's handler in a tracer that, for each attempt,
// puts the record's trace context into the handler's context — where
// trace.SpanContextFromContext finds it, and where the http handler reads
// what it forwards — and, when Options.TracerProvider is set, runs the
// attempt inside a span that is a child of the record's trace.
//
// The cost is paid only by those who use it: with no TracerProvider and a
// record without a trace header, an attempt costs a scan of the header names
// (no allocation; BenchmarkTracerNoTrace measures it).

// TraceparentHeader and TracestateHeader are the record headers (and the
// HTTP fields) that carry W3C trace context. Record headers are matched
// without regard to case; when a record repeats one, the last one counts.
const (
	TraceparentHeader = "traceparent"
	TracestateHeader  = "tracestate"
)

// tracerName is the instrumentation scope of the spans.
const tracerName = "github.com/turbokafka/turbo/actors"

// Outcome attribute values: how one attempt ended (outcomeOf).
const (
	outcomeOK        = "ok"
	outcomeError     = "error"     // failed; retried or not as the policy says
	outcomePermanent = "permanent" // wraps ErrPermanent: never retried
	outcomeTimeout   = "timeout"   // ran past max_handler_time
	outcomePanic     = "panic"
	outcomeCancelled = "cancelled" // the consumer was torn down or lost the partition
)

// Span attribute keys.
const (
	attrConsumer  = attribute.Key("consumer")
	attrTopic     = attribute.Key("topic")
	attrPartition = attribute.Key("partition")
	attrOffset    = attribute.Key("offset")
	attrAttempt   = attribute.Key("attempt")
	attrOutcome   = attribute.Key("outcome")
)

// maxStatusDescription bounds the error text a span carries: a handler's
// error can be long (an answer's body), and spans leave the process.
const maxStatusDescription = 256

// tracer is the handler middleware described above.
type tracer struct {
	next     Handler
	consumer string
	spans    trace.Tracer // nil: no spans, trace context only
}

// traced wraps h for the consumer; tp nil means no spans.
func traced(h Handler, consumer string, tp trace.TracerProvider) Handler {
	t := &tracer{next: h, consumer: consumer}
	if tp != nil {
		t.spans = tp.Tracer(tracerName)
	}
	return t
}

// Handle implements Handler: one attempt of rec (which attempt, from 1,
// is in ctx: withAttempt).
func (t *tracer) Handle(ctx context.Context, rec *Record) error {
	if t.spans == nil {
		if !hasTraceHeader(rec.Headers) {
			return t.next.Handle(ctx, rec)
		}
		return t.next.Handle(withRecordTrace(ctx, rec), rec)
	}
	return t.handleInSpan(ctx, rec, attemptOf(ctx))
}

// attemptKey holds which attempt of a record a handler call is, in its
// context; absent on the first attempt, so that first attempts (nearly all
// of them) cost no context. Only spans read it. (A runner calling the
// tracer through the Handler interface, rather than a method with the
// attempt as an argument, measured 5-10 % less CPU per no-op record.)
type attemptKey struct{}

func withAttempt(ctx context.Context, n int) context.Context {
	return context.WithValue(ctx, attemptKey{}, n)
}

func attemptOf(ctx context.Context) int {
	if n, ok := ctx.Value(attemptKey{}).(int); ok {
		return n
	}
	return 1
}

// handleInSpan runs one attempt inside its span. A panic is recorded on the
// span and raised again, for safeHandle to turn into the record's failure.
func (t *tracer) handleInSpan(ctx context.Context, rec *Record, attempt int) (err error) {
	parent := ctx
	if hasTraceHeader(rec.Headers) {
		parent = withRecordTrace(ctx, rec)
	}
	sctx, span := t.spans.Start(parent, "turbo.handle "+rec.Topic,
		trace.WithSpanKind(trace.SpanKindConsumer),
		trace.WithAttributes(
			attrConsumer.String(t.consumer),
			attrTopic.String(rec.Topic),
			attrPartition.Int64(int64(rec.Partition)),
			attrOffset.Int64(rec.Offset),
			attrAttempt.Int(attempt),
		))
	returned := false
	defer func() {
		if returned {
			return
		}
		// A panic, or runtime.Goexit (v is nil then, and Goexit goes on).
		v := recover()
		endSpan(span, outcomePanic, fmt.Sprint("panic: ", v))
		if v != nil {
			panic(v)
		}
	}()
	err = t.next.Handle(sctx, rec)
	returned = true
	outcome := outcomeOf(ctx, err)
	desc := ""
	if err != nil {
		desc = err.Error()
	}
	endSpan(span, outcome, desc)
	return err
}

// endSpan records how the attempt ended and ends its span.
func endSpan(span trace.Span, outcome, desc string) {
	span.SetAttributes(attrOutcome.String(outcome))
	if outcome != outcomeOK {
		span.SetStatus(codes.Error, truncate(desc, maxStatusDescription))
	}
	span.End()
}

// outcomeOf classifies an attempt that returned err under ctx (the context
// runner.handle gave the handler: its cause tells a max_handler_time expiry
// from a teardown).
func outcomeOf(ctx context.Context, err error) string {
	switch {
	case err == nil:
		return outcomeOK
	case ctx.Err() != nil && errors.Is(context.Cause(ctx), ErrHandlerTimeout):
		return outcomeTimeout
	case ctx.Err() != nil:
		return outcomeCancelled
	case errors.Is(err, ErrPermanent):
		return outcomePermanent
	default:
		return outcomeError
	}
}

// hasTraceHeader reports whether the record carries trace context. It is the
// whole per-record cost when no spans are made: a comparison of lengths per
// header, and of names for the few 11- or 10-byte ones.
func hasTraceHeader(hs []Header) bool {
	for i := range hs {
		if IsTraceHeader(hs[i].Key) {
			return true
		}
	}
	return false
}

// IsTraceHeader reports whether a record header's name is one of the trace
// context's (in any case). Handlers that forward trace context take it from
// the context, not from these headers (the http handler does not forward
// them as record headers).
func IsTraceHeader(name string) bool {
	switch len(name) {
	case len(TraceparentHeader):
		return strings.EqualFold(name, TraceparentHeader)
	case len(TracestateHeader):
		return strings.EqualFold(name, TracestateHeader)
	}
	return false
}

// withRecordTrace returns ctx carrying the record's trace context as a
// remote span context, or ctx itself when the record's traceparent is
// missing or invalid.
func withRecordTrace(ctx context.Context, rec *Record) context.Context {
	return propagation.TraceContext{}.Extract(ctx, headerCarrier(rec.Headers))
}

// headerCarrier reads a record's headers for the propagation API. It is
// read-only: a handler must not change the record.
type headerCarrier []Header

// Get returns the value of the last header named key (in any case).
func (c headerCarrier) Get(key string) string {
	for i := len(c) - 1; i >= 0; i-- {
		if strings.EqualFold(c[i].Key, key) {
			return string(c[i].Value)
		}
	}
	return ""
}

// Set does nothing: records are read-only.
func (headerCarrier) Set(string, string) {}

// Keys returns the header names.
func (c headerCarrier) Keys() []string {
	keys := make([]string, len(c))
	for i, h := range c {
		keys[i] = h.Key
	}
	return keys
}

// truncate cuts s to at most n bytes, on a UTF-8 boundary.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return strings.ToValidUTF8(s[:n], "") + "…"
}
