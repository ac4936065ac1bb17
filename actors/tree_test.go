package actors_test

// The tree's own logic — ordering, retries, failure policies, restarts,
// revocation, watermarks and their metadata, back-pressure — tested with
// actors/harness: the real actor tree over an in-memory Kafka, deterministic
// and fast. What needs a real client (sarama against kfake: rebalances
// between members, pausing, Kafka unreachable, the dead-letter producer, a
// restart rejoining the group) is tested in consumer_test.go and
// failure_test.go.

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strconv"
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

const topic = "orders"

func consumer(mod func(*config.Consumer)) harness.Config {
	c := harness.Consumer("tree", topic)
	if mod != nil {
		mod(&c)
	}
	return harness.Config{Consumer: c}
}

// feedAll feeds n records to each of partitions, with keys k0…k<keys-1> in
// turn in every partition (so a key spans partitions), and assigns them.
func feedAll(h *harness.Harness, partitions, n, keys int) {
	for p := range int32(partitions) {
		h.Feed(harness.Seq(topic, p, 0, n, keys)...)
		h.Assign(topic, p)
	}
}

// checkOnce fails the test unless every record of the partitions' first n
// offsets was handled exactly once.
func checkOnce(t *testing.T, h *harness.Harness, partitions, n int) {
	t.Helper()
	for p := range int32(partitions) {
		checkPartitionOnce(t, h, p, n)
	}
}

// checkPartitionOnce fails the test unless each of the partition's first n
// offsets was handled exactly once.
func checkPartitionOnce(t *testing.T, h *harness.Harness, partition int32, n int) {
	t.Helper()
	for off := range int64(n) {
		if got := h.TimesHandled(topic, partition, off); got != 1 {
			t.Errorf("%s/%d@%d handled %d times, want once", topic, partition, off, got)
		}
	}
}

// Under every ordering, with records of each key in every partition and
// handlers of varying length, each record is handled once, the harness sees
// no two records of a unit at once nor out of offset order, and everything
// is committed.
func TestOrderingHoldsUnderConcurrency(t *testing.T) {
	t.Parallel()
	for _, ordering := range []config.Ordering{config.OrderingKey, config.OrderingPartition, config.OrderingUnordered} {
		t.Run(string(ordering), func(t *testing.T) {
			work := actors.HandlerFunc(func(context.Context, *actors.Record) error {
				time.Sleep(time.Duration(rand.IntN(100)) * time.Microsecond) // simulated work
				return nil
			})
			h := harness.New(t, consumer(func(c *config.Consumer) {
				c.Ordering = ordering
				c.Concurrency = 8
				c.MaxBuffered = 40
			}), work)
			feedAll(h, 4, 150, 12)
			h.AwaitAllCommitted()
			checkOnce(t, h, 4, 150)
			if v := h.Violations(); len(v) > 0 {
				t.Errorf("%d ordering violations, first %s", len(v), v[0])
			}
			if s := h.Stats(); s.Processed != 600 || s.Restarts != 0 {
				t.Errorf("stats %+v: want 600 processed, no restart", s)
			}
		})
	}
}

// The parallelism each ordering allows, and no more: with every record
// held, as many run as there are free units (keys, partitions, or runners).
func TestParallelismPerOrdering(t *testing.T) {
	t.Parallel()
	cases := []struct {
		ordering config.Ordering
		limit    int
	}{
		{config.OrderingKey, 3},       // three keys
		{config.OrderingPartition, 4}, // four partitions
		{config.OrderingUnordered, 8}, // every runner
	}
	for _, tc := range cases {
		t.Run(string(tc.ordering), func(t *testing.T) {
			release := make(chan struct{})
			h := harness.New(t, consumer(func(c *config.Consumer) {
				c.Ordering = tc.ordering
				c.Concurrency = 8
			}), harness.Block(harness.Any, release, nil))
			feedAll(h, 4, 30, 3)
			h.AwaitRunning(tc.limit)
			if p := h.Peak(); p != tc.limit {
				t.Errorf("peak %d handler calls at once, want %d", p, tc.limit)
			}
			close(release)
			h.AwaitAllCommitted()
			checkOnce(t, h, 4, 30)
			if p := h.Peak(); p != tc.limit {
				t.Errorf("peak %d handler calls at once after the release, want %d", p, tc.limit)
			}
		})
	}
}

