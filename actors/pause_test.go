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
	r := newRun(t, 4, 400, 40)
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
	// hold their records: after pauseAfter (100 ms) the claims pause them.
	testkit.Eventually(t, 30*time.Second, "member a to hold 4 partitions and fill its budget", func() bool {
		s := a.Stats()
		return s.Assigned == 4 && s.Fetched >= 44
	})
	testkit.Eventually(t, 30*time.Second, "member a to pause its 4 starved partitions", func() bool { return a.Stats().Paused == 4 })
	// b takes two partitions (revoked from a while paused), then leaves:
	// they come back to a.
	b := r.start(c, slow)
	testkit.Eventually(t, 60*time.Second, "member b to get partitions", func() bool { return b.Stats().Assigned == 2 })
	close(release) // b's revocation must finish its running records
	stop(t, b)
	testkit.Eventually(t, 60*time.Second, "member a to hold 4 partitions again", func() bool { return a.Stats().Assigned == 4 })
	r.waitCommitted(c.Group, 60*time.Second)
	if rep := ledger.Report(); rep.Distinct != 400 || rep.Overlaps != 0 || rep.OrderViolations != 0 {
		t.Errorf("ledger %+v: want 400 records, no overlap, in order", rep)
	}
}
