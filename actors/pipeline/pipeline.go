// Package pipeline is the coordinator's bookkeeping: which buffered record
// runs on which runner, which ordering unit is busy or pinned, and when a
// partition's records are all accounted for.
//
// A Pipeline owns a schedule.Scheduler and the batches out with runners. Its
// operations (Add, Dispatch, Ran, Age, RetryDue, DeadLettered, Revoke, Drop,
// Halt, Flush) change its state and leave in an Out what the caller must do
// now — batches to send, credits to return, retry timers to arm or cancel —
// and gather for Flush what the caller reports later: finished, failed and
// dead-lettered records and drained partitions. It has no goroutines, no
// clock and no actor: the coordinator actor translates messages into calls
// and Out into sends, and the model test drives it with random operations
// against a naive implementation. It is not safe for concurrent use; only
// Batch's runner side (Claim, Finish) is used from another goroutine.
//
// Invariants, checked by the model test:
//   - records of one unit run one at a time, in the order they were added;
//   - a unit is in at most one runner's batch at a time, and stays pinned while
//     a failed record of it waits for a retry or the dead-letter topic;
//   - every added record leaves exactly once: finished (Done, Failed, Dead
//     then DeadLettered), dropped, or lost; a dropped one is in Dropped once,
//     any other's credit goes back in Free once;
//   - a revoked or dropped partition is reported in Drained exactly once,
//     after every record of it that finished.
//
// Cost: per record, one Scheduler Add and its share of a NextRun, and when
// it is accounted for one map lookup per run end (pinned) and one per change
// of partition along the batch; nothing allocates per record, and a batch
// reuses the arrays of one its runner reported done.
package pipeline

import (
	"fmt"
	"slices"

	"github.com/turbokafka/turbo/actors/schedule"
)

// Verdict is what becomes of a record whose handler failed; the caller's
// failure policy decides it (Item.Judge).
type Verdict int8

const (
	// Finished: a success, or a failure the policy skips: the record is done.
	Finished Verdict = iota
	// Retry: the record is parked, its unit pinned, until RetryDue.
	Retry
	// DeadLetter: the record goes to Finished.Dead, its unit pinned until
	// DeadLettered.
	DeadLetter
	// Escalate: the record failed for good and goes to Finished.Failed; its
	// unit stays pinned (the tree restarts and delivers it again).
	Escalate
	// Lost: the record was cancelled because its partition was taken away;
	// it leaves without being finished (the next owner runs it again).
	Lost
)

// Item tells a Pipeline what it needs of a record, and judges failures. A
// record's unit is what must not run twice at once ("" for unordered); it
// must not change while the record is in the Pipeline.
type Item[T any] interface {
	Unit(T) string
	Epoch(T) uint64 // the partition assignment it was fetched under
	Offset(T) int64
	// Judge applies the failure policy to a failed attempt (it may count,
	// log, and report Lost for a partition taken away).
	Judge(rec T, err error) Verdict
}

// Failure is a failed record with its error.
type Failure[T any] struct {
	Rec T
	Err error
}

// Run is a batch to send to a runner; Spawn says the runner does not exist
// yet (Runner is then the number of runners so far).
type Run[T any] struct {
	Runner int
	Spawn  bool
	Batch  *Batch[T]
}

// Out is what the caller must do now, gathered since the last Reset.
type Out[T any] struct {
	Runs      []Run[T]
	Free      []T          // records that left: their credit goes back
	Dropped   []T          // records dropped unfinished (their partition going away, or the halt): they left, their credit stays taken
	Park      []Failure[T] // arm a retry timer for each (RetryDue when it fires)
	Unpark    []T          // cancel their retry timers: they were dropped
	Succeeded int          // records whose handler succeeded
	Flush     bool         // Flush has something to report
}

// Report is what Flush reports: records whose handlers ran, and
// partitions drained, in that order.
type Report[T any] struct {
	Done    []T          // succeeded, or skipped by policy
	Failed  []Failure[T] // failed for good: Escalate
	Dead    []Failure[T] // for the dead-letter topic: DeadLetter
	Drained []uint64     // epochs of revoked or dropped partitions with nothing left here
}

// assignment is what the Pipeline knows of one partition assignment.
type assignment[T any] struct {
	records  int   // its records here: waiting, out with runners, or pinned
	maxDone  int64 // highest offset finished, -1 if none
	revoking bool  // report it drained when records reaches 0
	dropped  bool  // someone else's now (Drop): nothing of it starts again
	// held: paused (Hold): its records wait in waiting, and its due
	// retries in ready, out of the scheduler, until Release.
	held    bool
	waiting []T
	ready   []T
}

