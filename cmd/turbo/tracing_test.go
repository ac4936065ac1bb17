package main

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/turbokafka/turbo/actors/embedded"
	"github.com/turbokafka/turbo/actors/tracing/tracingtest"
	"github.com/twmb/franz-go/pkg/kgo"
	otlptrace "go.opentelemetry.io/proto/otlp/trace/v1"

	"github.com/turbokafka/turbo/test/testkit"
)

// runDeadline bounds a `turbo run --exit-on-idle` over a handful of records
// on the embedded broker (a group join takes a few seconds).
const runDeadline = 90 * time.Second

// `turbo run` with tracing.otlp_endpoint set and an http handler: the
// downstream sees the record's trace id with the attempt's span as parent,
// and the collector gets one span per attempt (the first answered 503, the
// retry 204), both children of the record's traceparent.
func TestRunExportsSpansAndForwardsTraceContext(t *testing.T) {
	const (
		topic    = "orders"
		traceID  = "4bf92f3577b34da6a3ce929d0e0e4736"
		parentID = "00f067aa0ba902b7"
	)
	broker, err := embedded.Start(embedded.Options{Partitions: 1, Topics: []string{topic}})
	if err != nil {
		t.Fatal(err)
	}
	defer broker.Close()
	produceTraced(t, broker.Addrs(), topic, "00-"+traceID+"-"+parentID+"-01")

	var mu sync.Mutex
	var parents []string // the Traceparent of each request, in order
	downstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		parents = append(parents, strings.Join(r.Header.Values("Traceparent"), ","))
		if r.Header.Get("Kafka-Header-Traceparent") != "" {
			t.Errorf("traceparent also sent as Kafka-Header-Traceparent")
		}
		if len(parents) == 1 {
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		w.WriteHeader(http.StatusNoContent)
	}))
	defer downstream.Close()
	recv := tracingtest.NewReceiver(t)

	cfg := writeConfig(t, "trace.yaml", fmt.Sprintf(`kafka:
  brokers: [%q]
consumers:
  - name: traced
    topics: [%s]
    commit_interval: 50ms
    retry: {max_attempts: 3, initial_backoff: 10ms, max_backoff: 50ms}
    handler: {type: http, url: %q}
tracing:
  otlp_endpoint: %q
  service_name: turbo-test
log:
  format: json
`, broker.Addrs()[0], topic, downstream.URL, recv.URL))
	done := make(chan int, 1)
	var stdout, stderr testkit.Buffer
	go func() { done <- runMain([]string{"run", "--config", cfg, "--exit-on-idle"}, &stdout, &stderr) }()
	select {
	case code := <-done:
		if code != exitOK {
			t.Fatalf("turbo run exited %d, want 0\nstderr:\n%s", code, stderr.String())
		}
	case <-time.After(runDeadline):
		t.Fatalf("turbo run --exit-on-idle did not finish one record within %s\nstderr:\n%s", runDeadline, stderr.String())
	}

	// run returned after flushing the exporter: the spans have arrived.
	spans := recv.AwaitSpans(2, 5*time.Second)
	mu.Lock()
	defer mu.Unlock()
	if len(spans) != 2 || len(parents) != 2 {
		t.Fatalf("%d spans and %d requests, want 2 of each (503, then 204)\nspans: %v\nrequests' traceparents: %q", len(spans), len(parents), spans, parents)
	}
	for i, want := range []struct{ attempt, outcome string }{{"1", "error"}, {"2", "ok"}} {
		var s *tracingtest.Span
		for j := range spans {
			if spans[j].Attrs["attempt"] == want.attempt {
				s = &spans[j]
			}
		}
		if s == nil {
			t.Errorf("no span of attempt %s: %v", want.attempt, spans)
			continue
		}
		if s.TraceID != traceID || s.ParentSpanID != parentID {
			t.Errorf("attempt %s: trace %s parent %s, want the record's %s/%s", want.attempt, s.TraceID, s.ParentSpanID, traceID, parentID)
		}
		if s.Attrs["outcome"] != want.outcome || s.Attrs["consumer"] != "traced" || s.Attrs["topic"] != topic || s.Attrs["offset"] != "0" {
			t.Errorf("attempt %s: %v, want outcome %s of consumer traced, %s offset 0", want.attempt, s, want.outcome, topic)
		}
		if s.Service != "turbo-test" || s.Kind != otlptrace.Span_SPAN_KIND_CONSUMER {
			t.Errorf("attempt %s: service %q kind %v, want turbo-test, consumer", want.attempt, s.Service, s.Kind)
		}
		// The downstream's parent is the attempt's span.
		if wantTP := "00-" + traceID + "-" + s.SpanID + "-01"; parents[i] != wantTP {
			t.Errorf("request %d: Traceparent %q, want %q", i+1, parents[i], wantTP)
		}
	}
}

// produceTraced writes one record carrying traceparent to partition 0. It
// uses franz-go rather than sarama: cmdRun sets sarama's global Logger, and
// a sarama producer's brokers close in goroutines that outlive its Close.
func produceTraced(t *testing.T, brokers []string, topic, traceparent string) {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	rec := &kgo.Record{Topic: topic, Partition: 0, Key: []byte("k"), Value: []byte("v"),
		Headers: []kgo.RecordHeader{{Key: "traceparent", Value: []byte(traceparent)}}}
	if err := cl.ProduceSync(ctx, rec).FirstErr(); err != nil {
		t.Fatalf("producing: %v", err)
	}
}
