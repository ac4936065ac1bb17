package actors

import "sync"

// gate holds a partition's fetch credits: how many more of its records may
// enter the pipeline (buffered or running). The claim goroutine takes credits
// before it reads records from sarama and stops reading (and pauses the
// partition) when none are left; the coordinator returns credits as records
// finish, and the proxy resizes the gates as partitions come and go.
// That is what bounds memory per partition without stalling the others.
//
// It is shared between one claim goroutine, the proxy, the coordinator and
// the offset controller, hence the mutex.
type gate struct {
	mu    sync.Mutex
	avail int // may go negative after the capacity shrinks
	cap   int
	held  bool          // the offset controller stopped reading: the watermark window is too wide
	wake  chan struct{} // 1-buffered: "enough credits to be worth reading again"
}

func newGate(capacity int) *gate {
	return &gate{avail: capacity, cap: capacity, wake: make(chan struct{}, 1)}
}

// take removes up to max credits and returns how many it took (0 if none).
func (g *gate) take(max int) int {
	g.mu.Lock()
	defer g.mu.Unlock()
	n := min(g.avail, max)
	if n <= 0 || g.held {
		return 0
	}
	g.avail -= n
	return n
}

// give returns n credits.
func (g *gate) give(n int) {
	g.mu.Lock()
	g.avail += n
	g.signalLocked()
	g.mu.Unlock()
}

// resize changes the capacity (the proxy shares the budget among the
// partitions it holds, so it changes on every assignment).
func (g *gate) resize(capacity int) {
	g.mu.Lock()
	g.avail += capacity - g.cap
	g.cap = capacity
	g.signalLocked()
	g.mu.Unlock()
}

// hold stops (or resumes) reading regardless of credits: the offset
// controller holds a partition whose oldest unfinished record lags too far
// behind the newest tracked one, which bounds its watermark's memory.
func (g *gate) hold(on bool) {
	g.mu.Lock()
	g.held = on
	if !on {
		select {
		case g.wake <- struct{}{}:
		default:
		}
	}
	g.mu.Unlock()
}

// signalLocked wakes the claim goroutine once a quarter of the capacity is
// free again: resuming for a single credit would pause and resume the
// partition on every record.
func (g *gate) signalLocked() {
	if g.avail >= max(1, g.cap/4) {
		select {
		case g.wake <- struct{}{}:
		default:
		}
	}
}

func (g *gate) available() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.avail
}
