package actors

import (
	"context"
	"fmt"
	"time"
	"unsafe"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/asynkron/protoactor-go/scheduler"
	"github.com/rs/zerolog"
	"github.com/turbokafka/turbo/actors/schedule"
	"github.com/turbokafka/turbo/config"
)

// coordinator is the parallelism coordinator: it owns the buffer of fetched
// records (a schedule.Scheduler, which decides what may run under the
// ordering strategy) and the runners, and hands runnable records to idle
// runners. Any idle runner takes any free key: keys are not pinned to runners.
type coordinator struct {
	ordering config.Ordering
	runners  int
	ctx      context.Context
	handler  Handler
	stats    *Stats
	props    func(actor.Actor, ...actor.PropsOption) *actor.Props
	log      zerolog.Logger
	maxTime  time.Duration // max_handler_time

	sched *schedule.Scheduler[*Record]
	pids  []*actor.PID
	idle  []int                  // runner ids
	parts map[uint64]*assignment // by epoch

	// batches out with the runners (by runner id; nil when idle). A batch is
	// a sequence of runs, each run consecutive records of one unit.
	batches []*runBatch
	timers  *scheduler.TimerScheduler
	check   scheduler.CancelFunc // the armed stealCheck, nil if none

	// Failed records waiting for their retry (parked) or for the dead-letter
	// topic's acknowledgement hold their unit: held counts them per unit, so
	// that nothing frees the unit before they are through.
	policy failurePolicy
	held   map[string]int
	parked map[*Record]scheduler.CancelFunc // the retry timers
	ready  []*Record                        // retries due, run before anything else
	free   []*Record                        // scratch: records whose credit goes back

	inFlight      int  // records in batches out with runners
	stopped       bool // Stopping was received: nothing is in the pipeline any more
	halted        bool // haltRunners was received: nothing starts any more
	finished      recordsFinished
	flushPending  bool
	avgRecordTime float64 // EWMA of a record's handler time, in nanoseconds
}

func newCoordinator(ctx context.Context, spec *treeSpec) *coordinator {
	return &coordinator{
		ordering: spec.consumer.Ordering,
		runners:  spec.consumer.Concurrency,
		ctx:      ctx,
		maxTime:  spec.consumer.MaxHandlerTime,
		handler:  spec.handler,
		stats:    spec.stats,
		props:    spec.props,
		sched:    schedule.New[*Record](),
		parts:    make(map[uint64]*assignment),
		policy:   newFailurePolicy(spec.consumer),
		log:      spec.log,
		held:     make(map[string]int),
		parked:   make(map[*Record]scheduler.CancelFunc),
	}
}

// assignment is what the coordinator knows of one partition assignment.
type assignment struct {
	ctx      context.Context // its records' handlers' context
	cancel   context.CancelFunc
	tp       TopicPartition
	records  int    // its records here: buffered, or out with runners
	maxDone  int64  // highest offset finished, -1 if none
	unit     string // its unit string under partition ordering (and for keyless records)
	revoking bool   // report partitionDrained when records reaches 0
}

func (co *coordinator) assignment(rec *Record) *assignment {
	a := co.parts[rec.epoch]
	if a == nil {
		a = &assignment{tp: rec.TP(), maxDone: -1, unit: "\x00partition\x00" + rec.TP().String()}
		a.ctx, a.cancel = context.WithCancel(co.ctx)
		co.parts[rec.epoch] = a
	}
	return a
}

func (co *coordinator) Receive(c actor.Context) {
	co.receive(c)
	co.publish()
}

// publish shows the pipeline in Stats: runners busy (never more than
// concurrency), and every other record here — waiting, or queued behind the
// running one in a runner's batch — as buffered.
func (co *coordinator) publish() {
	if co.stopped {
		co.stats.inFlight.Store(0)
		co.stats.buffered.Store(0)
		return
	}
	busy := len(co.pids) - len(co.idle)
	co.stats.inFlight.Store(int64(busy))
	co.stats.buffered.Store(int64(co.sched.Waiting() + co.inFlight - busy))
}

