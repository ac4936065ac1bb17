package actors

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/turbokafka/turbo/config"
)

// The failure policy waits the larger of its backoff and a RetryAfterError's
// delay, capped by max_backoff, wherever the RetryAfterError sits in the
// error's chain.
func TestRetryDelayHonoursRetryAfter(t *testing.T) {
	t.Parallel()
	c := config.DefaultConsumer("c")
	c.Retry = config.Retry{MaxAttempts: 10, InitialBackoff: 100 * time.Millisecond, MaxBackoff: 5 * time.Second}
	p := newFailurePolicy(c)
	boom := errors.New("boom")
	tests := []struct {
		name     string
		err      error
		attempts int
		u        float64
		want     time.Duration
	}{
		{"plain error: the backoff", boom, 1, 0, 100 * time.Millisecond},
		{"plain error, jitter", boom, 1, 0.5, 90 * time.Millisecond},
		{"Retry-After above the backoff", RetryAfter(time.Second, boom), 1, 0, time.Second},
		{"Retry-After below the backoff: the backoff", RetryAfter(50*time.Millisecond, boom), 1, 0, 100 * time.Millisecond},
		{"Retry-After 0", RetryAfter(0, boom), 2, 0, 200 * time.Millisecond},
		{"negative Retry-After", RetryAfter(-time.Hour, boom), 1, 0, 100 * time.Millisecond},
		{"Retry-After above max_backoff: capped", RetryAfter(time.Hour, boom), 1, 0, 5 * time.Second},
		{"huge Retry-After: capped", RetryAfter(time.Duration(1<<63-1), boom), 1, 0.9, 5 * time.Second},
		{"Retry-After exactly max_backoff", RetryAfter(5*time.Second, boom), 1, 0, 5 * time.Second},
		{"Retry-After not replacing jitter of a capped backoff", RetryAfter(time.Second, boom), 20, 0.5, 4500 * time.Millisecond},
		{"wrapped deeper in the chain", fmt.Errorf("handler: %w", RetryAfter(2*time.Second, boom)), 1, 0, 2 * time.Second},
		{"joined", errors.Join(boom, RetryAfter(3*time.Second, nil)), 1, 0, 3 * time.Second},
	}
	for _, tt := range tests {
		if got := p.retryDelay(tt.attempts, tt.u, tt.err); got != tt.want {
			t.Errorf("%s: retryDelay(%d, %v, %v) = %v, want %v", tt.name, tt.attempts, tt.u, tt.err, got, tt.want)
		}
	}
}

// A RetryAfterError is a failed attempt like any other: it consumes an
// attempt, and one that also wraps ErrPermanent is not retried.
func TestRetryAfterConsumesAnAttempt(t *testing.T) {
	t.Parallel()
	c := config.DefaultConsumer("c")
	c.Retry.MaxAttempts = 2
	c.OnFailure = config.OnFailureSkip
	p := newFailurePolicy(c)
	err := RetryAfter(time.Second, errors.New("503"))
	if v := p.judge(err, 1, false); v != verdictRetry {
		t.Errorf("attempt 1 of 2: verdict %v, want retry", v)
	}
	if v := p.judge(err, 2, false); v != verdictSkip {
		t.Errorf("attempt 2 of 2: verdict %v, want skip (the attempts ran out)", v)
	}
	if v := p.judge(RetryAfter(time.Second, ErrPermanent), 1, false); v != verdictSkip {
		t.Errorf("permanent with Retry-After: verdict %v, want skip", v)
	}
	if !errors.Is(err, err.(*RetryAfterError).Err) || err.Error() != "503 (retry no sooner than 1s)" {
		t.Errorf("RetryAfterError %q does not unwrap to its failure or reads wrong", err)
	}
}
