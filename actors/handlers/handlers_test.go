package handlers

import (
	"bufio"
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/turbokafka/turbo/actors"
	"github.com/turbokafka/turbo/config"
)

// waitFor bounds every wait in this file.
const waitFor = 5 * time.Second

// testRecord is a record with every field set, including a key and value
// that are not valid UTF-8, a timestamp with nanoseconds in a non-UTC zone,
// and two headers.
func testRecord() *actors.Record {
	zone := time.FixedZone("UTC+5:30", 5*3600+30*60)
	return &actors.Record{
		Topic:     "orders.v1",
		Partition: 7,
		Offset:    1234567890123,
		Key:       []byte{0xfb, 0xff, 0x00, 'k'}, // base64 "+/8Aaw==": std, not URL, alphabet
		Value:     []byte("{\"id\":1}\x00\xfe\r\n trailing "),
		Headers: []actors.Header{
			{Key: "trace-id", Value: []byte("abc-123")},
			{Key: "source", Value: []byte("billing service")},
		},
		Timestamp: time.Date(2024, 2, 29, 23, 59, 58, 123456789, zone),
	}
}

// captured is what a test server saw of one request.
type captured struct {
	method string
	path   string
	header http.Header
	body   []byte
}

// captureServer answers 204 to every request and hands what it saw to the
// returned channel.
func captureServer(t *testing.T) (*httptest.Server, <-chan captured) {
	t.Helper()
	ch := make(chan captured, 16)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(r.Body)
		if err != nil {
			t.Errorf("server: reading body: %v", err)
		}
		ch <- captured{method: r.Method, path: r.URL.Path, header: r.Header.Clone(), body: body}
		w.WriteHeader(http.StatusNoContent)
	}))
	t.Cleanup(srv.Close)
	return srv, ch
}

func receive[T any](t *testing.T, ch <-chan T, what string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(waitFor):
		t.Fatalf("timed out after %s waiting for %s", waitFor, what)
		var zero T
		return zero
	}
}

// handleAsync runs h.Handle in a goroutine and returns its result channel.
func handleAsync(ctx context.Context, h actors.Handler, rec *actors.Record) <-chan error {
	done := make(chan error, 1)
	go func() { done <- h.Handle(ctx, rec) }()
	return done
}

func TestNewPicksHandler(t *testing.T) {
	tests := []struct {
		name  string
		cfg   config.Handler
		check func(t *testing.T, h actors.Handler, out *bytes.Buffer)
	}{
		{
			name: "noop",
			cfg:  config.Handler{Type: config.HandlerNoop},
			check: func(t *testing.T, h actors.Handler, out *bytes.Buffer) {
				if _, ok := h.(actors.HandlerFunc); !ok {
					t.Errorf("handler is %T, want the noop HandlerFunc", h)
				}
				if err := h.Handle(context.Background(), testRecord()); err != nil {
					t.Errorf("noop Handle = %v, want nil", err)
				}
				if out.Len() != 0 {
					t.Errorf("noop wrote %q to the log writer", out.String())
				}
			},
		},
		{
			name: "log",
			cfg:  config.Handler{Type: config.HandlerLog},
			check: func(t *testing.T, h actors.Handler, out *bytes.Buffer) {
				if _, ok := h.(*Log); !ok {
					t.Fatalf("handler is %T, want *Log", h)
				}
				if err := h.Handle(context.Background(), testRecord()); err != nil {
					t.Fatalf("log Handle = %v", err)
				}
				if !strings.Contains(out.String(), `"topic":"orders.v1"`) || strings.Count(out.String(), "\n") != 1 {
					t.Errorf("log handler did not write one line to the writer given to New: %q", out.String())
				}
			},
		},
		{
			name: "sleep",
			cfg:  config.Handler{Type: config.HandlerSleep, Duration: 30 * time.Millisecond},
			check: func(t *testing.T, h actors.Handler, out *bytes.Buffer) {
				if _, ok := h.(actors.HandlerFunc); !ok {
					t.Errorf("handler is %T, want the sleep HandlerFunc", h)
				}
				start := time.Now()
				if err := h.Handle(context.Background(), testRecord()); err != nil {
					t.Fatalf("sleep Handle = %v", err)
				}
				if el := time.Since(start); el < 30*time.Millisecond {
					t.Errorf("sleep handler returned after %s, want >= the configured 30ms", el)
				}
			},
		},
		{
			name: "http",
			cfg:  config.Handler{Type: config.HandlerHTTP, URL: "http://127.0.0.1:1/hook", Timeout: 3 * time.Second},
			check: func(t *testing.T, h actors.Handler, out *bytes.Buffer) {
				hh, ok := h.(*HTTP)
				if !ok {
					t.Fatalf("handler is %T, want *HTTP", h)
				}
				if hh.url != "http://127.0.0.1:1/hook" || hh.timeout != 3*time.Second {
					t.Errorf("http handler url=%q timeout=%s, want the configured ones", hh.url, hh.timeout)
				}
				tr, ok := hh.client.Transport.(*http.Transport)
				if !ok {
					t.Fatalf("transport is %T, want *http.Transport", hh.client.Transport)
				}
				if tr.MaxIdleConnsPerHost != 12 {
					t.Errorf("MaxIdleConnsPerHost = %d, want the concurrency 12", tr.MaxIdleConnsPerHost)
				}
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var out bytes.Buffer
			h, err := New(tt.cfg, 12, &out)
			if err != nil {
				t.Fatalf("New(%+v) = %v", tt.cfg, err)
			}
			if h == nil {
				t.Fatal("New returned a nil handler without error")
			}
			tt.check(t, h, &out)
		})
	}
}