func (co *coordinator) receive(c actor.Context) {
	switch m := c.Message().(type) {
	case *scheduleRecords:
		co.handleSchedule(c, m)
	case *ranRecords:
		co.handleRan(c, m)
	case *flushFinished:
		co.flush(c)
	case *stealCheck:
		co.check = nil
		for _, b := range co.batches {
			if b != nil {
				co.harvest(c, b)
				b.aged = true
			}
		}
		co.dispatch(c)
		co.armStealCheck(c)
	case *revokePartition:
		co.handleRevoke(c, m)
	case *retryDue:
		co.handleRetryDue(c, m)
	case *deadLettered:
		co.handleDeadLettered(c, m)
	case *haltRunners:
		co.handleHalt(c)
	case *dropPartition:
		co.handleDrop(c, m)
	case *actor.Started:
		co.timers = scheduler.NewTimerScheduler(c)
	case *actor.Stopping:
		co.stopped = true
		if co.check != nil {
			co.check()
		}
		for _, cancel := range co.parked {
			cancel()
		}
	case *actor.Stopped, *actor.Restarting, *actor.Terminated:
	default:
		unexpected(c)
	}
}

// takeRunner returns an idle runner, spawning one while fewer than
// concurrency exist. Runners are made as work needs them rather than all at
// start: concurrency is a maximum, and 10,000,000 runners made up front
// took 2.8 GB before the first record.
func (co *coordinator) takeRunner(c actor.Context) int {
	if n := len(co.idle); n > 0 {
		id := co.idle[n-1]
		co.idle = co.idle[:n-1]
		return id
	}
	id := len(co.pids)
	r := &runner{id: id, ctx: co.ctx, handler: co.handler, maxTime: co.maxTime, since: co.stats.handlerClock(id)}
	if co.stats.handlerTime != nil {
		r.handlerTime, r.waitTime = co.stats.handlerTime.shard(id), co.stats.waitTime.shard(id)
	}
	co.pids = append(co.pids, c.Spawn(co.props(r)))
	co.batches = append(co.batches, nil)
	return id
}

func (co *coordinator) handleSchedule(c actor.Context, m *scheduleRecords) {
	if len(m.records) == 0 || co.halted {
		return // halted: they would never start (the claims are ending)
	}
	a := co.assignment(m.records[0]) // a batch comes from one assignment
	a.records += len(m.records)
	for _, rec := range m.records {
		rec.unit = co.unit(rec, a)
		rec.ctx = a.ctx
		co.sched.Add(rec.unit, rec)
	}
	co.dispatch(c)
}

// unit names what must not run twice at once under the ordering strategy.
// It is computed once per record and must not allocate per record: a key's
// unit is the key's own bytes (a record's key is never modified after the
// fetch), a partition's unit string is made once per assignment. Two
// different things sharing a unit by accident (a key equal to a partition's
// unit string) would only serialize more, never less.
func (co *coordinator) unit(rec *Record, a *assignment) string {
	switch {
	case co.ordering == config.OrderingUnordered:
		return ""
	case co.ordering == config.OrderingPartition, rec.Key == nil:
		return a.unit // records without a key keep their partition's order
	case len(rec.Key) == 0:
		return emptyKeyUnit
	default:
		return unsafe.String(unsafe.SliceData(rec.Key), len(rec.Key))
	}
}

// emptyKeyUnit is the unit of records whose key is empty but not null (unit
// "" means unordered).
const emptyKeyUnit = "\x00empty-key"

