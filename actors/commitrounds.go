package actors

import (
	"slices"
	"sync"
)

// commitRounds coalesces the final commits of claims that hand over
// together. Every claim ends its handover with a commit of everything
// marked, and the clients build each commit from every partition they
// hold: at a rebalance or a stop of 4,096 partitions, 4,096 commits of
// 4,096 partitions each. Here a claim that asks while a commit is under way
// waits for the next round, which starts after its mark and so carries it;
// one round serves every claim that asked meanwhile. The claim that found
// no round running runs them all, until nobody waits. The zero value is
// ready.
type commitRounds struct {
	mu      sync.Mutex
	running bool
	queue   []commitWaiter
}

type commitWaiter struct {
	sess groupSession
	done chan struct{}
}

// commit commits what is marked on sess, in a round that starts after the
// call, and returns once that round has.
func (r *commitRounds) commit(sess groupSession) {
	done := make(chan struct{})
	r.mu.Lock()
	r.queue = append(r.queue, commitWaiter{sess: sess, done: done})
	if r.running {
		r.mu.Unlock()
		<-done
		return
	}
	r.running = true
	for len(r.queue) > 0 {
		round := r.queue
		r.queue = nil
		r.mu.Unlock()
		// One commit per session asking: one, unless a new generation's
		// claims ask beside the last ones of the old.
		var sent []groupSession
		for _, w := range round {
			if !slices.Contains(sent, w.sess) {
				w.sess.Commit()
				sent = append(sent, w.sess)
			}
		}
		for _, w := range round {
			close(w.done)
		}
		r.mu.Lock()
	}
	r.running = false
	r.mu.Unlock()
}