func TestNewRejectsUnknownType(t *testing.T) {
	for _, typ := range []config.HandlerType{"kafka", "", "HTTP", "Noop"} {
		t.Run(fmt.Sprintf("%q", typ), func(t *testing.T) {
			h, err := New(config.Handler{Type: typ, URL: "http://127.0.0.1:1/"}, 4, io.Discard)
			if err == nil {
				t.Fatalf("New(type %q) returned %T and no error", typ, h)
			}
			if !errors.Is(err, config.ErrInvalid) {
				t.Errorf("New(type %q) error %v does not wrap config.ErrInvalid", typ, err)
			}
			if h != nil {
				t.Errorf("New(type %q) returned a handler (%T) along with the error", typ, h)
			}
			if !strings.Contains(err.Error(), "handler.type") {
				t.Errorf("error %q does not name handler.type", err)
			}
		})
	}
}

func TestHTTPRequest(t *testing.T) {
	srv, reqs := captureServer(t)
	h := NewHTTP(srv.URL+"/ingest", 5*time.Second, 4)
	rec := testRecord()

	if err := h.Handle(context.Background(), rec); err != nil {
		t.Fatalf("Handle = %v, want nil for a 204", err)
	}
	got := receive(t, reqs, "the request")

	if got.method != http.MethodPost {
		t.Errorf("method = %s, want POST", got.method)
	}
	if got.path != "/ingest" {
		t.Errorf("path = %q, want /ingest", got.path)
	}
	if !bytes.Equal(got.body, rec.Value) {
		t.Errorf("body = %q, want the record value %q byte for byte", got.body, rec.Value)
	}
	single := func(name string) string {
		t.Helper()
		vs := got.header.Values(name)
		if len(vs) != 1 {
			t.Errorf("header %s = %q, want exactly one value", name, vs)
			return ""
		}
		return vs[0]
	}
	if v := single("Kafka-Topic"); v != rec.Topic {
		t.Errorf("Kafka-Topic = %q, want %q", v, rec.Topic)
	}
	if v := single("Kafka-Partition"); v != strconv.Itoa(int(rec.Partition)) {
		t.Errorf("Kafka-Partition = %q, want %d", v, rec.Partition)
	}
	if v := single("Kafka-Offset"); v != strconv.FormatInt(rec.Offset, 10) {
		t.Errorf("Kafka-Offset = %q, want %d", v, rec.Offset)
	}
	ts := single("Kafka-Timestamp")
	if parsed, err := time.Parse(time.RFC3339, ts); err != nil {
		t.Errorf("Kafka-Timestamp %q is not RFC 3339: %v", ts, err)
	} else if !parsed.Equal(rec.Timestamp) {
		t.Errorf("Kafka-Timestamp %q parses to %s, want %s", ts, parsed, rec.Timestamp)
	}
	key := single("Kafka-Key")
	if dec, err := base64.StdEncoding.DecodeString(key); err != nil {
		t.Errorf("Kafka-Key %q is not standard base64: %v", key, err)
	} else if !bytes.Equal(dec, rec.Key) {
		t.Errorf("Kafka-Key decodes to %q, want %q", dec, rec.Key)
	}
	for _, hd := range rec.Headers {
		if v := single("Kafka-Header-" + hd.Key); v != string(hd.Value) {
			t.Errorf("Kafka-Header-%s = %q, want %q", hd.Key, v, hd.Value)
		}
	}
}