// Under partition ordering a runner gets runs of one partition's records;
// when one of them blocks, the rest of its run is taken back but must wait
// (same partition), while the other partitions keep flowing.
func TestPartitionOrderingBlockedRecordHoldsOnlyItsPartition(t *testing.T) {
	t.Parallel()
	release := make(chan struct{})
	h := harness.New(t, consumer(func(c *config.Consumer) {
		c.Ordering = config.OrderingPartition
		c.Concurrency = 4
	}), harness.Block(harness.At(topic, 0, 100), release, nil))
	feedAll(h, 4, 1000, 40)
	// Partition 0's offsets 0–99 and the other three partitions.
	h.AwaitHandled(100 + 3*1000)
	for _, c := range h.Handled() {
		if c.Partition == 0 && c.Offset > 100 {
			t.Errorf("%s ran while offset 100 of its partition was still running", c)
		}
	}
	close(release)
	h.AwaitAllCommitted()
	checkOnce(t, h, 4, 1000)
}

// A key whose records cannot progress fills only its partition's share of
// the budget (concurrency + max_buffered, shared among the partitions
// held): its partition stops being read, the others flow.
func TestBlockedKeyFillsOnlyItsPartitionsShare(t *testing.T) {
	t.Parallel()
	release := make(chan struct{})
	h := harness.New(t, consumer(func(c *config.Consumer) {
		c.Concurrency = 2
		c.MaxBuffered = 10 // budget 12: a share of 6 once two partitions are held
	}), harness.Block(harness.Key("hot"), release, nil))
	h.Feed(harness.Seq(topic, 1, 0, 100, 10)...)
	h.Assign(topic, 1)
	h.AwaitHandled(100) // partition 1 held (and sized) before partition 0 comes
	for off := range int64(100) {
		h.Feed(harness.Rec(topic, 0, off, "hot", "v"))
	}
	h.Assign(topic, 0)
	h.AwaitStarted(topic, 0, 0)
	h.Feed(harness.Seq(topic, 1, 100, 100, 10)...)
	h.AwaitHandled(200) // partition 1 keeps flowing
	if f := h.Stats().Fetched; f > 200+6 {
		t.Errorf("%d records read: partition 0 may hold no more than its share of 6 beside partition 1's 200", f)
	}
	close(release)
	h.AwaitAllCommitted()
	checkPartitionOnce(t, h, 0, 100)
	checkPartitionOnce(t, h, 1, 200)
}

// A record that fails twice and then succeeds is handled exactly three
// times; its key's later records wait for it, the other keys do not.
func TestRetryKeepsKeyOrderAndOtherKeysFlow(t *testing.T) {
	t.Parallel()
	third := make(chan struct{}) // the third attempt waits for the test
	handler := harness.FailTimes(harness.At(topic, 0, 20), 2, errors.New("transient failure"),
		harness.Block(harness.At(topic, 0, 20), third, nil))
	h := harness.New(t, consumer(func(c *config.Consumer) { c.Concurrency = 4 }), handler)
	h.Feed(harness.Seq(topic, 0, 0, 200, 10)...) // offset 20 is k0's third record
	h.Assign(topic, 0)
	h.AwaitStarted(topic, 0, 20)
	h.Await("offset 20's third attempt", func() bool { return h.Attempts(topic, 0, 20) == 3 })
	// While k0 waits for offset 20, the other nine keys finish.
	h.AwaitHandled(2 + 9*20) // k0's offsets 0 and 10, and the other keys' 20 each
	if k0 := h.HandledOffsets("k0"); !slices.Equal(k0, []int64{0, 10}) {
		t.Errorf("k0 handled %v while offset 20 was retried, want [0 10]", k0)
	}
	close(third)
	h.AwaitAllCommitted()
	checkOnce(t, h, 1, 200)
	want := make([]int64, 0, 20)
	for off := int64(0); off < 200; off += 10 {
		want = append(want, off)
	}
	if k0 := h.HandledOffsets("k0"); !slices.Equal(k0, want) {
		t.Errorf("k0 handled in the order %v, want %v", k0, want)
	}
	if n := h.Attempts(topic, 0, 20); n != 3 {
		t.Errorf("offset 20 attempted %d times, want 3", n)
	}
	if s := h.Stats(); s.Retries != 2 || s.Failed != 2 || s.Restarts != 0 {
		t.Errorf("stats %+v: want 2 retries, 2 failed attempts, no restart", s)
	}
}