// Pipeline is the coordinator's bookkeeping (see the package doc).
type Pipeline[T comparable] struct {
	it    Item[T]
	max   int // runners at most
	sched *schedule.Scheduler[T]
	parts map[uint64]*assignment[T] // by epoch
	// revoking holds the epochs of parts being revoked or dropped, so that
	// Flush looks at those only (at 4,096 partitions, every Flush visiting
	// them all was the pipeline's largest cost).
	revoking map[uint64]struct{}
	batches  []*Batch[T] // by runner id; nil when idle
	idle     []int       // runner ids
	spare    []*Batch[T] // batches runners reported done, to reuse
	// Failed records waiting for a retry (parked, then ready) or for the
	// dead-letter topic pin their unit: pinned counts them per unit, so that
	// nothing frees the unit before they are through.
	pinned map[string]int
	parked map[T]struct{}
	ready  []T // retries due, taking turns with fresh records
	// retryTurn: the last dispatch was a due retry while fresh records
	// could run too; the next goes to fresh records. Taking turns keeps a
	// storm of failing records from starving the records behind them.
	retryTurn   bool
	inFlight    int // records in batches out with runners
	halted      bool
	batch       int // records per batch beyond the first run (SetBatchSize)
	maxRun      int
	quota       int // records Dispatch may still give out; -1: no bound (SetQuota)
	limit       int // runners busy at most (SetLimit): an adaptive concurrency limit
	notRun      []T // harvest's scratch: records a handler call did not run (ErrNotRun)
	heldWaiting int // records in held assignments' waiting lists
	out         Out[T]
	fin         Report[T]
}

// New returns an empty Pipeline of at most runners runners, whose batches
// hold at most maxRun records of one unit.
func New[T comparable](it Item[T], runners, maxRun int) *Pipeline[T] {
	// A unit's backlog counts for its records times the runners: its
	// records run one at a time while the others share every runner (see
	// schedule.Scheduler), so a hot key starts as soon as it is the longest
	// path rather than behind a budget's worth of younger records.
	sched := schedule.New[T]()
	sched.SetBacklogWeight(runners)
	return &Pipeline[T]{
		it:       it,
		max:      runners,
		maxRun:   maxRun,
		limit:    runners,
		batch:    1,
		quota:    -1,
		sched:    sched,
		parts:    make(map[uint64]*assignment[T]),
		pinned:   make(map[string]int),
		revoking: make(map[uint64]struct{}),
		parked:   make(map[T]struct{}),
	}
}

// Out returns what the caller must do now; Reset clears it once done.
func (p *Pipeline[T]) Out() *Out[T] { return &p.out }

// Reset clears Out, keeping its arrays. The arrays are zeroed too: a
// record left behind in one would pin its memory (and the fetch buffer its
// key and value point into) until overwritten.
func (p *Pipeline[T]) Reset() {
	clear(p.out.Runs)
	clear(p.out.Free)
	clear(p.out.Park)
	clear(p.out.Unpark)
	clear(p.out.Dropped)
	p.out = Out[T]{Runs: p.out.Runs[:0], Free: p.out.Free[:0], Park: p.out.Park[:0], Unpark: p.out.Unpark[:0], Dropped: p.out.Dropped[:0]}
}

// SetBatchSize sets how many records a batch holds when more than one run
// joins it (the first run may be up to maxRun long: its records could only
// run one after the other anyway).
func (p *Pipeline[T]) SetBatchSize(n int) { p.batch = max(1, n) }

// SetLimit bounds how many runners Dispatch keeps busy, from 1 to the
// maximum given to New (an adaptive concurrency limit). Lowering it takes
// nothing back: busy runners finish, and no more start until fewer than n
// are busy.
func (p *Pipeline[T]) SetLimit(n int) { p.limit = min(max(n, 1), p.max) }

// SetMax changes the most runners (the consumer's concurrency, retuned):
// raised, more may be made; lowered, no batch goes out while as many as
// that are busy, so the busy runners above it finish and none replaces
// them. The limit (SetLimit) follows: unchanged when it was below both
// the old and the new maximum, the new maximum otherwise.
func (p *Pipeline[T]) SetMax(n int) {
	n = max(n, 1)
	if p.limit >= p.max || p.limit > n {
		p.limit = n
	}
	p.max = n
}

