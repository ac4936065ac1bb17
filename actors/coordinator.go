package actors

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/asynkron/protoactor-go/scheduler"
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

	sched   *schedule.Scheduler[*Record]
	pids    []*actor.PID
	idle    []int // runner ids
	running map[TopicPartition]int

	// batches out with the runners, and records taken back from them:
	// those are already running as far as the scheduler is concerned (their
	// units are busy) and go out first.
	batches []*runBatch // by runner id; nil when idle
	stolen  []*Record
	timers  *scheduler.TimerScheduler
	check   scheduler.CancelFunc // the armed stealCheck, nil if none

	// revoking partitions wait for their running records before they are
	// reported drained.
	revoking map[TopicPartition]uint64

	finished      recordsFinished
	flushPending  bool
	avgRecordTime float64 // EWMA of a record's handler time, in nanoseconds
}

func newCoordinator(ctx context.Context, spec *treeSpec) *coordinator {
	return &coordinator{
		ordering: spec.consumer.Ordering,
		runners:  spec.consumer.Concurrency,
		ctx:      ctx,
		handler:  spec.handler,
		stats:    spec.stats,
		props:    spec.props,
		sched:    schedule.New[*Record](),
		running:  make(map[TopicPartition]int),
		revoking: make(map[TopicPartition]uint64),
	}
}

func (co *coordinator) Receive(c actor.Context) {
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
			}
		}
		co.dispatch(c)
		co.armStealCheck(c)
	case *revokePartition:
		co.handleRevoke(c, m)
	case *actor.Started:
		co.timers = scheduler.NewTimerScheduler(c)
		co.spawnRunners(c)
	case *actor.Stopping:
		if co.check != nil {
			co.check()
		}
		co.stats.buffered.Add(-int64(co.sched.Waiting()))
		co.stats.inFlight.Add(-int64(co.inFlight()))
	case *actor.Stopped, *actor.Restarting, *actor.Terminated:
	default:
		unexpected(c)
	}
}

func (co *coordinator) spawnRunners(c actor.Context) {
	co.pids = make([]*actor.PID, co.runners)
	co.batches = make([]*runBatch, co.runners)
	for i := range co.runners {
		r := &runner{id: i, ctx: co.ctx, handler: co.handler}
		co.pids[i] = c.Spawn(co.props(r))
		co.idle = append(co.idle, i)
	}
}

func (co *coordinator) handleSchedule(c actor.Context, m *scheduleRecords) {
	for _, rec := range m.records {
		co.sched.Add(co.unit(rec), rec)
	}
	co.stats.buffered.Add(int64(len(m.records)))
	co.dispatch(c)
}

// unit names what must not run twice at once under the ordering strategy.
func (co *coordinator) unit(rec *Record) string {
	switch co.ordering {
	case config.OrderingUnordered:
		return ""
	case config.OrderingPartition:
		return partitionUnit(rec)
	default: // key
		if rec.Key == nil {
			return partitionUnit(rec) // records without a key keep their partition's order
		}
		return "k" + string(rec.Key)
	}
}

func partitionUnit(rec *Record) string {
	return "p" + rec.Topic + "/" + strconv.FormatInt(int64(rec.Partition), 10)
}

// dispatch gives runnable records to idle runners. When runners are idle and
// nothing else can run, it takes back the records queued behind the current
// one in other runners' batches: a slow record must not hold them.
func (co *coordinator) dispatch(c actor.Context) {
	for len(co.idle) > 0 {
		if len(co.stolen) == 0 && !co.sched.Runnable() && !co.stealBatches() {
			return
		}
		id := co.idle[len(co.idle)-1]
		co.idle = co.idle[:len(co.idle)-1]
		n := batchSize(co.avgRecordTime, co.sched.Waiting()+len(co.stolen), co.runners)
		batch := make([]*Record, 0, n)
		for len(batch) < n && len(co.stolen) > 0 {
			batch = append(batch, co.stolen[0])
			co.stolen = co.stolen[1:]
		}
		for len(batch) < n {
			_, rec, ok := co.sched.Next()
			if !ok {
				break
			}
			co.running[rec.TP()]++
			co.stats.buffered.Add(-1)
			co.stats.inFlight.Add(1)
			batch = append(batch, rec)
		}
		b := newRunBatch(batch)
		co.batches[id] = b
		c.Send(co.pids[id], &runRecords{batch: b})
	}
	co.armStealCheck(c)
}