// on_failure: skip gives up on a record after its attempts and carries on.
func TestSkipAfterAttempts(t *testing.T) {
	t.Parallel()
	h := harness.New(t, consumer(func(c *config.Consumer) { c.OnFailure = config.OnFailureSkip }),
		harness.FailTimes(func(rec *actors.Record) bool { return rec.Offset == 5 }, math.MaxInt, errors.New("always fails"), nil))
	feedAll(h, 2, 50, 10)
	h.AwaitAllCommitted()
	if got := h.HandledCount(); got != 98 {
		t.Errorf("%d records handled, want 98 (two partitions each skip offset 5)", got)
	}
	for p := range int32(2) {
		if n := h.Attempts(topic, p, 5); n != 3 {
			t.Errorf("partition %d offset 5 attempted %d times, want 3", p, n)
		}
	}
	if s := h.Stats(); s.Skipped != 2 || s.Restarts != 0 {
		t.Errorf("stats %+v: want 2 skipped, no restart", s)
	}
}

// on_failure: dlq writes a record that failed for good to the dead-letter
// topic — at once for a permanent error, after its attempts otherwise — with
// its key, value and headers plus where it came from and why; its key waits
// until the write is acknowledged, and it then counts as done.
func TestDeadLetterRecordsCarryTheirOrigin(t *testing.T) {
	t.Parallel()
	permanent := fmt.Errorf("bad payload: %w", actors.ErrPermanent)
	handler := harness.FailTimes(func(rec *actors.Record) bool { return rec.Offset%10 == 7 }, math.MaxInt, permanent,
		harness.FailTimes(harness.At(topic, 0, 3), math.MaxInt, errors.New("timeout"), nil))
	h := harness.New(t, consumer(func(c *config.Consumer) {
		c.OnFailure, c.DLQTopic = config.OnFailureDLQ, "orders-dlq"
		c.Concurrency = 4
	}), handler)
	var recs []harness.Record
	for _, r := range harness.Seq(topic, 0, 0, 40, 4) {
		r.Headers = []harness.Header{{Key: "trace", Value: []byte("t" + strconv.FormatInt(r.Offset, 10))}}
		recs = append(recs, r)
	}
	h.Feed(recs...)
	h.Assign(topic, 0)
	h.AwaitAllCommitted()

	dead := h.DeadLetters()
	var offsets []int64
	for _, d := range dead {
		off, _ := strconv.ParseInt(header(t, d, "turbo-original-offset"), 10, 64)
		offsets = append(offsets, off)
		wantAttempts, wantErr := "1", permanent.Error()
		if off == 3 {
			wantAttempts, wantErr = "3", "timeout"
		}
		if d.Topic != "orders-dlq" || string(d.Key) != fmt.Sprintf("k%d", off%4) || string(d.Value) != fmt.Sprintf("v%d", off) {
			t.Errorf("dead letter of offset %d: %s %q=%q", off, d.Topic, d.Key, d.Value)
		}
		for name, want := range map[string]string{
			"trace": fmt.Sprintf("t%d", off), "turbo-original-topic": topic, "turbo-original-partition": "0",
			"turbo-attempts": wantAttempts, "turbo-error": wantErr,
		} {
			if got := header(t, d, name); got != want {
				t.Errorf("dead letter of offset %d: header %s = %q, want %q", off, name, got, want)
			}
		}
		if _, err := time.Parse(time.RFC3339Nano, header(t, d, "turbo-failed-at")); err != nil {
			t.Errorf("dead letter of offset %d: turbo-failed-at: %v", off, err)
		}
	}
	slices.Sort(offsets)
	if want := []int64{3, 7, 17, 27, 37}; !slices.Equal(offsets, want) {
		t.Errorf("dead-lettered offsets %v, want %v once each", offsets, want)
	}
	if s := h.Stats(); s.Dead != 5 || s.Restarts != 0 || s.Retries != 2 {
		t.Errorf("stats %+v: want 5 dead letters, 2 retries (offset 3), no restart", s)
	}
}

func header(t *testing.T, r harness.Record, name string) string {
	t.Helper()
	v, ok := r.Header(name)
	if !ok {
		t.Errorf("dead letter %s@%d has no header %s", r.TP(), r.Offset, name)
	}
	return v
}

// A dead-letter write that fails (the producer's retries ran out) fails the
// tree: the record is never dropped silently. After the restart it comes
// again and is dead-lettered once the topic takes writes.
func TestDeadLetterWriteFailureRestartsTheTree(t *testing.T) {
	t.Parallel()
	h := harness.New(t, consumer(func(c *config.Consumer) {
		c.OnFailure, c.DLQTopic = config.OnFailureDLQ, "orders-dlq"
	}), harness.FailTimes(harness.At(topic, 0, 2), math.MaxInt, fmt.Errorf("no: %w", actors.ErrPermanent), nil))
	h.FailDeadLetters(errors.New("dead-letter topic unavailable"))
	h.Feed(harness.Seq(topic, 0, 0, 5, 1)...)
	h.Assign(topic, 0)
	h.AwaitRestarts(1)
	if c := h.Committed(topic, 0); c.Offset > 2 {
		t.Errorf("committed %d past the record whose dead letter failed", c.Offset)
	}
	h.FailDeadLetters(nil)
	h.AwaitAllCommitted()
	if d := h.DeadLetters(); len(d) != 1 || string(d[0].Value) != "v2" {
		t.Errorf("dead letters %v, want offset 2's once", d)
	}
}