// SetQuota bounds the records the following Dispatches give out in all (a
// rate limit's tokens): each record given out, a retry too, uses one. -1
// lifts the bound.
func (p *Pipeline[T]) SetQuota(n int) { p.quota = max(n, -1) }

// Quota is what is left of the bound SetQuota set (-1: none).
func (p *Pipeline[T]) Quota() int { return p.quota }

// Starved reports whether Dispatch would give records to a runner now but
// for the quota: some are runnable, and a runner is free.
func (p *Pipeline[T]) Starved() bool {
	return p.quota == 0 && !p.halted && p.free() && (len(p.ready) > 0 || p.sched.Runnable())
}

// free reports whether a runner may take a batch now: one is idle or may be
// made, and fewer than the limit are busy.
func (p *Pipeline[T]) free() bool {
	return (len(p.idle) > 0 || len(p.batches) < p.max) && len(p.batches)-len(p.idle) < p.limit
}

// Waiting is the number of records waiting in the scheduler or held with
// their paused partition (not counting retries that are due).
func (p *Pipeline[T]) Waiting() int { return p.sched.Waiting() + p.heldWaiting }

// Retries is the number of failed records due to run again now.
func (p *Pipeline[T]) Retries() int { return len(p.ready) }

// InFlight is the number of records in batches out with runners.
func (p *Pipeline[T]) InFlight() int { return p.inFlight }

// Busy is the number of runners with a batch.
func (p *Pipeline[T]) Busy() int { return len(p.batches) - len(p.idle) }

// Runners is the number of runners made so far.
func (p *Pipeline[T]) Runners() int { return len(p.batches) }

// Halted reports whether Halt was called.
func (p *Pipeline[T]) Halted() bool { return p.halted }

// Known reports whether an assignment has records here (or had, and is
// not drained yet).
func (p *Pipeline[T]) Known(epoch uint64) bool { return p.parts[epoch] != nil }

// Add buffers records fetched under one assignment. After Halt nothing is
// added: the records would never start.
func (p *Pipeline[T]) Add(epoch uint64, recs []T) {
	if len(recs) == 0 || p.halted {
		return
	}
	a := p.parts[epoch]
	if a == nil {
		a = &assignment[T]{maxDone: -1}
		p.parts[epoch] = a
	}
	a.records += len(recs)
	if a.held {
		a.waiting = append(a.waiting, recs...)
		p.heldWaiting += len(recs)
		return
	}
	for _, rec := range recs {
		p.sched.Add(p.it.Unit(rec), rec)
	}
}

// Hold pauses an assignment: none of its records starts until Release.
// Those waiting, and the unstarted tails of runners' batches, are taken out
// of the scheduler; records added later wait with them; a retry that comes
// due waits too. Records already running finish. An assignment with no
// records here is not held (hold it after its first Add). The caller
// dispatches afterwards.
func (p *Pipeline[T]) Hold(epoch uint64) {
	a := p.parts[epoch]
	if a == nil || a.held || a.revoking {
		return
	}
	a.held = true
	p.stealAll()
	taken := p.sched.DropIf(func(r T) bool { return p.it.Epoch(r) == epoch })
	a.waiting = append(a.waiting, taken...)
	p.heldWaiting += len(taken)
	for i := 0; i < len(p.ready); i++ {
		if rec := p.ready[i]; p.it.Epoch(rec) == epoch {
			a.ready = append(a.ready, rec)
			p.ready = append(p.ready[:i], p.ready[i+1:]...)
			i--
		}
	}
}

// Release ends a Hold: the assignment's records go back to the scheduler in
// the order they came, its due retries with the others that are due. The
// caller dispatches afterwards.
func (p *Pipeline[T]) Release(epoch uint64) {
	a := p.parts[epoch]
	if a == nil || !a.held {
		return
	}
	a.held = false
	for _, rec := range a.waiting {
		p.sched.Add(p.it.Unit(rec), rec)
	}
	p.heldWaiting -= len(a.waiting)
	p.ready = append(p.ready, a.ready...)
	a.waiting, a.ready = nil, nil
}

// Held reports whether an assignment is held (Hold).
func (p *Pipeline[T]) Held(epoch uint64) bool {
	a := p.parts[epoch]
	return a != nil && a.held
}

