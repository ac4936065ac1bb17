package e2e

import (
	"fmt"
	"testing"
	"time"

	"github.com/turbokafka/turbo/test/testkit"
)

// rate.limit through the real binary: a downstream that takes 5 ms per
// record, which 20 runners could call ~4,000 times a second, is called at
// the limit (after the burst); the ledger finds every record handled once,
// in key order.
func TestRateLimit(t *testing.T) {
	// Timed (it measures the rate to ±5 %): it runs alone, after the rest (the Makefile's TIMED).
	const records, keys, limit, burst = 500, 50, 100, 10 // ~5 s
	topic := testkit.TopicName("rate")
	addr := testkit.Cluster(t, 4, topic)
	testkit.ProduceWithBinary(t, addr, topic, records, keys)
	ledger := testkit.NewLedger(5 * time.Millisecond)
	cfg := testkit.WriteConfig(t, fmt.Sprintf(`
kafka:
  brokers: [%q]
consumers:
  - name: paced
    group: %s
    topics: [%s]
    concurrency: 20
    rate: {limit: %d, burst: %d}
    handler: {type: http, url: %q, timeout: 30s}
log: {level: warn, format: json}
`, addr, topic, topic, limit, burst, ledger.Endpoint(t)))
	run := testkit.Start(t, nil, "run", "--config", cfg, "--exit-on-idle")
	if code := run.Wait(t, 2*time.Minute); code != 0 {
		t.Fatalf("turbo run exited %d", code)
	}
	rep := ledger.Report()
	if rep.Distinct != records || rep.Duplicates != 0 || rep.Overlaps != 0 || rep.OrderViolations != 0 {
		t.Fatalf("%d distinct records handled, %d duplicates, %d overlaps, %d order violations; want %d, 0, 0, 0 (%v)",
			rep.Distinct, rep.Duplicates, rep.Overlaps, rep.OrderViolations, records, rep.Examples)
	}
	span := rep.LastBegin.Sub(rep.FirstBegin)
	rate := float64(rep.Deliveries-burst) / span.Seconds()
	if rate < limit*0.95 || rate > limit*1.05 {
		t.Fatalf("%d deliveries began over %s: %.1f/s after the burst, want %d/s ±5 %%", rep.Deliveries, span, rate, limit)
	}
	t.Logf("FIGURES rate broker=%s limit=%d/s burst=%d deliveries=%d span=%s measured=%.1f/s peak=%d",
		brokerKind(), limit, burst, rep.Deliveries, span.Round(time.Millisecond), rate, rep.Peak)
}
