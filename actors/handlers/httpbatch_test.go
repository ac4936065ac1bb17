package handlers

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/turbokafka/turbo/actors"
	"github.com/turbokafka/turbo/config"
)

// batchRecs is a batch of three: a keyed record with a header, a record
// without a key, and a tombstone whose key is not UTF-8.
func batchRecs() []*actors.Record {
	ts := time.Date(2026, 11, 24, 16, 40, 0, 123e6, time.UTC)
	return []*actors.Record{
		{Topic: "orders", Partition: 3, Offset: 1042, Timestamp: ts, Key: []byte("order-7"), Value: []byte(`{"id":7}`),
			Headers: []actors.Header{{Key: "source", Value: []byte("web")}}},
		{Topic: "orders", Partition: 3, Offset: 1043, Timestamp: ts, Value: []byte("héllo")},
		{Topic: "orders", Partition: 1, Offset: 1042, Timestamp: ts, Key: []byte{0xff, 0xfe}},
	}
}

// batchServer answers every POST with status and body after recording the
// request's lines (as generic JSON) and headers.
func batchServer(t *testing.T, status int, body string, extra http.Header) (*httptest.Server, *[]map[string]any, *http.Header) {
	t.Helper()
	var lines []map[string]any
	var got http.Header
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got = r.Header.Clone()
		sc := bufio.NewScanner(r.Body)
		for sc.Scan() {
			var m map[string]any
			if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
				t.Errorf("a body line is not JSON: %q: %v", sc.Text(), err)
			}
			lines = append(lines, m)
		}
		for k, v := range extra {
			w.Header()[k] = v
		}
		w.WriteHeader(status)
		_, _ = io.WriteString(w, body)
	}))
	t.Cleanup(srv.Close)
	return srv, &lines, &got
}

// TestHTTPBatchBody: one POST per batch, application/x-ndjson, a line per
// record in order with its coordinates, key and value in base64 (null when
// absent) and its headers; Kafka-Batch-Size says how many.
func TestHTTPBatchBody(t *testing.T) {
	srv, lines, hdr := batchServer(t, http.StatusNoContent, "", nil)
	h := NewHTTP(srv.URL, 5*time.Second, 1)
	res := h.HandleBatch(context.Background(), batchRecs())
	if res.Err != nil || len(res.Failed) != 0 {
		t.Fatalf("204: result %+v, want every record done", res)
	}
	if ct := hdr.Get("Content-Type"); ct != "application/x-ndjson" {
		t.Fatalf("Content-Type %q", ct)
	}
	if n := hdr.Get("Kafka-Batch-Size"); n != "3" {
		t.Fatalf("Kafka-Batch-Size %q, want 3", n)
	}
	if len(*lines) != 3 {
		t.Fatalf("%d lines, want 3", len(*lines))
	}
	first := (*lines)[0]
	want := map[string]any{"topic": "orders", "partition": 3.0, "offset": 1042.0, "timestamp": "2026-11-24T16:40:00.123Z",
		"key": "b3JkZXItNw==", "value": "eyJpZCI6N30="}
	for k, v := range want {
		if first[k] != v {
			t.Fatalf("line 1 %s = %v, want %v (line %v)", k, first[k], v, first)
		}
	}
	hs, _ := first["headers"].([]any)
	if len(hs) != 1 || hs[0].(map[string]any)["key"] != "source" || hs[0].(map[string]any)["value"] != "d2Vi" {
		t.Fatalf("line 1 headers %v, want source=d2Vi", first["headers"])
	}
	if k, ok := (*lines)[1]["key"]; !ok || k != nil {
		t.Fatalf("line 2 key %v (present %v), want null", k, ok)
	}
	if v, ok := (*lines)[2]["value"]; !ok || v != nil {
		t.Fatalf("line 3 value %v (present %v), want null (a tombstone)", v, ok)
	}
}

// TestHTTPBatchUTF8: with encoding utf8, valid UTF-8 goes as a string, the
// rest as base64 under key_base64 / value_base64.
func TestHTTPBatchUTF8(t *testing.T) {
	srv, lines, _ := batchServer(t, http.StatusOK, "ok", nil)
	h := NewHTTP(srv.URL, 5*time.Second, 1)
	h.encoding = config.EncodingUTF8
	if res := h.HandleBatch(context.Background(), batchRecs()); res.Err != nil || res.Failed != nil {
		t.Fatalf("200: result %+v", res)
	}
	if v := (*lines)[1]["value"]; v != "héllo" {
		t.Fatalf("line 2 value %v, want héllo", v)
	}
	if v := (*lines)[0]["headers"].([]any)[0].(map[string]any)["value"]; v != "web" {
		t.Fatalf("line 1 header value %v, want web", v)
	}
	l3 := (*lines)[2]
	if k, ok := l3["key"]; !ok || k != nil || l3["key_base64"] != "//4=" {
		t.Fatalf("line 3: key %v key_base64 %v, want null and //4=", k, l3["key_base64"])
	}
}