// Dispatch gives runnable records to idle runners (making runners while
// fewer than the maximum exist). When runners are idle and nothing else can
// run, it takes back the records queued behind the current one in batches
// out since before the last Age: a slow record must not hold them.
func (p *Pipeline[T]) Dispatch() {
	for p.free() && !p.halted && p.quota != 0 {
		if len(p.ready) == 0 && !p.sched.Runnable() && !p.stealAged() {
			break
		}
		r := Run[T]{Runner: len(p.batches), Spawn: true}
		if n := len(p.idle); n > 0 {
			r = Run[T]{Runner: p.idle[n-1]}
			p.idle = p.idle[:n-1]
		} else {
			p.batches = append(p.batches, nil)
		}
		b := p.spareBatch()
		recs := b.records[:0]
		// Due retries and fresh records take turns, when both can run: a
		// retry holds back the commit, but hundreds of records failing
		// again must not starve the records that would go through.
		if retry := len(p.ready) > 0 && (!p.retryTurn || !p.sched.Runnable()); retry {
			p.retryTurn = p.sched.Runnable()
			// A retry runs alone: its unit is already pinned for it.
			recs = append(recs, p.ready[0])
			var zero T
			p.ready[0] = zero // the array outlives the slice's head
			p.ready = p.ready[1:]
		} else {
			p.retryTurn = false
			// The first run may be long: its records could only run one
			// after the other anyway. More runs join the batch only when
			// handlers are fast enough for batching to pay (SetBatchSize).
			n, first := p.batch, p.maxRun
			if p.quota > 0 {
				n, first = min(n, p.quota), min(first, p.quota)
			}
			for lim := first; ; lim = n - len(recs) {
				var ok bool
				if _, recs, ok = p.sched.NextRunAppend(recs, lim); !ok || len(recs) >= n {
					break
				}
			}
		}
		if p.quota > 0 {
			p.quota -= len(recs)
		}
		p.inFlight += len(recs)
		b.reset(recs)
		r.Batch = b
		p.batches[r.Runner] = b
		p.out.Runs = append(p.out.Runs, r)
	}
}

// Pending reports whether a batch out with a runner may still have a tail to
// take back or finished records to account for: the caller should call Age
// a little later.
func (p *Pipeline[T]) Pending() bool {
	for _, b := range p.batches {
		if b != nil && b.pending() {
			return true
		}
	}
	return false
}

// Age accounts for the records finished so far in every batch out with a
// runner, and marks those batches aged: Dispatch may take back their tails.
// The caller dispatches afterwards.
func (p *Pipeline[T]) Age() {
	for _, b := range p.batches {
		if b != nil {
			p.harvest(b)
			b.aged = true
		}
	}
}

// Ran accounts for a batch its runner reported done, makes the runner idle,
// and returns how many records of the batch the runner finished. A runner
// stops at a failed record: the records it left go back (and are dropped at
// once after Halt). The batch is reused: neither the runner nor the caller
// may touch it any more. The caller dispatches afterwards.
func (p *Pipeline[T]) Ran(runner int) (finished int) {
	b := p.batches[runner]
	if b == nil {
		panic(fmt.Errorf("pipeline: runner %d reported no batch", runner))
	}
	p.harvest(b)
	p.giveBack(b, b.steal(), nil)
	if p.halted {
		p.dropWaiting()
		p.out.Flush = true
	}
	p.batches[runner] = nil
	p.idle = append(p.idle, runner)
	finished = b.seen
	b.idle()
	p.spare = append(p.spare, b)
	return finished
}

// spareBatch returns a batch to fill: one a runner reported done, or a new
// one. There are never more batches than runners.
func (p *Pipeline[T]) spareBatch() *Batch[T] {
	if n := len(p.spare); n > 0 {
		b := p.spare[n-1]
		p.spare[n-1] = nil
		p.spare = p.spare[:n-1]
		return b
	}
	return new(Batch[T])
}

