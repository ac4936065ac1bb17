package harness

import (
	"fmt"
	"time"
)

// recheck is how often an Await looks again when nothing announced a change:
// the consumer's counters (Stats, Restarts) change without a notice.
const recheck = 5 * time.Millisecond

// Await waits until cond holds, and fails the test after Config.Timeout
// naming what (and showing the cluster's and the handler's state). cond is
// checked at once, after every change of the cluster or of the handler
// calls, and every few milliseconds.
func (h *Harness) Await(what string, cond func() bool) {
	h.t.Helper()
	deadline := time.NewTimer(h.cfg.Timeout)
	defer deadline.Stop()
	tick := time.NewTicker(recheck)
	defer tick.Stop()
	for {
		// Taken before cond runs, so a change right after it is not missed.
		cluster, calls := h.cluster.Changed(), h.rec.events()
		if cond() {
			return
		}
		select {
		case <-cluster:
		case <-calls:
		case <-tick.C:
		case <-deadline.C:
			h.t.Fatalf("harness: timed out after %s waiting for %s\n%s", h.cfg.Timeout, what, h.describe())
			return
		}
	}
}

// AwaitHandled waits until at least n distinct records were handled
// successfully.
func (h *Harness) AwaitHandled(n int) {
	h.t.Helper()
	h.Await(fmt.Sprintf("%d distinct records handled", n), func() bool { return h.HandledCount() >= n })
}

// AwaitStarted waits until the handler was called for a record.
func (h *Harness) AwaitStarted(topic string, partition int32, offset int64) {
	h.t.Helper()
	h.Await(fmt.Sprintf("the handler to start %s/%d@%d", topic, partition, offset), func() bool {
		return h.Attempts(topic, partition, offset) > 0
	})
}

// AwaitRunning waits until n handler calls run at once.
func (h *Harness) AwaitRunning(n int) {
	h.t.Helper()
	h.Await(fmt.Sprintf("%d handler calls running at once", n), func() bool { return h.Running() == n })
}

// AwaitRestarts waits until the tree was restarted at least n times.
func (h *Harness) AwaitRestarts(n int) {
	h.t.Helper()
	h.Await(fmt.Sprintf("%d tree restart(s)", n), func() bool { return h.Restarts() >= n })
}

// AwaitBuffered waits until exactly n records wait in the consumer: fetched,
// not finished and not running (Stats().Buffered, the sum over its
// partitions).
func (h *Harness) AwaitBuffered(n int) {
	h.t.Helper()
	h.Await(fmt.Sprintf("%d records buffered in the consumer", n), func() bool { return h.Stats().Buffered == int64(n) })
}
