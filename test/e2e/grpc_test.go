package e2e

import (
	"fmt"
	"testing"
	"time"

	"github.com/turbokafka/turbo/test/testkit"
)

// TestGRPCHandler: turbo run hands records to a gRPC RecordHandler that
// keeps the ledger; a tenth fail their first delivery (UNAVAILABLE, or a
// batch's retryable failure). One record per call and batches of up to 25:
// nothing lost, no key runs twice at once or out of order, no duplicate.
func TestGRPCHandler(t *testing.T) {
	t.Parallel()
	for _, batch := range []int{1, 25} {
		t.Run(fmt.Sprintf("batch=%d", batch), func(t *testing.T) {
			const records, keys = 2000, 50
			topic := testkit.TopicName("grpc")
			addr := testkit.Cluster(t, 4, topic)
			testkit.ProduceWithBinary(t, addr, topic, records, keys)
			ledger := testkit.NewLedgerWith(testkit.LedgerOptions{Work: time.Millisecond, FailFirst: 0.1, Seed: 11})
			cfg := testkit.WriteConfig(t, fmt.Sprintf(`
kafka:
  brokers: [%q]
consumers:
  - name: grpc
    group: %s
    topics: [%s]
    concurrency: 16
    batch: {max_records: %d}
    retry: {max_attempts: 5, initial_backoff: 10ms, max_backoff: 100ms}
    handler: {type: grpc, target: %q, timeout: 10s}
log: {level: warn, format: json}
`, addr, topic, topic, batch, ledger.GRPCEndpoint(t)))
			runToEnd(t, cfg)
			rep := ledger.Report()
			handledOnce(t, rep, records)
			if rep.FailedAttempts == 0 {
				t.Fatalf("no delivery failed: the failures were not exercised")
			}
			t.Logf("FIGURES grpc broker=%s batch=%d records=%d deliveries=%d calls=%d failed=%d",
				brokerKind(), batch, records, rep.Deliveries, ledger.Requests(), rep.FailedAttempts)
		})
	}
}
