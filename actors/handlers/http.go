package handlers

import (
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/turbokafka/turbo/actors"
	"github.com/turbokafka/turbo/config"
	"go.opentelemetry.io/otel/propagation"
)

// HTTP posts each record to a URL: the body is the record's value as is, and
// the record's coordinates travel in headers (Kafka-Topic, Kafka-Partition,
// Kafka-Offset, Kafka-Timestamp, Kafka-Key in base64, and the record's
// headers as described at addRecordHeader).
//
// W3C trace context travels under its standard names, traceparent and
// tracestate, taken from the handler's context (propagation.TraceContext):
// actors.Start puts a record's trace context there, so the record's own
// traceparent is forwarded as it came — or, with spans on, one naming the
// attempt's span as the parent. The record's traceparent and tracestate
// headers are not also sent as Kafka-Header-*.
//
// A 2xx answer whose body arrives whole (or is longer than maxDrain) is
// success. With handler.response: outputs, its body lists the record's
// outputs, which the handler emits (actors.Emit): nothing, or JSON objects
// one after the other (application/x-ndjson) or in a list, each
// {"topic","key","value","headers":[{"key","value"}]} with the bytes
// encoded as in a batch request (handler.encoding; key_base64,
// value_base64), topic optional (output.topic), key and value null or left
// out for none; at most 64 MiB. A body that cannot be read so fails the
// record for good (ErrBadOutputs: the endpoint handled it); 408, 429, 5xx, timeouts, connection errors and answers that break
// off are retryable failures — with the answer's Retry-After, if any, as an
// actors.RetryAfterError; any other status is permanent (wraps
// actors.ErrPermanent).
type HTTP struct {
	url     string // what is requested
	shown   string // what errors name: the configured URL (a unix socket's too)
	timeout time.Duration
	client  *http.Client
	headers []*staticHeader // handler.headers
	// encoding is handler.encoding, for batch bodies (HandleBatch) and the
	// outputs an answer lists.
	encoding config.Encoding
	// outputs: a 2xx answer's body lists the record's outputs
	// (handler.response: outputs), which the handler emits.
	outputs bool
}

// StatusError is the failure of a non-2xx answer.
type StatusError struct {
	Status int
	Body   string // the start of the answer's body, for the logs
}

func (e *StatusError) Error() string {
	return fmt.Sprintf("handlers: http status %d: %s", e.Status, e.Body)
}

// Unwrap makes non-retryable statuses match actors.ErrPermanent.
func (e *StatusError) Unwrap() error {
	if Retryable(e.Status) {
		return nil
	}
	return actors.ErrPermanent
}

// Is makes 429 and 503 match actors.ErrBackpressure: the endpoint says it
// is overloaded (concurrency_mode adaptive cuts its limit on them).
func (e *StatusError) Is(target error) bool {
	return target == actors.ErrBackpressure && (e.Status == http.StatusTooManyRequests || e.Status == http.StatusServiceUnavailable)
}

// Retryable reports whether a failed status may succeed on another attempt.
func Retryable(status int) bool {
	return status == http.StatusRequestTimeout || status == http.StatusTooManyRequests || status >= 500
}

// NewHTTPWith is NewHTTP with the static request headers of handler.headers
// (see config.HTTPHeader); it fails when one cannot be read.
func NewHTTPWith(url string, timeout time.Duration, concurrency int, headers []config.HTTPHeader) (*HTTP, error) {
	hs, err := newStaticHeaders(headers)
	if err != nil {
		return nil, err
	}
	h := NewHTTP(url, timeout, concurrency)
	h.headers = hs
	return h, nil
}

// NewHTTP returns an HTTP handler with a keep-alive pool of concurrency
// connections, so every runner reuses its connection; HTTP/2 is used when
// an https:// server offers it (one connection then carries every runner's
// requests). A URL of the form
// unix:///run/app.sock:/records posts over that unix socket (a sidecar on
// the same host) to /records.
func NewHTTP(url string, timeout time.Duration, concurrency int) *HTTP {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.MaxIdleConns = concurrency
	tr.MaxIdleConnsPerHost = concurrency
	shown := url
	if socket, path, ok := config.UnixURL(url); ok {
		var d net.Dialer
		tr.DialContext = func(ctx context.Context, _, _ string) (net.Conn, error) { return d.DialContext(ctx, "unix", socket) }
		url = "http://localhost" + path
	}
	return &HTTP{url: url, shown: shown, timeout: timeout, client: &http.Client{
		Transport: tr,
		// A redirect would be followed as a GET without the record: the
		// 3xx itself is the answer (a permanent failure).
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}}
}

