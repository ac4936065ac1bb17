package actors_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/turbokafka/turbo/actors"
	"github.com/turbokafka/turbo/actors/harness"
	"github.com/turbokafka/turbo/test/testkit"
)

// TestPauseHoldsRecordsAndKeepsPartitions (in memory): Pause while a record
// runs with the rest of its key in its runner's batch: the running record
// finishes and is committed, nothing else starts — neither the records
// the runner held nor what arrives meanwhile — the partitions stay the
// consumer's, and Resume runs the rest once each, in order.
func TestPauseHoldsRecordsAndKeepsPartitions(t *testing.T) {
	t.Parallel()
	release := make(chan struct{})
	c := harness.Consumer("pausable", "t")
	c.Concurrency = 1 // the runner holds the whole run of "held" in its batch
	hs := harness.New(t, harness.Config{Consumer: c}, actors.HandlerFunc(func(ctx context.Context, rec *actors.Record) error {
		if rec.Partition == 0 && rec.Offset == 0 {
			select {
			case <-release:
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		return nil
	}))
	held := make([]harness.Record, 50) // one key: all wait behind offset 0
	for i := range held {
		held[i] = harness.Rec("t", 0, int64(i), "held", "v")
	}
	hs.Feed(held...)
	hs.Assign("t", 0, 1)
	hs.AwaitStarted("t", 0, 0)

	hs.Pause()
	if !hs.Stats().Suspended {
		t.Fatal("Stats().Suspended = false after Pause")
	}
	hs.Feed(harness.Seq("t", 1, 0, 30, 5)...) // arrives while paused
	close(release)
	hs.AwaitCommitted("t", 0, 1) // the running record finished and is committed
	calls := len(hs.Calls())
	testkit.Holds(t, 500*time.Millisecond, "nothing starts while paused", func() error {
		if n := len(hs.Calls()); n != calls {
			return fmt.Errorf("%d handler calls began (%d before): %v", n-calls, calls, hs.Calls()[calls:])
		}
		return nil
	})
	if !hs.Owned("t", 0) || !hs.Owned("t", 1) || hs.Restarts() != 0 {
		t.Fatalf("while paused: owned %v %v, %d restarts; want both partitions kept, no restart", hs.Owned("t", 0), hs.Owned("t", 1), hs.Restarts())
	}
	if got := hs.Committed("t", 0).Offset; got != 1 {
		t.Fatalf("partition 0 committed %d while paused, want 1 (the record that ran)", got)
	}

	hs.Resume()
	hs.AwaitAllCommitted()
	hs.AwaitHandled(80)
	if hs.Stats().Suspended {
		t.Fatal("Stats().Suspended = true after Resume")
	}
	for _, call := range hs.Handled() {
		if n := hs.TimesHandled(call.Topic, call.Partition, call.Offset); n != 1 {
			t.Fatalf("%s handled %d times, want once", call, n)
		}
	}
}

// A consumer started paused (Options.Paused, what a reload carries over)
// starts nothing until Resume, then runs everything once.
func TestConsumerStartedPaused(t *testing.T) {
	t.Parallel()
	hs := harness.New(t, harness.Config{Consumer: harness.Consumer("born-paused", "t"), Paused: true},
		actors.HandlerFunc(func(context.Context, *actors.Record) error { return nil }))
	hs.Feed(harness.Seq("t", 0, 0, 20, 4)...)
	hs.Assign("t", 0)
	if !hs.Stats().Suspended {
		t.Fatal("Stats().Suspended = false for a consumer started paused")
	}
	testkit.Holds(t, 300*time.Millisecond, "nothing starts in a consumer started paused", func() error {
		if n := len(hs.Calls()); n != 0 {
			return fmt.Errorf("%d handler calls began: %v", n, hs.Calls())
		}
		return nil
	})
	hs.Resume()
	hs.AwaitAllCommitted()
	hs.AwaitHandled(20)
}

// TestPausedConsumerKeepsItsGroup, on the suite's broker (embedded, and
// Apache Kafka in make test-kafka): paused for 10 s with records arriving,
// no record starts, nothing is fetched, the group does not rebalance,
// nothing more is committed and the lag the broker reports grows; after
// Resume every record is handled once and committed.
func TestPausedConsumerKeepsItsGroup(t *testing.T) {
	t.Parallel() // most of its time is spent waiting: for sessions, joins, handlers
	const before, during = 200, 300
	r := newRun(t, 4, before, 20)
	var mu sync.Mutex
	handled := map[string]int{}
	c := r.consumer("paused", nil)
	cons := r.start(c, actors.HandlerFunc(func(_ context.Context, rec *actors.Record) error {
		mu.Lock()
		defer mu.Unlock()
		handled[fmt.Sprintf("%d@%d", rec.Partition, rec.Offset)]++
		return nil
	}))
	r.waitCommitted(c.Group, time.Minute)
	starts := func() int {
		mu.Lock()
		defer mu.Unlock()
		n := 0
		for _, k := range handled {
			n += k
		}
		return n
	}
	lag := func() int64 {
		end, committed := testkit.EndOffsets(t, r.brokers, r.topic), testkit.CommittedOffsets(t, r.brokers, c.Group, r.topic)
		var n int64
		for p, e := range end {
			n += e - max(committed[p], 0)
		}
		return n
	}

	cons.Pause()
	s0 := cons.Stats()
	atPause := starts()
	testkit.Produce(t, r.brokers, r.topic, during, 20)
	const paused = 10 * time.Second
	testkit.Holds(t, paused, "nothing starts while paused", func() error {
		if n := starts(); n != atPause {
			return fmt.Errorf("%d records started", n-atPause)
		}
		return nil
	})
	s1 := cons.Stats()
	if s1.Rebalances != s0.Rebalances || s1.Assigned != 4 || !s1.InSession {
		t.Fatalf("while paused: %d rebalances (%d before), %d partitions assigned, in session %v; want none, 4, true",
			s1.Rebalances, s0.Rebalances, s1.Assigned, s1.InSession)
	}
	if s1.Fetched != s0.Fetched {
		t.Fatalf("%d records fetched while paused, want 0", s1.Fetched-s0.Fetched)
	}
	if got := lag(); got != during {
		t.Fatalf("lag %d after %s paused, want the %d records produced meanwhile", got, paused, during)
	}
	// The consumer's own lag too, though nothing is fetched: the high
	// watermarks of partitions not read are refreshed every few seconds.
	testkit.Eventually(t, 15*time.Second, fmt.Sprintf("the consumer to report a lag of %d", during), func() bool { return cons.Stats().Lag == during })
	if chk := cons.Ready(); !chk.OK {
		t.Fatalf("paused consumer not ready: %s", chk.Reason)
	}

	cons.Resume()
	r.waitCommitted(c.Group, time.Minute)
	mu.Lock()
	defer mu.Unlock()
	for k, n := range handled {
		if n != 1 {
			t.Fatalf("record %s handled %d times, want once", k, n)
		}
	}
	if len(handled) != before+during {
		t.Fatalf("%d records handled, want %d", len(handled), before+during)
	}
	broker := "embedded"
	if testkit.SharedBrokers() != nil {
		broker = "kafka"
	}
	t.Logf("FIGURES pause broker=%s paused=%s started_while_paused=0 rebalances_while_paused=%d lag=%d reported_lag=%d handled=%d",
		broker, paused, s1.Rebalances-s0.Rebalances, during, during, len(handled))
}