// stealCheckInterval is how late a batch's tail may be taken back; far above
// a fast batch's length (batchTarget), far below any handler worth waiting for.
const stealCheckInterval = 5 * time.Millisecond

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

// stealBatches takes back the unstarted records of the batches out with
// runners; it reports whether it got any.
func (co *coordinator) stealBatches() bool {
	for _, b := range co.batches {
		if b != nil && len(b.records) > 1 {
			co.stolen = append(co.stolen, b.steal()...)
		}
	}
	return len(co.stolen) > 0
}

// batchTarget is how long one runner batch should take at most: long enough to
// amortise the two actor hops of a batch (a few microseconds), short enough
// that a batch never holds back parallelism noticeably.
const batchTarget = 200 * time.Microsecond

const maxRunnerBatch = 64

// batchSize decides how many records one runner gets at a time. Slow handlers
// get one record each (full parallelism); handlers far faster than an actor
// hop get batches, which is what lets the pipeline keep up with a plain
// consumer. A batch never takes more than a fair share of what is waiting.
func batchSize(avgRecordNanos float64, waiting, runners int) int {
	if avgRecordNanos <= 0 {
		return 1 // nothing measured yet: assume slow
	}
	n := int(float64(batchTarget) / avgRecordNanos)
	n = min(n, maxRunnerBatch, waiting/max(runners, 1))
	return max(n, 1)
}

func (co *coordinator) handleRan(c actor.Context, m *ranRecords) {
	co.harvest(c, m.batch)
	co.observe(m.elapsed, m.batch.seen)
	co.batches[m.runner] = nil
	co.idle = append(co.idle, m.runner)
	co.dispatch(c)
}

// harvest accounts for the records of a batch finished since the last look:
// their units become free and their outcomes go to the orchestrator.
func (co *coordinator) harvest(c actor.Context, b *runBatch) {
	done := int(b.done.Load())
	if done == b.seen {
		return
	}
	for i := b.seen; i < done; i++ {
		rec := b.records[i]
		if err := co.sched.Done(co.unit(rec)); err != nil {
			panic(fmt.Errorf("actors: coordinator lost track of %s@%d: %w", rec.TP(), rec.Offset, err))
		}
		tp := rec.TP()
		if co.running[tp]--; co.running[tp] == 0 {
			delete(co.running, tp)
		}
		if err := b.errs[i]; err != nil {
			co.finished.failed = append(co.finished.failed, recordFailure{rec: rec, err: err})
		} else {
			co.finished.done = append(co.finished.done, rec)
		}
	}
	co.stats.inFlight.Add(-int64(done - b.seen))
	b.seen = done
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
	if len(co.finished.done) > 0 || len(co.finished.failed) > 0 {
		f := co.finished
		co.finished = recordsFinished{}
		c.Send(c.Parent(), &f)
	}
	for tp, epoch := range co.revoking {
		if co.running[tp] == 0 {
			delete(co.revoking, tp)
			c.Send(c.Parent(), &partitionDrained{tp: tp, epoch: epoch})
		}
	}
}

func (co *coordinator) handleRevoke(c actor.Context, m *revokePartition) {
	dropped := co.sched.DropIf(func(r *Record) bool { return r.Topic == m.tp.Topic && r.Partition == m.tp.Partition })
	co.stats.buffered.Add(-int64(len(dropped)))
	co.revoking[m.tp] = m.epoch
	// Drained is reported from flush, after the completions gathered so far,
	// so the orchestrator marks them done before it finalizes the partition.
	if !co.flushPending {
		co.flushPending = true
		c.Send(c.Self(), &flushFinished{})
	}
}

func (co *coordinator) inFlight() int {
	n := 0
	for _, v := range co.running {
		n += v
	}
	return n
}