// harvest accounts for the records of a batch finished since the last look:
// a unit becomes free when the last record of its run finished (unless a
// failed record pins it).
func (p *Pipeline[T]) harvest(b *Batch[T]) {
	done := int(b.done.Load())
	if done == b.seen {
		return
	}
	var next string // the unit of records[i+1], read once per record
	if b.seen < b.limit {
		next = p.it.Unit(b.records[b.seen])
	}
	var a *assignment[T] // the last record's, looked up once per run of one epoch
	var epoch uint64
	failed := false
	notRun := p.notRun[:0]
	p.fin.Done = slices.Grow(p.fin.Done, done-b.seen) // one allocation, not one per doubling
	for i := b.seen; i < done; i++ {
		rec, err := b.records[i], b.errs[i]
		unit := next
		runEnd := i+1 >= b.limit
		if !runEnd {
			next = p.it.Unit(b.records[i+1])
			runEnd = next != unit
		}
		if err != nil {
			failed = true
			if err == ErrNotRun {
				// Its unit stays busy: the record goes back below (requeue).
				notRun = append(notRun, rec)
				continue
			}
		}
		v := p.verdict(rec, err)
		if v == Retry || v == DeadLetter || v == Escalate {
			p.pin(unit)
		}
		if !p.leaves(rec, v, err) {
			continue // parked for a retry, or on its way to the dead-letter topic
		}
		if runEnd && p.pinned[unit] == 0 {
			p.done(unit)
		}
		if e := p.it.Epoch(rec); a == nil || e != epoch {
			a, epoch = p.parts[e], e
		}
		p.releaseTo(a, rec)
	}
	p.inFlight -= done - b.seen
	b.seen = done
	p.out.Flush = true
	if failed {
		// A runner claims nothing after a failure: its tail goes back now,
		// not when it reports. Left in the batch until then, the tail would
		// keep the unit's run open behind a failed record whose retry may
		// be dispatched first — and that run's end would then free the unit
		// while the retry runs (found by the model test).
		p.giveBack(b, b.steal(), notRun)
	}
	if len(notRun) > 0 {
		p.requeueNotRun(notRun)
	}
	clear(notRun)
	p.notRun = notRun[:0]
}

// requeueNotRun puts back the records a handler call did not run (ErrNotRun),
// ahead of their units' other records, and frees their units (unless a failed
// record pins them). Each unit's records are a run's last ones handed out,
// the tail after them already given back (giveBack), as Requeue needs. After
// a Halt or a Drop they are dropped instead: nothing of theirs starts again.
func (p *Pipeline[T]) requeueNotRun(recs []T) {
	for i := 0; i < len(recs); {
		unit := p.it.Unit(recs[i])
		j := i + 1
		for j < len(recs) && p.it.Unit(recs[j]) == unit {
			j++
		}
		var keep []T
		for _, rec := range recs[i:j] {
			if a := p.parts[p.it.Epoch(rec)]; p.halted || a.dropped {
				p.discard(a, rec)
			} else {
				keep = append(keep, rec)
			}
		}
		if len(keep) > 0 {
			p.requeue(unit, keep)
		}
		if p.pinned[unit] == 0 {
			p.done(unit)
		}
		i = j
	}
}

// verdict is what becomes of a finished record (err is its outcome).
func (p *Pipeline[T]) verdict(rec T, err error) Verdict {
	if err == nil {
		return Finished
	}
	v := p.it.Judge(rec, err)
	if v == Retry && p.halted {
		// Retries are given up after Halt: parked, it would hold its
		// partition's drain until the revocation expired (found by the
		// model test). Unfinished, the next generation runs it again.
		return Lost
	}
	return v
}

// leaves files a harvested record under its verdict, and reports whether it
// leaves the Pipeline now. A pinned record's unit is already pinned: under Retry
// and DeadLetter it stays (parked, or waiting for the dead-letter topic);
// under Escalate it leaves, and the tree is about to restart and deliver it
// again, so nothing of its unit may run meanwhile.
func (p *Pipeline[T]) leaves(rec T, v Verdict, err error) bool {
	switch v {
	case Retry:
		p.parked[rec] = struct{}{}
		p.out.Park = append(p.out.Park, Failure[T]{rec, err})
		return false
	case DeadLetter:
		p.fin.Dead = append(p.fin.Dead, Failure[T]{rec, err})
		return false
	case Escalate:
		p.fin.Failed = append(p.fin.Failed, Failure[T]{rec, err})
	case Lost: // not finished: the next owner runs it again
	default:
		if err == nil {
			p.out.Succeeded++
		}
		p.fin.Done = append(p.fin.Done, rec)
	}
	return true
}

// release accounts for a record leaving the Pipeline.
func (p *Pipeline[T]) release(rec T) { p.releaseTo(p.parts[p.it.Epoch(rec)], rec) }

// releaseTo is release with the record's assignment looked up.
func (p *Pipeline[T]) releaseTo(a *assignment[T], rec T) {
	a.records--
	a.maxDone = max(a.maxDone, p.it.Offset(rec))
	p.out.Free = append(p.out.Free, rec)
}

// discard accounts for a record dropped unfinished (its partition going
// away, or the halt). It leaves in Dropped, not Free: its credit is not
// given back (nothing more of the partition is to be read), but the caller
// learns that it is gone, for what it counts of the records here. It
// neither finished nor ran, so it does not count as started (maxDone).
func (p *Pipeline[T]) discard(a *assignment[T], rec T) {
	a.records--
	p.out.Dropped = append(p.out.Dropped, rec)
}

