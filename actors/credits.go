package actors

import "sync"

// creditPool is the part of a consumer's budget (records and their bytes)
// that flows to the partitions that have records to read, rather than being
// split evenly among all of them.
//
// Each partition's gate keeps a floor of its own (a share of the read-ahead's
// lowest budget: floorBudget), so a partition with records always gets
// credits once its own records have finished, whatever the others do; the
// rest of the budget sits here and is lent to a gate for records its feed
// already holds (claimFeed.backlog), up to a ceiling per gate, and paid back
// as those records leave the pipeline. A partition whose records cannot run
// (one hot key, a stuck record) therefore fills its floor and at most the
// ceiling, never the whole budget, while at 4,096 partitions the few that
// have records fetched read them in batches of hundreds instead of a share
// of five each.
//
// The invariant, for records and for bytes alike: what all gates hold (their
// own credits in use plus what they borrowed) never exceeds the floors plus
// lendable, the budget. Bytes borrowed are reserved for the batch being
// read; the one record that overshoots a batch's room is charged to the
// gate's own credits, as without the pool.
//
// A gate that finds the pool empty waits in a queue; credits paid back wake
// waiters in the order they came, one per wakeAt credits free, so a partition
// that waits for the pool is served before any that asks later and sees
// nothing left. A gate's own floor does not depend on the queue.
//
// Lock order: a gate's mutex, then the pool's.
type creditPool struct {
	mu            sync.Mutex
	lendable      int   // the budget less the gates' floors (<= 0: nothing to lend)
	lendableBytes int64 // likewise for bytes
	lent          int   // records borrowed and not yet paid back
	lentBytes     int64
	ceil          int   // the most one gate may have borrowed
	ceilBytes     int64 // likewise for bytes
	perRecord     int64 // bytes lent with each record borrowed: the budget's bytes per record
	wakeAt        int   // free records worth waking one waiter for
	waiters       []*gate
}

// poolCeilingShare is the ceiling's share of what the pool can lend: a gate
// may borrow at most 1/poolCeilingShare of it (an even share, with fewer
// partitions), so that partitions whose records cannot run take at most
// that each, and the others keep flowing until poolCeilingShare of them
// are stuck at once. With up to poolCeilingShare partitions, each may hold
// exactly the even share of the whole budget it had before there was a
// pool.
const poolCeilingShare = 8

// set sizes the pool for parts partitions: the budget (records, bytes)
// less the floors the gates hold. What is lent already stays lent; a pool
// made smaller than what it lent lends nothing until enough is paid back.
func (p *creditPool) set(budget int, budgetBytes int64, floors int, floorBytes int64, parts int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	share := max(1, min(poolCeilingShare, parts))
	p.lendable = budget - floors
	p.lendableBytes = budgetBytes - floorBytes
	p.ceil = max(1, p.lendable/share)
	p.ceilBytes = max(1, p.lendableBytes/int64(share))
	p.perRecord = max(1, budgetBytes/int64(max(1, budget)))
	p.wakeAt = max(1, p.ceil/16)
	p.wakeLocked()
}

// lend lends up to recs records, and the bytes a batch of own+recs records
// needs (perRecord each) beyond what the gate's own byte credits (ownBytes,
// negative after an overshoot) cover, to a gate that has borrowed has and
// hasBytes already; each within what is free and the gate's ceiling. It
// lends nothing when the gate would still have nothing to read with (no
// record, or no byte, own or lent); if the pool's emptiness is why, g joins
// the queue.
func (p *creditPool) lend(g *gate, recs, own, has int, ownBytes, hasBytes int64) (int, int64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	free, freeBytes := p.lendable-p.lent, p.lendableBytes-p.lentBytes
	n := max(0, min(recs, free, p.ceil-has))
	b := max(0, min(int64(own+n)*p.perRecord-max(ownBytes, 0), freeBytes, p.ceilBytes-hasBytes))
	if own+n == 0 || max(ownBytes, 0)+b <= 0 {
		if (free <= 0 || freeBytes <= 0) && !g.waiting {
			g.waiting = true
			p.waiters = append(p.waiters, g)
		}
		return 0, 0
	}
	p.lent += n
	p.lentBytes += b
	return n, b
}

// repay takes back records and bytes a gate borrowed, wakes waiters if
// enough is free, and returns the ceilings (the gate wakes its own claim
// once it is far enough below them again).
func (p *creditPool) repay(recs int, bytes int64) (ceil int, ceilBytes int64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.lent -= recs
	p.lentBytes -= bytes
	p.wakeLocked()
	return p.ceil, p.ceilBytes
}

// leave takes g out of the queue (it is closing: its stale entry is skipped).
func (p *creditPool) leave(g *gate) {
	p.mu.Lock()
	g.waiting = false
	p.mu.Unlock()
}

// wakeLocked wakes, in the order they came, one waiter per wakeAt records
// free (at least one when any is), while bytes are free too.
func (p *creditPool) wakeLocked() {
	free, freeBytes := p.lendable-p.lent, p.lendableBytes-p.lentBytes
	if len(p.waiters) == 0 || free < p.wakeAt || freeBytes <= 0 {
		return
	}
	k := max(1, free/p.wakeAt)
	i := 0
	for ; i < len(p.waiters) && k > 0; i++ {
		g := p.waiters[i]
		p.waiters[i] = nil
		if !g.waiting {
			continue // closed since it joined
		}
		g.waiting = false
		g.wakeUp()
		k--
	}
	p.waiters = p.waiters[i:]
	if len(p.waiters) == 0 {
		p.waiters = nil // nor keep the array, as long as the queue once was
	}
}

// canLendBytes reports whether a gate that borrowed hasBytes may borrow
// more bytes now.
func (p *creditPool) canLendBytes(hasBytes int64) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.lendableBytes-p.lentBytes > 0 && hasBytes < p.ceilBytes
}

// free is what the pool can lend now (records, bytes).
func (p *creditPool) free() (int, int64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.lendable - p.lent, p.lendableBytes - p.lentBytes
}

// borrowed is what is lent now (records, bytes).
func (p *creditPool) borrowed() (int, int64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.lent, p.lentBytes
}
