package actors_test

import (
	"context"
	"testing"
	"time"

	"github.com/turbokafka/turbo/actors"
	"github.com/turbokafka/turbo/config"
	"github.com/turbokafka/turbo/test/testkit"
)

// sarama keeps a partition's pause across its reassignment: a partition
// revoked while paused (its budget full behind slow records) and assigned to
// the same member again later must be read again, or its records wait
// forever while the member reports no lag. Found by the chaos suite
// (test/chaos, TestRebalancesUnderLoad).
func TestPartitionPausedWhenRevokedIsReadWhenItComesBack(t *testing.T) {
	t.Parallel() // most of its time is spent waiting: for sessions, joins, handlers
	// Enough records that a partition is paused on either side: sarama's
	// once its claim has lacked credits for pauseAfter, franz-go's once its
	// queue is past the high mark.
	// The keys spread unevenly (by hash), hence a margin, checked.
	records := 6 * (actors.FranzQueueHigh + 100)
	r := newRun(t, 4, records, 400)
	for p, end := range testkit.EndOffsets(t, r.brokers, r.topic) {
		if end <= int64(actors.FranzQueueHigh)+20 {
			t.Fatalf("partition %d got %d records: too few to be paused on the franz-go side", p, end)
		}
	}
	release := make(chan struct{})
	ledger := testkit.NewLedger(0)
	slow := actors.HandlerFunc(func(ctx context.Context, rec *actors.Record) error {
		select {
		case <-release:
		case <-ctx.Done():
			return ctx.Err()
		}
		return ledger.Handle(ctx, rec)
	})
	c := r.consumer("pause", func(c *config.Consumer) {
		c.Concurrency = 4
		c.MaxBuffered = 40
	})
	a := r.start(c, slow)
	// Every partition's share of the budget (11) is taken and the handlers
	// hold their records: the claims pause them (see above).
	testkit.Eventually(t, 30*time.Second, "member a to hold 4 partitions and fill its budget", func() bool {
		s := a.Stats()
		return s.Assigned == 4 && s.Fetched >= 44
	})
	testkit.Eventually(t, 30*time.Second, "member a to pause its 4 stuck partitions", func() bool { return a.Stats().Paused == 4 })
	// b takes two partitions (revoked from a while paused), then leaves:
	// they come back to a.
	b := r.start(c, slow)
	testkit.Eventually(t, 60*time.Second, "member b to get partitions", func() bool { return b.Stats().Assigned == 2 })
	close(release) // b's revocation must finish its running records
	stop(t, b)
	testkit.Eventually(t, 60*time.Second, "member a to hold 4 partitions again", func() bool { return a.Stats().Assigned == 4 })
	r.waitCommitted(c.Group, 60*time.Second)
	if rep := ledger.Report(); rep.Distinct != records || rep.Overlaps != 0 || rep.OrderViolations != 0 {
		t.Errorf("ledger %+v: want %d records, no overlap, in order", rep, records)
	}
}
