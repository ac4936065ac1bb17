package harness_test

import (
	"errors"
	"fmt"
	"math"

	"github.com/turbokafka/turbo/actors"
	"github.com/turbokafka/turbo/actors/harness"
	"github.com/turbokafka/turbo/actors/offsetmeta"
	"github.com/turbokafka/turbo/config"
)

// exampleT stands in for the *testing.T a test passes to harness.New: the
// examples below run as they would in a test, but an Example function has
// no T of its own.
type exampleT struct{ cleanups []func() }

func (t *exampleT) Helper()                      {}
func (t *exampleT) Logf(string, ...any)          {}
func (t *exampleT) Errorf(f string, args ...any) { fmt.Printf("error: "+f+"\n", args...) }
func (t *exampleT) Fatalf(f string, args ...any) { panic(fmt.Sprintf(f, args...)) }
func (t *exampleT) Cleanup(f func())             { t.cleanups = append(t.cleanups, f) }

// end runs the cleanups, as the end of a test does.
func (t *exampleT) end() {
	for i := len(t.cleanups) - 1; i >= 0; i-- {
		t.cleanups[i]()
	}
}

// Records flow through the real actor tree: each key's records are handled
// in offset order, and the committed offset reaches the end of the log.
func Example() {
	t := &exampleT{} // in a test: the test's *testing.T
	defer t.end()

	h := harness.New(t, harness.Config{Consumer: harness.Consumer("orders-service", "orders")}, nil)
	h.Assign("orders", 0)
	h.Feed(
		harness.Rec("orders", 0, 0, "alice", "created"),
		harness.Rec("orders", 0, 1, "bob", "created"),
		harness.Rec("orders", 0, 2, "alice", "paid"),
		harness.Rec("orders", 0, 3, "alice", "shipped"),
	)
	h.AwaitAllCommitted()

	fmt.Println("alice:", h.HandledOffsets("alice"))
	fmt.Println("bob:", h.HandledOffsets("bob"))
	fmt.Println("committed:", h.Committed("orders", 0).Offset)
	// Output:
	// alice: [0 2 3]
	// bob: [1]
	// committed: 4
}

// A record that fails twice is retried after a backoff; its key's later
// records wait for it.
func ExampleFailTimes() {
	t := &exampleT{}
	defer t.end()

	handler := harness.FailTimes(harness.At("orders", 0, 1), 2, errors.New("database unavailable"), nil)
	h := harness.New(t, harness.Config{Consumer: harness.Consumer("orders-service", "orders")}, handler)
	h.Assign("orders", 0)
	h.Feed(harness.Seq("orders", 0, 0, 6, 2)...) // keys k0, k1, k0, k1, …
	h.AwaitAllCommitted()

	fmt.Println("attempts of offset 1:", h.Attempts("orders", 0, 1))
	fmt.Println("k1:", h.HandledOffsets("k1"))
	fmt.Println("retries:", h.Stats().Retries)
	// Output:
	// attempts of offset 1: 3
	// k1: [1 3 5]
	// retries: 2
}

// A record that fails for good goes to the dead-letter topic with its
// origin and error (on_failure: dlq); a permanent error skips the retries.
func ExampleHarness_DeadLetters() {
	t := &exampleT{}
	defer t.end()

	c := harness.Consumer("orders-service", "orders")
	c.OnFailure, c.DLQTopic = config.OnFailureDLQ, "orders-dlq"
	bad := fmt.Errorf("unknown currency: %w", actors.ErrPermanent)
	h := harness.New(t, harness.Config{Consumer: c}, harness.FailTimes(harness.Key("eve"), math.MaxInt, bad, nil))
	h.Assign("orders", 0)
	h.Feed(
		harness.Rec("orders", 0, 0, "alice", "10 EUR"),
		harness.Rec("orders", 0, 1, "eve", "10 XYZ", harness.Header{Key: "trace", Value: []byte("t-1")}),
		harness.Rec("orders", 0, 2, "eve", "20 EUR"),
	)
	h.AwaitAllCommitted()

	for _, d := range h.DeadLetters() {
		fmt.Printf("%s %s=%q\n", d.Topic, d.Key, d.Value)
		for _, name := range []string{"trace", "turbo-original-topic", "turbo-original-offset", "turbo-attempts", "turbo-error"} {
			if v, ok := d.Header(name); ok {
				fmt.Printf("  %s: %s\n", name, v)
			}
		}
	}
	// Output:
	// orders-dlq eve="10 XYZ"
	//   trace: t-1
	//   turbo-original-topic: orders
	//   turbo-original-offset: 1
	//   turbo-attempts: 1
	//   turbo-error: unknown currency: actors: permanent failure
	// orders-dlq eve="20 EUR"
	//   turbo-original-topic: orders
	//   turbo-original-offset: 2
	//   turbo-attempts: 1
	//   turbo-error: unknown currency: actors: permanent failure
}

