// Package tracingtest is an OTLP/HTTP trace receiver for tests: a local
// collector that decodes what an exporter posts (protobuf, plain or gzip)
// and keeps the spans for the test to look at.
package tracingtest

import (
	"compress/gzip"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	coltrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/proto"
)

// maxBody bounds one export request's body (decompressed).
const maxBody = 16 << 20

// Span is one received span, flattened.
type Span struct {
	Service      string // the resource's service.name
	TraceID      string // hex
	SpanID       string // hex
	ParentSpanID string // hex; "" for a root span
	Name         string
	Kind         tracepb.Span_SpanKind
	Attrs        map[string]string // values as text (ints in decimal)
	StatusCode   tracepb.Status_StatusCode
	StatusText   string
}

func (s Span) String() string {
	return fmt.Sprintf("%s %s/%s parent %q %v status %v %q", s.Name, s.TraceID, s.SpanID, s.ParentSpanID, s.Attrs, s.StatusCode, s.StatusText)
}

// Receiver is a running receiver; URL is its base address (the exporter adds
// /v1/traces). It stops when the test ends.
type Receiver struct {
	URL string

	t       testing.TB
	mu      sync.Mutex
	spans   []Span
	changed chan struct{} // closed (and replaced) when spans arrive
}

// NewReceiver starts a receiver on a random loopback port.
func NewReceiver(t testing.TB) *Receiver {
	t.Helper()
	r := &Receiver{t: t, changed: make(chan struct{})}
	srv := httptest.NewServer(http.HandlerFunc(r.serve))
	r.URL = srv.URL
	t.Cleanup(srv.Close) // waits for requests in progress
	return r
}

func (r *Receiver) serve(w http.ResponseWriter, req *http.Request) {
	if req.Method != http.MethodPost || req.URL.Path != "/v1/traces" {
		r.t.Errorf("tracingtest: unexpected %s %s", req.Method, req.URL.Path)
		http.NotFound(w, req)
		return
	}
	if ct := req.Header.Get("Content-Type"); ct != "application/x-protobuf" {
		r.t.Errorf("tracingtest: Content-Type %q, want application/x-protobuf", ct)
		http.Error(w, "protobuf only", http.StatusUnsupportedMediaType)
		return
	}
	var body io.Reader = req.Body
	if strings.EqualFold(req.Header.Get("Content-Encoding"), "gzip") {
		zr, err := gzip.NewReader(req.Body)
		if err != nil {
			r.t.Errorf("tracingtest: gzip: %v", err)
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		defer zr.Close()
		body = zr
	}
	raw, err := io.ReadAll(io.LimitReader(body, maxBody+1))
	if err != nil || len(raw) > maxBody {
		r.t.Errorf("tracingtest: reading the request (%d bytes): %v", len(raw), err)
		http.Error(w, "bad body", http.StatusBadRequest)
		return
	}
	var msg coltrace.ExportTraceServiceRequest
	if err := proto.Unmarshal(raw, &msg); err != nil {
		r.t.Errorf("tracingtest: decoding ExportTraceServiceRequest: %v", err)
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	got := flatten(&msg)
	r.mu.Lock()
	r.spans = append(r.spans, got...)
	close(r.changed)
	r.changed = make(chan struct{})
	r.mu.Unlock()

	out, err := proto.Marshal(&coltrace.ExportTraceServiceResponse{})
	if err != nil {
		r.t.Errorf("tracingtest: encoding the response: %v", err)
		return
	}
	w.Header().Set("Content-Type", "application/x-protobuf")
	_, _ = w.Write(out)
}

func flatten(msg *coltrace.ExportTraceServiceRequest) []Span {
	var out []Span
	for _, rs := range msg.GetResourceSpans() {
		service := attrs(rs.GetResource().GetAttributes())["service.name"]
		for _, ss := range rs.GetScopeSpans() {
			for _, s := range ss.GetSpans() {
				out = append(out, Span{
					Service:      service,
					TraceID:      hex.EncodeToString(s.GetTraceId()),
					SpanID:       hex.EncodeToString(s.GetSpanId()),
					ParentSpanID: hex.EncodeToString(s.GetParentSpanId()),
					Name:         s.GetName(),
					Kind:         s.GetKind(),
					Attrs:        attrs(s.GetAttributes()),
					StatusCode:   s.GetStatus().GetCode(),
					StatusText:   s.GetStatus().GetMessage(),
				})
			}
		}
	}
	return out
}

func attrs(kvs []*commonpb.KeyValue) map[string]string {
	m := make(map[string]string, len(kvs))
	for _, kv := range kvs {
		v := kv.GetValue()
		switch x := v.GetValue().(type) {
		case *commonpb.AnyValue_StringValue:
			m[kv.GetKey()] = x.StringValue
		case *commonpb.AnyValue_IntValue:
			m[kv.GetKey()] = fmt.Sprint(x.IntValue)
		case *commonpb.AnyValue_BoolValue:
			m[kv.GetKey()] = fmt.Sprint(x.BoolValue)
		case *commonpb.AnyValue_DoubleValue:
			m[kv.GetKey()] = fmt.Sprint(x.DoubleValue)
		default:
			m[kv.GetKey()] = v.String()
		}
	}
	return m
}

// Spans returns the spans received so far, in arrival order.
func (r *Receiver) Spans() []Span {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]Span(nil), r.spans...)
}

// AwaitSpans waits until at least n spans have arrived and returns them all;
// past timeout it fails the test, saying what arrived. Call it from the
// test's goroutine.
func (r *Receiver) AwaitSpans(n int, timeout time.Duration) []Span {
	r.t.Helper()
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	for {
		r.mu.Lock()
		spans, changed := append([]Span(nil), r.spans...), r.changed
		r.mu.Unlock()
		if len(spans) >= n {
			return spans
		}
		select {
		case <-changed:
		case <-deadline.C:
			r.t.Fatalf("tracingtest: %d span(s) within %s, want %d; received: %v", len(spans), timeout, n, spans)
			return nil
		}
	}
}
