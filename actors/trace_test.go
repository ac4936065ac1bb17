package actors_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"github.com/turbokafka/turbo/actors"
	"github.com/turbokafka/turbo/actors/handlers"
	"github.com/turbokafka/turbo/actors/harness"
	"github.com/turbokafka/turbo/actors/memkafka"
	"github.com/turbokafka/turbo/actors/tracing"
	"github.com/turbokafka/turbo/actors/tracing/tracingtest"
	"github.com/turbokafka/turbo/config"
	"github.com/turbokafka/turbo/test/testkit"
	"go.opentelemetry.io/otel/trace"
	otlptrace "go.opentelemetry.io/proto/otlp/trace/v1"
)

// Trace context through the real tree (W3C traceparent in record headers).

const (
	recTraceID  = "4bf92f3577b34da6a3ce929d0e0e4736"
	recParentID = "00f067aa0ba902b7"
	recParent   = "00-" + recTraceID + "-" + recParentID + "-01"
	recState    = "congo=t61rcWkgMzE"
)

func traced(offset int64, key string) harness.Record {
	return harness.Rec(topic, 0, offset, key, "v",
		harness.Header{Key: "traceparent", Value: []byte(recParent)},
		harness.Header{Key: "tracestate", Value: []byte(recState)})
}

// A record produced with a traceparent reaches a Go handler whose context
// holds that trace (the record's span as a remote parent); a record without
// one reaches it with none.
func TestTraceContextReachesTheHandler(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	got := map[int64]trace.SpanContext{}
	h := harness.New(t, consumer(nil), actors.HandlerFunc(func(ctx context.Context, rec *actors.Record) error {
		mu.Lock()
		defer mu.Unlock()
		got[rec.Offset] = trace.SpanContextFromContext(ctx)
		return nil
	}))
	h.Feed(traced(0, "a"), harness.Rec(topic, 0, 1, "b", "v"))
	h.Assign(topic, 0)
	h.AwaitAllCommitted()

	mu.Lock()
	defer mu.Unlock()
	sc := got[0]
	if sc.TraceID().String() != recTraceID || sc.SpanID().String() != recParentID || !sc.IsSampled() || !sc.IsRemote() {
		t.Errorf("handler context trace %s span %s sampled %v remote %v, want the record's %s/%s, sampled, remote",
			sc.TraceID(), sc.SpanID(), sc.IsSampled(), sc.IsRemote(), recTraceID, recParentID)
	}
	if s := sc.TraceState().String(); s != recState {
		t.Errorf("tracestate %q, want %q", s, recState)
	}
	if got[1].IsValid() {
		t.Errorf("a record without trace context reached the handler with trace %s", got[1].TraceID())
	}
}

// The http handler forwards the record's traceparent and tracestate
// unchanged (spans off) under their standard names, and not as
// Kafka-Header-Traceparent.
func TestHTTPHandlerForwardsTheRecordsTraceparent(t *testing.T) {
	t.Parallel()
	reqs := make(chan http.Header, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		reqs <- r.Header.Clone()
		w.WriteHeader(http.StatusNoContent)
	}))
	defer srv.Close()
	h := harness.New(t, consumer(nil), handlers.NewHTTP(srv.URL, 5*time.Second, 1))
	h.Feed(traced(0, "a"))
	h.Assign(topic, 0)
	h.AwaitAllCommitted()
	var hdr http.Header
	select {
	case hdr = <-reqs:
	default:
		t.Fatal("the record was committed but the endpoint got no request")
	}
	if v := hdr.Values("Traceparent"); len(v) != 1 || v[0] != recParent {
		t.Errorf("Traceparent = %q, want the record's %q", v, recParent)
	}
	if v := hdr.Values("Tracestate"); len(v) != 1 || v[0] != recState {
		t.Errorf("Tracestate = %q, want the record's %q", v, recState)
	}
	for _, name := range []string{"Kafka-Header-Traceparent", "Kafka-Header-Tracestate"} {
		if v, ok := hdr[name]; ok {
			t.Errorf("%s = %q sent as well", name, v)
		}
	}
}

