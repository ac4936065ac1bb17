// Package schedule decides which buffered record may run next.
//
// turbo runs records of a partition on many runners at once, yet records that
// share an ordering unit (a record key, or a whole partition) must still be
// processed one at a time and in the order they were fetched. The Scheduler
// is the deterministic core of that decision, kept free of goroutines, locks
// and clocks so that it can be tested exhaustively and driven by whatever
// concurrency the caller chooses. It is not safe for concurrent use.
//
// Work is never pinned to a runner: any free unit can be taken by any idle
// runner. Among everything runnable the oldest item goes first, except that
// a unit with a backlog counts as older by the items queued behind its head,
// each worth as many Adds as there are runners: its records can only run one
// at a time, while everything else shares the runners, so starting them
// early is what keeps a hot key from finishing last. A unit passes a bounded
// number of younger items (its backlog times the weight), and takes one
// runner at a time, so a burst on one key cannot starve other keys.
package schedule

import (
	"cmp"
	"errors"
	"slices"
)

// ErrNotBusy is returned by Done and Requeue for a unit that is not
// currently running, which means the caller's bookkeeping is wrong; the
// Scheduler is unchanged.
var ErrNotBusy = errors.New("schedule: unit is not busy")

// ErrNotHandedOut is returned by Requeue when it is given back more items than the
// unit's runner was handed by its last Next or NextRun and has not given back
// yet, which means the caller's bookkeeping is wrong; the Scheduler is
// unchanged.
var ErrNotHandedOut = errors.New("schedule: requeued items were not handed out")

const (
	// maxSpare bounds the recycled unit records so that a spike of distinct
	// keys does not leave its memory behind: at most 4,096 × (a 96-byte unit
	// + a queue array of maxSpareQueue 16-byte items) ≈ 1.4 MB for T a
	// pointer. It is well above the keys a fetch's worth of records spans:
	// under key ordering a unit comes and goes with nearly every record
	// (its queue drains, new records of its key arrive). BenchmarkKeyMode in
	// actors/pipeline (1,000 keys): 72 bytes allocated and ~180 ns per record
	// with 256 spares, 18 bytes and ~144 ns with 4,096.
	maxSpare = 4096
	// maxSpareQueue is the largest queue array a recycled unit keeps; a unit
	// that once held a long backlog should not pin that array forever.
	maxSpareQueue = 16
	// maxIdleCap is the capacity above which an emptied queue or heap gives
	// its array back rather than keeping it for reuse; below it, reuse is
	// what makes the steady state allocation-free.
	maxIdleCap = 1024
	// minShrink is the map size below which rebuilding the map to release
	// memory is not worth it.
	minShrink = 1024
	// firstSeq is the Add sequence of the first item. Sequences start this
	// high so that Requeue can stamp unordered items, whose original
	// sequence is not known, with sequences older than any Add.
	firstSeq = 1 << 63
)

// item is a waiting value stamped with its Add sequence, which defines
// "oldest" across units.
type item[T any] struct {
	seq uint64
	v   T
}

// unit is the state of one non-empty ordering unit. A unit exists in the map
// only while it is busy or has waiting items.
type unit[T any] struct {
	name string
	q    fifo[item[T]]
	busy bool
	idx  int // its position in the ready heap, -1 when not there
	// out holds the sequences of the items handed out by the Next or NextRun
	// that made the unit busy and not given back by Requeue, oldest first,
	// so that Requeue can restore their age. It starts out backed by
	// outInline, so that a plain Next on a new unit costs no second
	// allocation.
	out       []uint64
	outInline [1]uint64
}