// The committed offset never passes a record that has not finished: while
// offset 1 is stuck, the commit stays there and its metadata records the
// offsets above it that finished, so whoever reads the partition next skips
// them.
func ExampleHarness_Committed() {
	t := &exampleT{}
	defer t.end()

	release := make(chan struct{})
	h := harness.New(t, harness.Config{Consumer: harness.Consumer("orders-service", "orders")},
		harness.Block(harness.At("orders", 0, 1), release, nil))
	h.Assign("orders", 0)
	h.Feed(harness.Seq("orders", 0, 0, 6, 6)...) // six keys: nothing waits for offset 1
	h.Await("offsets 2 to 5 to be recorded as finished", func() bool {
		c := h.Committed("orders", 0)
		return c.Offset == 1 && len(c.Finished) == 1 && c.Finished[0] == offsetmeta.Range{From: 2, To: 5}
	})
	c := h.Committed("orders", 0)
	fmt.Println("while offset 1 is stuck:", c.Offset, c.Finished)

	close(release)
	fmt.Println("once it finished:", h.AwaitCommitted("orders", 0, 6).Offset)
	// Output:
	// while offset 1 is stuck: 1 [{2 5}]
	// once it finished: 6
}

// A revoked partition is released only after its running record finished
// and its watermark was committed; records of the key behind it are dropped
// and read again, from that watermark, when the partition comes back.
func ExampleHarness_Revoke() {
	t := &exampleT{}
	defer t.end()

	release := make(chan struct{})
	h := harness.New(t, harness.Config{Consumer: harness.Consumer("orders-service", "orders")},
		harness.Block(harness.At("orders", 0, 2), release, nil))
	h.Assign("orders", 0)
	h.Feed(harness.Seq("orders", 0, 0, 5, 1)...) // one key: offsets 0 to 4 run in turn
	h.AwaitStarted("orders", 0, 2)
	h.AwaitBuffered(2) // offsets 3 and 4, behind offset 2

	h.Revoke("orders", 0)
	h.AwaitBuffered(0) // the revocation dropped them
	fmt.Println("held while offset 2 runs:", h.Owned("orders", 0))
	close(release)
	h.AwaitReleased("orders", 0)
	fmt.Println("released at", h.Committed("orders", 0).Offset, "after", h.HandledOffsets("k0"))

	h.Assign("orders", 0)
	h.AwaitAllCommitted()
	fmt.Println("after the new assignment:", h.HandledOffsets("k0"))
	// Output:
	// held while offset 2 runs: true
	// released at 3 after [0 1 2]
	// after the new assignment: [0 1 2 3 4]
}

// With on_failure: fail, a record whose attempts run out restarts the whole
// tree; the new tree reads the partition again from the committed offset.
func ExampleHarness_Restarts() {
	t := &exampleT{}
	defer t.end()

	c := harness.Consumer("orders-service", "orders")
	c.Retry.MaxAttempts = 1 // no retry: the first failure escalates
	h := harness.New(t, harness.Config{Consumer: c},
		harness.FailTimes(harness.At("orders", 0, 3), 1, errors.New("bug"), nil))
	h.Assign("orders", 0)
	h.Feed(harness.Seq("orders", 0, 0, 5, 1)...)
	h.AwaitAllCommitted()

	fmt.Println("restarts:", h.Restarts())
	fmt.Println("attempts of offset 3:", h.Attempts("orders", 0, 3))
	fmt.Println("committed:", h.Committed("orders", 0).Offset)
	// Output:
	// restarts: 1
	// attempts of offset 3: 2
	// committed: 5
}