// on_failure: fail restarts the tree (with backoff) once the attempts run
// out; the record comes again and succeeds on a later delivery.
func TestFailRestartsTheTreeAfterAttempts(t *testing.T) {
	t.Parallel()
	h := harness.New(t, consumer(func(c *config.Consumer) { c.Retry.MaxAttempts = 2 }),
		harness.FailTimes(harness.At(topic, 0, 10), 3, errors.New("fails three times"), nil))
	h.Feed(harness.Seq(topic, 0, 0, 30, 3)...)
	h.Assign(topic, 0)
	h.AwaitAllCommitted()
	if got := h.HandledCount(); got != 30 {
		t.Errorf("%d records handled, want 30", got)
	}
	// Attempts 1 and 2 fail → restart; redelivered: attempt 3 fails, 4 succeeds.
	if n := h.Attempts(topic, 0, 10); n != 4 {
		t.Errorf("offset 10 attempted %d times, want 4", n)
	}
	if n := h.Restarts(); n != 1 {
		t.Errorf("%d restarts, want 1", n)
	}
}

// A panicking handler fails its record like an error does.
func TestPanickingHandlerRestartsTheTree(t *testing.T) {
	t.Parallel()
	h := harness.New(t, consumer(func(c *config.Consumer) { c.Retry.MaxAttempts = 1 }),
		harness.Fail(harness.At(topic, 0, 5), func(attempt int) error {
			if attempt == 1 {
				panic("handler bug")
			}
			return nil
		}, nil))
	h.Feed(harness.Seq(topic, 0, 0, 20, 5)...)
	h.Assign(topic, 0)
	h.AwaitAllCommitted()
	if got := h.HandledCount(); got != 20 {
		t.Errorf("%d records handled, want 20", got)
	}
	if s := h.Stats(); s.Restarts != 1 || s.Failed < 1 {
		t.Errorf("stats %+v, want 1 restart after a failure", s)
	}
	if c := h.Calls(); !slices.ContainsFunc(c, func(c harness.Call) bool { return c.Offset == 5 && errors.Is(c.Err, harness.ErrPanicked) }) {
		t.Error("no call of offset 5 panicked")
	}
}

// After a restart the partition is read again from the committed offset:
// what was committed is not handled again, the failed record is.
func TestRestartRedeliversFromTheCommittedOffset(t *testing.T) {
	t.Parallel()
	release := make(chan struct{})
	h := harness.New(t, consumer(func(c *config.Consumer) { c.Retry.MaxAttempts = 1 }),
		harness.Block(harness.At(topic, 0, 5), release,
			harness.FailTimes(harness.At(topic, 0, 5), 1, errors.New("boom"), nil)))
	h.Feed(harness.Seq(topic, 0, 0, 10, 1)...) // one key: offset 5 holds 6–9
	h.Assign(topic, 0)
	h.AwaitStarted(topic, 0, 5)
	h.AwaitCommitted(topic, 0, 5) // 0–4 finished and committed
	before := len(h.Calls())
	close(release) // offset 5 fails → restart
	h.AwaitAllCommitted()
	var after []int64
	for _, c := range h.Calls()[before:] {
		after = append(after, c.Offset)
	}
	if want := []int64{5, 6, 7, 8, 9}; !slices.Equal(after, want) {
		t.Errorf("after the failure the handler saw %v, want %v (from the committed offset 5)", after, want)
	}
	checkOnce(t, h, 1, 10)
	if n := h.Restarts(); n != 1 {
		t.Errorf("%d restarts, want 1", n)
	}
}

// A record that fails for good (on_failure: fail) holds its key until the
// restart: nothing after it runs before it comes again.
func TestEscalatedFailureHoldsItsKeyUntilTheRestart(t *testing.T) {
	t.Parallel()
	h := harness.New(t, consumer(func(c *config.Consumer) { c.Retry.MaxAttempts = 1 }),
		harness.FailTimes(harness.At(topic, 0, 5), 1, errors.New("boom"), nil))
	h.Feed(harness.Seq(topic, 0, 0, 100, 1)...) // a single key
	h.Assign(topic, 0)
	h.AwaitAllCommitted()
	calls := h.Calls()
	failed := slices.IndexFunc(calls, func(c harness.Call) bool { return c.Err != nil })
	if failed < 0 {
		t.Fatal("offset 5 never failed")
	}
	// After the restart the key starts again at the committed offset (at
	// most 5); no record above 5 may run before 5 has run again.
	for _, c := range calls[failed+1:] {
		if c.Offset == 5 {
			break
		}
		if c.Offset > 5 {
			t.Errorf("%s ran before offset 5 came again", c)
			break
		}
	}
	if n := h.Restarts(); n != 1 {
		t.Errorf("%d restarts, want 1", n)
	}
}