// Scheduler holds waiting items and decides which may run next.
//
// Items with the same non-empty unit run one at a time, in Add order. Items
// with unit "" are unordered: never blocked and never blocking. Next returns
// the runnable item of the highest priority: among the heads of free units
// and the unordered items, the one with the smallest Add sequence less w
// for every item queued behind it in its unit (none for an unordered item),
// and of two alike the older; w is SetBacklogWeight's, 1 by default. With
// one item per unit that is the oldest runnable item; a unit with n items
// waiting goes ahead of the items up to (n-1)·w Adds younger than its head.
//
// Every operation except DropIf is O(log u) in the number u of free units
// with waiting items, plus O(k) for the k items NextRun takes or Requeue gives
// back, and does not allocate in steady state (NextRun returns a new slice;
// NextRunAppend does not have to). The zero value is an empty Scheduler ready
// to use.
type Scheduler[T any] struct {
	units     map[string]*unit[T]
	ready     readyHeap[T]  // free units with waiting items, by head sequence
	unordered fifo[item[T]] // unit "" items, in Add order
	spare     []*unit[T]    // recycled units, to avoid an allocation per new key
	seq       uint64        // Adds so far; the next Add gets firstSeq+seq
	requeued  uint64        // unordered items requeued so far; see Requeue
	waiting   int
	busy      int
	peak      int    // largest len(units) since the map was last rebuilt
	backlog   uint64 // SetBacklogWeight's; 0 counts as 1
}

// SetBacklogWeight sets how many Adds each item queued behind a unit's head
// counts for in its priority (see Scheduler). With the number of runners as
// the weight, a unit's chain of records starts as soon as it is the longest
// path through the waiting work. Set it before the first Add; w < 1 is
// treated as 1.
func (s *Scheduler[T]) SetBacklogWeight(w int) { s.backlog = uint64(max(w, 1)) }

func (s *Scheduler[T]) weight() uint64 { return max(s.backlog, 1) }

// New returns an empty Scheduler.
func New[T any]() *Scheduler[T] { return &Scheduler[T]{} }

// Add enqueues v behind every item added before it to the same unit. Unit ""
// means v has no ordering constraint.
func (s *Scheduler[T]) Add(unit string, v T) {
	it := item[T]{seq: firstSeq + s.seq, v: v}
	s.seq++
	s.waiting++
	if unit == "" {
		s.unordered.push(it)
		return
	}
	u, ok := s.units[unit]
	if !ok {
		u = s.newUnit(unit)
	}
	u.q.push(it)
	// A free unit enters the heap when it gets its first waiting item; each
	// later item raises its priority by the backlog weight.
	switch {
	case u.busy:
	case u.q.len() == 1:
		s.ready.push(readyEntry[T]{key: it.seq, seq: it.seq, u: u})
	default:
		s.ready.raise(u.idx, s.weight())
	}
}

// entry is the ready heap's entry for u, a free unit with waiting items.
func (s *Scheduler[T]) entry(u *unit[T]) readyEntry[T] {
	head := u.q.peek().seq
	return readyEntry[T]{key: head - uint64(u.q.len()-1)*s.weight(), seq: head, u: u}
}

// Next removes and returns the oldest runnable item and marks its unit busy
// until Done is called for it (unit "" is never marked). ok is false if
// nothing is runnable.
func (s *Scheduler[T]) Next() (unit string, v T, ok bool) {
	u, v, ok := s.take()
	if u != nil {
		unit = u.name
	}
	return unit, v, ok
}

// take is Next that returns the unit it made busy, or nil for an unordered
// item.
func (s *Scheduler[T]) take() (u *unit[T], v T, ok bool) {
	fromUnit := len(s.ready) > 0
	if fromUnit && s.unordered.len() > 0 {
		seq := s.unordered.peek().seq
		fromUnit = s.ready[0].before(readyEntry[T]{key: seq, seq: seq})
	}
	switch {
	case fromUnit:
		u := s.ready.pop().u
		it := u.q.pop()
		u.out = append(u.out[:0], it.seq)
		u.busy = true
		s.busy++
		s.waiting--
		return u, it.v, true
	case s.unordered.len() > 0:
		it := s.unordered.pop()
		s.waiting--
		return nil, it.v, true
	}
	return nil, v, false
}

