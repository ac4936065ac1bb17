package handlers

import (
	"context"
	"encoding/base64"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/turbokafka/turbo/actors"
	"go.opentelemetry.io/otel/trace"
)

// rawServer answers every connection with the bytes of answer, written
// straight to the socket after the request was read, then closes it: what a
// crashing endpoint or a cut connection looks like to the client.
func rawServer(t *testing.T, answer string) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		conn, buf, err := http.NewResponseController(w).Hijack()
		if err != nil {
			t.Errorf("server: hijack: %v", err)
			return
		}
		defer conn.Close()
		_, _ = buf.WriteString(answer)
		_ = buf.Flush()
	}))
	t.Cleanup(srv.Close)
	return srv
}

// A 2xx whose body breaks off (the connection closed before Content-Length
// bytes, or a chunked body without its last chunk) is not an answer the
// endpoint finished: it is a retryable failure, not a success.
func TestHTTPTruncatedBodyIsRetryable(t *testing.T) {
	tests := []struct {
		name, answer string
	}{
		{"content-length 100, 7 bytes sent", "HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\naccepte"},
		{"chunked without the last chunk", "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n7\r\naccepte\r\n"},
		{"201, content-length 2, 1 byte sent", "HTTP/1.1 201 Created\r\nContent-Length: 2\r\n\r\n{"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := rawServer(t, tt.answer)
			err := receive(t, handleAsync(context.Background(), NewHTTP(srv.URL, 5*time.Second, 1), testRecord()), "Handle")
			if err == nil {
				t.Fatalf("answer %q: Handle = nil, a broken answer counted as success", tt.answer)
			}
			if !errors.Is(err, io.ErrUnexpectedEOF) {
				t.Errorf("Handle = %v, want an error matching io.ErrUnexpectedEOF", err)
			}
			if errors.Is(err, actors.ErrPermanent) {
				t.Errorf("Handle = %v matches ErrPermanent; a broken answer is retryable", err)
			}
		})
	}
}

// A 2xx with an endless body is a success once its status arrived: the
// handler reads at most 1 MiB of it (so a short body lets the connection be
// reused) and then drops the connection instead of reading forever.
func TestHTTPEndlessSuccessBodyIsNotReadForever(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		chunk := []byte(strings.Repeat("x", 64<<10))
		w.WriteHeader(http.StatusOK)
		for r.Context().Err() == nil {
			if _, err := w.Write(chunk); err != nil {
				return
			}
		}
	}))
	defer srv.Close()
	err := receive(t, handleAsync(context.Background(), NewHTTP(srv.URL, 30*time.Second, 1), testRecord()), "Handle of an endless 200")
	if err != nil {
		t.Errorf("Handle = %v, want nil: the status was 200", err)
	}
}

// A body within the limit is read to its end, so the connection goes back
// to the pool: a second record reuses it.
func TestHTTPShortSuccessBodyKeepsTheConnection(t *testing.T) {
	conns := make(chan net.Conn, 4)
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, strings.Repeat("y", 100<<10))
	}))
	srv.Config.ConnState = func(c net.Conn, s http.ConnState) {
		if s == http.StateNew {
			conns <- c
		}
	}
	srv.Start()
	defer srv.Close()
	h := NewHTTP(srv.URL, 5*time.Second, 1)
	for i := range 2 {
		if err := h.Handle(context.Background(), testRecord()); err != nil {
			t.Fatalf("request %d: Handle = %v", i, err)
		}
	}
	if n := len(conns); n != 1 {
		t.Errorf("%d connections for 2 requests with 100 KiB answers, want 1 (kept alive)", n)
	}
}

// headerServer answers 204 and hands over the headers of each request as
// Go's server parsed them (names canonicalized, values byte for byte).
func headerServer(t *testing.T) (*httptest.Server, <-chan http.Header) {
	t.Helper()
	ch := make(chan http.Header, 4)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		ch <- r.Header.Clone()
		w.WriteHeader(http.StatusNoContent)
	}))
	t.Cleanup(srv.Close)
	return srv, ch
}