// With a TracerProvider, every attempt is one span: a record that fails once
// and then succeeds gives two spans (attempts 1 and 2, outcomes error and
// ok), both children of the record's traceparent, each the span the
// handler's context holds during that attempt; a record without trace
// context gets a root span. Exported over OTLP/HTTP to a receiver.
func TestOneSpanPerAttemptReachesTheCollector(t *testing.T) {
	t.Parallel()
	recv := tracingtest.NewReceiver(t)
	prov, err := tracing.Start(config.Tracing{OTLPEndpoint: recv.URL}, zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = prov.Shutdown(context.Background()) }()

	var mu sync.Mutex
	handlerSpans := map[string]bool{} // span ids the handler's context held
	failed := false
	cluster := memkafka.New()
	cons := startInMemory(t, cluster, prov.TracerProvider(), actors.HandlerFunc(func(ctx context.Context, rec *actors.Record) error {
		mu.Lock()
		defer mu.Unlock()
		handlerSpans[trace.SpanContextFromContext(ctx).SpanID().String()] = true
		if rec.Offset == 0 && !failed {
			failed = true
			return errors.New("first attempt fails")
		}
		return nil
	}))
	tp := memkafka.TopicPartition{Topic: topic, Partition: 0}
	if err := cluster.Produce(traced(0, "a"), harness.Rec(topic, 0, 1, "b", "v")); err != nil {
		t.Fatal(err)
	}
	cluster.Assign(tp)
	awaitCommitted(t, cluster, tp, 2)
	stopCtx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := cons.Stop(stopCtx); err != nil {
		t.Fatalf("stopping: %v", err)
	}
	if err := prov.Shutdown(stopCtx); err != nil { // flushes
		t.Fatalf("shutting the exporter down: %v", err)
	}

	spans := recv.AwaitSpans(3, 10*time.Second)
	if len(spans) != 3 {
		t.Fatalf("%d spans, want 3 (two attempts of offset 0, one of offset 1): %v", len(spans), spans)
	}
	byAttempt := map[string]tracingtest.Span{}
	for _, s := range spans {
		if !handlerSpans[s.SpanID] {
			t.Errorf("span %s is not the one the handler's context held (%v)", s.SpanID, handlerSpans)
		}
		if s.Name != "turbo.handle "+topic || s.Kind != otlptrace.Span_SPAN_KIND_CONSUMER || s.Service != tracing.DefaultServiceName {
			t.Errorf("span %v: want name \"turbo.handle %s\", kind consumer, service %s", s, topic, tracing.DefaultServiceName)
		}
		if s.Attrs["consumer"] != "tree" || s.Attrs["topic"] != topic || s.Attrs["partition"] != "0" {
			t.Errorf("span %v: want consumer tree, topic %s, partition 0", s, topic)
		}
		switch s.Attrs["offset"] {
		case "0":
			if s.TraceID != recTraceID || s.ParentSpanID != recParentID {
				t.Errorf("span %v: want a child of the record's %s/%s", s, recTraceID, recParentID)
			}
			byAttempt[s.Attrs["attempt"]] = s
		case "1":
			if s.ParentSpanID != "" || s.TraceID == recTraceID || s.Attrs["attempt"] != "1" || s.Attrs["outcome"] != "ok" {
				t.Errorf("span %v: want a root span of a new trace, attempt 1, ok", s)
			}
		default:
			t.Errorf("span of an unknown record: %v", s)
		}
	}
	first, second := byAttempt["1"], byAttempt["2"]
	if first.Attrs["outcome"] != "error" || first.StatusCode != otlptrace.Status_STATUS_CODE_ERROR || first.StatusText != "first attempt fails" {
		t.Errorf("attempt 1: %v, want outcome error, status error \"first attempt fails\"", first)
	}
	if second.Attrs["outcome"] != "ok" || second.StatusCode == otlptrace.Status_STATUS_CODE_ERROR {
		t.Errorf("attempt 2: %v, want outcome ok", second)
	}
}

// startInMemory starts a consumer of topic on cluster with spans from tp;
// actors/harness has no TracerProvider, so this is its smallest part.
func startInMemory(t *testing.T, cluster *memkafka.Cluster, tp trace.TracerProvider, h actors.Handler) *actors.Consumer {
	t.Helper()
	kafka := config.Default().Kafka
	kafka.Brokers = []string{"in-memory:9092"} // never dialled
	cons, err := actors.StartInMemory(actors.Options{
		Consumer: harness.Consumer("tree", topic), Kafka: kafka, ShutdownTimeout: 5 * time.Second,
		Handler: h, Logger: testkit.Logger(t).Level(zerolog.WarnLevel), Restart: harness.FastRestart,
		TracerProvider: tp,
	}, cluster)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := cons.Stop(ctx); err != nil {
			t.Errorf("stopping: %v", err)
		}
	})
	return cons
}

// awaitCommitted waits until the partition's committed offset reaches want.
func awaitCommitted(t *testing.T, c *memkafka.Cluster, tp memkafka.TopicPartition, want int64) {
	t.Helper()
	deadline := time.NewTimer(10 * time.Second)
	defer deadline.Stop()
	for {
		changed := c.Changed()
		if c.Partition(tp).Committed >= want {
			return
		}
		select {
		case <-changed:
		case <-deadline.C:
			t.Fatalf("%s committed %d after 10s, want %d", tp, c.Partition(tp).Committed, want)
		}
	}
}
