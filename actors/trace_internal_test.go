package actors

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
)

const (
	testTraceID  = "4bf92f3577b34da6a3ce929d0e0e4736"
	testParentID = "00f067aa0ba902b7"
	testParent   = "00-" + testTraceID + "-" + testParentID + "-01"
)

func TestOutcomeOf(t *testing.T) {
	t.Parallel()
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	timedOut, cancelT := context.WithTimeoutCause(context.Background(), time.Nanosecond, ErrHandlerTimeout)
	defer cancelT()
	<-timedOut.Done()
	live := context.Background()
	boom := errors.New("boom")
	tests := []struct {
		name string
		ctx  context.Context
		err  error
		want string
	}{
		{"success", live, nil, outcomeOK},
		{"success after a cancellation", cancelled, nil, outcomeOK},
		{"failure", live, boom, outcomeError},
		{"permanent", live, fmt.Errorf("bad: %w", ErrPermanent), outcomePermanent},
		{"max_handler_time", timedOut, context.DeadlineExceeded, outcomeTimeout},
		{"max_handler_time, permanent error", timedOut, ErrPermanent, outcomeTimeout},
		{"teardown", cancelled, context.Canceled, outcomeCancelled},
		{"teardown, own error", cancelled, boom, outcomeCancelled},
	}
	for _, tt := range tests {
		if got := outcomeOf(tt.ctx, tt.err); got != tt.want {
			t.Errorf("%s: outcomeOf = %q, want %q", tt.name, got, tt.want)
		}
	}
}

func TestIsTraceHeader(t *testing.T) {
	t.Parallel()
	for name, want := range map[string]bool{
		"traceparent": true, "Traceparent": true, "TRACESTATE": true, "tracestate": true,
		"": false, "traceparen": false, "traceparent ": false, "trace-id": false, "baggage": false, "tracestatx": false,
	} {
		if got := IsTraceHeader(name); got != want {
			t.Errorf("IsTraceHeader(%q) = %v, want %v", name, got, want)
		}
	}
}

func TestTruncateKeepsUTF8(t *testing.T) {
	t.Parallel()
	if got := truncate("short", 10); got != "short" {
		t.Errorf("truncate(short) = %q", got)
	}
	got := truncate("ab€cd", 3) // € is 3 bytes: cut inside it
	if got != "ab…" {
		t.Errorf("truncate = %q, want %q", got, "ab…")
	}
}

// The handler finds the record's trace in its context: trace id, parent
// span id, flags and tracestate, whatever the header names' case; the last
// of repeated headers counts; an invalid traceparent leaves the context
// without a trace.
func TestTracerPutsTheRecordTraceInTheContext(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		headers []Header
		want    string // traceparent the context holds; "" for none
		state   string
	}{
		{"none", []Header{{Key: "other", Value: []byte("x")}}, "", ""},
		{"traceparent", []Header{{Key: "traceparent", Value: []byte(testParent)}}, testParent, ""},
		{"with tracestate", []Header{{Key: "tracestate", Value: []byte("congo=t61rcWkgMzE")}, {Key: "traceparent", Value: []byte(testParent)}}, testParent, "congo=t61rcWkgMzE"},
		{"canonical case", []Header{{Key: "Traceparent", Value: []byte(testParent)}}, testParent, ""},
		{"last wins", []Header{{Key: "traceparent", Value: []byte("00-11111111111111111111111111111111-1111111111111111-01")}, {Key: "traceparent", Value: []byte(testParent)}}, testParent, ""},
		{"invalid", []Header{{Key: "traceparent", Value: []byte("00-zz-zz-01")}}, "", ""},
		{"all-zero trace id", []Header{{Key: "traceparent", Value: []byte("00-00000000000000000000000000000000-00f067aa0ba902b7-01")}}, "", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got trace.SpanContext
			h := traced(HandlerFunc(func(ctx context.Context, _ *Record) error {
				got = trace.SpanContextFromContext(ctx)
				return nil
			}), "c", nil)
			if err := h.Handle(context.Background(), &Record{Topic: "t", Headers: tt.headers}); err != nil {
				t.Fatal(err)
			}
			if tt.want == "" {
				if got.IsValid() {
					t.Fatalf("the context holds trace %s, want none", got.TraceID())
				}
				return
			}
			if tp := fmt.Sprintf("00-%s-%s-%s", got.TraceID(), got.SpanID(), got.TraceFlags()); tp != tt.want {
				t.Errorf("context traceparent %s, want %s", tp, tt.want)
			}
			if !got.IsRemote() {
				t.Error("the record's span context is not marked remote")
			}
			if s := got.TraceState().String(); s != tt.state {
				t.Errorf("tracestate %q, want %q", s, tt.state)
			}
		})
	}
}

