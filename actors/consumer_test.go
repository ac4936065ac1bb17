package actors_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/turbokafka/turbo/actors"
	"github.com/turbokafka/turbo/actors/backoff"
	"github.com/turbokafka/turbo/actors/embedded"
	"github.com/turbokafka/turbo/actors/handlers"
	"github.com/turbokafka/turbo/config"
	"github.com/turbokafka/turbo/test/testkit"
)

// fastRestart keeps restart tests short.
var fastRestart = backoff.Policy{Initial: 50 * time.Millisecond, Max: 200 * time.Millisecond, Multiplier: 2, Jitter: 0.2}

type run struct {
	t       *testing.T
	brokers []string
	topic   string
}

func newRun(t *testing.T, partitions, records, keys int) *run {
	t.Helper()
	topic := testkit.TopicName("t-" + strings.ReplaceAll(t.Name(), "/", "."))
	brokers := testkit.Broker(t, partitions, topic)
	if records > 0 {
		testkit.Produce(t, brokers, topic, records, keys)
	}
	return &run{t: t, brokers: brokers, topic: topic}
}

func (r *run) consumer(name string, mod func(*config.Consumer)) config.Consumer {
	c := config.DefaultConsumer(name)
	c.Group = "g-" + r.topic
	c.Topics = []string{r.topic}
	c.CommitInterval = 100 * time.Millisecond
	if mod != nil {
		mod(&c)
	}
	return c
}

func (r *run) start(c config.Consumer, h actors.Handler) *actors.Consumer {
	r.t.Helper()
	k := testkit.Kafka(r.t, r.brokers) // secured as the suite's environment says
	cons, err := actors.New(actors.Options{
		Consumer: c, Kafka: k, ShutdownTimeout: 10 * time.Second, Handler: h,
		Logger: testkit.Logger(r.t), Restart: fastRestart,
	})
	if err != nil {
		r.t.Fatalf("starting consumer: %v", err)
	}
	r.t.Cleanup(func() { stop(r.t, cons) })
	return cons
}

func stop(t *testing.T, c *actors.Consumer) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := c.Stop(ctx); err != nil {
		t.Errorf("stopping %s: %v", c.Name(), err)
	}
}

// waitCommitted waits until the group has committed every partition's end.
func (r *run) waitCommitted(group string, timeout time.Duration) {
	r.t.Helper()
	end := testkit.EndOffsets(r.t, r.brokers, r.topic)
	var last map[int32]int64
	testkit.Eventually(r.t, timeout, "the group to commit the end of every partition", func() bool {
		last = testkit.CommittedOffsets(r.t, r.brokers, group, r.topic)
		for p, e := range end {
			if last[p] < e {
				return false
			}
		}
		return true
	})
}

func checkClean(t *testing.T, rep testkit.Report, want int) {
	t.Helper()
	if rep.Distinct != want || rep.Duplicates != 0 {
		t.Errorf("handled %d distinct records with %d duplicates, want %d once each", rep.Distinct, rep.Duplicates, want)
	}
	if rep.Overlaps != 0 {
		t.Errorf("%d overlaps of records that must not run at once", rep.Overlaps)
	}
	if rep.OrderViolations != 0 {
		t.Errorf("%d records started before an earlier record of their key", rep.OrderViolations)
	}
}

// The seed blog post's demo: 1,000 records over 100 keys in 8 partitions,
// 100 ms each, key ordering, 10 runners. Ideal: 10 s; a consumer that runs one
// record per partition at a time needs at least 12.5 s.
func TestKeyOrderingReachesFullParallelism(t *testing.T) {
	t.Parallel() // most of its time is spent waiting: for sessions, joins, handlers
	r := newRun(t, 8, 1000, 100)
	ledger := testkit.NewLedger(100 * time.Millisecond)
	c := r.consumer("seed-demo", func(c *config.Consumer) { c.Concurrency = 10 })
	start := time.Now()
	cons := r.start(c, ledger)
	var maxInFlight, maxPipeline int64
	testkit.Eventually(t, 60*time.Second, "1000 records handled", func() bool {
		s := cons.Stats()
		maxInFlight, maxPipeline = max(maxInFlight, s.InFlight), max(maxPipeline, s.InFlight+s.Buffered)
		return ledger.Report().Distinct >= 1000
	})
	wall := time.Since(start)
	if maxInFlight > 10 || maxPipeline > 10+1000 {
		t.Errorf("stats showed up to %d in flight and %d in the pipeline; the bounds are 10 and 1010", maxInFlight, maxPipeline)
	}
	r.waitCommitted(c.Group, 20*time.Second)
	rep := ledger.Report()
	checkClean(t, rep, 1000)
	if rep.Peak != 10 {
		t.Errorf("peak parallelism %d, want 10", rep.Peak)
	}
	t.Logf("1000 records × 100 ms over 10 runners: %s (ideal 10 s), peak parallelism %d", wall.Round(time.Millisecond), rep.Peak)
	if s := cons.Stats(); s.Processed != 1000 || s.Failed != 0 || s.Restarts != 0 {
		t.Errorf("stats %+v, want 1000 processed, no failure, no restart", s)
	}
}