// Done marks unit free again, making its next waiting item runnable. The unit
// must have been returned by Next and not yet be Done; otherwise Done returns
// ErrNotBusy and changes nothing. Done("") is a no-op, so callers need not
// special-case unordered items.
func (s *Scheduler[T]) Done(unit string) error {
	if unit == "" {
		return nil
	}
	u, ok := s.units[unit]
	if !ok || !u.busy {
		return ErrNotBusy
	}
	u.busy = false
	u.out = u.out[:0]
	s.busy--
	if u.q.len() > 0 {
		s.ready.push(s.entry(u))
		return nil
	}
	s.removeUnit(u)
	return nil
}

// NextRun is Next that also takes up to max-1 further waiting items of the
// same unit, in order, so that one runner can run several consecutive items of
// a unit without a round trip per item: under partition ordering a unit holds
// many records. The unit becomes busy once, and one Done frees it. For unit ""
// it returns just the one item, since unordered items have no run. max < 1 is
// treated as 1. ok is false if nothing is runnable.
//
// items is a new slice that the caller owns; see NextRunAppend to reuse one.
func (s *Scheduler[T]) NextRun(max int) (unit string, items []T, ok bool) {
	return s.NextRunAppend(nil, max)
}

// NextRunAppend is NextRun that appends the items to dst and returns the
// extended slice, so that a runner can reuse one buffer instead of
// allocating per run. If nothing is runnable it returns dst unchanged.
func (s *Scheduler[T]) NextRunAppend(dst []T, max int) (unit string, items []T, ok bool) {
	u, v, ok := s.take()
	if !ok {
		return "", dst, false
	}
	if u == nil {
		return "", append(dst, v), true
	}
	if max <= 1 {
		return u.name, append(dst, v), true
	}
	// take made u busy, which took it out of the heap, so taking more of its
	// queue cannot leave a stale heap key behind.
	n := min(max-1, u.q.len())
	dst = slices.Grow(dst, 1+n)
	dst = append(dst, v)
	for range n {
		it := u.q.pop()
		u.out = append(u.out, it.seq)
		dst = append(dst, it.v)
	}
	s.waiting -= n
	return u.name, dst, true
}

// Requeue puts items back at the front of a busy unit's queue, in the given
// order, ahead of anything waiting in that unit, because a runner did not
// start them, for instance the tail of a run taken with NextRun. The items
// keep their original Add sequences, so once the unit is Done they are again
// as old as when they were first added, rather than queueing behind younger
// work of other units. The unit stays busy until Done.
//
// items must be the last items the runner of unit was handed by the Next or
// NextRun that made it busy, in the order they were handed out, and not yet
// given back: Requeue matches them to their sequences by position, because T
// need not be comparable. Giving back more than that returns ErrNotHandedOut.
// Requeue on a non-empty unit that is not busy returns ErrNotBusy. Either
// error changes nothing.
//
// For unit "" the items go back to the front of the unordered queue, in the
// given order. Done("") is a no-op, so the Scheduler cannot remember which
// unordered items are out and what their sequences were; they are instead
// stamped older than anything added, which makes them, once more, the oldest
// runnable items. Items requeued later count as older than those requeued
// earlier, and DropIf reports requeued unordered items first.
func (s *Scheduler[T]) Requeue(unit string, items []T) error {
	k := len(items)
	if unit == "" {
		q := s.unordered.prepend(k)
		base := firstSeq - s.requeued - uint64(k)
		for i, v := range items {
			q[i] = item[T]{seq: base + uint64(i), v: v}
		}
		s.requeued += uint64(k)
		s.waiting += k
		return nil
	}
	u, ok := s.units[unit]
	if !ok || !u.busy {
		return ErrNotBusy
	}
	if k > len(u.out) {
		return ErrNotHandedOut
	}
	// The unit is busy, so it is not in the heap and its key needs no fix.
	seqs := u.out[len(u.out)-k:]
	q := u.q.prepend(k)
	for i, v := range items {
		q[i] = item[T]{seq: seqs[i], v: v}
	}
	u.out = u.out[:len(u.out)-k]
	s.waiting += k
	return nil
}

