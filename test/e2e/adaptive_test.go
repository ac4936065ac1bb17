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
	t.Parallel()
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
	curve := ep.Follow(caps, phase, every)
	ep.Capacity.Store(1000)
	if code := run.Wait(t, 3*time.Minute); code != 0 {
		t.Fatalf("turbo run exited %d", code)
	}
	var b strings.Builder
	for _, s := range curve {
		fmt.Fprintf(&b, "%.1fs cap=%d serving=%d answers/s=%.0f; ", s.At.Seconds(), s.Capacity, s.Serving, float64(s.Answered)/every.Seconds())
	}
	t.Logf("curve: %s", b.String())
	rep := ledger.Report()
	handledOnce(t, rep, records)
	if ep.Refused.Load() == 0 {
		t.Fatalf("the endpoint never refused: the capacity was never reached")
	}
	// The low phase, from a second in: requests in flight stay near 5.
	n, serving, answered := testkit.Phase(curve, 1, phase, time.Second)
	if answered == 0 {
		t.Fatalf("no answers in the low phase: the records ran out before it (curve %s)", b.String())
	}
	if n == 0 || serving/n > 1.5*float64(caps[1])+2 {
		t.Fatalf("capacity %d: %.1f requests in flight on average (%v samples)", caps[1], serving/max(n, 1), n)
	}
	t.Logf("FIGURES adaptive-http broker=%s refused=%d low-phase-mean-in-flight=%.1f deliveries=%d", brokerKind(), ep.Refused.Load(), serving/n, rep.Deliveries)
}
