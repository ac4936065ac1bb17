package schedule

// readyEntry is a free unit with waiting items, keyed by the Add sequence of
// its head item. The key is copied into the entry so comparisons do not chase
// the unit pointer. It cannot go stale: a unit's head item only changes in
// Next, which takes the unit out of the heap, and in DropIf, which rebuilds
// the heap.
type readyEntry[T any] struct {
	seq uint64
	u   *unit[T]
}

// readyHeap is a binary min-heap on seq. It is hand-written rather than
// built on container/heap to avoid interface dispatch on the per-record path.
type readyHeap[T any] []readyEntry[T]

func (h *readyHeap[T]) push(e readyEntry[T]) {
	*h = append(*h, e)
	h.up(len(*h) - 1)
}

// pop removes and returns the entry with the smallest seq; h must not be empty.
func (h *readyHeap[T]) pop() readyEntry[T] {
	old := *h
	top := old[0]
	last := len(old) - 1
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

// init restores the heap order after arbitrary changes, in O(n).
func (h readyHeap[T]) init() {
	for i := len(h)/2 - 1; i >= 0; i-- {
		h.down(i)
	}
}

func (h readyHeap[T]) up(i int) {
	e := h[i]
	for i > 0 {
		p := (i - 1) / 2
		if h[p].seq <= e.seq {
			break
		}
		h[i] = h[p]
		i = p
	}
	h[i] = e
}

func (h readyHeap[T]) down(i int) {
	n := len(h)
	e := h[i]
	for {
		c := 2*i + 1
		if c >= n {
			break
		}
		if r := c + 1; r < n && h[r].seq < h[c].seq {
			c = r
		}
		if e.seq <= h[c].seq {
			break
		}
		h[i] = h[c]
		i = c
	}
	h[i] = e
}