func TestHTTPNilKeySendsNoKeyHeader(t *testing.T) {
	srv, reqs := captureServer(t)
	h := NewHTTP(srv.URL, 5*time.Second, 1)
	rec := testRecord()
	rec.Key = nil
	rec.Headers = nil

	if err := h.Handle(context.Background(), rec); err != nil {
		t.Fatalf("Handle = %v", err)
	}
	got := receive(t, reqs, "the request")
	if vs, ok := got.header["Kafka-Key"]; ok {
		t.Errorf("a record with a nil key sent Kafka-Key %q", vs)
	}
	for name := range got.header {
		if strings.HasPrefix(name, "Kafka-Header-") {
			t.Errorf("a record without headers sent %s", name)
		}
	}
	if got.header.Get("Kafka-Topic") != rec.Topic {
		t.Errorf("Kafka-Topic = %q, want %q", got.header.Get("Kafka-Topic"), rec.Topic)
	}
}

func TestHTTPStatusClassification(t *testing.T) {
	tests := []struct {
		status    int
		ok        bool // Handle returns nil
		permanent bool // the error matches actors.ErrPermanent
	}{
		{http.StatusOK, true, false},
		{http.StatusCreated, true, false},
		{http.StatusNoContent, true, false},
		{http.StatusRequestTimeout, false, false},
		{http.StatusTooManyRequests, false, false},
		{http.StatusInternalServerError, false, false},
		{http.StatusServiceUnavailable, false, false},
		{http.StatusBadRequest, false, true},
		{http.StatusNotFound, false, true},
		{http.StatusConflict, false, true},
		{http.StatusUnprocessableEntity, false, true},
		// A redirect is not followed (it would turn the POST into a GET
		// without the record): it is a permanent failure.
		{http.StatusMovedPermanently, false, true},
		{http.StatusFound, false, true},
		{http.StatusSeeOther, false, true},
	}
	for _, tt := range tests {
		t.Run(strconv.Itoa(tt.status), func(t *testing.T) {
			const body = "reason for the status"
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				_, _ = io.Copy(io.Discard, r.Body)
				if tt.status >= 300 && tt.status < 400 {
					w.Header().Set("Location", "/elsewhere") // answered 200 if followed
				}
				if r.Method != http.MethodPost {
					w.WriteHeader(http.StatusOK)
					return
				}
				w.WriteHeader(tt.status)
				if tt.status != http.StatusNoContent {
					_, _ = io.WriteString(w, "  "+body+"\n")
				}
			}))
			defer srv.Close()

			err := NewHTTP(srv.URL, 5*time.Second, 1).Handle(context.Background(), testRecord())
			if tt.ok {
				if err != nil {
					t.Fatalf("status %d: Handle = %v, want nil", tt.status, err)
				}
				return
			}
			if err == nil {
				t.Fatalf("status %d: Handle = nil, want an error", tt.status)
			}
			var se *StatusError
			if !errors.As(err, &se) {
				t.Fatalf("status %d: error %v (%T) is not a *StatusError", tt.status, err, err)
			}
			if se.Status != tt.status {
				t.Errorf("StatusError.Status = %d, want %d", se.Status, tt.status)
			}
			if se.Body != body {
				t.Errorf("StatusError.Body = %q, want the trimmed answer body %q", se.Body, body)
			}
			if got := errors.Is(err, actors.ErrPermanent); got != tt.permanent {
				t.Errorf("status %d: errors.Is(err, ErrPermanent) = %v, want %v", tt.status, got, tt.permanent)
			}
			if got := Retryable(tt.status); got == tt.permanent {
				t.Errorf("Retryable(%d) = %v, want %v", tt.status, got, !tt.permanent)
			}
		})
	}
}

