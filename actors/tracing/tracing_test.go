package tracing

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"github.com/turbokafka/turbo/actors/tracing/tracingtest"
	"github.com/turbokafka/turbo/config"
	"go.opentelemetry.io/otel/trace"

	"github.com/turbokafka/turbo/test/testkit"
)

// The tests of this package are not parallel: the SDK's error handler is
// process-wide, and each Start points it at its own logger.

func TestStartWithoutEndpointMakesNoProvider(t *testing.T) {
	p, err := Start(config.Tracing{ServiceName: "x"}, zerolog.Nop())
	if p != nil || err != nil {
		t.Fatalf("Start without an endpoint = %v, %v; want nil, nil", p, err)
	}
}

func TestExportURL(t *testing.T) {
	for in, want := range map[string]string{
		"http://127.0.0.1:4318":              "http://127.0.0.1:4318/v1/traces",
		"http://127.0.0.1:4318/":             "http://127.0.0.1:4318/v1/traces",
		"https://otel.example:443/v1/traces": "https://otel.example:443/v1/traces",
		"https://otel.example/custom/path":   "https://otel.example/custom/path",
		"http://collector:4318?x=1#f":        "http://collector:4318/v1/traces",
	} {
		got, err := exportURL(in)
		if err != nil || got != want {
			t.Errorf("exportURL(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	for _, bad := range []string{"collector:4318", "ftp://x", "http://user:pw@host:4318", "http://%zz"} {
		if got, err := exportURL(bad); err == nil {
			t.Errorf("exportURL(%q) = %q, want an error", bad, got)
		} else if strings.Contains(err.Error(), "pw") {
			t.Errorf("exportURL's error repeats the credentials: %v", err)
		}
	}
}

// Spans reach an OTLP/HTTP collector with the configured service name;
// Shutdown flushes them and is idempotent.
func TestSpansReachTheCollector(t *testing.T) {
	recv := tracingtest.NewReceiver(t)
	var logs testkit.Buffer
	p, err := Start(config.Tracing{OTLPEndpoint: recv.URL, ServiceName: "checkout"}, zerolog.New(&logs))
	if err != nil {
		t.Fatal(err)
	}
	_, span := p.TracerProvider().Tracer("test").Start(context.Background(), "one", trace.WithSpanKind(trace.SpanKindConsumer))
	span.End()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := p.Shutdown(ctx); err != nil {
		t.Fatalf("Shutdown: %v", err)
	}
	if err := p.Shutdown(ctx); err != nil {
		t.Fatalf("second Shutdown: %v", err)
	}
	spans := recv.AwaitSpans(1, 5*time.Second)
	if len(spans) != 1 || spans[0].Name != "one" || spans[0].Service != "checkout" {
		t.Fatalf("received %v, want span \"one\" of service checkout", spans)
	}
	if spans[0].TraceID != span.SpanContext().TraceID().String() {
		t.Errorf("trace id %s, want %s", spans[0].TraceID, span.SpanContext().TraceID())
	}
	if !strings.Contains(logs.String(), `"otlp_endpoint":"`+recv.URL+`/v1/traces"`) {
		t.Errorf("the start is not logged with the endpoint:\n%s", logs.String())
	}
	// Stopped, the provider's logger no longer gets the SDK's reports.
	before := logs.String()
	sdkLog.Handle(fmt.Errorf("reported after the shutdown"))
	if after := logs.String(); after != before {
		t.Errorf("a report after Shutdown reached the stopped provider's logger:\n%s", after[len(before):])
	}
}

// A collector that refuses every export shows in the log as a warning, once
// per distinct message however many exports fail, and the log never holds
// the headers configured through the environment (an API key) — not even
// when their value is malformed and the SDK complains about it.
func TestExportErrorsAreLoggedOnceAndWithoutSecrets(t *testing.T) {
	const secret = "s3cret-token"
	var mu sync.Mutex
	var auth []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		auth = append(auth, r.Header.Get("Api-Key"))
		mu.Unlock()
		http.Error(w, "no such tenant", http.StatusBadRequest) // not retried by the exporter
	}))
	defer srv.Close()
	// One good header, one whose value is a bad escape: the SDK logs the
	// latter's value among its key/values.
	t.Setenv("OTEL_EXPORTER_OTLP_HEADERS", "api-key="+secret+",x-bad=%zz"+secret)
	var logs testkit.Buffer
	p, err := Start(config.Tracing{OTLPEndpoint: srv.URL}, zerolog.New(&logs))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	defer func() { _ = p.Shutdown(ctx) }()
	for i := range 3 {
		_, span := p.TracerProvider().Tracer("test").Start(ctx, fmt.Sprint("span-", i))
		span.End()
		if err := p.ForceFlush(ctx); err == nil {
			t.Fatalf("flush %d: no error from a collector answering 400", i)
		}
	}
	mu.Lock()
	if len(auth) != 3 || auth[0] != secret {
		t.Errorf("the collector got %d exports with api-key %q, want 3 with the configured one", len(auth), auth)
	}
	mu.Unlock()
	out := logs.String()
	t.Logf("log:\n%s", out)
	if n := strings.Count(out, "no such tenant"); n != 1 {
		t.Errorf("the refusal is logged %d times, want once:\n%s", n, out)
	}
	if !strings.Contains(out, `"level":"warn"`) || !strings.Contains(out, `"component":"tracing"`) {
		t.Errorf("the refusal is not a tracing warning:\n%s", out)
	}
	if strings.Contains(out, secret) {
		t.Errorf("the log holds the secret header value:\n%s", out)
	}
}