// A hot key that cannot progress fills only its partition's share of the
// buffer: that partition is paused, the others keep flowing.
func TestBlockedKeyDoesNotStallOtherPartitions(t *testing.T) {
	t.Parallel()
	r := newRun(t, 4, 2000, 20)
	release := make(chan struct{})
	defer close(release)
	var blocked atomic.Int64
	hotPartition := make(chan int32, 1)
	ledger := testkit.NewLedger(0)
	h := actors.HandlerFunc(func(ctx context.Context, rec *actors.Record) error {
		if string(rec.Key) == "key-0" {
			if blocked.Add(1) == 1 {
				hotPartition <- rec.Partition
			}
			select {
			case <-release:
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		return ledger.Handle(ctx, rec)
	})
	c := r.consumer("hot-key", func(c *config.Consumer) {
		c.Concurrency = 4
		c.MaxBuffered = 40
	})
	cons := r.start(c, h)
	var hot int32
	select {
	case hot = <-hotPartition:
	case <-time.After(60 * time.Second):
		t.Fatal("timed out waiting for the hot key's first record")
	}
	// Every record of the other partitions must get through although the
	// buffer holds only 44 records in all and one partition is stuck.
	want := 0
	for p, end := range testkit.EndOffsets(t, r.brokers, r.topic) {
		if p != hot {
			want += int(end)
		}
	}
	otherDone := func() int {
		n := 0
		for id := range ledger.Handled() {
			if !strings.HasPrefix(id, fmt.Sprintf("%s/%d@", r.topic, hot)) {
				n++
			}
		}
		return n
	}
	testkit.Eventually(t, 60*time.Second, fmt.Sprintf("%d records of the partitions without the hot key", want), func() bool { return otherDone() >= want })
	if n := blocked.Load(); n != 1 {
		t.Errorf("%d records of the blocked key started, want exactly 1", n)
	}
	s := cons.Stats()
	if s.InFlight+s.Buffered > int64(c.Concurrency+c.MaxBuffered) {
		t.Errorf("in flight %d + buffered %d exceed the budget %d", s.InFlight, s.Buffered, c.Concurrency+c.MaxBuffered)
	}
	// Health reports judge a stuck handler by the oldest call still running,
	// and polling by the group session.
	if s.Oldest.IsZero() || time.Since(s.Oldest) < time.Since(s.LastFetch)/2 {
		t.Errorf("oldest handler call began %v, want the blocked key's (running since before the last fetch %v)", s.Oldest, s.LastFetch)
	}
	if time.Since(s.LastPoll) > 5*time.Second {
		t.Errorf("last poll %v: want a live session", s.LastPoll)
	}
	if rep := ledger.Report(); rep.Overlaps != 0 || rep.OrderViolations != 0 || rep.Duplicates != 0 {
		t.Errorf("ledger %+v, want no overlap, order violation or duplicate", rep)
	}
}

// Without retries, a failing handler restarts the tree after a backoff;
// uncommitted records come again and the consumer carries on.
func TestHandlerFailureRestartsTheTree(t *testing.T) {
	t.Parallel()
	r := newRun(t, 2, 100, 10)
	var failed atomic.Bool
	ledger := testkit.NewLedger(0)
	ledger.Fail = func(rec *actors.Record) error {
		if rec.Partition == 0 && rec.Offset == 20 && failed.CompareAndSwap(false, true) {
			return errors.New("boom")
		}
		return nil
	}
	c := r.consumer("failing", func(c *config.Consumer) { c.Retry.MaxAttempts = 1 }) // no retry: fail at once
	cons := r.start(c, ledger)
	testkit.Eventually(t, 60*time.Second, "all 100 records handled after the restart", func() bool { return ledger.Report().Distinct >= 100 })
	r.waitCommitted(c.Group, 20*time.Second)
	s := cons.Stats()
	if s.Restarts != 1 {
		t.Errorf("%d restarts, want 1", s.Restarts)
	}
	if !failed.Load() {
		t.Error("the failure was never injected")
	}
	if rep := ledger.Report(); rep.Overlaps != 0 {
		t.Errorf("%d overlaps across the restart", rep.Overlaps)
	}
}

// Stop drains and commits: a second consumer of the group handles none of
// the records the first one finished.
func TestStopCommitsFinishedRecords(t *testing.T) {
	t.Parallel()
	r := newRun(t, 4, 600, 60)
	first := testkit.NewLedger(10 * time.Millisecond)
	c := r.consumer("first", func(c *config.Consumer) { c.Concurrency = 8 })
	cons := r.start(c, first)
	testkit.Eventually(t, 60*time.Second, "200 records handled by the first consumer", func() bool { return first.Report().Distinct >= 200 })
	stop(t, cons)
	done := first.Handled()
	if len(done) >= 600 {
		t.Fatalf("the first consumer finished everything (%d) before Stop; the test proves nothing", len(done))
	}

	second := testkit.NewLedger(0)
	c2 := r.consumer("second", nil)
	r.start(c2, second)
	r.waitCommitted(c2.Group, 60*time.Second)
	again := 0
	for id := range second.Handled() {
		if done[id] > 0 {
			again++
		}
	}
	if again != 0 {
		t.Errorf("%d records finished before Stop were handled again", again)
	}
	if total := len(done) + second.Report().Distinct; total != 600 {
		t.Errorf("%d + %d records handled, want 600 in all", len(done), second.Report().Distinct)
	}
	t.Logf("first consumer finished %d records before Stop, the second handled the other %d", len(done), second.Report().Distinct)
}

// A second member joins mid-run: partitions move, same-key records never
// overlap across members, nothing is lost.
func TestRebalanceHandoverKeepsKeysApart(t *testing.T) {
	t.Parallel() // most of its time is spent waiting: for sessions, joins, handlers
	testkit.EachSide(t, rebalanceHandoverKeepsKeysApart)
}

func rebalanceHandoverKeepsKeysApart(t *testing.T, _ testkit.Side) {
	r := newRun(t, 8, 1600, 80)
	// The shared ledger does the work and judges overlap and loss across both
	// members; each member's own ledger judges the order it started records in.
	shared := testkit.NewLedger(20 * time.Millisecond)
	a, b := testkit.NewLedger(0), testkit.NewLedger(0)
	// Until b holds partitions, records take longer: a join takes a few
	// heartbeats on real Kafka, and a must not finish everything meanwhile.
	var joined atomic.Bool
	both := func(member *testkit.Ledger) actors.Handler {
		return actors.HandlerFunc(func(ctx context.Context, rec *actors.Record) error {
			if err := member.Handle(ctx, rec); err != nil {
				return err
			}
			if !joined.Load() {
				if err := handlers.Sleep(100*time.Millisecond).Handle(ctx, rec); err != nil {
					return err
				}
			}
			return shared.Handle(ctx, rec)
		})
	}
	c := r.consumer("member-a", func(c *config.Consumer) { c.Concurrency = 4 })
	ca := r.start(c, both(a))
	testkit.Eventually(t, 60*time.Second, "member a to make progress", func() bool { return shared.Report().Distinct >= 50 })
	cb := r.start(r.consumer("member-b", func(c *config.Consumer) { c.Concurrency = 4 }), both(b))
	testkit.Eventually(t, 60*time.Second, "both members to hold partitions", func() bool {
		return cb.Stats().Assigned > 0 && ca.Stats().Assigned > 0 && ca.Stats().Assigned+cb.Stats().Assigned == 8
	})
	joined.Store(true)
	if s := ca.Stats(); s.Moves != 8+(8-s.Assigned) {
		t.Errorf("member a counted %d partition moves, want 8 gained + %d handed to b", s.Moves, 8-s.Assigned)
	}
	r.waitCommitted(c.Group, 60*time.Second)
	rep := shared.Report()
	if rep.Distinct != 1600 {
		t.Errorf("%d distinct records handled, want 1600", rep.Distinct)
	}
	if b.Report().Total == 0 {
		t.Error("member b handled nothing: there was no handover to judge")
	}
	for name, l := range map[string]*testkit.Ledger{"a": a, "b": b} {
		if o := l.Report().OrderViolations; o != 0 {
			t.Errorf("member %s started %d records before an earlier one of their key", name, o)
		}
	}
	if rep.Overlaps != 0 {
		t.Errorf("%d same-key overlaps across members", rep.Overlaps)
	}
	t.Logf("member a handled %d, member b %d, duplicates after the handover %d",
		a.Report().Total, b.Report().Total, rep.Duplicates)
}

// A handler that ignores its context cannot hold Stop beyond the bound:
// shutdown_timeout for the drain, then a short grace after cancellation.
func TestStopIsBoundedWhenAHandlerHangs(t *testing.T) {
	// Timed (its 1 s shutdown_timeout leaves a quarter second for leaving the group): it runs alone, after the rest (the Makefile's TIMED).
	r := newRun(t, 1, 10, 1)
	hang := make(chan struct{})
	defer close(hang)
	started := make(chan struct{}, 10)
	h := actors.HandlerFunc(func(context.Context, *actors.Record) error {
		started <- struct{}{}
		<-hang // ignores cancellation on purpose
		return nil
	})
	k := config.Default().Kafka
	k.Brokers = r.brokers
	cons, err := actors.New(actors.Options{
		Consumer: r.consumer("hang", nil), Kafka: k, ShutdownTimeout: time.Second, Handler: h, Logger: testkit.Logger(t),
	})
	if err != nil {
		t.Fatal(err)
	}
	select {
	case <-started:
	case <-time.After(30 * time.Second):
		t.Fatal("timed out waiting for the handler to start")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	begin := time.Now()
	var errs [2]error
	var wg sync.WaitGroup
	for i := range errs { // concurrent calls get the same, single shutdown
		wg.Go(func() { errs[i] = cons.Stop(ctx) })
	}
	wg.Wait()
	took := time.Since(begin)
	if !errors.Is(errs[0], actors.ErrAbandoned) || errs[1] != errs[0] {
		t.Errorf("Stop = %v, %v; want the same ErrAbandoned twice", errs[0], errs[1])
	}
	if took > 6*time.Second {
		t.Errorf("Stop took %s with shutdown_timeout 1s", took)
	}
	if err := cons.Stop(ctx); err != errs[0] {
		t.Errorf("a third Stop = %v, want the first call's result", err)
	}
	t.Logf("Stop returned after %s with a handler that never returns", took.Round(time.Millisecond))
}

// Kafka unreachable at start: turbo retries with backoff and consumes once
// the broker appears.
func TestKafkaUnreachableAtStartThenAppears(t *testing.T) {
	t.Parallel()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close() // nothing listens there now
	ledger := testkit.NewLedger(0)
	c := config.DefaultConsumer("late")
	c.Topics = []string{"late"}
	c.CommitInterval = 100 * time.Millisecond
	k := config.Default().Kafka
	k.Brokers = []string{addr}
	cons, err := actors.New(actors.Options{
		Consumer: c, Kafka: k, ShutdownTimeout: 5 * time.Second, Handler: ledger, Logger: testkit.Logger(t), Restart: fastRestart,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { stop(t, cons) })

	b, err := embedded.Start(embedded.Options{Listen: addr, Partitions: 2, Topics: []string{"late"}})
	if err != nil {
		t.Fatalf("starting the broker late on %s: %v", addr, err)
	}
	t.Cleanup(b.Close)
	testkit.Produce(t, b.Addrs(), "late", 50, 5)
	testkit.Eventually(t, 60*time.Second, "the 50 records produced after the broker came up", func() bool { return ledger.Report().Distinct >= 50 })
	checkClean(t, ledger.Report(), 50)
}

// A paused partition still notices its cooperative revocation (sarama only
// closes its channel): when a second member joins while every partition of
// the first is paused behind a stuck record, the handover takes the
// revocation's shutdown_timeout, not the broker's rebalance timeout (60 s).
func TestPausedPartitionsAreHandedOverPromptly(t *testing.T) {
	t.Parallel()
	r := newRun(t, 4, 2000, 40)
	stuck := actors.HandlerFunc(func(ctx context.Context, rec *actors.Record) error {
		if rec.Offset == 3 {
			<-ctx.Done() // stuck until cancelled
			return ctx.Err()
		}
		return nil
	})
	k := config.Default().Kafka
	k.Brokers = r.brokers
	start := func(name string, h actors.Handler) *actors.Consumer {
		c := r.consumer(name, func(c *config.Consumer) {
			c.Ordering = config.OrderingPartition
			c.Concurrency = 4
			c.MaxBuffered = 40
			c.Retry.MaxAttempts = 1
		})
		cons, err := actors.New(actors.Options{
			Consumer: c, Kafka: k, ShutdownTimeout: 2 * time.Second, Handler: h, Logger: testkit.Logger(t), Restart: fastRestart,
		})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = cons.Stop(context.Background()) })
		return cons
	}
	a := start("a", stuck)
	testkit.Eventually(t, 30*time.Second, "member a to hold 4 partitions and fill its budget", func() bool {
		s := a.Stats()
		return s.Assigned == 4 && s.Fetched >= 44
	})
	b := start("b", actors.HandlerFunc(func(context.Context, *actors.Record) error { return nil }))
	begin := time.Now()
	testkit.Eventually(t, 40*time.Second, "member b to get a partition", func() bool { return b.Stats().Assigned > 0 })
	t.Logf("member b got a partition %s after joining", time.Since(begin).Round(time.Millisecond))
}

// A record stuck at the head of a partition while everything after it
// finishes: reading stops once the partition's watermark window passes its
// bound (the finished offsets behind a stuck record are the one state credits
// do not bound), and resumes when the record finishes.
func TestStuckRecordBoundsTheWatermarkWindow(t *testing.T) {
	defer actors.SetMaxWatermarkWindow(500)()
	r := newRun(t, 1, 3000, 30)
	release := make(chan struct{})
	ledger := testkit.NewLedger(0)
	h := actors.HandlerFunc(func(ctx context.Context, rec *actors.Record) error {
		if rec.Offset == 0 {
			select {
			case <-release:
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		return ledger.Handle(ctx, rec)
	})
	c := r.consumer("window", func(c *config.Consumer) {
		c.Concurrency = 4
		c.MaxBuffered = 100
	})
	cons := r.start(c, h)
	// key-0's later records wait behind offset 0; the other keys finish
	// until the window is full. Reading must then stop well short of 3,000.
	var last int64 = -1
	testkit.Eventually(t, 30*time.Second, "reading to stop", func() bool {
		f := cons.Stats().Fetched
		stable := f > 500 && f == last
		last = f
		if !stable {
			time.Sleep(200 * time.Millisecond) // let a fetch land between two looks
		}
		return stable
	})
	// The hold is decided when the offset controller tracks a batch, so up
	// to the partition's credits (the budget, 104) may be on their way then.
	if f := cons.Stats().Fetched; f > 500+104+64 {
		t.Errorf("%d records read with a window of 500 and a budget of 104 behind a stuck record", f)
	}
	close(release)
	r.waitCommitted(c.Group, 60*time.Second)
	checkClean(t, ledger.Report(), 3000)
}

// TestReadAheadStaysWithinOneFetch: behind a handler slower than the pause
// delay, the partition starves, is paused, and gets a credit back over and
// over. sarama must not fetch ahead at every such cycle: the records it
// delivered beyond the pipeline's budget (Held) stay within about one fetch
// response, however large the backlog. (Before claimFlow, each cycle resumed
// the partition while the previous response still waited, and Held grew by a
// response per cycle up to the whole backlog: memory grew with the backlog.)
func TestReadAheadStaysWithinOneFetch(t *testing.T) {
	t.Parallel()
	// One 256 KiB fetch holds about 5,000 of these records (the producer's
	// batches are 5,000 records, about 50 bytes each).
	const records, oneFetch = 40_000, 5_000
	r := newRun(t, 1, records, 100)
	h := actors.HandlerFunc(func(ctx context.Context, _ *actors.Record) error {
		return handlerSleep(ctx, 150*time.Millisecond) // longer than the 100 ms pause delay
	})
	c := r.consumer("read-ahead", func(c *config.Consumer) {
		c.Concurrency = 1
		c.MaxBuffered = 3
	})
	cons := r.start(c, h)
	var maxHeld int64
	// Ten records are ten starve–pause–credit cycles: enough for the old
	// behaviour to have read the whole topic.
	testkit.Eventually(t, 60*time.Second, "10 records handled", func() bool {
		s := cons.Stats()
		maxHeld = max(maxHeld, s.ReadAhead)
		return s.Processed >= 10
	})
	if maxHeld > 2*oneFetch {
		t.Errorf("up to %d records held outside the budget; want at most about one fetch (%d)", maxHeld, oneFetch)
	}
	if maxHeld == 0 {
		t.Error("no record was ever held: the partition was never paused, so this test measured nothing")
	}
	t.Logf("at most %d records held", maxHeld)
}

func handlerSleep(ctx context.Context, d time.Duration) error {
	tm := time.NewTimer(d)
	defer tm.Stop()
	select {
	case <-tm.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
