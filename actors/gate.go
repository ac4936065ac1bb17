package actors

import (
	"math"
	"sync"
	"sync/atomic"
)

// gate holds a partition's fetch credits: how many more of its records, and
// how many more bytes of them (keys, values, headers), may enter the
// pipeline (buffered or running). The claim goroutine takes record credits
// before it reads a batch from sarama, reads while the batch's bytes stay
// below the byte credits it saw, settles (unused records back, bytes
// charged), and stops reading (and pauses the partition) when either runs
// out; the coordinator returns both as records finish, and the proxy resizes
// the gates as partitions come and go. That is what bounds memory per
// partition without stalling the others. Two calls per batch, not one per
// record: the mutex is on the claim's hot path.
//
// Bytes are known only once a record is read, so they are charged after the
// fact: a record may be read while any byte credit is left, whatever its
// size. A partition therefore holds less than its byte share plus one
// record, and a record larger than the whole share still enters, alone,
// once everything before it has finished: the byte budget can slow a
// partition down but never stall it.
//
// It also counts the records it let into the pipeline that have not left it
// (piped), which is what a partition shows as buffered (with those running
// taken out): credits are not records — a claim holds the credits it took
// while it waits for records to arrive, up to a batch's worth (maxFetchBatch)
// on a partition with nothing to read. Records an earlier owner finished
// (inherited) never enter the pipeline, so they are not counted.
//
// Beyond its own credits (its floor, which the proxy sizes), a gate may
// borrow from the consumer's creditPool for records its feed already holds
// (take): lent credits are held per batch while it is read (pend),
// then for the records kept (lent), and paid back first as records leave.
//
// It is shared between one claim goroutine, the proxy, the coordinator and
// the offset controller, hence the mutex.
type gate struct {
	mu         sync.Mutex
	avail      int // may go negative after the capacity shrinks
	cap        int
	availBytes int64 // may go negative: the last record read may overshoot
	capBytes   int64
	piped      int           // records settled into the pipeline that have not left it (release, discard)
	next       int64         // the offset after the last record the claim read
	limit      int64         // the highest offset that may be read: the watermark window's bound (setLimit)
	slack      int64         // how far below limit next must be before a claim stopped by it is woken
	wake       chan struct{} // 1-buffered: "enough credits to be worth reading again"
	watch      *partWatch    // what observers see of the partition (not guarded by mu)
	held       *atomic.Bool  // the consumer is paused (Consumer.Pause): no credits; nil: never
	partHeld   atomic.Bool   // this partition is paused (Consumer.Pause(tp)): no credits

	pool      *creditPool // where it borrows beyond its own credits; nil: never (or closed)
	lent      int         // records borrowed for records in the pipeline
	lentBytes int64
	pend      int // borrowed for the batch being read (take, until settle or give)
	pendBytes int64
	closed    bool // its claim ended: it never borrows again
	starving  bool // the last take got nothing: wake the claim when it can borrow again
	waiting   bool // in the pool's queue (guarded by the pool's mutex)
}

func newGate(capacity int, capBytes int64) *gate {
	return &gate{avail: capacity, cap: capacity, availBytes: capBytes, capBytes: capBytes, limit: math.MaxInt64,
		wake: make(chan struct{}, 1), watch: newPartWatch()}
}

// take removes up to maxN record credits — the gate's own, and beyond them
// up to borrow more from its pool, with the bytes they need — and returns
// how many it took (0 if none, or if no byte credit is left), with the
// byte room: the batch may read another record while the bytes it read are
// below room. A claim borrows for records its feed already holds, not for
// records it waits for. Borrowed byte credits are reserved for the batch;
// the gate's own only grow until settle (the proxy may shrink them, as it
// may the records'), so room is never more than the batch may use.
func (g *gate) take(maxN, borrow int) (n int, room int64) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.next > g.limit || g.isHeld() {
		return 0, 0
	}
	own := max(0, min(g.avail, maxN))
	var lent int
	var lentBytes int64
	if g.pool != nil && borrow > 0 {
		lent, lentBytes = g.pool.lend(g, min(borrow, maxN-own), own, g.lent, g.availBytes, g.lentBytes)
	}
	room = max(g.availBytes, 0) + lentBytes
	if own+lent == 0 || room <= 0 {
		g.starving = g.pool != nil
		return 0, 0
	}
	g.starving = false
	g.avail -= own
	g.pend, g.pendBytes = lent, lentBytes
	return own + lent, room
}

// settle ends a batch of taken credits: kept records go on to the
// pipeline and keep their credits (until release), the others' come back
// (borrowed ones to the pool first); it charges the bytes of the records
// kept, and notes next, the offset after the batch's last record.
func (g *gate) settle(taken, kept int, bytes int64, next int64) {
	g.mu.Lock()
	unused := taken - kept
	back := min(g.pend, unused)
	g.avail += unused - back
	g.lent += g.pend - back
	// Bytes: the gate's own first. The rest, the one record that overshoots
	// included, is lent if the batch borrowed bytes (back may then be
	// negative: the pool lends the overshoot, and lends nothing more until
	// it is paid back), else the gate's own (as without a pool).
	fromOwn := min(bytes, max(g.availBytes, 0))
	fromLent := int64(0)
	if g.pendBytes > 0 {
		fromLent = bytes - fromOwn
	}
	g.availBytes -= bytes - fromLent
	g.lentBytes += fromLent
	backBytes := g.pendBytes - fromLent
	g.pend, g.pendBytes = 0, 0
	g.piped += kept
	g.next = max(g.next, next)
	g.repayLocked(back, backBytes)
	g.signalLocked()
	g.mu.Unlock()
}