// One span per attempt, with its attributes and outcome; a panic is
// recorded and raised again.
func TestTracerSpans(t *testing.T) {
	t.Parallel()
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	defer func() { _ = tp.Shutdown(context.Background()) }()

	boom := errors.New("boom")
	var handlerSpan trace.SpanContext
	h := traced(HandlerFunc(func(ctx context.Context, r *Record) error {
		handlerSpan = trace.SpanContextFromContext(ctx)
		switch r.Offset {
		case 1:
			return boom
		case 2:
			panic("kaputt")
		}
		return nil
	}), "orders-consumer", tp)

	withParent := &Record{Topic: "orders", Partition: 3, Offset: 0, Headers: []Header{{Key: "traceparent", Value: []byte(testParent)}}}
	if err := h.Handle(context.Background(), withParent); err != nil {
		t.Fatal(err)
	}
	spans := rec.Ended()
	if len(spans) != 1 {
		t.Fatalf("%d spans after one attempt, want 1", len(spans))
	}
	s := spans[0]
	if !s.SpanContext().Equal(handlerSpan) {
		t.Errorf("the handler's context holds span %s, want the attempt's %s", handlerSpan.SpanID(), s.SpanContext().SpanID())
	}
	if s.Parent().TraceID().String() != testTraceID || s.Parent().SpanID().String() != testParentID || !s.Parent().IsRemote() {
		t.Errorf("parent %s/%s (remote %v), want the record's %s/%s", s.Parent().TraceID(), s.Parent().SpanID(), s.Parent().IsRemote(), testTraceID, testParentID)
	}
	if s.Name() != "turbo.handle orders" || s.SpanKind() != trace.SpanKindConsumer {
		t.Errorf("span %q kind %s, want \"turbo.handle orders\" consumer", s.Name(), s.SpanKind())
	}
	checkAttrs(t, s.Attributes(), map[attribute.Key]string{
		attrConsumer: "orders-consumer", attrTopic: "orders", attrPartition: "3", attrOffset: "0", attrAttempt: "1", attrOutcome: outcomeOK,
	})
	if s.Status().Code != codes.Unset {
		t.Errorf("status %v on success, want unset", s.Status())
	}

	// A failure on the third attempt (two failed before), without a trace
	// header: a root span.
	failing := &Record{Topic: "orders", Partition: 3, Offset: 1}
	if err := h.Handle(withAttempt(context.Background(), 3), failing); !errors.Is(err, boom) {
		t.Fatalf("Handle = %v, want boom", err)
	}
	s = rec.Ended()[1]
	if s.Parent().IsValid() {
		t.Errorf("a record without trace context got parent %s", s.Parent().SpanID())
	}
	checkAttrs(t, s.Attributes(), map[attribute.Key]string{attrOffset: "1", attrAttempt: "3", attrOutcome: outcomeError})
	if s.Status().Code != codes.Error || s.Status().Description != "boom" {
		t.Errorf("status %+v, want error \"boom\"", s.Status())
	}

	// A panic goes through safeHandle as in the runner.
	err := safeHandle(context.Background(), h, &Record{Topic: "orders", Offset: 2})
	var pe *PanicError
	if !errors.As(err, &pe) || pe.Value != "kaputt" {
		t.Fatalf("safeHandle = %v, want the handler's panic", err)
	}
	if !strings.Contains(string(pe.Stack), "trace_internal_test.go") {
		t.Errorf("the panic's stack lost the handler's frame:\n%s", pe.Stack)
	}
	spans = rec.Ended()
	if len(spans) != 3 {
		t.Fatalf("%d spans after three attempts, want 3", len(spans))
	}
	s = spans[2]
	checkAttrs(t, s.Attributes(), map[attribute.Key]string{attrOffset: "2", attrOutcome: outcomePanic})
	if s.Status().Code != codes.Error || s.Status().Description != "panic: kaputt" {
		t.Errorf("status %+v, want error \"panic: kaputt\"", s.Status())
	}
}

func checkAttrs(t *testing.T, got []attribute.KeyValue, want map[attribute.Key]string) {
	t.Helper()
	have := make(map[attribute.Key]string, len(got))
	for _, kv := range got {
		have[kv.Key] = kv.Value.Emit()
	}
	for k, v := range want {
		if have[k] != v {
			t.Errorf("attribute %s = %q, want %q (all: %v)", k, have[k], v, have)
		}
	}
}

// The path every record takes when tracing is off and the record carries no
// trace context allocates nothing.
func TestTracerNoTraceAllocatesNothing(t *testing.T) {
	h := traced(HandlerFunc(func(context.Context, *Record) error { return nil }), "c", nil)
	rec := benchRecord(false)
	ctx := context.Background()
	if n := testing.AllocsPerRun(1000, func() { _ = h.Handle(ctx, rec) }); n != 0 {
		t.Fatalf("%v allocations per record without trace context or spans, want 0", n)
	}
}

// benchRecord has the headers a typical producer sets; with trace, a
// traceparent among them.
func benchRecord(withTrace bool) *Record {
	rec := &Record{Topic: "orders", Partition: 1, Offset: 42, Headers: []Header{
		{Key: "content-type", Value: []byte("application/json")},
		{Key: "idempotency-key", Value: []byte("8a6e0804-2bd0-4672-b79d-d97027f9071b")},
		{Key: "source", Value: []byte("checkout")},
	}}
	if withTrace {
		rec.Headers = append(rec.Headers, Header{Key: "traceparent", Value: []byte(testParent)})
	}
	return rec
}

func benchTracer(b *testing.B, rec *Record, tp trace.TracerProvider) {
	h := traced(HandlerFunc(func(context.Context, *Record) error { return nil }), "c", tp)
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		_ = h.Handle(ctx, rec)
	}
}

// BenchmarkTracerNoTrace is the cost every record pays with tracing off:
// it must report 0 allocs/op.
func BenchmarkTracerNoTrace(b *testing.B) { benchTracer(b, benchRecord(false), nil) }

// BenchmarkTracerTraceHeader is a record with a traceparent, spans off: the
// context for the handler.
func BenchmarkTracerTraceHeader(b *testing.B) { benchTracer(b, benchRecord(true), nil) }

// BenchmarkTracerSpan is a record with a traceparent and spans on (the SDK,
// sampling everything, with a processor that drops the spans).
func BenchmarkTracerSpan(b *testing.B) {
	tp := sdktrace.NewTracerProvider()
	defer func() { _ = tp.Shutdown(context.Background()) }()
	benchTracer(b, benchRecord(true), tp)
}