// max_handler_time cancels an attempt that runs too long; it counts as a
// failed attempt and is retried.
func TestMaxHandlerTimeCancelsAndRetries(t *testing.T) {
	t.Parallel()
	var hung atomic.Bool
	h := harness.New(t, consumer(func(c *config.Consumer) { c.MaxHandlerTime = 50 * time.Millisecond }),
		actors.HandlerFunc(func(ctx context.Context, rec *actors.Record) error {
			if rec.Offset == 3 && hung.CompareAndSwap(false, true) {
				<-ctx.Done() // hangs until max_handler_time cancels it
				return ctx.Err()
			}
			return nil
		}))
	h.Feed(harness.Seq(topic, 0, 0, 10, 2)...)
	h.Assign(topic, 0)
	h.AwaitAllCommitted()
	checkOnce(t, h, 1, 10)
	calls := h.Calls()
	first := slices.IndexFunc(calls, func(c harness.Call) bool { return c.Offset == 3 })
	if !errors.Is(calls[first].Err, context.DeadlineExceeded) {
		t.Errorf("offset 3's first attempt ended with %v, want it cancelled by max_handler_time", calls[first].Err)
	}
	if s := h.Stats(); s.Failed != 1 || s.Retries != 1 || s.Restarts != 0 {
		t.Errorf("stats %+v: want 1 failed attempt, 1 retry, no restart", s)
	}
}

// A revoked partition is released only after its running record finished
// and its watermark was committed; its records above the highest started
// one are dropped, the other partitions keep flowing meanwhile, and the
// partition's next assignment reads from that watermark.
func TestRevocationDrainsAndCommits(t *testing.T) {
	t.Parallel()
	release := make(chan struct{})
	cfg := consumer(nil)
	cfg.ShutdownTimeout = 30 * time.Second // the revocation must wait for the test, however slow the machine
	h := harness.New(t, cfg, harness.Block(harness.At(topic, 0, 2), release, nil))
	for off := range int64(10) {
		h.Feed(harness.Rec(topic, 0, off, "a", "v")) // one key: 3–9 wait for 2
	}
	h.Feed(harness.Seq(topic, 1, 0, 20, 5)...)
	h.Assign(topic, 0, 1)
	h.AwaitStarted(topic, 0, 2)
	h.AwaitHandled(2 + 20)
	h.AwaitBuffered(7) // 3–9, behind offset 2

	h.Revoke(topic, 0)
	h.AwaitBuffered(0) // the revocation reached the coordinator, which dropped 3–9
	h.Feed(harness.Seq(topic, 1, 20, 20, 5)...)
	h.AwaitHandled(2 + 40) // partition 1 flows during the revocation
	if !h.Owned(topic, 0) {
		t.Fatal("partition 0 was released while offset 2 still ran")
	}
	close(release)
	h.AwaitReleased(topic, 0)
	if c := h.Committed(topic, 0); c.Offset != 3 {
		t.Errorf("partition 0 released at %d, want 3 (after offset 2)", c.Offset)
	}
	if a := h.HandledOffsets("a"); !slices.Equal(a, []int64{0, 1, 2}) {
		t.Errorf("key a handled %v before the release, want [0 1 2]", a)
	}

	h.Assign(topic, 0)
	h.AwaitAllCommitted()
	checkPartitionOnce(t, h, 0, 10)
	checkPartitionOnce(t, h, 1, 40)
	if s := h.Stats(); s.Moves != 2+2 {
		t.Errorf("%d partition moves, want 2 assigned + 1 released + 1 assigned again", s.Moves)
	}
}

