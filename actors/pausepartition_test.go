package actors_test

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/turbokafka/turbo/actors"
	"github.com/turbokafka/turbo/actors/harness"
	"github.com/turbokafka/turbo/config"
	"github.com/turbokafka/turbo/test/testkit"
)

// TestPausePartitions: pausing t/0 alone (in each ordering) stops its
// records — those buffered, those fed later, and a retry that comes due —
// while t/1 goes on; t/0 stays assigned, and after Resume(t/0) it drains,
// in order, each record once.
func TestPausePartitions(t *testing.T) {
	t.Parallel()
	for _, ordering := range []config.Ordering{config.OrderingKey, config.OrderingPartition, config.OrderingUnordered} {
		t.Run(string(ordering), func(t *testing.T) {
			c := harness.Consumer("pause-parts", "t")
			c.Ordering = ordering
			c.Concurrency = 4
			// The retry comes due well after the pause, so it is one that
			// comes due while paused (with 5 ms it could come due, and
			// start, before Pause had returned).
			c.Retry.InitialBackoff, c.Retry.MaxBackoff = 300*time.Millisecond, 300*time.Millisecond
			h := harness.FailTimes(func(r *actors.Record) bool { return r.Partition == 0 && r.Offset == 3 }, 1, fmt.Errorf("once"), nil)
			hs := harness.New(t, harness.Config{Consumer: c}, h)
			hs.Feed(partSeq(0, 0, 4, 2)...) // t/0@3 fails once: its retry comes due while paused
			hs.Assign("t", 0, 1)
			hs.AwaitStarted("t", 0, 3)
			p0 := actors.TopicPartition{Topic: "t", Partition: 0}
			hs.Pause(p0)
			if got := hs.PausedPartitions(); !slices.Equal(got, []actors.TopicPartition{p0}) {
				t.Fatalf("PausedPartitions() = %v", got)
			}
			before := hs.Attempts("t", 0, 3)
			hs.Feed(partSeq(0, 4, 50, 5)...)
			hs.Feed(partSeq(1, 0, 50, 5)...)
			hs.Await("t/1 handled while t/0 is paused", func() bool {
				n := 0
				for _, call := range hs.Handled() {
					if call.Partition == 1 {
						n++
					}
				}
				return n == 50
			})
			testkit.Holds(t, time.Second, "no record of the paused t/0 starts", func() error {
				for off := int64(4); off < 54; off++ {
					if n := hs.Attempts("t", 0, off); n != 0 {
						return fmt.Errorf("t/0@%d started %d times while paused", off, n)
					}
				}
				if n := hs.Attempts("t", 0, 3); n != before {
					return fmt.Errorf("t/0@3's retry ran while paused (%d attempts, %d before)", n, before)
				}
				if !hs.Owned("t", 0) {
					return fmt.Errorf("t/0 is no longer the consumer's")
				}
				return nil
			})
			hs.Resume(p0)
			hs.AwaitHandled(4 + 50 + 50)
			hs.AwaitAllCommitted()
			if got := hs.PausedPartitions(); len(got) != 0 {
				t.Fatalf("PausedPartitions() = %v after Resume", got)
			}
			if ordering == config.OrderingPartition {
				var offs []int64
				for _, call := range hs.Handled() {
					if call.Partition == 0 {
						offs = append(offs, call.Offset)
					}
				}
				if !slices.IsSorted(offs) {
					t.Fatalf("t/0 handled out of order after the resume: %v", offs)
				}
			}
		})
	}
}

// partSeq is harness.Seq on topic t with keys of the partition's own (a key
// is one partition's, as Kafka's partitioners make it): under key
// ordering a key's records wait behind its earlier ones whatever their
// partition, so a key shared with a paused partition would wait too.
func partSeq(p int32, from int64, n, keys int) []harness.Record {
	recs := harness.Seq("t", p, from, n, keys)
	for i := range recs {
		recs[i].Key = []byte(fmt.Sprintf("p%d-%s", p, recs[i].Key))
	}
	return recs
}