// Record headers HTTP can carry byte for byte travel as they are, UTF-8 and
// other bytes from 0x80 up (obs-text) included: refusing them made a normal
// record fail for good (a restart loop under on_failure: fail).
func TestHTTPNonASCIIHeaderValuesArriveIntact(t *testing.T) {
	srv, got := headerServer(t)
	rec := testRecord()
	rec.Headers = []actors.Header{
		{Key: "greeting", Value: []byte("héllo")},
		{Key: "emoji", Value: []byte("ok 👍 done")},
		{Key: "latin1", Value: []byte{'c', 0xe9, 0xff, 0x80}}, // not UTF-8: still obs-text
		{Key: "tabbed", Value: []byte("a\tb  c")},
		{Key: "empty", Value: nil},
	}
	if err := NewHTTP(srv.URL, 5*time.Second, 1).Handle(context.Background(), rec); err != nil {
		t.Fatalf("Handle = %v, want the record delivered", err)
	}
	h := receive(t, got, "the request")
	for _, hd := range rec.Headers {
		vs, ok := h[http.CanonicalHeaderKey("Kafka-Header-"+hd.Key)]
		if !ok || len(vs) != 1 || vs[0] != string(hd.Value) {
			t.Errorf("Kafka-Header-%s = %q (present %v), want exactly %q", hd.Key, vs, ok, hd.Value)
		}
	}
	for name := range h {
		if strings.HasPrefix(name, "Kafka-Base64-Header") {
			t.Errorf("header %s sent: every header of this record can travel as it is", name)
		}
	}
}

// A record header value HTTP cannot carry (control characters, a line
// break, leading or trailing blanks, which a parser trims) travels base64
// encoded under Kafka-Base64-Header-<name>: the record is delivered, and
// nothing in the value can become a header of its own.
func TestHTTPUnsendableHeaderValueTravelsBase64(t *testing.T) {
	srv, got := headerServer(t)
	rec := testRecord()
	rec.Headers = []actors.Header{
		{Key: "note", Value: []byte("ok\r\nX-Evil: 1")},
		{Key: "note", Value: []byte("second\nX-Evil2: 1")},
		{Key: "id", Value: []byte{0x00, 0x00, 0x01, 0x2c}}, // a binary int32
		{Key: "del", Value: []byte("a\x7fb")},
		{Key: "padded", Value: []byte(" x ")},
		{Key: "plain", Value: []byte("kept as is")},
	}
	if err := NewHTTP(srv.URL, 5*time.Second, 1).Handle(context.Background(), rec); err != nil {
		t.Fatalf("Handle = %v, want the record delivered", err)
	}
	h := receive(t, got, "the request")
	for _, evil := range []string{"X-Evil", "X-Evil2"} {
		if vs, ok := h[evil]; ok {
			t.Errorf("the server saw an injected header %s: %q", evil, vs)
		}
	}
	decoded := map[string][]string{}
	for name, vs := range h {
		if strings.HasPrefix(name, "Kafka-Base64-Header-") {
			for _, v := range vs {
				b, err := base64.StdEncoding.DecodeString(v)
				if err != nil {
					t.Errorf("%s: %q is not standard base64: %v", name, v, err)
				}
				decoded[name] = append(decoded[name], string(b))
			}
		}
	}
	want := map[string][]string{
		"Kafka-Base64-Header-Note":   {"ok\r\nX-Evil: 1", "second\nX-Evil2: 1"},
		"Kafka-Base64-Header-Id":     {"\x00\x00\x01\x2c"},
		"Kafka-Base64-Header-Del":    {"a\x7fb"},
		"Kafka-Base64-Header-Padded": {" x "},
	}
	for name, w := range want {
		if g := decoded[name]; strings.Join(g, "|") != strings.Join(w, "|") {
			t.Errorf("%s decodes to %q, want %q", name, g, w)
		}
		if vs, ok := h[strings.Replace(name, "Kafka-Base64-Header-", "Kafka-Header-", 1)]; ok {
			t.Errorf("the header of %s was also sent raw: %q", name, vs)
		}
	}
	if len(decoded) != len(want) {
		t.Errorf("base64 headers %q, want exactly %q", decoded, want)
	}
	if v := h.Get("Kafka-Header-Plain"); v != "kept as is" {
		t.Errorf("Kafka-Header-Plain = %q, want the value as is", v)
	}
}

