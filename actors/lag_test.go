package actors_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"github.com/turbokafka/turbo/actors"
	"github.com/turbokafka/turbo/actors/harness"
	"github.com/turbokafka/turbo/actors/memkafka"
	"github.com/turbokafka/turbo/config"
	"github.com/turbokafka/turbo/test/testkit"
)

// lagRefresh is the high watermark refresh of the lag tests: short, so
// that they wait a fraction of a second for what production shows within
// the default interval.
const lagRefresh = 200 * time.Millisecond

// startRefreshing is run.start with the high watermark refresh at every.
func (r *run) startRefreshing(c config.Consumer, h actors.Handler, every time.Duration) *actors.Consumer {
	r.t.Helper()
	opts := actors.Options{
		Consumer: c, Kafka: testkit.Kafka(r.t, r.brokers), ShutdownTimeout: 10 * time.Second, Handler: h,
		Logger: testkit.Logger(r.t), Restart: fastRestart,
	}
	cons, err := actors.New(actors.WithWatermarkRefresh(opts, every))
	if err != nil {
		r.t.Fatalf("starting consumer: %v", err)
	}
	r.t.Cleanup(func() { stop(r.t, cons) })
	return cons
}

// lagFigures prints what the consumer reports of every partition, for a
// failure's message.
func lagFigures(c *actors.Consumer) string {
	s := fmt.Sprintf("consumer lag %d;", c.Stats().Lag)
	for _, p := range c.Partitions() {
		s += fmt.Sprintf(" %d: committed %d hwm %d lag %d buffered %d;", p.Partition, p.Committed, p.HighWatermark, p.Lag, p.Buffered)
	}
	return s
}

// A paused consumer fetches nothing, yet its lag must follow what arrives:
// the high watermark of a partition not fetched is refreshed from the
// brokers. (Before, the lag stayed at what the last fetch had seen: 0 with
// every record waiting.)
func TestLagOfPausedConsumerFollowsTheBroker(t *testing.T) {
	t.Parallel()
	const first, more = 200, 300
	r := newRun(t, 4, first, 20)
	ledger := testkit.NewLedger(0)
	c := r.consumer("lag-paused", nil)
	cons := r.startRefreshing(c, ledger, lagRefresh)
	r.waitCommitted(c.Group, 60*time.Second)
	testkit.Eventually(t, 30*time.Second, "the consumer's lag to reach 0 once everything is committed", func() bool {
		return cons.Stats().Lag == 0 && cons.Stats().Assigned == 4
	})

	cons.Pause()
	testkit.Produce(t, r.brokers, r.topic, more, 20)
	end := testkit.EndOffsets(t, r.brokers, r.topic)
	committed := testkit.CommittedOffsets(t, r.brokers, c.Group, r.topic)
	want := map[int32]int64{}
	for p, e := range end {
		want[p] = e - committed[p]
	}
	deadline := time.Now().Add(30 * time.Second)
	for !lagIs(cons, want, more) {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after 30s waiting for the lag of the paused consumer to reach %d (per partition %v): %s", more, want, lagFigures(cons))
		}
		time.Sleep(20 * time.Millisecond)
	}
	if d := ledger.Report().Distinct; d != first {
		t.Errorf("%d records handled while paused, want the first %d only", d, first)
	}
	cons.Resume()
	r.waitCommitted(c.Group, 60*time.Second)
	testkit.Eventually(t, 30*time.Second, "the lag to be 0 again after the resume", func() bool { return cons.Stats().Lag == 0 })
	checkClean(t, ledger.Report(), first+more)
}

// lagIs reports whether every partition's lag, and the consumer's, are as
// wanted.
func lagIs(c *actors.Consumer, want map[int32]int64, total int64) bool {
	ps := c.Partitions()
	if len(ps) != len(want) || c.Stats().Lag != total {
		return false
	}
	for _, p := range ps {
		if p.Lag != want[p.Partition] {
			return false
		}
	}
	return true
}

