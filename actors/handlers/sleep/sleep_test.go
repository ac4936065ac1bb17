package sleep

import (
	"context"
	"errors"
	"testing"
	"time"
)

func TestForWaitsItsDuration(t *testing.T) {
	start := time.Now()
	if err := For(context.Background(), 20*time.Millisecond); err != nil {
		t.Fatalf("For(20ms) = %v, want nil", err)
	}
	if took := time.Since(start); took < 20*time.Millisecond {
		t.Fatalf("For(20ms) returned after %s", took)
	}
	if err := For(context.Background(), 0); err != nil {
		t.Fatalf("For(0) = %v, want nil", err)
	}
}

func TestForEndsWithTheContext(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- For(ctx, time.Hour) }()
	cancel()
	select {
	case err := <-done:
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("For after cancel = %v, want context.Canceled", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("For(1h) did not return within 10 s of its context's cancellation")
	}
}
