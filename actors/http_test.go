package actors_test

import (
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/turbokafka/turbo/actors/handlers"
	"github.com/turbokafka/turbo/actors/harness"
	"github.com/turbokafka/turbo/config"
)

// The http handler through the real tree (actors/harness).

// An endpoint answering 429 or 503 with Retry-After is retried no sooner
// than it asked (capped by max_backoff), through the whole tree: the http
// handler reads the header, the failure policy delays the parked record.
// Before Retry-After was honoured, every retry came after the plain backoff
// (80–100 ms here), whatever the endpoint said.
func TestHTTPRetryAfterDelaysTheRetry(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name       string
		status     int
		maxBackoff time.Duration
		// retryAfter returns the header's value and the earliest moment the
		// retry may arrive, given when the first answer was written.
		retryAfter func(answered time.Time) (string, time.Time)
	}{
		{"delta-seconds", http.StatusServiceUnavailable, 5 * time.Second, func(at time.Time) (string, time.Time) {
			return "1", at.Add(time.Second)
		}},
		{"HTTP-date", http.StatusTooManyRequests, 5 * time.Second, func(at time.Time) (string, time.Time) {
			// Whole seconds, as HTTP-dates are: 2 to 3 s ahead.
			when := at.Truncate(time.Second).Add(3 * time.Second)
			return when.UTC().Format(http.TimeFormat), when
		}},
		{"capped by max_backoff", http.StatusServiceUnavailable, time.Second, func(at time.Time) (string, time.Time) {
			return "3600", at.Add(time.Second)
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var (
				mu       sync.Mutex
				arrivals []time.Time
				answered time.Time
				earliest time.Time
			)
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				now := time.Now()
				mu.Lock()
				defer mu.Unlock()
				arrivals = append(arrivals, now)
				if len(arrivals) == 1 {
					answered = time.Now()
					var v string
					v, earliest = tt.retryAfter(answered)
					w.Header().Set("Retry-After", v)
					w.WriteHeader(tt.status)
					return
				}
				w.WriteHeader(http.StatusNoContent)
			}))
			defer srv.Close()
			h := harness.New(t, consumer(func(c *config.Consumer) {
				c.Retry = config.Retry{MaxAttempts: 3, InitialBackoff: 100 * time.Millisecond, MaxBackoff: tt.maxBackoff}
			}), handlers.NewHTTP(srv.URL, 5*time.Second, 1))
			h.Feed(harness.Seq(topic, 0, 0, 1, 1)...)
			h.Assign(topic, 0)
			h.AwaitAllCommitted()

			mu.Lock()
			defer mu.Unlock()
			if len(arrivals) != 2 {
				t.Fatalf("%d requests, want 2 (the 503/429, then the retry)", len(arrivals))
			}
			gap := arrivals[1].Sub(answered)
			t.Logf("retry arrived %v after the answer with Retry-After", gap)
			if arrivals[1].Before(earliest) {
				t.Errorf("retry arrived %v after the answer, %v before the moment Retry-After named (max_backoff %v)",
					gap, earliest.Sub(arrivals[1]), tt.maxBackoff)
			}
			if gap > tt.maxBackoff+2*time.Second {
				t.Errorf("retry arrived %v after the answer; Retry-After is capped by max_backoff %v", gap, tt.maxBackoff)
			}
			if s := h.Stats(); s.Retries != 1 || s.Restarts != 0 {
				t.Errorf("stats %+v: want 1 retry (Retry-After consumes an attempt) and no restart", s)
			}
		})
	}
}

// Records whose headers HTTP cannot carry as they are — UTF-8, a line break,
// a name with a space — are delivered, each once, under on_failure: fail
// (the default). Refusing them made a permanent failure, and so a restart
// loop on perfectly normal records.
func TestHTTPRecordHeadersNeverFailTheTree(t *testing.T) {
	t.Parallel()
	var (
		mu       sync.Mutex
		received = map[string][]string{} // offset → what arrived of its header
	)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		off := r.Header.Get("Kafka-Offset")
		for _, name := range []string{"Kafka-Header-Greeting", "Kafka-Base64-Header-Note", "Kafka-Base64-Header"} {
			for _, v := range r.Header.Values(name) {
				received[off] = append(received[off], name+": "+v)
			}
		}
		w.WriteHeader(http.StatusNoContent)
	}))
	defer srv.Close()
	h := harness.New(t, consumer(func(c *config.Consumer) {
		c.Retry.MaxAttempts = 2
		c.OnFailure = config.OnFailureFail
	}), handlers.NewHTTP(srv.URL, 5*time.Second, 2))
	h.Feed(
		harness.Rec(topic, 0, 0, "k", "v0", harness.Header{Key: "greeting", Value: []byte("héllo")}),
		harness.Rec(topic, 0, 1, "k", "v1", harness.Header{Key: "note", Value: []byte("a\r\nX-Evil: 1")}),
		harness.Rec(topic, 0, 2, "k", "v2", harness.Header{Key: "trace id", Value: []byte("x")}),
	)
	h.Assign(topic, 0)
	h.AwaitAllCommitted()

	mu.Lock()
	defer mu.Unlock()
	want := map[string][]string{
		"0": {"Kafka-Header-Greeting: héllo"},
		"1": {"Kafka-Base64-Header-Note: YQ0KWC1FdmlsOiAx"},
		"2": {"Kafka-Base64-Header: dHJhY2UgaWQ=:eA=="},
	}
	for off, w := range want {
		if g := received[off]; len(g) != 1 || g[0] != w[0] {
			t.Errorf("offset %s arrived with %q, want %q", off, g, w)
		}
	}
	for off := range int64(3) {
		if n := h.TimesHandled(topic, 0, off); n != 1 {
			t.Errorf("offset %d handled %d times, want once", off, n)
		}
	}
	if s := h.Stats(); s.Restarts != 0 || s.Failed != 0 {
		t.Errorf("stats %+v: want no failed attempt and no restart", s)
	}
}
