package actors_test

// A tree restart (on_failure: fail once the attempts ran out) must not throw
// away what finished: before the generation goes, every partition goes
// through the revocation handshake and its watermark, with the commit
// metadata of what finished above it, is committed — whatever the commit
// ticker did. A record that failed for good a
// moment after each assignment meant nothing was ever committed, and the
// healthy records were handled again after every restart.

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/turbokafka/turbo/actors"
	"github.com/turbokafka/turbo/actors/handlers/sleep"
	"github.com/turbokafka/turbo/actors/harness"
	"github.com/turbokafka/turbo/actors/offsetmeta"
	"github.com/turbokafka/turbo/config"
	"github.com/turbokafka/turbo/test/testkit"
)

// work is a handler that takes a little time, as real ones do (so a
// failure finds records running), and returns at once when cancelled.
func work(d time.Duration) actors.Handler {
	return actors.HandlerFunc(func(ctx context.Context, _ *actors.Record) error { return sleep.For(ctx, d) })
}

// One record fails every attempt under on_failure: fail, so the tree
// restarts again and again; the other 399 records must each be handled once
// and committed (the poisoned partition at the poisoned offset, with the
// finished records above it in the commit metadata). The commit ticker is
// an hour: only the restart's own commit can do it.
func TestRestartLoopCommitsWhatFinished(t *testing.T) {
	t.Parallel()
	const partitions, perPartition = 4, 100
	poison := harness.At(topic, 0, 10)
	cfg := consumer(func(c *config.Consumer) {
		c.CommitInterval = time.Hour
		c.Retry.MaxAttempts = 2
	})
	cfg.Timeout = 60 * time.Second // a deadline for a loaded machine, not an expected time
	h := harness.New(t, cfg, harness.FailTimes(poison, 1<<30, errors.New("poisoned record"), work(2*time.Millisecond)))
	for p := range int32(partitions) {
		recs := harness.Seq(topic, p, 0, perPartition, 20)
		if p == 0 {
			recs[10].Key = []byte("poison") // its own key: nothing else waits for it
		}
		h.Feed(recs...)
	}
	h.Assign(topic, 0, 1, 2, 3)

	healthy := partitions*perPartition - 1
	h.Await(fmt.Sprintf("%d healthy records handled and committed across restarts", healthy), func() bool {
		if h.HandledCount() < healthy {
			return false
		}
		for p := int32(1); p < partitions; p++ {
			if h.Committed(topic, p).Offset != perPartition {
				return false
			}
		}
		c := h.Committed(topic, 0)
		return c.Offset == 10 && slices.Equal(c.Finished, []offsetmeta.Range{{From: 11, To: perPartition - 1}})
	})
	calls := 0
	for _, c := range h.Calls() {
		if c.Offset != 10 || c.Partition != 0 {
			calls++
		}
	}
	t.Logf("%d healthy records: %d handler calls, %d distinct handled, over %d restarts; committed %v",
		healthy, calls, h.HandledCount(), h.Restarts(), h.Committed(topic, 0))
	for p := range int32(partitions) {
		for off := range int64(perPartition) {
			if p == 0 && off == 10 {
				continue
			}
			if n := h.TimesHandled(topic, p, off); n != 1 {
				t.Errorf("%s/%d@%d handled %d times across the restarts, want once", topic, p, off, n)
			}
		}
	}
	if h.Restarts() < 1 {
		t.Error("the poisoned record never restarted the tree")
	}
	if c := h.Committed(topic, 0); c.Offset > 10 {
		t.Errorf("partition 0 committed at %d, past the record that never succeeded", c.Offset)
	}
}