// stealAged takes back the unstarted records of the batches out since before
// the last Age, and reports whether that made anything runnable. Younger
// batches are left alone: with fast handlers they finish in microseconds, and
// taking them apart would only add hops.
func (p *Pipeline[T]) stealAged() bool {
	for _, b := range p.batches {
		if b != nil && b.aged && len(b.records) > 1 {
			p.giveBack(b, b.steal(), nil)
		}
	}
	return p.sched.Runnable()
}

// stealAll takes back the unstarted records of every batch out with runners.
func (p *Pipeline[T]) stealAll() {
	for _, b := range p.batches {
		if b != nil {
			p.giveBack(b, b.steal(), nil)
		}
	}
}

// giveBack returns the records stolen from b's tail to the scheduler. A run
// that was cut (its first records are with the runner) keeps its unit busy:
// the runner's last record of it becomes the run's end, and frees the unit
// when it finishes. A run taken whole frees its unit now. A cut run whose
// unit has records in notRun keeps it busy too: requeueNotRun puts them back
// in front of the tail, then frees it.
func (p *Pipeline[T]) giveBack(b *Batch[T], stolen, notRun []T) {
	if len(stolen) == 0 {
		return
	}
	cut := len(b.records) - len(stolen)
	b.limit = cut
	for i := 0; i < len(stolen); {
		unit := p.it.Unit(stolen[i])
		j := i + 1
		for j < len(stolen) && p.it.Unit(stolen[j]) == unit {
			j++
		}
		p.requeue(unit, stolen[i:j])
		cutRun := i == 0 && cut > 0 && p.it.Unit(b.records[cut-1]) == unit
		if cutRun && len(notRun) > 0 && p.it.Unit(notRun[len(notRun)-1]) == unit {
			// The runner's last records of this run were not run: they go
			// back in front of the tail (requeueNotRun), which frees the unit.
		} else if (!cutRun || cut-1 < b.seen) && p.pinned[unit] == 0 {
			// Nothing of this unit runs any more (or the runner's part of
			// the run was already accounted for without freeing it).
			p.done(unit)
		}
		i = j
	}
	p.inFlight -= len(stolen)
}

// requeue puts records a runner did not start (or run) back in front of
// their unit's queue: the last ones it was handed, as Requeue needs. Those
// of a held assignment go in front of its held records instead (they are
// older than any of their unit there).
func (p *Pipeline[T]) requeue(unit string, recs []T) {
	keep := recs // the usual case: none held, nothing allocated
	for i, rec := range recs {
		if a := p.parts[p.it.Epoch(rec)]; a != nil && a.held {
			keep = p.holdBack(unit, recs, i)
			break
		}
	}
	if len(keep) == 0 {
		return
	}
	if err := p.sched.Requeue(unit, keep); err != nil {
		panic(fmt.Errorf("pipeline: requeue of %q: %w", unit, err))
	}
}

// holdBack moves the records of held assignments among recs (from index
// first on) to the front of their held lists, and returns the others.
func (p *Pipeline[T]) holdBack(unit string, recs []T, first int) []T {
	keep := append([]T(nil), recs[:first]...)
	moved := map[*assignment[T]][]T{}
	for _, rec := range recs[first:] {
		if a := p.parts[p.it.Epoch(rec)]; a != nil && a.held {
			moved[a] = append(moved[a], rec)
			continue
		}
		keep = append(keep, rec)
	}
	for a, recs := range moved {
		a.waiting = append(recs, a.waiting...)
		p.heldWaiting += len(recs)
	}
	return keep
}

func (p *Pipeline[T]) done(unit string) {
	if err := p.sched.Done(unit); err != nil {
		panic(fmt.Errorf("pipeline: lost track of unit %q: %w", unit, err))
	}
}

// pin keeps a failed record's unit busy while the record waits.
func (p *Pipeline[T]) pin(unit string) {
	if unit != "" {
		p.pinned[unit]++
	}
}

// unpin ends a pin; the unit stays busy (the caller frees it or runs the
// record again).
func (p *Pipeline[T]) unpin(unit string) {
	if unit == "" {
		return
	}
	if p.pinned[unit]--; p.pinned[unit] == 0 {
		delete(p.pinned, unit)
	}
}

// Place is where a record stands in the Pipeline (Find).
type Place int8

