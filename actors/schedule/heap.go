package schedule

// readyEntry is a free unit with waiting items, keyed by its priority: the
// Add sequence of its head item less one for every item queued behind it
// (see Scheduler), and the head's sequence to break ties. Both are copied
// into the entry so comparisons do not chase the unit pointer. The head
// only changes in Next, which takes the unit out of the heap, and in
// DropIf, which rebuilds the heap; the key falls with every Add to the unit
// (raise).
type readyEntry[T any] struct {
	key, seq uint64
	u        *unit[T]
}

func (e readyEntry[T]) before(o readyEntry[T]) bool {
	return e.key < o.key || e.key == o.key && e.seq < o.seq
}

// readyHeap is a binary min-heap on (key, seq) that keeps each unit's
// position in the unit (idx), so that an Add can raise a unit in place. It
// is hand-written rather than built on container/heap to avoid interface
// dispatch on the per-record path.
type readyHeap[T any] []readyEntry[T]

func (h *readyHeap[T]) push(e readyEntry[T]) {
	*h = append(*h, e)
	h.up(len(*h) - 1)
}

// pop removes and returns the first entry; h must not be empty.
func (h *readyHeap[T]) pop() readyEntry[T] {
	old := *h
	top := old[0]
	last := len(old) - 1
	top.u.idx = -1
	old[0] = old[last]
	old[last] = readyEntry[T]{} // do not keep the unit reachable from the spare capacity
	*h = old[:last]
	switch {
	case last > 0:
		h.down(0)
	case cap(old) > maxIdleCap:
		*h = nil // a burst of distinct keys should not pin its peak size
	}
	return top
}

// raise lowers the key of the entry at i by w: its unit got another item.
func (h readyHeap[T]) raise(i int, w uint64) {
	h[i].key -= w
	h.up(i)
}

// init restores the heap order after arbitrary changes, in O(n).
func (h readyHeap[T]) init() {
	for i := range h {
		h[i].u.idx = i
	}
	for i := len(h)/2 - 1; i >= 0; i-- {
		h.down(i)
	}
}

func (h readyHeap[T]) up(i int) {
	e := h[i]
	for i > 0 {
		p := (i - 1) / 2
		if !e.before(h[p]) {
			break
		}
		h[i] = h[p]
		h[i].u.idx = i
		i = p
	}
	h[i] = e
	e.u.idx = i
}

func (h readyHeap[T]) down(i int) {
	n := len(h)
	e := h[i]
	for {
		c := 2*i + 1
		if c >= n {
			break
		}
		if r := c + 1; r < n && h[r].before(h[c]) {
			c = r
		}
		if !h[c].before(e) {
			break
		}
		h[i] = h[c]
		h[i].u.idx = i
		i = c
	}
	h[i] = e
	e.u.idx = i
}
