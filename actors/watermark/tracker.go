// Package watermark computes the offset a partition may safely commit.
//
// turbo finishes records out of order, but Kafka stores a single committed
// offset per partition, meaning "everything below this is done". Committing
// past a record that is still running would lose it on a restart, so the
// commit must stop at the lowest unfinished record. Tracker is the
// deterministic core of that rule for one partition, kept free of locks and
// clocks; it is not safe for concurrent use.
package watermark

import (
	"errors"
	"slices"
)

var (
	// ErrOutOfOrder is returned by Track for an offset not above every offset
	// tracked before; records of a partition are fetched in offset order, so
	// this signals a caller bug such as a re-fetch that was not reset.
	ErrOutOfOrder = errors.New("watermark: offset tracked out of order")
	// ErrUnknownOffset is returned by Done for an offset that is not tracked
	// and unfinished, so a double completion cannot hide a lost one.
	ErrUnknownOffset = errors.New("watermark: offset not tracked or already done")
)

// minCompact is the length of finished prefix below which sliding the window
// to the front of the arrays is not worth a copy.
const minCompact = 32

// Tracker follows the offsets of one partition handed out for processing, in
// increasing order, and which of them have finished.
//
// Gaps are allowed: compacted and transactional topics skip offsets, and an
// offset that was never tracked is never waited for.
//
// Only the window from the lowest unfinished offset to the highest tracked
// one is stored, so memory follows the number of records in flight rather
// than the partition's history. Track and Committable are O(1), Done is
// O(log w) in the window size w, and none of them allocate in steady state.
// The zero value is ready to use.
type Tracker struct {
	// offsets[head:] is the window, ascending; done[i] says whether
	// offsets[i] finished. Invariant: head == len(offsets) or !done[head],
	// so the watermark is always offsets[head].
	offsets []int64
	done    []bool
	head    int
	pending int
	highest int64 // highest offset ever tracked; valid when tracked
	tracked bool
}

// New returns a Tracker with nothing tracked.
func New() *Tracker { return &Tracker{} }

// Track registers offset as handed out for processing. It must be greater
// than every offset tracked before; otherwise Track returns ErrOutOfOrder and
// changes nothing.
func (t *Tracker) Track(offset int64) error {
	if t.tracked && offset <= t.highest {
		return ErrOutOfOrder
	}
	t.compact()
	t.offsets = append(t.offsets, offset)
	t.done = append(t.done, false)
	t.highest = offset
	t.tracked = true
	t.pending++
	return nil
}

// Done marks a tracked offset finished. It returns ErrUnknownOffset, and
// changes nothing, if the offset was never tracked or is already done.
func (t *Tracker) Done(offset int64) error {
	i, found := t.find(offset)
	if !found || t.done[i] {
		return ErrUnknownOffset
	}
	t.done[i] = true
	t.pending--
	for t.head < len(t.offsets) && t.done[t.head] {
		t.head++
	}
	if t.head == len(t.offsets) {
		// Everything finished: reuse the arrays from the start for free.
		t.offsets = t.offsets[:0]
		t.done = t.done[:0]
		t.head = 0
	}
	return nil
}

// Committable returns the offset to commit to Kafka, which by Kafka's
// convention is the next offset to consume: the lowest tracked unfinished
// offset, or the highest tracked offset plus one when all are finished. ok
// is false when nothing was ever tracked, as there is then nothing to commit.
// (Kafka offsets stay far below math.MaxInt64, so the plus one cannot
// overflow in practice; it is not checked.)
func (t *Tracker) Committable() (offset int64, ok bool) {
	if !t.tracked {
		return 0, false
	}
	if t.head < len(t.offsets) {
		return t.offsets[t.head], true
	}
	return t.highest + 1, true
}

// Pending returns the number of tracked offsets not yet finished.
func (t *Tracker) Pending() int { return t.pending }

// FinishedAbove calls fn, in ascending order, for each maximal run of
// finished offsets above the watermark, so that out-of-order completions can
// be recorded (for instance in commit metadata) and not be redone after a
// restart.
//
// Runs are over tracked offsets: two finished offsets belong to the same run
// unless an unfinished tracked offset lies between them. Offsets that were
// never tracked do not split a run, so [from, to] may include offsets skipped
// by the partition; none of them needs processing.
func (t *Tracker) FinishedAbove(fn func(from, to int64)) {
	// offsets[head] is unfinished by the invariant, so start after it.
	for i := t.head + 1; i < len(t.offsets); i++ {
		if !t.done[i] {
			continue
		}
		from := t.offsets[i]
		for i+1 < len(t.offsets) && t.done[i+1] {
			i++
		}
		fn(from, t.offsets[i])
	}
}

// find returns the index of offset in the window, if it is there.
func (t *Tracker) find(offset int64) (int, bool) {
	if t.head == len(t.offsets) {
		return 0, false
	}
	// Most partitions have no gaps, so an offset usually sits exactly its
	// distance from the watermark; one probe then replaces the search, whose
	// unpredictable branches dominate the cost of Done.
	if d := offset - t.offsets[t.head]; d >= 0 && d < int64(len(t.offsets)-t.head) {
		if i := t.head + int(d); t.offsets[i] == offset {
			return i, true
		}
	}
	i, found := slices.BinarySearch(t.offsets[t.head:], offset)
	return t.head + i, found
}

// compact slides the window to the front of the arrays once the finished
// prefix is at least half of them, before an append would otherwise grow
// them; the copy is paid for by the completions that advanced the head.
func (t *Tracker) compact() {
	if t.head < minCompact || t.head < len(t.offsets)/2 || len(t.offsets) < cap(t.offsets) {
		return
	}
	n := copy(t.offsets, t.offsets[t.head:])
	copy(t.done, t.done[t.head:])
	t.offsets = t.offsets[:n]
	t.done = t.done[:n]
	t.head = 0
}
