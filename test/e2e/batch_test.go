package e2e

import (
	"fmt"
	"testing"
	"time"

	"github.com/turbokafka/turbo/actors"
	"github.com/turbokafka/turbo/test/testkit"
)

// TestHTTPBatches: turbo run posts batches of up to 25 records to the
// ledger's endpoint (the http handler's ndjson contract), a tenth of the
// records fail their first delivery (answered in a 207), in key and in
// partition ordering: nothing is lost, no unit runs twice at once or out of
// order, and the requests carried several records each.
func TestHTTPBatches(t *testing.T) {
	t.Parallel()
	for _, ordering := range []string{"key", "partition"} {
		t.Run(ordering, func(t *testing.T) {
			const records, keys = 2000, 50
			topic := testkit.TopicName("batch")
			addr := testkit.Cluster(t, 4, topic)
			testkit.ProduceWithBinary(t, addr, topic, records, keys)
			ledger := testkit.NewLedgerWith(testkit.LedgerOptions{Work: time.Millisecond, FailFirst: 0.1, Seed: 7})
			if ordering == "partition" {
				// The endpoint skips what turbo counts as not run: a
				// partition's records after its failed one.
				ledger.UnitOf = func(r *actors.Record) string { return r.TP().String() }
			}
			cfg := testkit.WriteConfig(t, fmt.Sprintf(`
kafka:
  brokers: [%q]
consumers:
  - name: batches
    group: %s
    topics: [%s]
    ordering: %s
    concurrency: 8
    batch: {max_records: 25, max_wait: 20ms}
    retry: {max_attempts: 5, initial_backoff: 10ms, max_backoff: 100ms}
    handler: {type: http, url: %q, timeout: 10s}
log: {level: warn, format: json}
`, addr, topic, topic, ordering, ledger.Endpoint(t)))
			runToEnd(t, cfg)
			rep := ledger.Report()
			handledOnce(t, rep, records)
			if rep.FailedAttempts == 0 {
				t.Fatalf("no delivery failed: the partial failures were not exercised")
			}
			reqs := ledger.Requests()
			if reqs == 0 || reqs*2 > rep.Deliveries {
				t.Fatalf("%d requests for %d deliveries: batches did not hold several records", reqs, rep.Deliveries)
			}
			t.Logf("FIGURES batch broker=%s ordering=%s records=%d deliveries=%d requests=%d (%.1f per request) failed=%d duplicates=%d",
				brokerKind(), ordering, records, rep.Deliveries, reqs, float64(rep.Deliveries)/float64(reqs), rep.FailedAttempts, rep.Duplicates)
		})
	}
}