// The places of Find.
const (
	Absent  Place = iota // not in the Pipeline (finished, or never added)
	Waiting              // waiting for a runner, or for its unit
	Queued               // in a runner's batch, not started yet
	Running              // claimed by its runner and not finished
	Parked               // failed, waiting for its retry to come due
	Due                  // its retry came due, waiting for a runner (or its partition's Release)
)

func (pl Place) String() string {
	return [...]string{"absent", "waiting", "queued", "running", "parked", "due"}[pl]
}

// Find looks for the record match accepts among those in the Pipeline and
// says where it stands, and for a record in a runner's batch (Running,
// Queued) which runner's. A record in a runner's batch may move on (start,
// finish) as Find reads: the place is what was seen. It costs O(records
// here): for rare events (an operator looking for one record).
func (p *Pipeline[T]) Find(match func(T) bool) (rec T, place Place, runner int) {
	for r, b := range p.batches {
		if b == nil {
			continue
		}
		claimed := int(b.next.Load())
		for i := b.Done(); i < b.limit && i < len(b.records); i++ {
			if rec := b.records[i]; match(rec) {
				if i < claimed {
					return rec, Running, r
				}
				return rec, Queued, r
			}
		}
	}
	rec, place = p.find(match)
	return rec, place, -1
}

// find is Find beyond the runners' batches.
func (p *Pipeline[T]) find(match func(T) bool) (T, Place) {
	var zero T
	for rec := range p.parked {
		if match(rec) {
			return rec, Parked
		}
	}
	due := p.ready
	for _, a := range p.parts {
		due = append(due[:len(due):len(due)], a.ready...)
	}
	for _, rec := range due {
		if match(rec) {
			return rec, Due
		}
	}
	found, place := zero, Absent
	p.sched.Each(func(rec T) bool {
		if match(rec) {
			found, place = rec, Waiting
			return false
		}
		return true
	})
	if place == Absent {
		for _, a := range p.parts {
			for _, rec := range a.waiting {
				if match(rec) {
					return rec, Waiting
				}
			}
		}
	}
	return found, place
}

// RetryDue makes a parked record ready: it runs again alone (it is the
// oldest of its unit, which waited for it), due retries taking turns with
// fresh records when both can run (Dispatch). It
// reports false for a record no longer parked (dropped with its partition).
// The caller dispatches afterwards.
func (p *Pipeline[T]) RetryDue(rec T) bool {
	if _, ok := p.parked[rec]; !ok {
		return false
	}
	delete(p.parked, rec)
	p.unpin(p.it.Unit(rec))
	if a := p.parts[p.it.Epoch(rec)]; a != nil && a.held {
		a.ready = append(a.ready, rec) // its partition is paused: it waits for Release
		return true
	}
	p.ready = append(p.ready, rec)
	return true
}

// DeadLettered completes the records the dead-letter topic acknowledged,
// and lets go of those it failed: they are unfinished, and the tree is
// restarting, so their units stay pinned; but their partitions must not wait
// for them to drain. The caller dispatches afterwards.
func (p *Pipeline[T]) DeadLettered(acked, failed []T) {
	for _, rec := range acked {
		unit := p.it.Unit(rec)
		p.unpin(unit)
		p.done(unit)
		p.release(rec)
	}
	for _, rec := range failed {
		p.release(rec)
	}
	p.out.Flush = true // a revoked partition may be drained now
}

// Revoke drains a revoked partition; it reports false when nothing of it
// ever reached the Pipeline (the caller reports it drained at once). Its
// unstarted records are taken back from the runners and dropped, and it is
// drained (Flush) when none of its records is left: only the running ones
// are waited for. The committed watermark then stays below the dropped
// records, and the finished ones above it are for the next owner to skip
// (turbo records them in the commit's metadata). With finishGaps, the
// unstarted records below the highest offset already started or finished
// still run first, so that the watermark passes every record that finished —
// under key ordering nearly the whole buffer, since a key's records wait
// behind one another while other keys run ahead. The caller dispatches
// afterwards.
func (p *Pipeline[T]) Revoke(epoch uint64, finishGaps bool) bool {
	a := p.parts[epoch]
	if a == nil {
		return false
	}
	p.Release(epoch) // a paused partition drains like any other
	a.revoking = true
	p.revoking[epoch] = struct{}{}
	// Tails first: giveBack must still see the parked records' pins.
	p.stealAll()
	keep := func(T) bool { return false } // every unstarted record is dropped
	if finishGaps {
		// A unit whose record waits for a retry must not run past it: its
		// other records are dropped with the retry (the next owner starts
		// below them).
		blocked := p.parkedUnits(epoch)
		high := p.highestStarted(epoch, a)
		keep = func(r T) bool {
			u := p.it.Unit(r)
			return p.it.Offset(r) <= high && (u == "" || !blocked[u])
		}
	}
	for _, rec := range p.sched.DropIf(func(r T) bool { return p.it.Epoch(r) == epoch && !keep(r) }) {
		p.discard(a, rec)
	}
	p.dropParked(epoch)
	// Drained is reported from Flush, after the completions gathered so far,
	// so the orchestrator marks them done before it finalizes the partition.
	p.out.Flush = true
	return true
}

