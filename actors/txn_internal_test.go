package actors

import (
	"errors"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// fakeTxn is a transactional producer that records what the loop asks of
// it, and answers commits from a script.
type fakeTxn struct {
	mu        sync.Mutex
	open      bool
	sent      []int64 // offsets of the records sent, in order, across transactions
	inOpen    []int64 // those of the open transaction
	committed [][]int64
	marks     []txnMarks
	aborts    int
	answers   []error // commit i answers answers[i], nil past the end
}

func (f *fakeTxn) begin() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.open, f.inOpen = true, nil
	return nil
}

func (f *fakeTxn) inTxn() bool { f.mu.Lock(); defer f.mu.Unlock(); return f.open }

func (f *fakeTxn) send(rec *envelope, _ <-chan struct{}) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.sent = append(f.sent, rec.Offset)
	f.inOpen = append(f.inOpen, rec.Offset)
	return true
}

func (f *fakeTxn) commit(marks txnMarks) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	var err error
	if n := len(f.marks); n < len(f.answers) {
		err = f.answers[n]
	}
	f.marks = append(f.marks, marks)
	if err == nil {
		f.committed = append(f.committed, f.inOpen)
		f.open, f.inOpen = false, nil
	}
	return err
}

func (f *fakeTxn) abort() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.aborts++
	f.open, f.inOpen = false, nil
	return nil
}

func (f *fakeTxn) abortAfter(error) {
	if f.inTxn() {
		_ = f.abort()
	}
}

var errFakeRebalance = errors.New("fake: the group moved on")

func (*fakeTxn) rebalanced(err error) bool { return errors.Is(err, errFakeRebalance) }
func (*fakeTxn) fenced(error) bool         { return false }
func (*fakeTxn) close()                    {}

// loopSession is a txnGroup of the loop's tests.
type loopSession uint64

func (s loopSession) order() uint64 { return uint64(s) }

// loopRun starts a loop over f whose claims are alive while alive says so,
// and collects what it tells the proxy.
type loopRun struct {
	l    *txnLoop
	mu   sync.Mutex
	told []any
}

func startLoop(t *testing.T, f *fakeTxn, alive func(uint64) bool) *loopRun {
	r := &loopRun{}
	r.l = newTxnLoop(f, "t", alive, func(m any) { r.mu.Lock(); r.told = append(r.told, m); r.mu.Unlock() }, &consumerStats{}, zerolog.Nop())
	done := make(chan struct{})
	go func() { defer close(done); r.l.run() }()
	t.Cleanup(func() {
		r.l.stop()
		<-done
	})
	return r
}

func (r *loopRun) messages() []any { r.mu.Lock(); defer r.mu.Unlock(); return slices.Clone(r.told) }

func recAt(epoch uint64, off int64) *envelope {
	return &envelope{Record: Record{Offset: off}, epoch: epoch}
}

// A commit holds what was handed to it, offsets and outputs together, and
// tells the proxy which records it wrote.
func TestTxnLoopCommitsOffsetsWithTheirOutputs(t *testing.T) {
	t.Parallel()
	f := &fakeTxn{}
	r := startLoop(t, f, func(uint64) bool { return true })
	tp := TopicPartition{Topic: "in", Partition: 0}
	r.l.transact(loopSession(1), []partitionOffset{{tp: tp, epoch: 1, offset: 3}}, []*envelope{recAt(1, 0), recAt(1, 1), recAt(1, 2)})
	if err := r.l.commitTxn(); err != nil {
		t.Fatalf("commit: %v", err)
	}
	f.mu.Lock()
	committed, marks := slices.Clone(f.committed), slices.Clone(f.marks)
	f.mu.Unlock()
	if len(committed) != 1 || !slices.Equal(committed[0], []int64{0, 1, 2}) {
		t.Errorf("committed transactions %v, want one holding 0, 1, 2", committed)
	}
	if len(marks) != 1 || marks[0][loopSession(1)][tp].offset != 3 {
		t.Errorf("marks %v, want in@3", marks)
	}
	msgs := r.messages()
	if len(msgs) != 1 {
		t.Fatalf("told the proxy %d messages, want one outputsWritten", len(msgs))
	}
	if w, ok := msgs[0].(*outputsWritten); !ok || len(w.written) != 3 || len(w.dropped) != 0 {
		t.Errorf("told %#v, want 3 written", msgs[0])
	}
}

