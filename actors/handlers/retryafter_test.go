package handlers

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/turbokafka/turbo/actors"
)

func TestParseRetryAfter(t *testing.T) {
	now := time.Date(2026, 11, 3, 10, 0, 0, 0, time.UTC)
	tests := []struct {
		value string
		want  time.Duration
		ok    bool
	}{
		{"0", 0, true},
		{"1", time.Second, true},
		{"120", 2 * time.Minute, true},
		{" 7 ", 7 * time.Second, true},
		{"007", 7 * time.Second, true},
		{now.Add(90 * time.Second).Format(http.TimeFormat), 90 * time.Second, true},
		{"Tuesday, 03-Nov-26 10:00:30 GMT", 30 * time.Second, true}, // RFC 850, obsolete but allowed
		{"Tue Nov  3 10:01:00 2026", time.Minute, true},             // asctime
		{now.Add(-time.Hour).Format(http.TimeFormat), 0, true},      // in the past: no wait beyond the backoff
		{now.Format(http.TimeFormat), 0, true},
		// Huge values saturate rather than overflow; max_backoff caps them.
		{"99999999999999999999999999", maxRetryAfter, true},
		{"9223372037", maxRetryAfter, true},
		{"9223372036", 9223372036 * time.Second, true},
		{"Fri, 31 Dec 9999 23:59:59 GMT", maxRetryAfter, true},
		// Not Retry-After: ignored (the plain backoff applies).
		{"", 0, false},
		{"-1", 0, false},
		{"+5", 0, false},
		{"1.5", 0, false},
		{"1e3", 0, false},
		{"0x10", 0, false},
		{"5 s", 0, false},
		{"soon", 0, false},
		{"Tue, 03 Nov 2026 25:00:00 GMT", 0, false},
		{"١", 0, false}, // an Arabic-Indic digit is not a DIGIT
	}
	for _, tt := range tests {
		got, ok := parseRetryAfter(tt.value, now)
		if got != tt.want || ok != tt.ok {
			t.Errorf("parseRetryAfter(%q) = %v, %v; want %v, %v", tt.value, got, ok, tt.want, tt.ok)
		}
	}
}

// A retryable answer with Retry-After carries it to the failure policy
// (actors.RetryAfterError); the status error stays reachable.
func TestHTTPRetryAfterIsReported(t *testing.T) {
	tests := []struct {
		status int
		header string
		want   time.Duration // 0: no RetryAfterError
	}{
		{http.StatusServiceUnavailable, "3", 3 * time.Second},
		{http.StatusTooManyRequests, "120", 2 * time.Minute},
		{http.StatusInternalServerError, "1", time.Second},
		{http.StatusServiceUnavailable, "garbage", 0},
		{http.StatusServiceUnavailable, "", 0},
		{http.StatusBadRequest, "3", 0}, // permanent: nothing to retry
	}
	for _, tt := range tests {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if tt.header != "" {
				w.Header().Set("Retry-After", tt.header)
			}
			w.WriteHeader(tt.status)
		}))
		err := NewHTTP(srv.URL, 5*time.Second, 1).Handle(context.Background(), testRecord())
		srv.Close()
		var se *StatusError
		if !errors.As(err, &se) || se.Status != tt.status {
			t.Errorf("status %d Retry-After %q: Handle = %v, want a StatusError", tt.status, tt.header, err)
			continue
		}
		var ra *actors.RetryAfterError
		switch {
		case tt.want == 0 && errors.As(err, &ra):
			t.Errorf("status %d Retry-After %q: Handle = %v asks for a delay of %v, want none", tt.status, tt.header, err, ra.Delay)
		case tt.want != 0 && !errors.As(err, &ra):
			t.Errorf("status %d Retry-After %q: Handle = %v, want an actors.RetryAfterError", tt.status, tt.header, err)
		case tt.want != 0 && ra.Delay != tt.want:
			t.Errorf("status %d Retry-After %q: delay %v, want %v", tt.status, tt.header, ra.Delay, tt.want)
		}
	}
}