// outOfBytes reports whether reading stops for lack of byte credits (rather
// than of record credits): the claim then pauses its partition at once,
// because what sarama reads ahead meanwhile costs a record's size each. A
// gate whose pool can still lend it bytes is not out of them.
func (g *gate) outOfBytes() bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.availBytes > 0 || g.avail <= 0 || g.next > g.limit {
		return false
	}
	return g.pool == nil || !g.pool.canLendBytes(g.lentBytes)
}

// release returns the credits of n records that left the pipeline
// (finished, or lost), and their bytes: the coordinator's side of settle.
// What the gate borrowed is paid back first.
func (g *gate) release(n int, bytes int64) {
	g.mu.Lock()
	r, rb := min(g.lent, n), min(g.lentBytes, bytes)
	g.lent -= r
	g.lentBytes -= rb
	g.avail += n - r
	g.availBytes += bytes - rb
	g.piped -= n
	g.repayLocked(r, rb)
	g.signalLocked()
	g.mu.Unlock()
}

// repayLocked pays records and bytes back to the pool, and wakes a starving
// claim once it is a quarter of the ceilings below them again (its own
// credits wake it by signalLocked; the pool's queue, when the pool was
// empty).
func (g *gate) repayLocked(recs int, bytes int64) {
	if g.pool == nil || (recs == 0 && bytes == 0) {
		return
	}
	ceil, ceilBytes := g.pool.repay(recs, bytes)
	if g.starving && g.lent <= ceil-ceil/4 && g.lentBytes <= ceilBytes-ceilBytes/4 {
		g.starving = false
		g.wakeUp()
	}
}

// discard takes n records dropped unfinished out of the pipeline's count;
// their credits stay taken: their partition is going away, or the tree
// halts (pipeline.Out.Dropped).
func (g *gate) discard(n int) {
	g.mu.Lock()
	g.piped -= n
	g.mu.Unlock()
}

// give returns the n record credits of a batch taken but not read (no
// record of it entered the pipeline): a batch settled with nothing kept.
func (g *gate) give(n int) { g.settle(n, 0, 0, 0) }

// attach lets the gate borrow from pool (the proxy's, once it takes the
// claim).
func (g *gate) attach(pool *creditPool) {
	g.mu.Lock()
	if g.pool == nil && !g.closed {
		g.pool = pool
	}
	g.mu.Unlock()
}

// close pays back all the gate borrowed and stops it borrowing: its claim
// has ended. Records of it still in the pipeline (a revocation that timed
// out) then hold only the gate's own credits.
func (g *gate) close() {
	g.mu.Lock()
	g.closed = true
	if p := g.pool; p != nil {
		g.pool = nil
		p.repay(g.lent+g.pend, g.lentBytes+g.pendBytes)
		p.leave(g)
		g.lent, g.lentBytes, g.pend, g.pendBytes = 0, 0, 0, 0
	}
	g.mu.Unlock()
}

// resize changes the capacities (the proxy shares the budgets among the
// partitions it holds, so they change on every assignment).
func (g *gate) resize(capacity int, capBytes int64) {
	g.mu.Lock()
	g.avail += capacity - g.cap
	g.cap = capacity
	g.availBytes += capBytes - g.capBytes
	g.capBytes = capBytes
	g.signalLocked()
	g.mu.Unlock()
}

// setLimit bounds reading, whatever the credits: no batch starts past
// offset limit. The offset controller sets it to the partition's oldest
// unfinished offset plus the watermark window whenever that offset moves,
// so a record stuck while everything after it finishes stops reading at
// the window's bound however late the controller hears of the records read
// (a hold decided when it tracked a batch let a claim fed by fast-returning
// credits read 1,184 records past a window of 500 on a loaded machine). A
// claim stopped by it is woken once the limit is slack past next again, so
// a creeping watermark does not pause and resume it record by record.
func (g *gate) setLimit(limit, slack int64) {
	g.mu.Lock()
	g.limit, g.slack = limit, slack
	if g.next+g.slack <= g.limit {
		select {
		case g.wake <- struct{}{}:
		default:
		}
	}
	g.mu.Unlock()
}

// isHeld reports whether the consumer or this partition is paused
// (Consumer.Pause).
func (g *gate) isHeld() bool { return g.partHeld.Load() || (g.held != nil && g.held.Load()) }

// wakeUp wakes the claim whatever its credits (Resume).
func (g *gate) wakeUp() {
	select {
	case g.wake <- struct{}{}:
	default:
	}
}

// signalLocked wakes the claim goroutine once a quarter of both capacities
// is free again: resuming for a single credit would pause and resume the
// partition on every record. Once everything has finished both are whole,
// so a claim waiting for a quarter is always woken eventually.
func (g *gate) signalLocked() {
	if g.avail >= max(1, g.cap/4) && g.availBytes >= max(1, g.capBytes/4) {
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

// inPipeline is the number of records settled into the pipeline and not
// released from it.
func (g *gate) inPipeline() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.piped
}

// availableBytes is the byte credit left (negative after an overshoot).
func (g *gate) availableBytes() int64 {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.availBytes
}
