package actors

import (
	"sync"
	"sync/atomic"
)

// workerPool is the protoactor dispatcher of a consumer's actors. protoactor's
// default starts a new goroutine every time a mailbox is scheduled, and with
// a handler on the stack each of those goroutines grows its stack again: on
// fast handlers that copying was a quarter of the CPU. The pool keeps the
// goroutines (and their stacks) and hands them the next mailbox to run.
//
// It never makes a mailbox wait: with no idle worker it starts another one,
// because runners block in handlers and a bounded pool could starve the rest
// of the tree. So it grows to the peak number of mailboxes running at once
// (about concurrency + 5) and no further.
type workerPool struct {
	throughput int
	work       chan func() // unbuffered: a send succeeds only to an idle worker
	quit       chan struct{}
	closed     atomic.Bool
	wg         sync.WaitGroup
}

func newWorkerPool(throughput int) *workerPool {
	return &workerPool{throughput: throughput, work: make(chan func()), quit: make(chan struct{})}
}

// Schedule implements actor.Dispatcher.
func (p *workerPool) Schedule(fn func()) {
	select {
	case p.work <- fn:
		return
	default:
	}
	if p.closed.Load() {
		go fn() // after close: behave like protoactor's default dispatcher
		return
	}
	p.wg.Add(1)
	go p.worker(fn)
}

// Throughput implements actor.Dispatcher: messages a mailbox processes before
// it yields its worker.
func (p *workerPool) Throughput() int { return p.throughput }

func (p *workerPool) worker(fn func()) {
	defer p.wg.Done()
	for {
		fn()
		select {
		case fn = <-p.work:
		case <-p.quit:
			return
		}
	}
}

// close stops the idle workers and waits for the busy ones to finish their
// mailbox run. Call it once the actors that use the pool have stopped.
func (p *workerPool) close() {
	p.release()
	p.wg.Wait()
}

// release stops the idle workers without waiting for the busy ones (which
// may be stuck in a handler that never returns); each exits when its run ends.
func (p *workerPool) release() {
	if !p.closed.Swap(true) {
		close(p.quit)
	}
}