// Waiting returns the number of items added or requeued and neither returned
// by Next or NextRun nor dropped.
func (s *Scheduler[T]) Waiting() int { return s.waiting }

// Busy returns the number of units currently running an item.
func (s *Scheduler[T]) Busy() int { return s.busy }

// Runnable reports whether Next would return an item.
func (s *Scheduler[T]) Runnable() bool {
	return len(s.ready) > 0 || s.unordered.len() > 0
}

// DropIf removes every waiting item for which drop returns true and returns
// them in Add order, requeued items included (requeued unordered items come
// first; see Requeue); the remaining items keep their order. Busy units stay
// busy, since their running items are not waiting and must still be reported
// through Done.
//
// drop is called exactly once per waiting item, in unspecified order, and
// must not call back into the Scheduler. DropIf is meant for rare events such
// as partition revocation and costs O(n log n) in the number of waiting
// items.
func (s *Scheduler[T]) DropIf(drop func(T) bool) []T {
	match := func(it *item[T]) bool { return drop(it.v) }
	var dropped []item[T]
	dropped = s.unordered.filter(match, dropped)
	s.ready = s.ready[:0]
	for _, u := range s.units {
		dropped = u.q.filter(match, dropped)
		switch {
		case u.busy:
		case u.q.len() > 0:
			s.ready = append(s.ready, s.entry(u))
		default:
			s.forget(u) // deleting during range is allowed and skips nothing else
		}
	}
	s.maybeShrink()
	clear(s.ready[len(s.ready):cap(s.ready)])
	s.ready.init()
	if len(dropped) == 0 {
		return nil
	}
	s.waiting -= len(dropped)
	slices.SortFunc(dropped, func(a, b item[T]) int { return cmp.Compare(a.seq, b.seq) })
	out := make([]T, len(dropped))
	for i := range dropped {
		out[i] = dropped[i].v
	}
	return out
}

// Each calls f with every waiting item, in no particular order, until f
// returns false. It changes nothing; f must not call back into the
// Scheduler. It costs O(n): for rare events (an operator looking for one
// record).
func (s *Scheduler[T]) Each(f func(T) bool) {
	for _, it := range s.unordered.buf[s.unordered.head:] {
		if !f(it.v) {
			return
		}
	}
	for _, u := range s.units {
		for _, it := range u.q.buf[u.q.head:] {
			if !f(it.v) {
				return
			}
		}
	}
}

func (s *Scheduler[T]) newUnit(name string) *unit[T] {
	var u *unit[T]
	if n := len(s.spare); n > 0 {
		u = s.spare[n-1]
		s.spare[n-1] = nil
		s.spare = s.spare[:n-1]
	} else {
		u = &unit[T]{idx: -1}
		u.out = u.outInline[:0]
	}
	u.name = name
	if s.units == nil {
		s.units = make(map[string]*unit[T])
	}
	s.units[name] = u
	if len(s.units) > s.peak {
		s.peak = len(s.units)
	}
	return u
}

// removeUnit forgets an idle unit with nothing waiting, so that memory tracks
// the units in use rather than every key ever seen.
func (s *Scheduler[T]) removeUnit(u *unit[T]) {
	s.forget(u)
	s.maybeShrink()
}

func (s *Scheduler[T]) forget(u *unit[T]) {
	delete(s.units, u.name)
	if len(s.spare) < maxSpare && cap(u.q.buf) <= maxSpareQueue {
		u.name = ""
		if cap(u.out) > maxSpareQueue {
			u.out = u.outInline[:0] // a long run should not pin its array either
		}
		s.spare = append(s.spare, u)
	}
}

func (s *Scheduler[T]) maybeShrink() {
	// Go maps never give back their buckets, so after a spike of distinct
	// keys rebuild the map at its current size. The copy is paid for by the
	// three quarters of the peak that were deleted since the last rebuild.
	if s.peak >= minShrink && len(s.units) <= s.peak/4 {
		m := make(map[string]*unit[T], len(s.units))
		for k, v := range s.units {
			m[k] = v
		}
		s.units = m
		s.peak = len(m)
	}
}