func TestLimiterLetsEachMessageThroughOncePerInterval(t *testing.T) {
	l := limiter{every: 10 * time.Second, max: 2}
	t0 := time.Unix(1000, 0)
	steps := []struct {
		msg        string
		at         time.Duration
		ok         bool
		suppressed int
	}{
		{"a", 0, true, 0},
		{"a", time.Second, false, 0},
		{"b", time.Second, true, 0},
		{"a", 9 * time.Second, false, 0},
		{"c", 9 * time.Second, false, 0}, // two remembered, none old: dropped
		{"a", 10 * time.Second, true, 2}, // the two repeats held back
		{"a", 11 * time.Second, false, 0},
		{"c", 11 * time.Second, true, 0}, // b is old: forgotten to make room
		{"b", 12 * time.Second, false, 0},
	}
	for i, s := range steps {
		ok, n := l.allow(s.msg, t0.Add(s.at))
		if ok != s.ok || n != s.suppressed {
			t.Errorf("step %d: allow(%q, +%s) = %v, %d; want %v, %d", i, s.msg, s.at, ok, n, s.ok, s.suppressed)
		}
	}
	if len(l.seen) > l.max {
		t.Errorf("%d messages remembered, bound %d", len(l.seen), l.max)
	}
}

func TestErrorLogSaysHowManyRepeatsItHeldBack(t *testing.T) {
	now := time.Unix(1000, 0)
	var out bytes.Buffer
	e := &errorLog{log: zerolog.New(&out), lim: limiter{every: errorEvery, max: maxMessages}, now: func() time.Time { return now }}
	e.Handle(fmt.Errorf("collector down"))
	e.Handle(fmt.Errorf("collector down"))
	e.Handle(fmt.Errorf("collector down"))
	now = now.Add(errorEvery)
	e.Handle(fmt.Errorf("collector down"))
	e.Handle(fmt.Errorf("%s", strings.Repeat("x", 2*maxMessageLen)))
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(lines) != 3 {
		t.Fatalf("%d lines, want 3:\n%s", len(lines), out.String())
	}
	if strings.Contains(lines[0], "repeated") || !strings.Contains(lines[1], `"repeated":2`) {
		t.Errorf("the repeats are not counted right:\n%s", out.String())
	}
	if len(lines[2]) > maxMessageLen+200 {
		t.Errorf("a long error is logged at %d bytes, bound about %d", len(lines[2]), maxMessageLen)
	}
}