// Handle implements actors.Handler.
func (h *HTTP) Handle(ctx context.Context, rec *actors.Record) error {
	if h.timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, h.timeout)
		defer cancel()
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, h.url, bytes.NewReader(rec.Value))
	if err != nil {
		return fmt.Errorf("handlers: http request: %w", errors.Join(err, actors.ErrPermanent))
	}
	now := time.Now()
	for _, sh := range h.headers {
		if err := sh.set(req.Header, now); err != nil {
			return err // retryable: the file may be good again
		}
	}
	req.Header.Set("Content-Type", "application/octet-stream")
	req.Header.Set("Kafka-Topic", rec.Topic)
	req.Header.Set("Kafka-Partition", strconv.FormatInt(int64(rec.Partition), 10))
	req.Header.Set("Kafka-Offset", strconv.FormatInt(rec.Offset, 10))
	req.Header.Set("Kafka-Timestamp", rec.Timestamp.UTC().Format(time.RFC3339Nano))
	if rec.Key != nil {
		req.Header.Set("Kafka-Key", base64.StdEncoding.EncodeToString(rec.Key))
	}
	for _, hd := range rec.Headers {
		if !actors.IsTraceHeader(hd.Key) { // forwarded from ctx below
			addRecordHeader(req.Header, hd)
		}
	}
	propagation.TraceContext{}.Inject(ctx, propagation.HeaderCarrier(req.Header))
	resp, err := h.client.Do(req)
	if err != nil {
		return fmt.Errorf("handlers: http post %s: %w", h.shown, err)
	}
	// Closing a body before its end drops the connection instead of
	// reading on: that is what bounds the reads below.
	defer resp.Body.Close()
	if resp.StatusCode >= 200 && resp.StatusCode < 300 && h.outputs {
		return h.emitOne(ctx, rec, resp.Body)
	}
	if resp.StatusCode >= 200 && resp.StatusCode < 300 {
		// Read the answer to its end, so the connection goes back to the
		// pool, and to know it arrived: a body that breaks off (the
		// connection closed before Content-Length bytes, a chunked body
		// without its last chunk) means the endpoint did not finish
		// answering — it may have crashed while handling the record.
		if _, err := io.Copy(io.Discard, io.LimitReader(resp.Body, maxDrain)); err != nil {
			return fmt.Errorf("handlers: http post %s: status %d, but the answer broke off: %w", h.shown, resp.StatusCode, err)
		}
		return nil
	}
	return statusFailure(resp)
}

// maxDrain is the most of an answer's body the handler reads: beyond it, the
// connection is dropped rather than read for ever.
const maxDrain = 1 << 20

// maxRetryAfter is what a Retry-After too large for a time.Duration (about
// 292 years) becomes; max_backoff caps it anyway.
const maxRetryAfter = time.Duration(math.MaxInt64)

// parseRetryAfter reads a Retry-After field value (RFC 9110, 10.2.3):
// delay-seconds (ASCII digits only) or an HTTP-date, which is turned into a
// wait from now (0 when it has passed). Values too large saturate at
// maxRetryAfter. ok is false for anything else — empty, negative,
// fractional, garbage — which the handler ignores, as if no Retry-After had
// been sent.
func parseRetryAfter(v string, now time.Time) (d time.Duration, ok bool) {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0, false
	}
	if strings.Trim(v, "0123456789") == "" {
		n, err := strconv.ParseUint(v, 10, 64)
		if err != nil || n > uint64(maxRetryAfter/time.Second) { // only a range error is possible here
			return maxRetryAfter, true
		}
		return time.Duration(n) * time.Second, true
	}
	t, err := http.ParseTime(v)
	if err != nil {
		return 0, false
	}
	return max(t.Sub(now), 0), true // Sub saturates instead of overflowing
}

// addRecordHeader adds one record header to an HTTP request. Kafka headers
// are any string and any bytes, HTTP fields are not, and a record must not
// fail for good over a header (under on_failure: fail that is a restart
// loop), so a header travels in one of three unambiguous forms:
//
//   - Kafka-Header-<name>: <value>, when name is an HTTP token and the value
//     a field value that arrives byte for byte: no control character but
//     HTAB (so no CR, LF, NUL, DEL), no leading or trailing space or tab
//     (parsers trim them); UTF-8 and any byte from 0x80 up (obs-text) are
//     sent as they are, as Go's client and server allow.
//   - Kafka-Base64-Header-<name>: <value in standard base64>, when name is a
//     token but the value is not such a field value.
//   - Kafka-Base64-Header: <name in base64>:<value in base64>, when the name
//     is not a token (empty, spaces, colons, control characters, non-ASCII).
//
// Nothing of a record header is ever written raw unless it is a valid token
// or field value, so a header cannot inject another one. Repeated names
// arrive in the record's order; HTTP names are case-insensitive (Go's client
// sends them canonicalized: trace-id becomes Trace-Id), so record headers
// differing only in case arrive as repeated values of one field.
//
// The trace context headers (traceparent and tracestate, in any case) do not
// come here: Handle forwards them from the context under their own names.
func addRecordHeader(h http.Header, hd actors.Header) {
	switch {
	case !validHeaderName(hd.Key):
		h.Add("Kafka-Base64-Header", base64.StdEncoding.EncodeToString([]byte(hd.Key))+":"+base64.StdEncoding.EncodeToString(hd.Value))
	case !exactHeaderValue(hd.Value):
		h.Add("Kafka-Base64-Header-"+hd.Key, base64.StdEncoding.EncodeToString(hd.Value))
	default:
		h.Add("Kafka-Header-"+hd.Key, string(hd.Value))
	}
}

// validHeaderName reports whether s is an HTTP token (RFC 9110, 5.6.2).
func validHeaderName(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9':
		case strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0:
		default:
			return false
		}
	}
	return true
}

// exactHeaderValue reports whether v can be sent as an HTTP field value and
// arrive unchanged (RFC 9110, 5.5): visible ASCII, obs-text (0x80–0xFF),
// and spaces and tabs between them, not at either end.
func exactHeaderValue(v []byte) bool {
	for _, c := range v {
		if (c < 0x20 && c != '\t') || c == 0x7f {
			return false
		}
	}
	if n := len(v); n > 0 && (isBlank(v[0]) || isBlank(v[n-1])) {
		return false
	}
	return true
}

func isBlank(c byte) bool { return c == ' ' || c == '\t' }