// A rebalance's revocation waits only for the running records. Its
// unstarted ones are dropped even below an offset that finished, because the
// final commit's metadata lists what finished above the watermark and the
// next owner skips it: nothing runs twice, and a rebalance does not wait for
// a key's backlog. With commit metadata off, or when the member is stopping,
// the records below the highest one started still run before the release,
// so the committed offset passes every finished record.
func TestRevocationWaitsOnlyForRunningRecords(t *testing.T) {
	t.Parallel()
	// Key a: offset 0 blocks, 1–200 wait behind it and take 2 ms each (so a
	// revocation that dropped them could not come too late to matter); key
	// b's offset 201 finishes at once.
	const waiting = 200
	for _, tc := range []struct {
		name      string
		metaBytes int
		stop      bool // the consumer stops, rather than the partition being revoked
	}{
		{"rebalance", 4000, false},
		{"rebalance without metadata", 0, false},
		{"stop", 4000, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			release := make(chan struct{})
			cfg := consumer(func(c *config.Consumer) { c.CommitMetadataBytes = tc.metaBytes })
			cfg.ShutdownTimeout = 30 * time.Second
			h := harness.New(t, cfg, harness.Block(harness.At(topic, 0, 0), release,
				actors.HandlerFunc(func(ctx context.Context, r *actors.Record) error {
					if string(r.Key) == "a" {
						return sleep.For(ctx, 2*time.Millisecond)
					}
					return nil
				})))
			for off := range int64(waiting + 1) {
				h.Feed(harness.Rec(topic, 0, off, "a", "v"))
			}
			h.Feed(harness.Rec(topic, 0, waiting+1, "b", "v"))
			h.Assign(topic, 0)
			h.AwaitStarted(topic, 0, 0)
			h.AwaitHandled(1) // b's record, past a's unstarted ones
			h.AwaitBuffered(waiting)
			dropped := tc.metaBytes > 0 && !tc.stop
			stopped := make(chan error, 1)
			if tc.stop {
				go func() { stopped <- h.Stop() }()
			} else {
				h.Revoke(topic, 0)
			}
			if dropped {
				h.AwaitBuffered(0) // the revocation dropped a's waiting records
			}
			close(release)
			if tc.stop {
				if err := <-stopped; err != nil {
					t.Fatalf("Stop: %v", err)
				}
			} else {
				h.AwaitReleased(topic, 0)
			}
			c := h.Committed(topic, 0)
			a := h.HandledOffsets("a")
			if dropped {
				if want := []offsetmeta.Range{{From: waiting + 1, To: waiting + 1}}; c.Offset != 1 || !slices.Equal(c.Finished, want) {
					t.Errorf("released at %d with %v finished, want 1 with %v (a's waiting records dropped)", c.Offset, c.Finished, want)
				}
				if !slices.Equal(a, []int64{0}) {
					t.Errorf("key a handled %v before the release, want [0]", a)
				}
			} else {
				if c.Offset != waiting+2 || len(c.Finished) != 0 {
					t.Errorf("released at %d with %v finished, want %d and nothing above", c.Offset, c.Finished, waiting+2)
				}
				if len(a) != waiting+1 {
					t.Errorf("key a handled %d records before the release, want all %d", len(a), waiting+1)
				}
			}
			if !tc.stop {
				h.Assign(topic, 0)
				h.AwaitAllCommitted()
				checkPartitionOnce(t, h, 0, waiting+2)
			}
		})
	}
}

// A record parked for a retry holds its key even when its partition is
// revoked: the key's later records are dropped with it, not run past it,
// and the watermark stays below it (its metadata lists what finished).
func TestRevocationDoesNotRunPastAParkedRecord(t *testing.T) {
	t.Parallel()
	h := harness.New(t, consumer(func(c *config.Consumer) {
		c.Retry = config.Retry{MaxAttempts: 3, InitialBackoff: 20 * time.Second, MaxBackoff: 20 * time.Second}
	}), harness.FailTimes(harness.At(topic, 0, 0), 1, errors.New("transient"), nil))
	h.Feed(harness.Seq(topic, 0, 0, 20, 2)...) // k0 at even offsets, k1 at odd ones
	h.Assign(topic, 0)
	h.AwaitHandled(10) // k1's ten records
	h.Revoke(topic, 0)
	h.AwaitReleased(topic, 0)
	if k0 := h.HandledOffsets("k0"); len(k0) > 0 {
		t.Errorf("k0 records %v ran while offset 0 waited for its retry", k0)
	}
	c := h.Committed(topic, 0)
	if c.Offset > 0 {
		t.Errorf("committed offset %d passes the record still waiting for its retry", c.Offset)
	}
	var odd []offsetmeta.Range
	for off := int64(1); off < 20; off += 2 {
		odd = append(odd, offsetmeta.Range{From: off, To: off})
	}
	if !slices.Equal(c.Finished, odd) {
		t.Errorf("commit metadata lists %v as finished, want k1's odd offsets", c.Finished)
	}
}