func TestHTTPConnectionErrorIsRetryable(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	url := srv.URL
	srv.Close() // nothing listens on the address any more

	done := handleAsync(context.Background(), NewHTTP(url, 5*time.Second, 1), testRecord())
	err := receive(t, done, "Handle against a closed server")
	if err == nil {
		t.Fatal("Handle against a closed server = nil, want an error")
	}
	if errors.Is(err, actors.ErrPermanent) {
		t.Errorf("connection error %v matches ErrPermanent; it must be retryable", err)
	}
	var se *StatusError
	if errors.As(err, &se) {
		t.Errorf("connection error %v is a StatusError (status %d)", err, se.Status)
	}
}

func TestHTTPTimeoutIsRetryable(t *testing.T) {
	release := make(chan struct{})
	arrived := make(chan struct{}, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		arrived <- struct{}{}
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}))
	// Cleanups run last-in first-out: release the handler, then close.
	t.Cleanup(srv.Close)
	t.Cleanup(func() { close(release) })

	const timeout = 100 * time.Millisecond
	start := time.Now()
	done := handleAsync(context.Background(), NewHTTP(srv.URL, timeout, 1), testRecord())
	receive(t, arrived, "the request to reach the server")
	err := receive(t, done, "Handle to time out")
	elapsed := time.Since(start)
	if err == nil {
		t.Fatal("Handle = nil although the server never answered within the timeout")
	}
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("timeout error %v does not match context.DeadlineExceeded", err)
	}
	if errors.Is(err, actors.ErrPermanent) {
		t.Errorf("timeout error %v matches ErrPermanent; it must be retryable", err)
	}
	if elapsed < timeout {
		t.Errorf("Handle returned after %s, before the %s timeout", elapsed, timeout)
	}
}

func TestHTTPKeepAlive(t *testing.T) {
	for _, status := range []int{http.StatusOK, http.StatusServiceUnavailable} {
		t.Run(strconv.Itoa(status), func(t *testing.T) {
			var newConns, requests atomic.Int64
			srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				requests.Add(1)
				_, _ = io.Copy(io.Discard, r.Body)
				w.WriteHeader(status)
				_, _ = io.WriteString(w, strings.Repeat("answer body ", 100))
			}))
			srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
				if s == http.StateNew {
					newConns.Add(1)
				}
			}
			srv.Start()
			defer srv.Close()

			h := NewHTTP(srv.URL, 5*time.Second, 4)
			const n = 50
			for i := range n {
				rec := testRecord()
				rec.Offset = int64(i)
				err := h.Handle(context.Background(), rec)
				if (status == http.StatusOK) != (err == nil) {
					t.Fatalf("record %d: Handle = %v for status %d", i, err, status)
				}
			}
			if got := requests.Load(); got != n {
				t.Errorf("server saw %d requests, want %d", got, n)
			}
			if got := newConns.Load(); got > 2 {
				t.Errorf("%d sequential requests opened %d connections, want <= 2 (keep-alive)", n, got)
			}
		})
	}
}

