package pipeline

import (
	"errors"
	"sync/atomic"
)

// ErrNotRun is the outcome a runner publishes for a record of a handler's
// batch that must count as not run: one that follows a failed record of its
// unit in the same handler call, and so must not finish before the failed
// record does. The Pipeline puts it back at the front of its unit's queue.
var ErrNotRun = errors.New("pipeline: not run: an earlier record of its unit failed in the same handler call")

// Batch is records given to one runner to run one after the other. It is
// shared by the runner that runs it and the Pipeline, so that one slow or
// stuck record never holds the records around it:
//   - the Pipeline may take back the records the runner has not started
//     (work stealing); both sides claim records through next, so each record
//     is either run or taken back, never both;
//   - the Pipeline may account for the records the runner has finished before
//     the batch ends (their units become free again); the runner publishes
//     each outcome in errs before it moves done past it.
//
// The runner uses only Len, Item, Claim and Finish, and nothing once it has
// reported the batch done (Pipeline.Ran reuses it); every other field is the
// Pipeline's, read and written on its owner's goroutine.
type Batch[T any] struct {
	records []T
	errs    []error      // errs[i]: outcome of records[i], valid once done > i
	next    atomic.Int64 // index of the first record not claimed yet
	done    atomic.Int64 // records finished: always a prefix of the claimed ones
	seen    int          // Pipeline only: finished records accounted for
	limit   int          // Pipeline only: records left to the runner (the rest was taken back)
	aged    bool         // Pipeline only: out since before the last Age
}

// NewBatch returns a batch of records, none claimed yet.
func NewBatch[T any](records []T) *Batch[T] {
	b := new(Batch[T])
	b.reset(records)
	return b
}

// reset makes b a batch of records, none claimed yet, reusing its outcome
// array when it is large enough. Only an idle batch, one its runner has
// reported done, may be reset.
func (b *Batch[T]) reset(records []T) {
	b.records = records
	if cap(b.errs) < len(records) {
		b.errs = make([]error, len(records), cap(records))
	}
	b.errs = b.errs[:len(records)]
	b.next.Store(0)
	b.done.Store(0)
	b.seen, b.limit, b.aged = 0, len(records), false
}

// idle empties a batch its runner reported done, keeping its arrays for the
// next batch: a record left in one would pin its memory (and the fetch
// buffer its key and value point into) until overwritten.
func (b *Batch[T]) idle() {
	clear(b.records)
	clear(b.errs)
	b.records = b.records[:0]
}

// Len is the number of records the batch was made with.
func (b *Batch[T]) Len() int { return len(b.records) }

// Item returns the record at index i (an index Claim returned).
func (b *Batch[T]) Item(i int) T { return b.records[i] }

// Claim returns the index of the next record for the runner, or false when
// the batch is exhausted or was taken back.
func (b *Batch[T]) Claim() (int, bool) {
	i := b.next.Add(1) - 1
	return int(i), i < int64(len(b.records))
}

// Peek returns the record the next Claim would return, without claiming
// it (a runner filling a handler's batch by bytes looks before it takes);
// false when the batch is exhausted or was taken back.
func (b *Batch[T]) Peek() (T, bool) {
	if i := b.next.Load(); i < int64(len(b.records)) {
		return b.records[i], true
	}
	var zero T
	return zero, false
}

// Finish publishes the outcome of the record claimed at index i. The runner
// finishes its claims in order and stops claiming after a failure.
func (b *Batch[T]) Finish(i int, err error) {
	b.errs[i] = err
	b.done.Store(int64(i + 1))
}

// FinishRange publishes at once the outcomes of the records claimed at
// indexes from to from+len(errs)-1: one handler call's batch, which the
// Pipeline then accounts for whole. An outcome may be ErrNotRun. The runner
// stops claiming when any outcome is an error.
func (b *Batch[T]) FinishRange(from int, errs []error) {
	copy(b.errs[from:], errs)
	b.done.Store(int64(from + len(errs)))
}

// Done is how many records the runner has finished.
func (b *Batch[T]) Done() int { return int(b.done.Load()) }

// steal takes back every record the runner has not claimed yet.
func (b *Batch[T]) steal() []T {
	i := b.next.Swap(int64(len(b.records)))
	if i >= int64(len(b.records)) {
		return nil
	}
	return b.records[i:]
}

// pending reports whether the Pipeline may still find records to take back
// or outcomes to account for before the runner reports the batch.
func (b *Batch[T]) pending() bool {
	return b.next.Load() < int64(len(b.records)) || int(b.done.Load()) > b.seen
}
