package actors_test

import (
	"context"
	"fmt"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/turbokafka/turbo/actors"
	"github.com/turbokafka/turbo/actors/harness"
	"github.com/turbokafka/turbo/config"
	"github.com/turbokafka/turbo/test/testkit"
)

// TestPauseTopics: a paused topic holds its partitions, those assigned
// after the pause too, while another topic goes on; resuming the topic
// resumes a partition of it paused on its own as well, and everything is
// handled once.
func TestPauseTopics(t *testing.T) {
	t.Parallel()
	c := harness.Consumer("pause-topics", "t", "u")
	c.Concurrency = 4
	hs := harness.New(t, harness.Config{Consumer: c}, nil)
	hs.PauseTopics("t")
	hs.Pause(actors.TopicPartition{Topic: "t", Partition: 1})
	if got := hs.PausedTopics(); !slices.Equal(got, []string{"t"}) {
		t.Fatalf("PausedTopics() = %v, want [t]", got)
	}
	hs.Feed(harness.Seq("t", 0, 0, 20, 5)...)
	hs.Feed(harness.Seq("t", 1, 0, 20, 5)...)
	hs.Feed(harness.Seq("u", 0, 0, 20, 5)...)
	hs.Assign("u", 0)
	hs.Assign("t", 0, 1) // assigned after the pause
	hs.AwaitHandled(20)
	testkit.Holds(t, 500*time.Millisecond, "no record of the paused topic t starts", func() error {
		for _, call := range hs.Handled() {
			if call.Topic == "t" {
				return fmt.Errorf("%s/%d@%d ran while its topic was paused", call.Topic, call.Partition, call.Offset)
			}
		}
		return nil
	})
	hs.ResumeTopics("t")
	hs.AwaitHandled(60)
	hs.AwaitAllCommitted()
	if got, parts := hs.PausedTopics(), hs.PausedPartitions(); len(got) != 0 || len(parts) != 0 {
		t.Fatalf("after ResumeTopics: paused topics %v, partitions %v; want none", got, parts)
	}
}

// peakCounter counts handler calls in flight and the most seen since the
// last reset.
type peakCounter struct {
	now, peak atomic.Int64
}

func (p *peakCounter) enter() {
	n := p.now.Add(1)
	for {
		old := p.peak.Load()
		if n <= old || p.peak.CompareAndSwap(old, n) {
			return
		}
	}
}

// TestSetConcurrencyLive: a consumer at concurrency 8 retuned to 2 runs at
// most 2 calls at once once the calls above it have finished, and retuned
// to 12 (above the configuration) reaches 12; Tuning reports each, and the
// retune holds across a tree restart. Every record is handled once.
func TestSetConcurrencyLive(t *testing.T) {
	t.Parallel()
	const records = 6000
	c := harness.Consumer("retune", "t")
	c.Ordering = config.OrderingUnordered
	c.Concurrency = 8
	c.MaxBuffered = 200
	c.Retry.MaxAttempts = 1 // no retry: a failure escalates and restarts the tree
	var calls peakCounter
	var fail atomic.Bool // the next call fails: the tree restarts
	h := actors.HandlerFunc(func(ctx context.Context, rec *actors.Record) error {
		calls.enter()
		defer calls.now.Add(-1)
		select { // the simulated work
		case <-time.After(2 * time.Millisecond):
		case <-ctx.Done():
			return ctx.Err()
		}
		if fail.CompareAndSwap(true, false) {
			return fmt.Errorf("a failure that restarts the tree")
		}
		return nil
	})
	// A race-built run on a loaded CI machine handles a few hundred records
	// a second here: the waits get 30 s, and the second half of the records
	// is fed only after the tree restart, so that the phases before it
	// cannot run out of records on a fast machine.
	hs := harness.New(t, harness.Config{Consumer: c, Timeout: 30 * time.Second}, h)
	hs.Feed(harness.Seq("t", 0, 0, records/2, 100)...)
	hs.Assign("t", 0)
	hs.Await("8 calls at once", func() bool { return calls.peak.Load() == 8 })

	if err := hs.SetConcurrency(2); err != nil {
		t.Fatal(err)
	}
	hs.Await("the calls above 2 to finish", func() bool { return calls.now.Load() <= 2 })
	calls.peak.Store(calls.now.Load())
	testkit.Holds(t, 300*time.Millisecond, "at most 2 calls at once after SetConcurrency(2)", func() error {
		if p := calls.peak.Load(); p > 2 {
			return fmt.Errorf("%d calls at once", p)
		}
		return nil
	})
	if tu := hs.Tuning(); tu.Concurrency != 2 || !tu.Retuned {
		t.Fatalf("Tuning() = %+v, want concurrency 2, retuned", tu)
	}
	if s := hs.Stats(); s.Limit != 2 {
		t.Fatalf("Stats().Limit = %d, want 2", s.Limit)
	}

	if err := hs.SetConcurrency(12); err != nil {
		t.Fatal(err)
	}
	hs.Await("12 calls at once after SetConcurrency(12)", func() bool { return calls.peak.Load() == 12 })
	fail.Store(true)
	hs.Await("the tree restart", func() bool { return hs.Restarts() == 1 })
	calls.peak.Store(0)
	hs.Feed(harness.Seq("t", 0, records/2, records/2, 100)...)
	hs.Await("12 calls at once after the tree restart", func() bool { return calls.peak.Load() == 12 })
	hs.AwaitHandled(records)
	hs.AwaitAllCommitted()
	if p := calls.peak.Load(); p > 12 {
		t.Fatalf("%d calls at once at concurrency 12", p)
	}
	for _, bad := range []int{0, config.MaxConcurrency + 1} {
		if err := hs.SetConcurrency(bad); err == nil {
			t.Fatalf("SetConcurrency(%d) accepted", bad)
		}
	}
}