func TestHTTPContextCancel(t *testing.T) {
	release := make(chan struct{})
	arrived := make(chan struct{}, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		arrived <- struct{}{}
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}))
	t.Cleanup(srv.Close)
	t.Cleanup(func() { close(release) })
	h := NewHTTP(srv.URL, time.Hour, 1)

	t.Run("cancelled in flight", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		done := handleAsync(ctx, h, testRecord())
		receive(t, arrived, "the request to reach the server")
		cancel()
		start := time.Now()
		err := receive(t, done, "Handle to return after cancel")
		if err == nil {
			t.Fatal("Handle = nil after its context was cancelled mid-request")
		}
		if !errors.Is(err, context.Canceled) {
			t.Errorf("error %v does not match context.Canceled", err)
		}
		if errors.Is(err, actors.ErrPermanent) {
			t.Errorf("cancellation error %v matches ErrPermanent", err)
		}
		if el := time.Since(start); el > time.Second {
			t.Errorf("Handle took %s to return after cancel", el)
		}
	})

	t.Run("cancelled before the call", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		err := receive(t, handleAsync(ctx, h, testRecord()), "Handle with a cancelled context")
		if !errors.Is(err, context.Canceled) {
			t.Errorf("Handle with a cancelled context = %v, want context.Canceled", err)
		}
	})
}

// A record header that cannot travel as an HTTP header (Kafka header keys
// are arbitrary strings and values arbitrary bytes) fails the same way on
// every attempt. The handler must either deliver the record anyway or
// report a permanent failure; a retryable error would retry it forever.
func TestHTTPUnsendableRecordHeaderIsNotRetryable(t *testing.T) {
	tests := []struct {
		name   string
		header actors.Header
	}{
		{"value with CRLF", actors.Header{Key: "note", Value: []byte("line1\r\nline2")}},
		{"binary value", actors.Header{Key: "trace", Value: []byte{0x00, 0x01, 0x02}}},
		{"name with space", actors.Header{Key: "trace id", Value: []byte("x")}},
		{"name with colon", actors.Header{Key: "a:b", Value: []byte("x")}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv, reqs := captureServer(t)
			rec := testRecord()
			rec.Headers = []actors.Header{tt.header}
			err := NewHTTP(srv.URL, 5*time.Second, 1).Handle(context.Background(), rec)
			if err == nil {
				// Delivered some other way: then the body must be intact.
				got := receive(t, reqs, "the delivered request")
				if !bytes.Equal(got.body, rec.Value) {
					t.Errorf("body = %q, want %q", got.body, rec.Value)
				}
				return
			}
			if !errors.Is(err, actors.ErrPermanent) {
				t.Errorf("record header %q=%q: Handle = %v, a retryable error for a record that can never be sent; want nil (delivered) or an error matching ErrPermanent",
					tt.header.Key, tt.header.Value, err)
			}
		})
	}
}

type logLineOut struct {
	Topic     string            `json:"topic"`
	Partition int32             `json:"partition"`
	Offset    int64             `json:"offset"`
	Timestamp time.Time         `json:"timestamp"`
	Key       *string           `json:"key"`
	Value     string            `json:"value"`
	Headers   map[string]string `json:"headers"`
}

func TestLogLine(t *testing.T) {
	rec := testRecord()
	rec.Key = []byte("customer-42")
	rec.Value = []byte(`{"amount": 10}`)

	tests := []struct {
		name    string
		key     []byte
		wantKey string // the raw JSON of "key"
	}{
		{"with key", []byte("customer-42"), `"customer-42"`},
		{"nil key", nil, `null`},
		{"empty key", []byte{}, `""`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var out bytes.Buffer
			r := *rec
			r.Key = tt.key
			if err := NewLog(&out).Handle(context.Background(), &r); err != nil {
				t.Fatalf("Handle = %v", err)
			}
			text := out.String()
			if strings.Count(text, "\n") != 1 || !strings.HasSuffix(text, "\n") {
				t.Fatalf("output %q is not exactly one line", text)
			}
			var raw map[string]json.RawMessage
			if err := json.Unmarshal(out.Bytes(), &raw); err != nil {
				t.Fatalf("line %q is not a JSON object: %v", text, err)
			}
			if got := string(raw["key"]); got != tt.wantKey {
				t.Errorf("key = %s, want %s", got, tt.wantKey)
			}
			var line logLineOut
			if err := json.Unmarshal(out.Bytes(), &line); err != nil {
				t.Fatalf("decoding %q: %v", text, err)
			}
			if line.Topic != r.Topic || line.Partition != r.Partition || line.Offset != r.Offset {
				t.Errorf("coordinates = %s/%d@%d, want %s/%d@%d", line.Topic, line.Partition, line.Offset, r.Topic, r.Partition, r.Offset)
			}
			if line.Value != string(r.Value) {
				t.Errorf("value = %q, want %q", line.Value, r.Value)
			}
			if !line.Timestamp.Equal(r.Timestamp) {
				t.Errorf("timestamp = %s, want %s", line.Timestamp, r.Timestamp)
			}
			if line.Headers["trace-id"] != "abc-123" || line.Headers["source"] != "billing service" || len(line.Headers) != 2 {
				t.Errorf("headers = %v, want the record's two headers", line.Headers)
			}
		})
	}
}