// The watermark never passes a record that has not finished: while one is
// stuck, the committed offset stays at it and the commit metadata lists the
// finished records above it. When the tree restarts, the new tree reads the
// metadata and does not run those again — unless metadata is off.
func TestWatermarkNeverPassesAnUnfinishedRecord(t *testing.T) {
	t.Parallel()
	for _, metaBytes := range []int{4000, 0} {
		t.Run(fmt.Sprintf("commit_metadata_bytes=%d", metaBytes), func(t *testing.T) {
			release := make(chan struct{})
			h := harness.New(t, consumer(func(c *config.Consumer) {
				c.CommitMetadataBytes = metaBytes
				c.Retry.MaxAttempts = 1
			}), harness.Block(harness.At(topic, 0, 3), release,
				harness.FailTimes(harness.At(topic, 0, 3), 1, errors.New("boom"), nil)))
			h.Feed(harness.Seq(topic, 0, 0, 20, 20)...) // twenty keys: nothing waits for offset 3
			h.Assign(topic, 0)
			h.AwaitHandled(19)
			highest := int64(-1)
			h.Await("the commit at offset 3 to list 4–19 as finished", func() bool {
				c := h.Committed(topic, 0)
				highest = max(highest, c.Offset)
				if metaBytes == 0 {
					return c.Offset == 3
				}
				return slices.Equal(c.Finished, []offsetmeta.Range{{From: 4, To: 19}})
			})
			if c := h.Committed(topic, 0); highest != 3 || c.Offset != 3 {
				t.Errorf("committed offsets went up to %d (now %d) while offset 3 was unfinished, want 3", highest, c.Offset)
			}

			close(release) // offset 3 fails for good → restart from 3
			h.AwaitAllCommitted()
			times, inherited := 1, 16 // 4–19 are not run again…
			if metaBytes == 0 {
				times, inherited = 2, 0 // …unless nothing recorded that they finished
			}
			for off := int64(4); off < 20; off++ {
				if n := h.TimesHandled(topic, 0, off); n != times {
					t.Errorf("offset %d handled %d times, want %d", off, n, times)
				}
			}
			if s := h.Stats(); s.Restarts != 1 || s.Inherited != int64(inherited) {
				t.Errorf("stats %+v: want 1 restart, %d records inherited from the commit metadata", s, inherited)
			}
		})
	}
}

// Offsets that are never delivered (compaction, transaction markers) are
// never waited for.
func TestGapsInOffsetsDoNotStallTheWatermark(t *testing.T) {
	t.Parallel()
	h := harness.New(t, consumer(nil), nil)
	for _, off := range []int64{0, 1, 5, 6, 10, 42} {
		h.Feed(harness.Rec(topic, 0, off, "k", "v"))
	}
	h.Assign(topic, 0)
	if c := h.AwaitCommitted(topic, 0, 43); c.Offset != 43 {
		t.Errorf("committed %d, want 43", c.Offset)
	}
	if k := h.HandledOffsets("k"); !slices.Equal(k, []int64{0, 1, 5, 6, 10, 42}) {
		t.Errorf("handled %v", k)
	}
}

// Stop drains like a revocation: the running record finishes, then the
// watermark is committed (here the only commit: commit_interval is long).
func TestStopWaitsForRunningRecordsAndCommits(t *testing.T) {
	t.Parallel()
	release := make(chan struct{})
	cfg := consumer(func(c *config.Consumer) { c.CommitInterval = time.Hour })
	cfg.ShutdownTimeout = 30 * time.Second
	h := harness.New(t, cfg, harness.Block(harness.At(topic, 0, 4), release, nil))
	h.Feed(harness.Seq(topic, 0, 0, 10, 10)...)
	h.Assign(topic, 0)
	h.AwaitHandled(9)
	stopped := make(chan error, 1)
	go func() { stopped <- h.Stop() }()
	close(release)
	select {
	case err := <-stopped:
		if err != nil {
			t.Fatalf("Stop: %v", err)
		}
	case <-time.After(time.Minute):
		t.Fatal("Stop did not return")
	}
	if c := h.Committed(topic, 0); c.Offset != 10 || c.Commits != 1 {
		t.Errorf("committed %d in %d commits, want 10 in the final one", c.Offset, c.Commits)
	}
	checkOnce(t, h, 1, 10)
}