// A claim that ended before the commit has its records taken out: the
// transaction starts again with the others' outputs only, and its marks
// are not committed.
func TestTxnLoopLeavesEndedClaimsOut(t *testing.T) {
	t.Parallel()
	f := &fakeTxn{}
	var ended sync.Map
	r := startLoop(t, f, func(epoch uint64) bool { _, gone := ended.Load(epoch); return !gone })
	a, b := TopicPartition{Topic: "in", Partition: 0}, TopicPartition{Topic: "in", Partition: 1}
	r.l.transact(loopSession(1), []partitionOffset{{tp: a, epoch: 1, offset: 2}, {tp: b, epoch: 2, offset: 12}},
		[]*envelope{recAt(1, 0), recAt(2, 10), recAt(1, 1), recAt(2, 11)})
	ended.Store(uint64(2), true)
	if err := r.l.commitTxn(); err != nil {
		t.Fatalf("commit: %v", err)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.aborts != 1 || len(f.committed) != 1 || !slices.Equal(f.committed[0], []int64{0, 1}) {
		t.Errorf("%d aborts, committed %v; want the open transaction aborted and one holding 0, 1", f.aborts, f.committed)
	}
	if m := f.marks[0][loopSession(1)]; len(m) != 1 || m[a].offset != 2 {
		t.Errorf("marks committed %v, want in[0]@2 only", m)
	}
	w := r.messages()[0].(*outputsWritten)
	if len(w.written) != 2 || len(w.dropped) != 2 {
		t.Errorf("written %d, dropped %d; want 2 and 2", len(w.written), len(w.dropped))
	}
}

// The group refusing a commit for a generation it left (a rebalance under
// it) makes the transaction again, outputs resent, up to txnAttempts; one
// more refusal fails the loop, and every later commit with it.
func TestTxnLoopRetriesARebalanceThenFails(t *testing.T) {
	t.Parallel()
	f := &fakeTxn{answers: []error{errFakeRebalance, errFakeRebalance}}
	r := startLoop(t, f, func(uint64) bool { return true })
	tp := TopicPartition{Topic: "in", Partition: 0}
	r.l.transact(loopSession(1), []partitionOffset{{tp: tp, epoch: 1, offset: 1}}, []*envelope{recAt(1, 0)})
	if err := r.l.commitTxn(); err != nil {
		t.Fatalf("commit after two refusals: %v", err)
	}
	f.mu.Lock()
	sent, committed := slices.Clone(f.sent), slices.Clone(f.committed)
	f.answers = slices.Repeat([]error{errFakeRebalance}, txnAttempts+10)
	f.mu.Unlock()
	if !slices.Equal(sent, []int64{0, 0, 0}) || len(committed) != 1 || !slices.Equal(committed[0], []int64{0}) {
		t.Errorf("sent %v, committed %v; want the output sent three times and committed once", sent, committed)
	}

	r.l.transact(loopSession(1), []partitionOffset{{tp: tp, epoch: 1, offset: 2}}, []*envelope{recAt(1, 1)})
	start := time.Now()
	err := r.l.commitTxn()
	if !errors.Is(err, errFakeRebalance) {
		t.Fatalf("commit refused %d times answered %v, want the refusal", txnAttempts, err)
	}
	f.mu.Lock()
	attempts := len(f.marks) - 3
	f.mu.Unlock()
	if attempts != txnAttempts {
		t.Errorf("%d attempts, want %d", attempts, txnAttempts)
	}
	t.Logf("%d attempts in %s", attempts, time.Since(start))
	failed := false
	for _, m := range r.messages() {
		if _, ok := m.(*transactionFailed); ok {
			failed = true
		}
	}
	if !failed {
		t.Errorf("no transactionFailed told")
	}
	if err := r.l.commitTxn(); !errors.Is(err, errFakeRebalance) {
		t.Errorf("a commit after the failure answered %v, want the failure", err)
	}
}

// The franz-go side refuses exactly once on brokers whose TxnOffsetCommit
// carries no member generation (before Kafka 2.5): a stale member's
// transactional commits would not be fenced.
func TestFencesStaleMembers(t *testing.T) {
	t.Parallel()
	with := func(v int16) *kmsg.ApiVersionsResponse {
		resp := kmsg.NewPtrApiVersionsResponse()
		k := kmsg.NewApiVersionsResponseApiKey()
		k.ApiKey, k.MaxVersion = int16(kmsg.TxnOffsetCommit), v
		resp.ApiKeys = append(resp.ApiKeys, k)
		return resp
	}
	for _, c := range []struct {
		resp *kmsg.ApiVersionsResponse
		want bool
	}{{with(2), false}, {with(3), true}, {with(5), true}, {kmsg.NewPtrApiVersionsResponse(), false}} {
		if got := fencesStaleMembers(c.resp); got != c.want {
			t.Errorf("fencesStaleMembers(%v) = %t, want %t", c.resp.ApiKeys, got, c.want)
		}
	}
	if msg := (&txnProtocolError{brokers: []string{"b:9092"}}).Error(); !strings.Contains(msg, "output.exactly_once") || !strings.Contains(msg, "b:9092") {
		t.Errorf("the refusal %q names neither the key nor the brokers", msg)
	}
}

// After a loss, commitSoon makes the loop let the lost claims' outputs go
// at once (the open transaction is aborted and made again without them),
// with no commit waited for.
func TestTxnLoopCommitSoonAfterALoss(t *testing.T) {
	t.Parallel()
	f := &fakeTxn{}
	var lost atomic.Bool
	r := startLoop(t, f, func(uint64) bool { return !lost.Load() })
	r.l.transact(loopSession(1), nil, []*envelope{recAt(1, 0), recAt(1, 1)})
	awaitLoop(t, "the outputs sent into the open transaction", func() bool {
		f.mu.Lock()
		defer f.mu.Unlock()
		return len(f.inOpen) == 2
	})
	lost.Store(true)
	r.l.commitSoon()
	awaitLoop(t, "the lost claim's outputs dropped and the transaction aborted", func() bool {
		for _, m := range r.messages() {
			if w, ok := m.(*outputsWritten); ok && len(w.dropped) == 2 {
				f.mu.Lock()
				defer f.mu.Unlock()
				return f.aborts == 1 && len(f.inOpen) == 0
			}
		}
		return false
	})
}

// awaitLoop polls cond for up to 10 s, and fails the test naming what it
// waited for.
func awaitLoop(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); !cond(); time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("after 10 s, still waiting for %s", what)
		}
	}
}