func TestLogConcurrentLinesDoNotInterleave(t *testing.T) {
	const goroutines, perG = 8, 200
	var out bytes.Buffer // not safe for concurrent use: Log must serialize writes
	l := NewLog(&out)
	value := strings.Repeat("v", 300) // long enough that interleaving would show

	var wg sync.WaitGroup
	for g := range goroutines {
		wg.Go(func() {
			for i := range perG {
				rec := &actors.Record{Topic: fmt.Sprintf("g%d", g), Partition: int32(g), Offset: int64(i), Key: []byte("k"), Value: []byte(value)}
				if err := l.Handle(context.Background(), rec); err != nil {
					t.Errorf("goroutine %d record %d: Handle = %v", g, i, err)
					return
				}
			}
		})
	}
	wg.Wait()

	seen := make(map[[2]int64]bool)
	sc := bufio.NewScanner(&out)
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	lines := 0
	for sc.Scan() {
		lines++
		var line logLineOut
		if err := json.Unmarshal(sc.Bytes(), &line); err != nil {
			t.Fatalf("line %d %q is not valid JSON: %v", lines, sc.Text(), err)
		}
		if line.Topic != fmt.Sprintf("g%d", line.Partition) || line.Value != value {
			t.Fatalf("line %d mixes records: %q", lines, sc.Text())
		}
		id := [2]int64{int64(line.Partition), line.Offset}
		if seen[id] {
			t.Fatalf("record %v written twice", id)
		}
		seen[id] = true
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if lines != goroutines*perG || len(seen) != goroutines*perG {
		t.Errorf("got %d lines (%d distinct records), want %d", lines, len(seen), goroutines*perG)
	}
}

func TestSleep(t *testing.T) {
	t.Run("returns nil after the duration", func(t *testing.T) {
		const d = 40 * time.Millisecond
		start := time.Now()
		err := receive(t, handleAsync(context.Background(), Sleep(d), testRecord()), "Sleep to finish")
		if err != nil {
			t.Fatalf("Handle = %v, want nil", err)
		}
		if el := time.Since(start); el < d {
			t.Errorf("returned after %s, want >= %s", el, d)
		}
	})

	t.Run("zero and negative return at once", func(t *testing.T) {
		for _, d := range []time.Duration{0, -time.Second} {
			ctx, cancel := context.WithCancel(context.Background())
			cancel() // even a cancelled context: there is nothing to wait for
			if err := receive(t, handleAsync(ctx, Sleep(d), testRecord()), "Sleep(0)"); err != nil {
				t.Errorf("Sleep(%s) = %v, want nil", d, err)
			}
		}
	})

	t.Run("cancel returns ctx.Err promptly", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		done := handleAsync(ctx, Sleep(time.Hour), testRecord())
		start := time.Now()
		cancel()
		err := receive(t, done, "Sleep to return after cancel")
		if !errors.Is(err, context.Canceled) {
			t.Errorf("Handle = %v, want context.Canceled", err)
		}
		if el := time.Since(start); el > time.Second {
			t.Errorf("returned %s after cancel", el)
		}
	})

	t.Run("deadline returns DeadlineExceeded", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
		defer cancel()
		err := receive(t, handleAsync(ctx, Sleep(time.Hour), testRecord()), "Sleep to hit the deadline")
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("Handle = %v, want context.DeadlineExceeded", err)
		}
	})
}