// A revocation (here Stop's) that does not drain within shutdown_timeout
// releases the partition at its last committed watermark, which never
// passes the record still running: nothing is lost, its metadata still
// spares the next owner the records that finished.
func TestExpiredRevocationReleasesAtTheLastWatermark(t *testing.T) {
	t.Parallel()
	release := make(chan struct{})
	defer close(release)
	cfg := consumer(nil)
	cfg.ShutdownTimeout = time.Second
	h := harness.New(t, cfg, harness.Block(harness.At(topic, 0, 4), release, nil))
	h.Feed(harness.Seq(topic, 0, 0, 10, 10)...)
	h.Assign(topic, 0)
	h.AwaitHandled(9)
	h.Await("the commit at 4 to list 5–9 as finished", func() bool {
		return slices.Equal(h.Committed(topic, 0).Finished, []offsetmeta.Range{{From: 5, To: 9}})
	})
	if err := h.Stop(); err != nil {
		t.Fatalf("Stop: %v", err)
	}
	if c := h.Committed(topic, 0); c.Offset != 4 || !slices.Equal(c.Finished, []offsetmeta.Range{{From: 5, To: 9}}) {
		t.Errorf("released at %d with %v finished above, want 4 with 5–9", c.Offset, c.Finished)
	}
}

// A handler cancelled because its partition's revocation expired did not
// fail: the partition is someone else's now, so under every failure policy
// the record is neither retried, nor dead-lettered, nor a reason to restart
// the tree. It is simply not finished, and the partition's next owner (here
// the same consumer, given it back) handles it again.
func TestRecordCancelledByAnExpiredRevocationIsNotAFailure(t *testing.T) {
	t.Parallel()
	for _, policy := range []config.OnFailure{config.OnFailureFail, config.OnFailureSkip, config.OnFailureDLQ} {
		t.Run(string(policy), func(t *testing.T) {
			release := make(chan struct{})
			defer close(release)
			cfg := consumer(func(c *config.Consumer) {
				c.OnFailure = policy
				if policy == config.OnFailureDLQ {
					c.DLQTopic = "orders-dlq"
				}
			})
			cfg.ShutdownTimeout = time.Second
			var blocked atomic.Bool // only the first call of offset 4
			h := harness.New(t, cfg, harness.Block(func(r *actors.Record) bool {
				return r.Offset == 4 && blocked.CompareAndSwap(false, true)
			}, release, nil))
			h.Feed(harness.Seq(topic, 0, 0, 10, 10)...)
			h.Assign(topic, 0)
			h.AwaitHandled(9)
			h.Revoke(topic, 0)
			h.AwaitReleased(topic, 0)
			h.Await("the cancelled record to leave the pipeline", func() bool {
				s := h.Stats()
				return h.Running() == 0 && s.InFlight == 0 && s.Buffered == 0
			})
			h.Assign(topic, 0)
			h.AwaitAllCommitted()
			if got := h.Attempts(topic, 0, 4); got != 2 {
				t.Errorf("offset 4 was attempted %d times, want 2 (cancelled, then by the next owner)", got)
			}
			if s := h.Stats(); s.Restarts != 0 || s.Failed != 0 || s.Retries != 0 || s.Dead != 0 || s.Skipped != 0 {
				t.Errorf("restarts %d, failed %d, retries %d, dead %d, skipped %d; want all 0", s.Restarts, s.Failed, s.Retries, s.Dead, s.Skipped)
			}
			if d := h.DeadLetters(); len(d) != 0 {
				t.Errorf("%d dead letters, want 0", len(d))
			}
		})
	}
}

// A partition that drains — every record read up to its high watermark
// finished — commits at once rather than at the next commit_interval tick
// (an hour here), twice in a row; a third drain within the interval waits
// for the tick: over any stretch a partition commits at most once per
// interval plus that burst of two.
func TestADrainedPartitionCommitsWithoutWaitingForTheTick(t *testing.T) {
	t.Parallel()
	h := harness.New(t, consumer(func(c *config.Consumer) { c.CommitInterval = time.Hour }), nil)
	h.Feed(harness.Seq(topic, 0, 0, 20, 5)...)
	h.Assign(topic, 0)
	h.AwaitCommitted(topic, 0, 20) // Config.Timeout, far below the hour
	h.Feed(harness.Seq(topic, 0, 20, 20, 5)...)
	if c := h.AwaitCommitted(topic, 0, 40); c.Commits != 2 {
		t.Errorf("two drains took %d commits, want 2", c.Commits)
	}
	h.Feed(harness.Seq(topic, 0, 40, 20, 5)...)
	h.AwaitHandled(60)
	testkit.Holds(t, 200*time.Millisecond, "no third drain commit within the interval", func() error {
		if c := h.Committed(topic, 0); c.Offset != 40 || c.Commits != 2 {
			return fmt.Errorf("committed %d after %d commits: a third drain committed at once", c.Offset, c.Commits)
		}
		return nil
	})
}