// In memory (the side of actors/harness), the same: a paused consumer's
// lag follows what arrives, and so does that of a partition assigned again
// while paused, which never fetches: its lag counts from the offset the
// group committed.
func TestLagOfPausedConsumerInMemory(t *testing.T) {
	t.Parallel()
	const first, more = 10, 25
	tp := memkafka.TopicPartition{Topic: "lag", Partition: 0}
	cluster := memkafka.New()
	produce := func(from, n int) {
		t.Helper()
		for i := from; i < from+n; i++ {
			if err := cluster.Produce(memkafka.Record{Topic: tp.Topic, Partition: tp.Partition, Offset: int64(i), Key: []byte("k"), Value: []byte("v")}); err != nil {
				t.Fatal(err)
			}
		}
	}
	produce(0, first)
	kafka := config.Default().Kafka
	kafka.Brokers = []string{"in-memory:9092"} // never dialled
	opts := actors.Options{
		Consumer: harness.Consumer("lag", tp.Topic), Kafka: kafka, ShutdownTimeout: 5 * time.Second,
		Handler: actors.HandlerFunc(func(context.Context, *actors.Record) error { return nil }),
		Logger:  testkit.Logger(t).Level(zerolog.WarnLevel), Restart: harness.FastRestart,
	}
	cons, err := actors.StartInMemory(actors.WithWatermarkRefresh(opts, lagRefresh), cluster)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { stop(t, cons) })
	cluster.Assign(tp)
	testkit.Eventually(t, 10*time.Second, fmt.Sprintf("offset %d committed", first), func() bool { return cluster.Partition(tp).Committed == first })

	cons.Pause()
	produce(first, more)
	want := map[int32]int64{0: more}
	testkit.Eventually(t, 10*time.Second, fmt.Sprintf("a lag of %d while paused", more), func() bool { return lagIs(cons, want, more) })

	claims := cluster.Partition(tp).Claims
	cluster.Revoke(tp)
	testkit.Eventually(t, 10*time.Second, "the partition released", func() bool { return !cluster.Partition(tp).Owned })
	cluster.Assign(tp)
	testkit.Eventually(t, 10*time.Second, "the partition claimed again", func() bool { return cluster.Partition(tp).Claims > claims })
	testkit.Eventually(t, 10*time.Second, fmt.Sprintf("a lag of %d on the new assignment, never fetched", more), func() bool { return lagIs(cons, want, more) })
	if st := cons.Partitions(); len(st) != 1 || st[0].Committed != -1 {
		t.Errorf("partitions %+v: want the new assignment, nothing committed by it yet", st)
	}
	cons.Resume()
	testkit.Eventually(t, 10*time.Second, "everything committed after the resume", func() bool { return cluster.Partition(tp).Committed == first+more })
	testkit.Eventually(t, 10*time.Second, "a lag of 0", func() bool { return cons.Stats().Lag == 0 })
}

// A partition whose key is stuck uses up its credits and is no longer
// fetched; its lag must still count what arrives behind it, up to the
// broker's high watermark. (Before, it stayed at the high watermark of its
// last fetch: 127 where the backlog was 2,003, in production.)
func TestLagOfStuckPartitionCountsTheWholeBacklog(t *testing.T) {
	t.Parallel()
	// key-0's records fill its partition's share (11) while the other
	// keys finish: the partition is paused with a backlog behind them
	// (on the franz-go side once its queue is past the high mark).
	first, more := 2*(actors.FranzQueueHigh+1000), 2000
	r := newRun(t, 2, first, 20)
	release := make(chan struct{})
	defer close(release)
	hot := make(chan int32, 1)
	h := actors.HandlerFunc(func(ctx context.Context, rec *actors.Record) error {
		if string(rec.Key) == "key-0" {
			select {
			case hot <- rec.Partition:
			default:
			}
			select {
			case <-release:
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		return nil
	})
	c := r.consumer("lag-stuck", func(c *config.Consumer) {
		c.Concurrency = 2
		c.MaxBuffered = 20 // a share of 11 per partition
	})
	cons := r.startRefreshing(c, h, lagRefresh)
	var p int32
	select {
	case p = <-hot:
	case <-time.After(60 * time.Second):
		t.Fatal("timed out after 60s waiting for key-0's first record")
	}
	testkit.Eventually(t, 30*time.Second, fmt.Sprintf("partition %d to be paused, its credits used up behind key-0", p), func() bool {
		return partition(cons, r.topic, p).Paused
	})
	testkit.Produce(t, r.brokers, r.topic, more, 20)
	end := testkit.EndOffsets(t, r.brokers, r.topic)[p]
	var st actors.PartitionStats
	deadline := time.Now().Add(30 * time.Second)
	for {
		st = partition(cons, r.topic, p)
		if st.HighWatermark == end && st.Committed >= 0 && st.Lag == end-st.Committed {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("timed out after 30s waiting for partition %d's high watermark to reach %d and its lag the backlog behind its committed offset: %s", p, end, lagFigures(cons))
		}
		time.Sleep(20 * time.Millisecond)
	}
	if !st.Paused {
		t.Errorf("partition %d = %+v: want it still paused behind key-0", p, st)
	}
	// What the consumer counts from is what the group committed.
	testkit.Eventually(t, 10*time.Second, fmt.Sprintf("the group's committed offset of partition %d to be the consumer's %d", p, st.Committed), func() bool {
		return testkit.CommittedOffsets(t, r.brokers, c.Group, r.topic)[p] == st.Committed
	})
	t.Logf("partition %d stuck behind key-0: committed %d, high watermark %d, lag %d", p, st.Committed, st.HighWatermark, st.Lag)
}