// dispatch gives runnable records to idle runners. When runners are idle and
// nothing else can run, it takes back the records queued behind the current
// one in other runners' batches: a slow record must not hold them.
func (co *coordinator) dispatch(c actor.Context) {
	for (len(co.idle) > 0 || len(co.pids) < co.runners) && !co.halted {
		if len(co.ready) == 0 && !co.sched.Runnable() && !co.stealBatches() {
			break
		}
		id := co.takeRunner(c)
		var batch []*Record
		if len(co.ready) > 0 {
			// A retry runs alone: its unit is already held for it.
			batch = []*Record{co.ready[0]}
			co.ready = co.ready[1:]
		} else {
			// The first run may be long: its records could only run one
			// after the other anyway. More runs join the batch only when
			// handlers are fast enough for batching to pay (batchSize).
			n := batchSize(co.avgRecordTime)
			for max := maxRun; len(batch) < n || max == maxRun; max = n - len(batch) {
				var ok bool
				if _, batch, ok = co.sched.NextRunAppend(batch, max); !ok {
					break
				}
			}
		}
		co.inFlight += len(batch)
		b := newRunBatch(batch)
		co.batches[id] = b
		c.Send(co.pids[id], &runRecords{batch: b})
	}
	co.armStealCheck(c)
}

// stealBatches takes back the unstarted records of the batches out with
// runners since before the last stealCheck, and puts them back in the
// scheduler; it reports whether that made anything runnable. Younger batches
// are left alone: with fast handlers they finish in microseconds, and taking
// them apart would only add hops.
func (co *coordinator) stealBatches() bool {
	for _, b := range co.batches {
		if b != nil && b.aged && len(b.records) > 1 {
			co.giveBack(b, b.steal())
		}
	}
	return co.sched.Runnable()
}

// giveBack returns the records stolen from b's tail to the scheduler. A run
// that was cut (its first records are with the runner) keeps its unit busy:
// the runner's last record of it becomes the run's end, and frees the unit
// when it finishes. A run taken whole frees its unit now.
func (co *coordinator) giveBack(b *runBatch, stolen []*Record) {
	if len(stolen) == 0 {
		return
	}
	cut := len(b.records) - len(stolen)
	b.limit = cut
	for i := 0; i < len(stolen); {
		j := i + 1
		for j < len(stolen) && stolen[j].unit == stolen[i].unit {
			j++
		}
		unit := stolen[i].unit
		if err := co.sched.Requeue(unit, stolen[i:j]); err != nil {
			panic(fmt.Errorf("actors: coordinator requeue of %q: %w", unit, err))
		}
		cutRun := i == 0 && cut > 0 && b.records[cut-1].unit == unit
		if (!cutRun || cut-1 < b.seen) && co.held[unit] == 0 {
			// Nothing of this unit runs any more (or the runner's part of
			// the run was already accounted for without freeing it).
			co.done(unit)
		}
		i = j
	}
	co.inFlight -= len(stolen)
}

// stealAll takes back the unstarted records of every batch out with runners.
func (co *coordinator) stealAll() {
	for _, b := range co.batches {
		if b != nil {
			co.giveBack(b, b.steal())
		}
	}
}

func (co *coordinator) done(unit string) {
	if err := co.sched.Done(unit); err != nil {
		panic(fmt.Errorf("actors: coordinator lost track of unit %q: %w", unit, err))
	}
}

// batchTarget is how long one runner batch should take at most: long enough to
// amortise the two actor hops of a batch (a few microseconds), short enough
// that a batch never holds back parallelism noticeably.
const batchTarget = 200 * time.Microsecond

const maxRunnerBatch = 64

// maxRun bounds the records of one unit (key or partition) given to a runner
// at once.
const maxRun = 256

// batchSize decides how many records one runner gets at a time: as many as
// fit in batchTarget of handler time. Slow handlers get one record each (full
// parallelism); handlers far faster than an actor hop get batches, which is
// what lets the pipeline keep up with a plain consumer. Spreading a few fast
// records thinly over idle runners would cost a hop each and save nothing: a
// whole batch takes at most batchTarget.
func batchSize(avgRecordNanos float64) int {
	if avgRecordNanos <= 0 {
		return 1 // nothing measured yet: assume slow
	}
	return max(1, min(int(float64(batchTarget)/avgRecordNanos), maxRunnerBatch))
}

func (co *coordinator) handleRan(c actor.Context, m *ranRecords) {
	co.harvest(c, m.batch)
	// A runner stops at a failed record: the records it left go back (and
	// are dropped at once when nothing may start any more).
	co.giveBack(m.batch, m.batch.steal())
	if co.halted {
		co.dropWaiting()
		co.scheduleFlush(c)
	}
	co.observe(m.elapsed, m.batch.seen)
	co.batches[m.runner] = nil
	co.idle = append(co.idle, m.runner)
	co.dispatch(c)
}