// TestSetRateLive: an unlimited consumer retuned to 50 records a second
// starts no more than a second's worth plus its burst in a second; the
// retune lifted (limit 0), the rest drains. A rate the configuration would
// refuse is refused.
func TestSetRateLive(t *testing.T) {
	t.Parallel()
	const records = 2000
	c := harness.Consumer("retune-rate", "t")
	c.Ordering = config.OrderingUnordered
	c.Concurrency = 8
	hs := harness.New(t, harness.Config{Consumer: c}, nil)
	if err := hs.SetRate(config.Rate{Limit: 50, Burst: 5}); err != nil {
		t.Fatal(err)
	}
	hs.Feed(harness.Seq("t", 0, 0, records, 100)...)
	hs.Assign("t", 0)
	hs.Await("the first records under the rate", func() bool { return hs.Stats().Processed > 0 })
	from := hs.Stats().Processed
	start := time.Now()
	// Records finishing in the window started under at most 50 a second
	// and the burst, or took their tokens before it began (at most another
	// burst's worth: a loaded machine finished 9 in the first 40 ms).
	testkit.Holds(t, time.Second, "at most 50 records a second plus the burst", func() error {
		if n, allowed := hs.Stats().Processed-from, int64(50*time.Since(start).Seconds())+2*5+1; n > allowed {
			return fmt.Errorf("%d records in %s", n, time.Since(start))
		}
		return nil
	})
	if tu := hs.Tuning(); tu.Rate.Limit != 50 || tu.Rate.Burst != 5 {
		t.Fatalf("Tuning() = %+v, want rate 50, burst 5", tu)
	}
	if err := hs.SetRate(config.Rate{}); err != nil {
		t.Fatal(err)
	}
	hs.AwaitHandled(records)
	if err := hs.SetRate(config.Rate{Limit: -3}); err == nil {
		t.Fatal("SetRate(-3) accepted")
	}
}

// TestPausesHoldAcrossARebalance: a paused partition and a paused topic
// that are revoked and assigned again come back paused: none of their
// records starts until they are resumed, while an unpaused partition goes
// on; then everything is handled once.
func TestPausesHoldAcrossARebalance(t *testing.T) {
	t.Parallel()
	c := harness.Consumer("pause-rebalance", "t", "u")
	c.Concurrency = 4
	hs := harness.New(t, harness.Config{Consumer: c}, nil)
	hs.Feed(harness.Seq("t", 0, 0, 10, 2)...)
	hs.Feed(harness.Seq("t", 1, 0, 10, 2)...)
	hs.Feed(harness.Seq("u", 0, 0, 10, 2)...)
	hs.Assign("t", 0, 1)
	hs.Assign("u", 0)
	hs.AwaitHandled(30)
	hs.AwaitAllCommitted()
	hs.Pause(actors.TopicPartition{Topic: "t", Partition: 0})
	hs.PauseTopics("u")
	hs.Revoke("t", 0, 1)
	hs.Revoke("u", 0)
	hs.Await("the partitions revoked", func() bool { return !hs.Owned("t", 0) && !hs.Owned("t", 1) && !hs.Owned("u", 0) })
	hs.Feed(harness.Seq("t", 0, 10, 10, 2)...)
	hs.Feed(harness.Seq("t", 1, 10, 10, 2)...)
	hs.Feed(harness.Seq("u", 0, 10, 10, 2)...)
	hs.Assign("t", 0, 1)
	hs.Assign("u", 0)
	hs.AwaitHandled(40) // t/1's new records: it was not paused
	testkit.Holds(t, 500*time.Millisecond, "no record of t/0 or u/0 starts after the rebalance", func() error {
		for _, tp := range []struct {
			topic string
			p     int32
		}{{"t", 0}, {"u", 0}} {
			for off := int64(10); off < 20; off++ {
				if n := hs.Attempts(tp.topic, tp.p, off); n != 0 {
					return fmt.Errorf("%s/%d@%d started %d times while paused", tp.topic, tp.p, off, n)
				}
			}
		}
		return nil
	})
	hs.Resume(actors.TopicPartition{Topic: "t", Partition: 0})
	hs.ResumeTopics("u")
	hs.AwaitHandled(60)
	hs.AwaitAllCommitted()
}
