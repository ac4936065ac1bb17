package actors_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/turbokafka/turbo/actors"
	"github.com/turbokafka/turbo/actors/harness"
	"github.com/turbokafka/turbo/config"
)

// service is a simulated downstream: it serves up to capacity calls at
// once, each for latency, and refuses the ones over it at once with
// ErrBackpressure (as a 503 would).
type service struct {
	latency  time.Duration
	capacity atomic.Int64
	serving  atomic.Int64
	calls    atomic.Int64 // in flight, refused ones included
	served   atomic.Int64
	refused  atomic.Int64
}

func (s *service) Handle(ctx context.Context, _ *actors.Record) error {
	s.calls.Add(1)
	defer s.calls.Add(-1)
	if s.serving.Add(1) > s.capacity.Load() {
		s.serving.Add(-1)
		s.refused.Add(1)
		return fmt.Errorf("over capacity: %w", actors.ErrBackpressure)
	}
	defer s.serving.Add(-1)
	select {
	case <-time.After(s.latency):
	case <-ctx.Done():
		return ctx.Err()
	}
	s.served.Add(1)
	return nil
}

// sample is one row of the curve.
type sample struct {
	at               time.Duration
	capacity, limit  int64
	inFlight, served int64 // calls out now; successes in the interval
}

// TestAdaptiveConcurrencyFollowsTheDownstream: a downstream of 20 ms whose
// capacity goes 40 → 10 → 40 (over it, it refuses at once). With
// concurrency_mode adaptive (2..200) the consumer's limit follows: once a
// phase has settled (a second in), calls in flight stay near the capacity
// and throughput near what it allows; every record is handled once, in key
// order, with no tree restart.
func TestAdaptiveConcurrencyFollowsTheDownstream(t *testing.T) {
	// Timed (it measures throughput): it runs alone, after the rest (the Makefile's TIMED).
	const records, keys, lat, phase = 6000, 600, 20 * time.Millisecond, 2 * time.Second
	caps := []int64{40, 10, 40}
	c := harness.Consumer("adaptive", "t")
	c.Concurrency = 200
	c.ConcurrencyMode = config.ConcurrencyAdaptive
	c.ConcurrencyMin = 2
	c.MaxBuffered = 2000
	c.Retry.MaxAttempts = 1000
	svc := &service{latency: lat}
	svc.capacity.Store(caps[0])
	hs := harness.New(t, harness.Config{Consumer: c, Timeout: time.Minute}, svc)
	for p := range int32(4) {
		hs.Feed(harness.Seq("t", p, 0, records/4, keys)...)
	}
	hs.Assign("t", 0, 1, 2, 3)

	const every = 100 * time.Millisecond
	var curve []sample
	start := time.Now()
	tick := time.NewTicker(every)
	defer tick.Stop()
	var lastServed int64
	for i := 1; i <= len(caps)*int(phase/every); i++ {
		<-tick.C
		at := time.Since(start)
		ph := min(int(at/phase), len(caps)-1)
		svc.capacity.Store(caps[ph])
		served := svc.served.Load()
		curve = append(curve, sample{at: at, capacity: caps[ph], limit: hs.Stats().Limit, inFlight: svc.calls.Load(), served: served - lastServed})
		lastServed = served
	}
	var b strings.Builder
	b.WriteString("| time | capacity | limit | calls in flight | successes/s |\n|---|---|---|---|---|\n")
	for _, s := range curve {
		fmt.Fprintf(&b, "| %.1f s | %d | %d | %d | %.0f |\n", s.at.Seconds(), s.capacity, s.limit, s.inFlight, float64(s.served)/every.Seconds())
	}
	t.Logf("curve (refused %d):\n%s", svc.refused.Load(), b.String())

	// Judge each phase from one second in, on its mean.
	for ph, capacity := range caps {
		var n, flight, served float64
		for _, s := range curve {
			if into := s.at - time.Duration(ph)*phase; into >= time.Second && into < phase {
				n, flight, served = n+1, flight+float64(s.inFlight), served+float64(s.served)
			}
		}
		if n == 0 {
			t.Fatalf("phase %d: no samples", ph)
		}
		ideal := float64(capacity) / lat.Seconds()
		rate := served / (n * every.Seconds())
		t.Logf("FIGURES adaptive phase=%d capacity=%d mean-in-flight=%.1f successes/s=%.0f ideal=%.0f", ph, capacity, flight/n, rate, ideal)
		if mean := flight / n; mean > 1.5*float64(capacity)+2 {
			t.Errorf("phase %d (capacity %d): %.1f calls in flight on average", ph, capacity, mean)
		}
		if rate < 0.4*ideal {
			t.Errorf("phase %d (capacity %d): %.0f successes/s, want ≥ 40 %% of %.0f", ph, capacity, rate, ideal)
		}
	}
	svc.capacity.Store(1000)
	hs.AwaitHandled(records)
	if hs.Restarts() != 0 {
		t.Fatalf("%d tree restarts", hs.Restarts())
	}
	if hs.Stats().Pushbacks == 0 {
		t.Fatalf("Stats().Pushbacks = 0 after %d refusals", svc.refused.Load())
	}
}

// TestRetryAfterPausesAdaptiveDispatch: under concurrency_mode adaptive, a
// push-back with Retry-After 300 ms holds every dispatch of the consumer
// that long, not only the failed record's retry.
func TestRetryAfterPausesAdaptiveDispatch(t *testing.T) {
	t.Parallel()
	c := harness.Consumer("pause-after", "t")
	c.Concurrency = 4
	c.ConcurrencyMode = config.ConcurrencyAdaptive
	c.Retry.MaxBackoff = time.Second
	var mu sync.Mutex
	var starts []time.Time
	var once sync.Once
	h := actors.HandlerFunc(func(ctx context.Context, rec *actors.Record) error {
		mu.Lock()
		starts = append(starts, time.Now())
		mu.Unlock()
		var err error
		once.Do(func() { err = actors.RetryAfter(300*time.Millisecond, fmt.Errorf("busy: %w", actors.ErrBackpressure)) })
		return err
	})
	hs := harness.New(t, harness.Config{Consumer: c}, h)
	hs.Feed(harness.Rec("t", 0, 0, "a", "0"))
	hs.Assign("t", 0)
	hs.AwaitStarted("t", 0, 0)
	hs.Await("the push-back to be counted", func() bool { return hs.Stats().Pushbacks == 1 })
	hs.Feed(harness.Rec("t", 0, 1, "b", "1")) // another key: free to run but for the pause
	hs.AwaitHandled(2)
	mu.Lock()
	defer mu.Unlock()
	if len(starts) != 3 {
		t.Fatalf("%d attempts, want 3", len(starts))
	}
	if gap := starts[1].Sub(starts[0]); gap < 250*time.Millisecond {
		t.Fatalf("the next attempt began %s after the Retry-After 300ms push-back", gap)
	}
}