// harvest accounts for the records of a batch finished since the last look:
// a unit becomes free when the last record of its run finished (unless a
// failed record holds it), and the outcomes go to the orchestrator.
func (co *coordinator) harvest(c actor.Context, b *runBatch) {
	done := int(b.done.Load())
	if done == b.seen {
		return
	}
	co.free = co.free[:0]
	succeeded := 0
	for i := b.seen; i < done; i++ {
		rec, err := b.records[i], b.errs[i]
		v := verdictSkip // a success goes where a skipped failure goes: done
		if err != nil && co.lost(rec) {
			// Cancelled because its partition was taken away: not a failure
			// and not finished. The next owner handles it again.
			if b.runEnd(i) && co.held[rec.unit] == 0 {
				co.done(rec.unit)
			}
			co.release(rec)
			continue
		}
		if err != nil {
			if v = co.failed(c, rec, err); v == verdictRetry || v == verdictDeadLetter {
				continue // held: parked for a retry, or on its way to the dead-letter topic
			}
			if v == verdictEscalate {
				// The tree is about to restart and deliver this record again:
				// nothing of its key may run meanwhile.
				co.hold(rec)
			}
		}
		if b.runEnd(i) && co.held[rec.unit] == 0 {
			co.done(rec.unit)
		}
		co.release(rec)
		if err == nil {
			succeeded++
		}
		if v == verdictEscalate {
			co.finished.failed = append(co.finished.failed, recordFailure{rec: rec, err: err})
		} else {
			co.finished.done = append(co.finished.done, rec)
		}
	}
	co.inFlight -= done - b.seen
	b.seen = done
	co.stats.processed.Add(int64(succeeded))
	returnCredits(co.free)
	co.scheduleFlush(c)
}

// lost reports whether rec's partition was taken from this consumer while
// the tree goes on (an expired revocation cancelled its assignment).
func (co *coordinator) lost(rec *Record) bool {
	a := co.parts[rec.epoch]
	return co.ctx.Err() == nil && a != nil && a.ctx.Err() != nil
}

// release accounts for a record leaving the pipeline.
func (co *coordinator) release(rec *Record) {
	a := co.parts[rec.epoch]
	a.records--
	a.maxDone = max(a.maxDone, rec.Offset)
	co.free = append(co.free, rec)
}

func (co *coordinator) scheduleFlush(c actor.Context) {
	if !co.flushPending {
		co.flushPending = true
		c.Send(c.Self(), &flushFinished{})
	}
}

// observe folds a batch's handler time into the running average.
func (co *coordinator) observe(elapsed time.Duration, n int) {
	if n == 0 {
		return
	}
	per := float64(elapsed) / float64(n)
	if co.avgRecordTime == 0 {
		co.avgRecordTime = per
		return
	}
	co.avgRecordTime = 0.8*co.avgRecordTime + 0.2*per
}

func (co *coordinator) flush(c actor.Context) {
	co.flushPending = false
	if len(co.finished.done) > 0 || len(co.finished.failed) > 0 || len(co.finished.dead) > 0 {
		f := co.finished
		co.finished = recordsFinished{}
		c.Send(c.Parent(), &f)
	}
	for epoch, a := range co.parts {
		if a.revoking && a.records == 0 {
			a.cancel()
			delete(co.parts, epoch)
			c.Send(c.Parent(), &partitionDrained{tp: a.tp, epoch: epoch})
		}
	}
}

