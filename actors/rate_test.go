package actors_test

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/turbokafka/turbo/actors"
	"github.com/turbokafka/turbo/actors/harness"
	"github.com/turbokafka/turbo/config"
)

// startTimes is a handler that notes when each attempt began, and fails the
// first attempt of every tenth record (a retry takes a token too).
type startTimes struct {
	mu     sync.Mutex
	starts []time.Time
	failed map[int64]bool
}

func (s *startTimes) Handle(_ context.Context, rec *actors.Record) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.starts = append(s.starts, time.Now())
	if rec.Offset%10 == 3 && !s.failed[rec.Offset] {
		s.failed[rec.Offset] = true
		return errors.New("the downstream said no, once")
	}
	return nil
}

// TestRateLimitPacesAttempts: with rate.limit 100/s and a burst of 10, 16
// runners and a handler that takes no time, attempts start at 100/s (after
// the burst), retries included; every record is handled once and in key
// order, and the time waited shows in Stats.
func TestRateLimitPacesAttempts(t *testing.T) {
	// Timed (it measures the rate to ±5 %): it runs alone, after the rest (the Makefile's TIMED).
	const limit, burst, records = 100, 10, 200 // 20 retries: 220 attempts, ~2.1 s
	c := harness.Consumer("paced", "t")
	c.Concurrency = 16
	c.Rate = config.Rate{Limit: limit, Burst: burst}
	h := &startTimes{failed: map[int64]bool{}}
	hs := harness.New(t, harness.Config{Consumer: c}, h)
	hs.Feed(harness.Seq("t", 0, 0, records, 20)...)
	hs.Assign("t", 0)
	hs.AwaitHandled(records)

	h.mu.Lock()
	starts := slices.Clone(h.starts)
	h.mu.Unlock()
	if want := records + records/10; len(starts) != want {
		t.Fatalf("%d attempts, want %d (every tenth record fails once)", len(starts), want)
	}
	slices.SortFunc(starts, func(a, b time.Time) int { return a.Compare(b) })
	// The burst starts at once; the rest come at the limit.
	span := starts[len(starts)-1].Sub(starts[0])
	rate := float64(len(starts)-burst) / span.Seconds()
	if rate < limit*0.95 || rate > limit*1.05 {
		t.Fatalf("%d attempts in %s: %.1f/s after the burst, want %d/s ±5 %%", len(starts), span, rate, limit)
	}
	if w := hs.Stats().RateWait; w <= 0 {
		t.Fatalf("Stats().RateWait = %s, want the time runners waited", w)
	}
	t.Logf("FIGURES rate limit=%d/s burst=%d attempts=%d span=%s measured=%.1f/s wait=%s",
		limit, burst, len(starts), span.Round(time.Millisecond), rate, hs.Stats().RateWait.Round(time.Millisecond))
}

// TestRateLimitWaitEndsAtStop: records waiting for their turn (one attempt
// per 100 s) do not hold up a stop, and are not handled: they are not a
// runner's until their token came.
func TestRateLimitWaitEndsAtStop(t *testing.T) {
	t.Parallel()
	c := harness.Consumer("slow", "t")
	c.Rate = config.Rate{Limit: config.MinRateLimit, Burst: 1}
	hs := harness.New(t, harness.Config{Consumer: c}, nil)
	hs.Feed(harness.Seq("t", 0, 0, 3, 3)...)
	hs.Assign("t", 0)
	hs.AwaitHandled(1)
	hs.Await("records held back by the rate limit, none in flight", func() bool {
		s := hs.Stats()
		return s.RateWait > 0 && s.InFlight == 0
	})
	began := time.Now()
	if err := hs.Stop(); err != nil {
		t.Fatalf("Stop: %v", err)
	}
	if took := time.Since(began); took > 3*time.Second {
		t.Fatalf("Stop took %s with records waiting for the rate limit, want well under the 100 s wait", took)
	}
	if n := hs.HandledCount(); n != 1 {
		t.Fatalf("%d records handled, want 1 (the burst): the rest waited for their turn", n)
	}
}
