package actors_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/turbokafka/turbo/actors"
	"github.com/turbokafka/turbo/config"
	"github.com/turbokafka/turbo/test/testkit"
)

// TestPartitionPauseHoldsAcrossARealRebalance, on the suite's broker
// (embedded, and Apache Kafka in make test-kafka): a partition paused on
// member A stays paused through a real rebalance — member B joins, then
// leaves, and the partition comes back to A — so that none of the records
// produced to it afterwards starts while the other partitions drain; after
// Resume every record is handled once and committed.
func TestPartitionPauseHoldsAcrossARealRebalance(t *testing.T) {
	t.Parallel()
	const before, after = 200, 400
	r := newRun(t, 4, before, 20)
	var mu sync.Mutex
	handled := map[string]int{}
	count := func(p int32) (n int) {
		mu.Lock()
		defer mu.Unlock()
		for k, c := range handled {
			var part int32
			var off int64
			fmt.Sscanf(k, "%d@%d", &part, &off)
			if part == p {
				n += c
			}
		}
		return n
	}
	h := actors.HandlerFunc(func(_ context.Context, rec *actors.Record) error {
		mu.Lock()
		defer mu.Unlock()
		handled[fmt.Sprintf("%d@%d", rec.Partition, rec.Offset)]++
		return nil
	})
	c := r.consumer("pause-rebalance", nil)
	a := r.start(c, h)
	r.waitCommitted(c.Group, time.Minute)
	p0 := actors.TopicPartition{Topic: r.topic, Partition: 0}
	a.Pause(p0)

	b := r.start(c, h) // the same group: a rebalance shares the partitions
	testkit.Eventually(t, time.Minute, "the partitions shared between A and B", func() bool {
		return a.Stats().Assigned > 0 && b.Stats().Assigned > 0 && a.Stats().Assigned+b.Stats().Assigned == 4
	})
	stop(t, b)
	testkit.Eventually(t, time.Minute, "every partition back with A", func() bool { return a.Stats().Assigned == 4 })
	atStart := count(0)
	testkit.Produce(t, r.brokers, r.topic, after, 20)
	end := testkit.EndOffsets(t, r.brokers, r.topic)
	testkit.Eventually(t, time.Minute, "partitions 1-3 drained while 0 is held", func() bool {
		committed := testkit.CommittedOffsets(t, r.brokers, c.Group, r.topic)
		for p := int32(1); p < 4; p++ {
			if committed[p] < end[p] {
				return false
			}
		}
		return true
	})
	if n := count(0) - atStart; n != 0 {
		t.Fatalf("%d records of the paused partition 0 started after the rebalance", n)
	}
	held := false
	for _, ps := range a.Partitions() {
		if ps.TopicPartition == p0 {
			held = ps.Held
		}
	}
	if !held {
		t.Fatalf("partition 0 is not shown held after coming back: %+v", a.Partitions())
	}
	// Held is also not fetched: the client stops fetching it (at once on
	// the franz-go side, after pauseAfter on sarama's), rather than reading
	// ahead what cannot start.
	testkit.Eventually(t, 10*time.Second, "partition 0 paused in the Kafka client while held", func() bool {
		for _, ps := range a.Partitions() {
			if ps.TopicPartition == p0 {
				return ps.Paused
			}
		}
		return false
	})
	a.Resume(p0)
	r.waitCommitted(c.Group, time.Minute)
	mu.Lock()
	defer mu.Unlock()
	if len(handled) != before+after {
		t.Fatalf("%d records handled, want %d", len(handled), before+after)
	}
	for k, n := range handled {
		if n != 1 {
			t.Fatalf("record %s handled %d times, want once", k, n)
		}
	}
	t.Logf("FIGURES pause-across-rebalance broker=%s partition0-records=%d (none started while held)", brokerName(), end[0])
}

// TestRetuneInFlightOnABroker, on the suite's broker: records that each
// take 20 ms, measured in flight: 8 at once at concurrency 8, at most 2
// after SetConcurrency(2) (once the calls above it finished), 16 after
// SetConcurrency(16); every record once.
func TestRetuneInFlightOnABroker(t *testing.T) {
	t.Parallel()
	const records = 3000
	r := newRun(t, 4, records, 200)
	var now, peak, total int64
	var mu sync.Mutex
	handled := map[string]int{}
	h := actors.HandlerFunc(func(ctx context.Context, rec *actors.Record) error {
		mu.Lock()
		now++
		peak = max(peak, now)
		mu.Unlock()
		defer func() {
			mu.Lock()
			now--
			total++
			handled[fmt.Sprintf("%d@%d", rec.Partition, rec.Offset)]++
			mu.Unlock()
		}()
		return handlerSleep(ctx, 20*time.Millisecond)
	})
	read := func() (n, p int64) {
		mu.Lock()
		defer mu.Unlock()
		return now, peak
	}
	c := r.consumer("retune-broker", func(c *config.Consumer) {
		c.Ordering = config.OrderingUnordered
		c.Concurrency = 8
	})
	cons := r.start(c, h)
	testkit.Eventually(t, time.Minute, "8 calls in flight", func() bool { _, p := read(); return p == 8 })
	_, before := read()
	if err := cons.SetConcurrency(2); err != nil {
		t.Fatal(err)
	}
	testkit.Eventually(t, 10*time.Second, "the calls above 2 to finish", func() bool { n, _ := read(); return n <= 2 })
	mu.Lock()
	peak = now
	mu.Unlock()
	testkit.Holds(t, time.Second, "at most 2 in flight after SetConcurrency(2)", func() error {
		if _, p := read(); p > 2 {
			return fmt.Errorf("%d in flight", p)
		}
		return nil
	})
	_, low := read()
	if err := cons.SetConcurrency(16); err != nil {
		t.Fatal(err)
	}
	testkit.Eventually(t, time.Minute, "16 calls in flight after SetConcurrency(16)", func() bool { _, p := read(); return p == 16 })
	r.waitCommitted(c.Group, 2*time.Minute)
	mu.Lock()
	defer mu.Unlock()
	if peak > 16 || len(handled) != records {
		t.Fatalf("peak %d (want at most 16), %d records handled (want %d)", peak, len(handled), records)
	}
	for k, n := range handled {
		if n != 1 {
			t.Fatalf("record %s handled %d times", k, n)
		}
	}
	t.Logf("FIGURES retune broker=%s in-flight: %d at concurrency 8, at most %d at 2, %d at 16", brokerName(), before, low, peak)
}

func brokerName() string {
	if testkit.SharedBrokers() != nil {
		return "kafka"
	}
	return "embedded"
}