// highestStarted is the highest offset of the assignment that finished or
// is running now (started, not yet accounted for), -1 if none.
func (p *Pipeline[T]) highestStarted(epoch uint64, a *assignment[T]) int64 {
	high := a.maxDone
	for _, b := range p.batches {
		if b == nil {
			continue
		}
		for _, rec := range b.records[b.seen:b.limit] {
			if p.it.Epoch(rec) == epoch {
				high = max(high, p.it.Offset(rec))
			}
		}
	}
	return high
}

// Drop drops a partition that is someone else's now: its unstarted records
// do not start, and it is drained (Flush) once none of them runs. The caller
// cancels its running ones (Judge reports them Lost). It reports false when
// nothing of it is here. The caller dispatches afterwards.
func (p *Pipeline[T]) Drop(epoch uint64) bool {
	a := p.parts[epoch]
	if a == nil {
		return false
	}
	p.Release(epoch)
	a.revoking, a.dropped = true, true
	p.revoking[epoch] = struct{}{}
	p.stealAll()
	for _, rec := range p.sched.DropIf(func(r T) bool { return p.it.Epoch(r) == epoch }) {
		p.discard(a, rec)
	}
	p.dropParked(epoch)
	p.out.Flush = true
	return true
}

// Halt stops the work after a failure, before the partitions are revoked
// and their watermarks committed: the records that have not started are
// dropped (unfinished, so the watermark stays below them and the next
// generation runs them), retries are given up, and only the records running
// now are waited for. Nothing starts any more.
func (p *Pipeline[T]) Halt() {
	if p.halted {
		return
	}
	p.halted = true
	for epoch := range p.parts {
		p.Release(epoch)
	}
	p.dropWaiting()
	for epoch := range p.parts {
		p.dropParked(epoch)
	}
	p.out.Flush = true
}

// dropWaiting takes back the unstarted records of every batch and drops them
// with every record waiting in the scheduler.
func (p *Pipeline[T]) dropWaiting() {
	p.stealAll()
	for _, rec := range p.sched.DropIf(func(T) bool { return true }) {
		p.discard(p.parts[p.it.Epoch(rec)], rec)
	}
}

// parkedUnits returns the units pinned by an assignment's records waiting for
// a retry.
func (p *Pipeline[T]) parkedUnits(epoch uint64) map[string]bool {
	units := map[string]bool{}
	for rec := range p.parked {
		if u := p.it.Unit(rec); p.it.Epoch(rec) == epoch && u != "" {
			units[u] = true
		}
	}
	for _, rec := range p.ready {
		if u := p.it.Unit(rec); p.it.Epoch(rec) == epoch && u != "" {
			units[u] = true
		}
	}
	return units
}

// dropParked gives up the retries of an assignment's records (its partition
// is going away: the next owner will run them from the watermark).
func (p *Pipeline[T]) dropParked(epoch uint64) {
	for rec := range p.parked {
		if p.it.Epoch(rec) != epoch {
			continue
		}
		delete(p.parked, rec)
		p.out.Unpark = append(p.out.Unpark, rec)
		unit := p.it.Unit(rec)
		p.unpin(unit)
		p.done(unit)
		p.discard(p.parts[epoch], rec)
	}
	for i := 0; i < len(p.ready); i++ {
		if rec := p.ready[i]; p.it.Epoch(rec) == epoch {
			p.done(p.it.Unit(rec))
			p.discard(p.parts[epoch], rec)
			p.ready = append(p.ready[:i], p.ready[i+1:]...)
			i--
		}
	}
}

// Flush hands over what finished since the last Flush, and the partitions
// drained since: revoked or dropped ones none of whose records is left.
func (p *Pipeline[T]) Flush() Report[T] {
	f := p.fin
	p.fin = Report[T]{}
	for epoch := range p.revoking {
		if a := p.parts[epoch]; a.records == 0 {
			delete(p.parts, epoch)
			delete(p.revoking, epoch)
			f.Drained = append(f.Drained, epoch)
		}
	}
	return f
}
