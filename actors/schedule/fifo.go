package schedule

// fifo is a queue backed by one slice that is reused as it drains, so a unit
// that keeps receiving a record or two at a time allocates nothing in steady
// state.
type fifo[E any] struct {
	buf  []E
	head int // index of the oldest element; buf[:head] are already popped
}

func (q *fifo[E]) len() int { return len(q.buf) - q.head }

func (q *fifo[E]) push(e E) {
	// Slide the live elements down instead of growing when at least half of
	// the array is dead: the copy is paid for by the pops that made the space.
	if q.head > 0 && len(q.buf) == cap(q.buf) && q.head >= len(q.buf)/2 {
		n := copy(q.buf, q.buf[q.head:])
		clear(q.buf[n:]) // drop references so popped values can be collected
		q.buf = q.buf[:n]
		q.head = 0
	}
	q.buf = append(q.buf, e)
}

// peek returns the oldest element; the queue must not be empty.
func (q *fifo[E]) peek() *E { return &q.buf[q.head] }

// pop removes and returns the oldest element; the queue must not be empty.
func (q *fifo[E]) pop() E {
	e := q.buf[q.head]
	var zero E
	q.buf[q.head] = zero // let the garbage collector reclaim what e points to once the caller is done
	q.head++
	if q.head == len(q.buf) {
		q.buf = q.buf[:0]
		q.head = 0
		if cap(q.buf) > maxIdleCap {
			q.buf = nil // a drained backlog should not pin its peak size
		}
	}
	return e
}

// filter removes every element for which drop returns true, appending it to
// out, keeps the others in order and returns out.
func (q *fifo[E]) filter(drop func(*E) bool, out []E) []E {
	w := 0
	for i := q.head; i < len(q.buf); i++ {
		if drop(&q.buf[i]) {
			out = append(out, q.buf[i])
			continue
		}
		q.buf[w] = q.buf[i]
		w++
	}
	clear(q.buf[w:])
	q.buf = q.buf[:w]
	q.head = 0
	return out
}

// prepend makes room for n elements in front of the oldest one and returns
// those slots, oldest first, for the caller to fill. It serves Requeue, which
// gives back items that were popped a moment ago, so the common case reuses
// the slots they were popped from and copies nothing.
func (q *fifo[E]) prepend(n int) []E {
	if q.head < n {
		// Move the live elements up to index n, in place when the array is
		// big enough. The slots below them may hold stale copies; the caller
		// overwrites all of them.
		live := q.len()
		if need := n + live; need <= cap(q.buf) {
			old := q.head
			q.buf = q.buf[:need]
			copy(q.buf[n:], q.buf[old:old+live])
		} else {
			buf := make([]E, need, need+need/4)
			copy(buf[n:], q.buf[q.head:])
			q.buf = buf
		}
		q.head = n
	}
	q.head -= n
	return q.buf[q.head : q.head+n]
}
