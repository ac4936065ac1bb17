package actors_test

import (
	"testing"
	"time"

	"github.com/turbokafka/turbo/actors"
	"github.com/turbokafka/turbo/config"
	"github.com/turbokafka/turbo/test/testkit"
)

// After a run whose every record finished and was committed, nothing is
// buffered: not in any partition — those without a record either — and not
// in the consumer. (Before, a partition counted the credits its claim held
// while it waited for records: up to 512 each.)
func TestBufferedIsZeroAfterACommittedRun(t *testing.T) {
	t.Parallel()
	// 3 keys over 8 partitions: at least five partitions get no record.
	const records = 300
	r := newRun(t, 8, records, 3)
	ledger := testkit.NewLedger(0)
	c := r.consumer("buffered-zero", nil)
	cons := r.start(c, ledger)
	end := testkit.EndOffsets(t, r.brokers, r.topic)
	empty := 0
	for _, e := range end {
		if e == 0 {
			empty++
		}
	}
	if empty == 0 {
		t.Fatalf("every partition got records (%v): the test needs empty ones", end)
	}
	r.waitCommittedWhereRecords(cons, end)
	deadline := time.Now().Add(10 * time.Second)
	for {
		ps := cons.Partitions()
		var sum int64
		zero := len(ps) == 8
		for _, p := range ps {
			sum += p.Buffered
			zero = zero && p.Buffered == 0 && p.InFlight == 0
		}
		s := cons.Stats()
		if zero && sum == s.Buffered && s.Buffered == 0 && s.InFlight == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("timed out after 10s waiting for every partition (%d empty) and the consumer to show 0 buffered: consumer %d, partitions' sum %d; %s",
				empty, s.Buffered, sum, lagFigures(cons))
		}
		time.Sleep(20 * time.Millisecond)
	}
	checkClean(t, ledger.Report(), records)
}

// While the consumer is paused with records waiting, the partitions'
// buffered records add up to the consumer's, and partitions with nothing
// to fetch show none.
func TestBufferedAddsUpWhilePaused(t *testing.T) {
	t.Parallel()
	const records = 400
	r := newRun(t, 8, records, 3) // at least five partitions without a record
	ledger := testkit.NewLedger(20 * time.Millisecond)
	c := r.consumer("buffered-paused", func(c *config.Consumer) {
		c.Concurrency = 2
		c.MaxBuffered = 200
	})
	cons := r.start(c, ledger)
	// Under load, Status reads the two together: they add up.
	testkit.Eventually(t, 60*time.Second, "records to be buffered behind the two runners", func() bool {
		s, ps := cons.Status()
		var sum int64
		for _, p := range ps {
			sum += p.Buffered
			if p.Buffered < 0 || p.InFlight < 0 {
				t.Fatalf("partition %d: %d buffered, %d in flight", p.Partition, p.Buffered, p.InFlight)
			}
		}
		if sum != s.Buffered {
			t.Fatalf("Status: the consumer's buffered %d, the partitions' sum %d", s.Buffered, sum)
		}
		return s.Assigned == 8 && s.Processed > 0 && s.Buffered > 20
	})
	cons.Pause()
	testkit.Eventually(t, 30*time.Second, "the running records to finish after the pause", func() bool {
		return cons.Stats().InFlight == 0
	})
	end := testkit.EndOffsets(t, r.brokers, r.topic)
	var sum, consumer int64
	deadline := time.Now().Add(10 * time.Second)
	for {
		ps := cons.Partitions()
		sum = 0
		emptyZero := true
		for _, p := range ps {
			sum += p.Buffered
			if end[p.Partition] == 0 && p.Buffered != 0 {
				emptyZero = false
			}
		}
		consumer = cons.Stats().Buffered
		if emptyZero && sum == consumer && consumer > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("timed out after 10s waiting for the partitions' buffered records (sum %d) to add up to the consumer's (%d), non-zero, and none in the partitions without records (ends %v): %s",
				sum, consumer, end, lagFigures(cons))
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Logf("paused with %d records buffered (handled %d of %d)", consumer, ledger.Report().Distinct, records)
	cons.Resume()
	r.waitCommittedWhereRecords(cons, end)
	checkClean(t, ledger.Report(), records)
}

// waitCommittedWhereRecords waits until the consumer has committed the end
// of every partition that has records (the others never commit). It reads
// the consumer's committed offsets rather than the group's: a fresh Kafka
// broker answers the group's offsets with "still loading" for a while.
func (r *run) waitCommittedWhereRecords(c *actors.Consumer, end map[int32]int64) {
	r.t.Helper()
	testkit.Eventually(r.t, 60*time.Second, "the consumer to commit the end of every partition with records", func() bool {
		got := map[int32]int64{}
		for _, p := range c.Partitions() {
			got[p.Partition] = p.Committed
		}
		for p, e := range end {
			if e > 0 && got[p] < e {
				return false
			}
		}
		return true
	})
}