// A record header whose name is not an HTTP token (a space, a colon, a line
// break, non-ASCII, empty) travels as Kafka-Base64-Header: <name in
// base64>:<value in base64>, one field per header, in the record's order.
func TestHTTPUnsendableHeaderNameTravelsBase64(t *testing.T) {
	srv, got := headerServer(t)
	rec := testRecord()
	rec.Headers = []actors.Header{
		{Key: "trace id", Value: []byte("x")},
		{Key: "a:b", Value: []byte("y")},
		{Key: "X-Evil: 1\r\nX-Evil", Value: []byte("z")},
		{Key: "clé", Value: []byte("héllo")},
		{Key: "", Value: []byte("no name")},
		{Key: "ok", Value: []byte("plain")},
	}
	if err := NewHTTP(srv.URL, 5*time.Second, 1).Handle(context.Background(), rec); err != nil {
		t.Fatalf("Handle = %v, want the record delivered", err)
	}
	h := receive(t, got, "the request")
	if vs, ok := h["X-Evil"]; ok {
		t.Errorf("the server saw an injected header X-Evil: %q", vs)
	}
	var pairs []string
	for _, v := range h.Values("Kafka-Base64-Header") {
		name, value, ok := strings.Cut(v, ":")
		n, err1 := base64.StdEncoding.DecodeString(name)
		b, err2 := base64.StdEncoding.DecodeString(value)
		if !ok || err1 != nil || err2 != nil {
			t.Errorf("Kafka-Base64-Header %q is not <base64>:<base64> (%v, %v)", v, err1, err2)
			continue
		}
		pairs = append(pairs, string(n)+"="+string(b))
	}
	want := []string{"trace id=x", "a:b=y", "X-Evil: 1\r\nX-Evil=z", "clé=héllo", "=no name"}
	if strings.Join(pairs, "|") != strings.Join(want, "|") {
		t.Errorf("Kafka-Base64-Header decodes to %q, want %q in this order", pairs, want)
	}
	if v := h.Get("Kafka-Header-Ok"); v != "plain" {
		t.Errorf("Kafka-Header-Ok = %q, want plain", v)
	}
}

const (
	traceID     = "4bf92f3577b34da6a3ce929d0e0e4736"
	parentID    = "00f067aa0ba902b7"
	traceparent = "00-" + traceID + "-" + parentID + "-01"
)

// Trace context travels under its standard names, from the context (where
// actors.Start puts the record's): never as Kafka-Header-traceparent, and
// never twice.
func TestHTTPForwardsTraceContextUnderItsStandardNames(t *testing.T) {
	sc := trace.NewSpanContext(trace.SpanContextConfig{
		TraceID: mustTraceID(t, traceID), SpanID: mustSpanID(t, parentID), TraceFlags: trace.FlagsSampled, Remote: true,
		TraceState: mustTraceState(t, "congo=t61rcWkgMzE"),
	})
	rec := testRecord()
	rec.Headers = []actors.Header{
		{Key: "traceparent", Value: []byte(traceparent)},
		{Key: "Tracestate", Value: []byte("congo=t61rcWkgMzE")},
		{Key: "other", Value: []byte("kept")},
	}
	tests := []struct {
		name   string
		ctx    context.Context
		parent string // Traceparent sent; "" for none
		state  string
	}{
		{"the record's trace in the context", trace.ContextWithRemoteSpanContext(context.Background(), sc), traceparent, "congo=t61rcWkgMzE"},
		// Without it (a caller that is not actors.Start), nothing is
		// forwarded: the record's headers are not read for it.
		{"no trace in the context", context.Background(), "", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv, got := headerServer(t)
			if err := NewHTTP(srv.URL, 5*time.Second, 1).Handle(tt.ctx, rec); err != nil {
				t.Fatalf("Handle = %v", err)
			}
			h := receive(t, got, "the request")
			if vs := h["Traceparent"]; tt.parent == "" && len(vs) != 0 || tt.parent != "" && (len(vs) != 1 || vs[0] != tt.parent) {
				t.Errorf("Traceparent = %q, want %q", vs, tt.parent)
			}
			if vs := h["Tracestate"]; tt.state == "" && len(vs) != 0 || tt.state != "" && (len(vs) != 1 || vs[0] != tt.state) {
				t.Errorf("Tracestate = %q, want %q", vs, tt.state)
			}
			for name := range h {
				if l := strings.ToLower(name); strings.HasSuffix(l, "-traceparent") || strings.HasSuffix(l, "-tracestate") {
					t.Errorf("trace context also sent as %s", name)
				}
			}
			if v := h.Get("Kafka-Header-Other"); v != "kept" {
				t.Errorf("Kafka-Header-Other = %q, want the other headers forwarded as before", v)
			}
		})
	}
}

func mustTraceID(t *testing.T, s string) trace.TraceID {
	t.Helper()
	id, err := trace.TraceIDFromHex(s)
	if err != nil {
		t.Fatal(err)
	}
	return id
}

func mustSpanID(t *testing.T, s string) trace.SpanID {
	t.Helper()
	id, err := trace.SpanIDFromHex(s)
	if err != nil {
		t.Fatal(err)
	}
	return id
}

func mustTraceState(t *testing.T, s string) trace.TraceState {
	t.Helper()
	ts, err := trace.ParseTraceState(s)
	if err != nil {
		t.Fatal(err)
	}
	return ts
}
