package e2e

import (
	"fmt"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/turbokafka/turbo/test/testkit"
)

// TestAdaptiveConcurrencyThroughHTTP: turbo run with concurrency_mode
// adaptive (2..100) toward an endpoint of 20 ms whose capacity goes 20 → 5
// → 20 (503 beyond it): the requests in flight follow the capacity, and
// the ledger behind the endpoint sees every record once, in key order.
func TestAdaptiveConcurrencyThroughHTTP(t *testing.T) {
	const records, keys, phase = 4000, 400, 3 * time.Second
	caps := []int64{20, 5, 20}
	topic := testkit.TopicName("adaptive")
	addr := testkit.Cluster(t, 4, topic)
	testkit.ProduceWithBinary(t, addr, topic, records, keys)
	ledger := testkit.NewLedger(20 * time.Millisecond)
	ep := &testkit.Capped{Next: ledger}
	ep.Capacity.Store(caps[0])
	srv := httptest.NewServer(ep)
	t.Cleanup(srv.Close)
	cfg := testkit.WriteConfig(t, fmt.Sprintf(`
kafka:
  brokers: [%q]
consumers:
  - name: adaptive
    group: %s
    topics: [%s]
    concurrency: 100
    concurrency_mode: adaptive
    concurrency_min: 2
    retry: {max_attempts: 1000, initial_backoff: 5ms, max_backoff: 50ms}
    handler: {type: http, url: %q, timeout: 10s}
log: {level: warn, format: json}
`, addr, topic, topic, srv.URL))
	run := testkit.Start(t, nil, "run", "--config", cfg, "--exit-on-idle")
	testkit.Eventually(t, time.Minute, "the first answers", func() bool { return ep.Answered.Load() > 0 })

	const every = 100 * time.Millisecond
	type sample struct {
		at                time.Duration
		capacity, serving int64
		answered          int64
	}
	var curve []sample
	start := time.Now()
	last := ep.Answered.Load()
	tick := time.NewTicker(every)
	for range len(caps) * int(phase/every) {
		<-tick.C
		at := time.Since(start)
		ph := min(int(at/phase), len(caps)-1)
		ep.Capacity.Store(caps[ph])
		a := ep.Answered.Load()
		curve = append(curve, sample{at: at, capacity: caps[ph], serving: ep.Serving.Load(), answered: a - last})
		last = a
	}
	tick.Stop()
	ep.Capacity.Store(1000)
	if code := run.Wait(t, 3*time.Minute); code != 0 {
		t.Fatalf("turbo run exited %d", code)
	}
	var b strings.Builder
	for _, s := range curve {
		fmt.Fprintf(&b, "%.1fs cap=%d serving=%d answers/s=%.0f; ", s.at.Seconds(), s.capacity, s.serving, float64(s.answered)/every.Seconds())
	}
	t.Logf("curve: %s", b.String())
	rep := ledger.Report()
	if rep.Lost != 0 || rep.Distinct != records || rep.Overlaps != 0 || rep.OrderViolations != 0 || rep.Duplicates != 0 {
		t.Fatalf("%d lost, %d distinct handled, %d overlaps, %d order violations, %d duplicates; want 0, %d, 0, 0, 0 (%v)",
			rep.Lost, rep.Distinct, rep.Overlaps, rep.OrderViolations, rep.Duplicates, records, rep.Examples)
	}
	if ep.Refused.Load() == 0 {
		t.Fatalf("the endpoint never refused: the capacity was never reached")
	}
	// The low phase, from a second in: requests in flight stay near 5.
	var n, serving, answered float64
	for _, s := range curve {
		if into := s.at - phase; into >= time.Second && into < phase {
			n, serving, answered = n+1, serving+float64(s.serving), answered+float64(s.answered)
		}
	}
	if answered == 0 {
		t.Fatalf("no answers in the low phase: the records ran out before it (curve %s)", b.String())
	}
	if n == 0 || serving/n > 1.5*float64(caps[1])+2 {
		t.Fatalf("capacity %d: %.1f requests in flight on average (%v samples)", caps[1], serving/max(n, 1), n)
	}
	t.Logf("FIGURES adaptive-http broker=%s refused=%d low-phase-mean-in-flight=%.1f deliveries=%d", brokerKind(), ep.Refused.Load(), serving/n, rep.Deliveries)
}