// The restart's commit never passes a record that had not finished: a
// record running when the failure came is cancelled, and the watermark
// stops below it (as below the failed record); the metadata lists only what
// finished. The next generation runs exactly the unfinished records.
func TestRestartCommitStopsBelowCancelledRecords(t *testing.T) {
	t.Parallel()
	cfg := consumer(func(c *config.Consumer) {
		c.CommitInterval = time.Hour
		c.Retry.MaxAttempts = 1
		c.Ordering = config.OrderingUnordered
	})
	cfg.ShutdownTimeout = 30 * time.Second // a slow machine must not turn the commit into a timeout
	fail := make(chan struct{})            // closed by the test: offset 12 fails then
	var calls3, calls12 atomic.Int32
	h := harness.New(t, cfg, actors.HandlerFunc(func(ctx context.Context, rec *actors.Record) error {
		switch {
		case rec.Partition == 0 && rec.Offset == 3 && calls3.Add(1) == 1:
			<-ctx.Done() // runs until the teardown cancels it
			return ctx.Err()
		case rec.Partition == 0 && rec.Offset == 12 && calls12.Add(1) == 1:
			<-fail
			return errors.New("offset 12 fails once")
		}
		return nil
	}))
	h.Feed(harness.Seq(topic, 0, 0, 20, 0)...)
	h.Assign(topic, 0)
	h.AwaitStarted(topic, 0, 3)
	h.AwaitStarted(topic, 0, 12)
	h.AwaitHandled(18) // every other record finished
	close(fail)        // → restart: offset 3 is cancelled, 12 failed

	want := []offsetmeta.Range{{From: 4, To: 11}, {From: 13, To: 19}}
	h.Await("the restart to commit offset 3 with 4–11 and 13–19 finished", func() bool {
		c := h.Committed(topic, 0)
		return c.Offset == 3 && slices.Equal(c.Finished, want)
	})
	h.AwaitHandled(20)
	if err := h.Stop(); err != nil {
		t.Fatal(err)
	}
	if c := h.Committed(topic, 0); c.Offset != 20 {
		t.Errorf("committed %d after the stop, want 20", c.Offset)
	}
	checkPartitionOnce(t, h, 0, 20)
	if n := h.Restarts(); n != 1 {
		t.Errorf("%d restarts, want 1", n)
	}
}

// The same restart loop through sarama (the embedded broker, or the real
// Kafka of TURBO_TEST_BROKERS): a record failing for good soon after every
// assignment must not stop the other partitions' commits, and no healthy
// record may be handled twice across the restarts.
func TestRestartLoopCommitsWhatFinishedOnABroker(t *testing.T) {
	t.Parallel()
	const records = 400
	r := newRun(t, 4, records, 40)
	ledger := testkit.NewLedger(2 * time.Millisecond)
	ledger.Fail = func(rec *actors.Record) error {
		if rec.Partition == 0 && rec.Offset == 5 {
			return errors.New("poisoned record")
		}
		return nil
	}
	c := r.consumer("poisoned", func(c *config.Consumer) {
		c.CommitInterval = time.Hour // only the restart's own commit counts
		c.Retry = config.Retry{MaxAttempts: 2, InitialBackoff: 10 * time.Millisecond, MaxBackoff: 10 * time.Millisecond}
	})
	cons := r.start(c, ledger)
	end := testkit.EndOffsets(t, r.brokers, r.topic)
	var committed map[int32]int64
	defer func() { // the figures, also when the wait below fails
		rep, s := ledger.Report(), cons.Stats()
		t.Logf("%d records: %d handled, %d runs, %d duplicates over %d restarts; committed %v", records, rep.Distinct, rep.Total, rep.Duplicates, s.Restarts, committed)
	}()
	testkit.Eventually(t, 90*time.Second, "three restarts, partitions 1–3 committed at their ends and partition 0 at the poisoned offset", func() bool {
		if cons.Stats().Restarts < 3 {
			return false
		}
		committed = testkit.CommittedOffsets(t, r.brokers, c.Group, r.topic)
		for p, e := range end {
			if want := map[bool]int64{true: 5, false: e}[p == 0]; committed[p] != want {
				return false
			}
		}
		return true
	})
	if rep := ledger.Report(); rep.Duplicates != 0 || rep.Overlaps != 0 || rep.OrderViolations != 0 {
		t.Errorf("%+v: want no record handled twice, no overlap, no order violation across the restarts", rep)
	}
	if off, meta := testkit.CommittedMetadata(t, r.brokers, c.Group, r.topic, 0); off != 5 || meta == "" {
		t.Errorf("partition 0 committed at %d with metadata %q: want 5, listing what finished above it", off, meta)
	}
}