// handleRevoke drains a revoked partition. Its unstarted records are taken
// back from the runners; those below the highest offset already started or
// finished still run, so that the watermark committed for the next owner
// passes every record that finished (none of them is handled twice); the
// rest are dropped. The partition is drained when none of its records is
// left here.
func (co *coordinator) handleRevoke(c actor.Context, m *revokePartition) {
	a := co.parts[m.epoch]
	if a == nil { // nothing of it ever reached the coordinator
		c.Send(c.Parent(), &partitionDrained{tp: m.tp, epoch: m.epoch})
		return
	}
	a.revoking = true
	// Tails first: giveBack must still see the parked records' holds.
	co.stealAll()
	// A key whose record waits for a retry must not run past it: its other
	// records are dropped with the retry (the next owner starts below them).
	blocked := co.parkedUnits(m.epoch)
	high := a.maxDone
	for _, b := range co.batches {
		if b == nil {
			continue
		}
		for _, rec := range b.records[b.seen:b.limit] { // started, not yet accounted for
			if rec.epoch == m.epoch {
				high = max(high, rec.Offset)
			}
		}
	}
	dropped := co.sched.DropIf(func(r *Record) bool {
		return r.epoch == m.epoch && (r.Offset > high || (r.unit != "" && blocked[r.unit]))
	})
	a.records -= len(dropped)
	co.dropParked(m.epoch)
	// Drained is reported from flush, after the completions gathered so far,
	// so the orchestrator marks them done before it finalizes the partition.
	co.scheduleFlush(c)
	co.dispatch(c) // stealing may have left runners idle with work to do
}

// handleHalt stops the generation's work after a failure, before its
// partitions are revoked and their watermarks committed: the records that
// have not started are dropped (unfinished, so the watermark stays below
// them and the next generation runs them), retries are given up, and only
// the records running now — whose handlers were cancelled — are waited for.
// Each revoked partition then drains as soon as they return, with every
// record that finished accounted for.
func (co *coordinator) handleHalt(c actor.Context) {
	if co.halted {
		return
	}
	co.halted = true
	co.dropWaiting()
	for epoch := range co.parts {
		co.dropParked(epoch)
	}
	co.scheduleFlush(c)
}

// dropWaiting takes back the unstarted records of every batch and drops
// them with every record waiting in the scheduler.
func (co *coordinator) dropWaiting() {
	co.stealAll()
	for _, rec := range co.sched.DropIf(func(*Record) bool { return true }) {
		co.parts[rec.epoch].records--
	}
}

// stealCheckInterval is how late a batch's tail may be taken back; far above
// a fast batch's length (batchTarget), far below any handler worth waiting for.
const stealCheckInterval = 5 * time.Millisecond

// armStealCheck starts the stealCheck timer while a batch may still have a
// tail to take back or finished records to account for.
func (co *coordinator) armStealCheck(c actor.Context) {
	if co.check != nil {
		return
	}
	for _, b := range co.batches {
		if b != nil && b.pending() {
			co.check = co.timers.SendOnce(stealCheckInterval, c.Self(), &stealCheck{})
			return
		}
	}
}

// returnCredits gives the fetch credits of finished records (one each, and
// their bytes) back to their partitions' gates, one call per run of records
// sharing a gate.
func returnCredits(recs []*Record) {
	for i := 0; i < len(recs); {
		bytes := recs[i].size
		j := i + 1
		for j < len(recs) && recs[j].gate == recs[i].gate {
			bytes += recs[j].size
			j++
		}
		if g := recs[i].gate; g != nil {
			g.give(j-i, bytes)
		}
		i = j
	}
}

// handleDrop drops a partition that is someone else's now (its revocation
// expired, or its session was lost): its unstarted records do not start,
// its running ones are cancelled (harvest counts them as lost, not failed),
// and it is reported drained once none of them runs — which ends the offset
// controller's tracking of it; the proxy no longer commits it.
func (co *coordinator) handleDrop(c actor.Context, m *dropPartition) {
	a := co.parts[m.epoch]
	if a == nil { // nothing of it here (or drained already)
		c.Send(c.Parent(), &partitionDrained{tp: m.tp, epoch: m.epoch})
		return
	}
	a.revoking = true
	co.stealAll()
	a.cancel()
	dropped := co.sched.DropIf(func(r *Record) bool { return r.epoch == m.epoch })
	a.records -= len(dropped)
	co.dropParked(m.epoch)
	co.scheduleFlush(c)
	co.dispatch(c)
}