// TestHTTPBatchAnswers: what each answer makes of the batch.
func TestHTTPBatchAnswers(t *testing.T) {
	tests := []struct {
		name      string
		status    int
		body      string
		extra     http.Header
		failed    []int // indexes failed
		permanent []bool
		whole     bool // Err set
		retryWait time.Duration
	}{
		{name: "200: all done", status: 200, body: `{"anything":1}`},
		{name: "207: the listed ones failed", status: 207,
			body:   `{"failed":[{"topic":"orders","partition":3,"offset":1043,"retryable":true,"error":"busy"},{"topic":"orders","partition":1,"offset":1042,"retryable":false,"error":"bad key"},{"topic":"orders","partition":9,"offset":1,"retryable":true}]}`,
			failed: []int{1, 2}, permanent: []bool{false, true}},
		{name: "207: none listed (not a partial failure)", status: 207, body: `{"failed":[]}`, whole: true},
		{name: "207: not the document", status: 207, body: `<html>`, whole: true},
		{name: "503 with Retry-After", status: 503, body: "later", extra: http.Header{"Retry-After": {"7"}}, whole: true, retryWait: 7 * time.Second},
		{name: "400: permanent", status: 400, body: "no", whole: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv, _, _ := batchServer(t, tt.status, tt.body, tt.extra)
			res := NewHTTP(srv.URL, 5*time.Second, 1).HandleBatch(context.Background(), batchRecs())
			if (res.Err != nil) != tt.whole {
				t.Fatalf("Err = %v, want whole failure %v", res.Err, tt.whole)
			}
			if len(res.Failed) != len(tt.failed) {
				t.Fatalf("Failed = %v, want indexes %v", res.Failed, tt.failed)
			}
			for k, i := range tt.failed {
				err, ok := res.Failed[i]
				if !ok {
					t.Fatalf("record %d not failed: %v", i, res.Failed)
				}
				if errors.Is(err, actors.ErrPermanent) != tt.permanent[k] {
					t.Fatalf("record %d: %v, permanent want %v", i, err, tt.permanent[k])
				}
			}
			switch {
			case tt.status == 400 && !errors.Is(res.Err, actors.ErrPermanent):
				t.Fatalf("400: %v is not permanent", res.Err)
			case tt.status == 503 && errors.Is(res.Err, actors.ErrPermanent):
				t.Fatalf("503: %v is permanent", res.Err)
			case tt.status == 207 && tt.whole && (!errors.Is(res.Err, ErrBadMultiStatus) || errors.Is(res.Err, actors.ErrPermanent)):
				t.Fatalf("bad 207: %v, want a retryable ErrBadMultiStatus", res.Err)
			}
			if tt.retryWait > 0 {
				var ra *actors.RetryAfterError
				if !errors.As(res.Err, &ra) || ra.Delay != tt.retryWait {
					t.Fatalf("503: %v, want Retry-After %s", res.Err, tt.retryWait)
				}
			}
			if res.Err != nil && strings.Contains(res.Err.Error(), "Bearer") {
				t.Fatalf("error shows a header: %v", res.Err)
			}
		})
	}
}

// TestPushbackStatuses: 429 and 503 are push-back (actors.ErrBackpressure),
// with or without Retry-After, for one record and for a batch; 500 and 400
// are not.
func TestPushbackStatuses(t *testing.T) {
	for _, tt := range []struct {
		status int
		extra  http.Header
		want   bool
	}{
		{429, nil, true}, {503, http.Header{"Retry-After": {"2"}}, true}, {500, nil, false}, {400, nil, false},
	} {
		srv, _, _ := batchServer(t, tt.status, "", tt.extra)
		h := NewHTTP(srv.URL, 5*time.Second, 1)
		one := h.Handle(context.Background(), batchRecs()[0])
		batch := h.HandleBatch(context.Background(), batchRecs()).Err
		for _, err := range []error{one, batch} {
			if errors.Is(err, actors.ErrBackpressure) != tt.want {
				t.Fatalf("status %d: %v: push-back %v, want %v", tt.status, err, !tt.want, tt.want)
			}
		}
	}
}
