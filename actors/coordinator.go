package actors

import (
	"context"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/asynkron/protoactor-go/scheduler"
	"github.com/rs/zerolog"
	"github.com/turbokafka/turbo/actors/adaptive"
	"github.com/turbokafka/turbo/actors/pipeline"
	"github.com/turbokafka/turbo/config"
	"golang.org/x/time/rate"
)

// coordinator is the parallelism coordinator: it owns the buffer of fetched
// records and the runners, and hands runnable records to idle runners. Any
// idle runner takes any free key: keys are not bound to runners.
//
// The bookkeeping — which record runs where, which unit is busy or pinned,
// when a partition is drained — is a pipeline.Pipeline; the coordinator is
// its adapter: it translates messages into calls on it, and what the calls
// leave in its Out into sends, spawns, credits and timers.
type coordinator struct {
	pausesSeen uint64 // consumerStats.pausesChanged when the holds were last synced
	tunesSeen  uint64 // consumerStats.tunesChanged when the tuning was last applied
	// The configuration's concurrency and rate limiter, which a retune
	// replaces while it holds (SetConcurrency, SetRate).
	fileRunners int
	fileLimit   *rate.Limiter
	ordering    config.Ordering
	ctx         context.Context
	handler     Handler
	stats       *consumerStats
	props       func(actor.Actor, ...actor.PropsOption) *actor.Props
	log         zerolog.Logger
	maxTime     time.Duration // max_handler_time
	outputs     *outputRules  // the runners' output rules; nil: no outputs
	runners     int           // concurrency
	metaOn      bool          // commits record what finished above the watermark (commit_metadata_bytes > 0)
	limit       *rate.Limiter // rate.limit; nil: none
	batch       BatchHandler  // nil: one record per handler call
	fill        int           // batch.max_records
	fillWait    time.Duration // batch.max_wait
	maxBytes    int64         // batch.max_bytes
	// adapt is the adaptive concurrency limit (concurrency_mode adaptive),
	// nil when concurrency is fixed; backoffUntil is when dispatch may go
	// on after a Retry-After it honoured (at most retry.max_backoff away).
	adapt        *adaptive.Limiter
	backoffUntil time.Time
	maxBackoff   time.Duration

	p      *pipeline.Pipeline[*envelope]
	pids   []*actor.PID           // by runner id
	runs   []*runner              // by runner id: Skip cancels a call through them
	parts  map[uint64]*assignment // by epoch
	timers *scheduler.TimerScheduler
	check  scheduler.CancelFunc // the armed stealCheck, nil if none
	turn   scheduler.CancelFunc // the armed rateTurn, nil if none
	filler scheduler.CancelFunc // the armed fillTurn, nil if none
	// holdSince is when dispatch began holding records back for a batch to
	// fill (batch.max_wait); zero when it is not. wake is when a hold ends
	// (max_wait, or a Retry-After in adaptive mode): the fillTurn fires then.
	holdSince time.Time
	wake      time.Time

	policy failurePolicy
	parked map[*envelope]scheduler.CancelFunc // the retry timers of parked records

	stopped       bool // Stopping was received: nothing is in the pipeline any more
	dispatched    bool // this message dispatched: arm the stealCheck if a batch needs it
	flushPending  bool
	avgRecordTime float64 // EWMA of a record's handler time, in nanoseconds
}

func newCoordinator(ctx context.Context, spec *treeSpec) *coordinator {
	co := &coordinator{
		ordering:    spec.consumer.Ordering,
		runners:     spec.consumer.Concurrency,
		ctx:         ctx,
		maxTime:     spec.consumer.MaxHandlerTime,
		outputs:     newOutputRules(spec.consumer.Output),
		limit:       spec.limit,
		fileLimit:   spec.limit,
		fileRunners: spec.consumer.Concurrency,
		handler:     spec.handler,
		batch:       spec.batch,
		fill:        spec.consumer.Batch.Records(),
		fillWait:    spec.consumer.Batch.MaxWait,
		maxBytes:    int64(spec.consumer.Batch.MaxBytes),
		maxBackoff:  spec.consumer.Retry.MaxBackoff,
		stats:       spec.stats,
		props:       spec.props,
		parts:       make(map[uint64]*assignment),
		policy:      newFailurePolicy(spec.consumer),
		metaOn:      spec.consumer.CommitMetadataBytes > 0,
		log:         spec.log,
		parked:      make(map[*envelope]scheduler.CancelFunc),
	}
	co.stats.limit.Store(int64(co.runners))
	if spec.consumer.Adaptive() {
		co.adapt = adaptive.New(spec.consumer.MinConcurrency(), co.runners)
		co.stats.limit.Store(int64(co.adapt.Limit()))
	}
	if co.batch != nil {
		// A runner's batch is one handler call's worth (or less: max_bytes
		// may cut it, and the rest stays the runner's or is taken back).
		co.p = pipeline.New[*envelope](recordItem{co}, co.runners, co.fill)
		co.p.SetBatchSize(co.fill)
	} else {
		co.p = pipeline.New[*envelope](recordItem{co}, co.runners, maxRun)
	}
	if co.adapt != nil {
		co.p.SetLimit(co.adapt.Limit())
	}
	co.retune() // a retune made before this generation holds in it too
	return co
}

// retune applies SetConcurrency and SetRate: the tuning as it stands, over
// the configuration's values.
func (co *coordinator) retune() {
	co.tunesSeen = co.stats.tunesChanged.Load()
	t := co.stats.tuning()
	co.runners = co.fileRunners
	if t.concurrency > 0 {
		co.runners = t.concurrency
	}
	co.p.SetMax(co.runners)
	if co.adapt != nil {
		co.adapt.SetMax(co.runners)
		co.p.SetLimit(co.adapt.Limit())
		co.stats.limit.Store(int64(co.adapt.Limit()))
	} else {
		co.stats.limit.Store(int64(co.runners))
	}
	co.limit = co.fileLimit
	if t.rate != nil {
		co.limit = nil
		if perSecond, burst, ok := t.rate.Bucket(); ok {
			co.limit = rate.NewLimiter(rate.Limit(perSecond), burst)
		}
	}
}

// assignment is what the coordinator itself keeps of one partition
// assignment (the pipeline keeps its record counts).
type assignment struct {
	ctx    context.Context // its records' handlers' context
	cancel context.CancelFunc
	tp     TopicPartition
	unit   string // its unit string under partition ordering (and for keyless records)
}

func (co *coordinator) assignment(rec *envelope) *assignment {
	a := co.parts[rec.epoch]
	if a == nil {
		a = &assignment{tp: rec.TP(), unit: "\x00partition\x00" + rec.TP().String()}
		a.ctx, a.cancel = context.WithCancel(co.ctx)
		co.parts[rec.epoch] = a
	}
	return a
}

func (co *coordinator) Receive(c actor.Context) {
	co.receive(c)
	co.apply(c)
	co.publish()
}

// publish shows the runners busy in Stats (never more than concurrency).
// What is buffered is counted per partition, by the gates (gate.piped), so
// that the partitions' figures add up to the consumer's.
func (co *coordinator) publish() {
	if co.stopped {
		co.stats.inFlight.Store(0)
		return
	}
	co.stats.inFlight.Store(int64(co.p.Busy()))
}

func (co *coordinator) receive(c actor.Context) {
	switch m := c.Message().(type) {
	case *scheduleRecords:
		co.handleSchedule(m)
	case *ranRecords:
		busy := co.p.Busy()
		co.observe(m.elapsed, co.p.Ran(m.runner))
		co.adjust(m, busy)
		co.dispatch()
	case *flushFinished:
		co.flush(c)
	case *stealCheck:
		co.check = nil
		co.p.Age()
		co.dispatch()
	case *rateTurn:
		co.turn = nil
		co.dispatch()
	case *fillTurn:
		co.filler = nil
		co.dispatch()
	case *controlChanged:
		co.dispatch() // which syncs the holds first
	case *skipRecord:
		m.reply <- co.skip(m.tp, m.offset)

	case *revokePartition:
		co.handleRevoke(c, m)
	case *retryDue:
		if co.p.RetryDue(m.rec) {
			delete(co.parked, m.rec)
			co.dispatch()
		}
	case *deadLettered:
		co.p.DeadLettered(m.records, m.failed)
		co.dispatch()
	case *haltRunners:
		co.p.Halt()
	case *dropPartition:
		co.handleDrop(c, m)
	case *actor.Started:
		co.timers = scheduler.NewTimerScheduler(c)
	case *actor.Stopping:
		co.stopped = true
		if co.check != nil {
			co.check()
		}
		if co.turn != nil {
			co.turn()
		}
		if co.filler != nil {
			co.filler()
		}
		for _, cancel := range co.parked {
			cancel()
		}
	case *actor.Stopped, *actor.Restarting, *actor.Terminated:
	default:
		unexpected(c)
	}
}

// apply does what the pipeline asked for: batches to runners (spawning
// them), credits back to the gates, retry timers armed and cancelled, a
// flush of what finished, and the stealCheck while a batch may need it.
func (co *coordinator) apply(c actor.Context) {
	out := co.p.Out()
	for _, r := range out.Runs {
		if r.Spawn {
			co.spawn(c, r.Runner)
		}
		c.Send(co.pids[r.Runner], &runRecords{batch: r.Batch})
	}
	returnCredits(out.Free)
	forgetDropped(out.Dropped)
	if out.Succeeded > 0 {
		co.stats.processed.Add(int64(out.Succeeded))
	}
	for _, f := range out.Park {
		co.park(c, f.Rec, f.Err)
	}
	for _, rec := range out.Unpark {
		if cancel := co.parked[rec]; cancel != nil {
			cancel()
		}
		delete(co.parked, rec)
	}
	if out.Flush {
		co.scheduleFlush(c)
	}
	co.p.Reset()
	if co.dispatched {
		co.dispatched = false
		co.armStealCheck(c)
		co.armRateTurn(c)
		co.armFillTurn(c)
	}
}

// dispatch gives runnable records to idle runners (pipeline.Dispatch),
// within the rate limit's tokens, and none while the consumer is paused;
// apply sends the batches and arms the stealCheck, and the rateTurn when
// the limit held records back.
func (co *coordinator) dispatch() {
	co.dispatched = true
	// A partition paused since the last dispatch is held before anything
	// starts, even when the controlChanged message is still on its way: once
	// Consumer.Pause(tps...) has returned, none of their records starts —
	// a retry coming due included.
	if v := co.stats.pausesChanged.Load(); v != co.pausesSeen {
		co.pausesSeen = v
		co.syncHolds()
	}
	if co.stats.tunesChanged.Load() != co.tunesSeen {
		co.retune()
	}
	switch {
	case co.stats.suspended.Load():
		co.p.SetQuota(0) // Resume sends controlChanged: dispatch again then
		return
	case (co.fillWait > 0 || co.adapt != nil) && co.holding(time.Now()): // no clock read otherwise
		co.p.SetQuota(0) // the fillTurn dispatches when the hold is up
		return
	case co.limit == nil:
		co.p.SetQuota(-1)
		co.p.Dispatch()
		return
	}
	// A token per record given out, a retry too: a record given out
	// starts at once unless a slow record ahead of it in its batch holds
	// it (then it may be taken back, its token spent).
	now := time.Now()
	tokens := int(co.limit.TokensAt(now))
	co.p.SetQuota(tokens)
	co.p.Dispatch()
	if used := tokens - co.p.Quota(); used > 0 {
		co.limit.AllowN(now, used)
	}
}

// armRateTurn starts the rateTurn timer when the rate limit alone holds
// records back: it fires when the next token is due.
func (co *coordinator) armRateTurn(c actor.Context) {
	if co.limit == nil || co.turn != nil || co.stopped || co.stats.suspended.Load() || !co.p.Starved() {
		return
	}
	now := time.Now()
	wait := max(time.Duration((1-co.limit.TokensAt(now))/float64(co.limit.Limit())*float64(time.Second)), minRateTurn)
	co.stats.rateWait.Add(int64(wait))
	co.turn = co.timers.SendOnce(wait, c.Self(), &rateTurn{})
}

// syncHolds holds the assignments of paused partitions (Consumer.Pause(tps))
// and releases the others'.
func (co *coordinator) syncHolds() {
	for epoch, a := range co.parts {
		switch paused := co.stats.partitionPaused(a.tp); {
		case paused && !co.p.Held(epoch):
			co.p.Hold(epoch)
		case !paused && co.p.Held(epoch):
			co.p.Release(epoch)
		}
	}
}

// holding reports whether dispatch holds records back for a batch to fill
// (batch.max_wait): fewer than max_records wait, and they have not waited
// max_wait yet. A retry that is due is not held: it runs alone anyway.
func (co *coordinator) holding(now time.Time) bool {
	co.wake = time.Time{}
	if now.Before(co.backoffUntil) && !co.p.Halted() {
		co.wake = co.backoffUntil // the downstream asked for a pause (Retry-After)
		return true
	}
	if co.fillWait == 0 || co.p.Halted() || co.p.Retries() > 0 {
		co.holdSince = time.Time{}
		return false
	}
	if n := co.p.Waiting(); n == 0 || n >= co.fill {
		co.holdSince = time.Time{}
		return false
	}
	if co.holdSince.IsZero() {
		co.holdSince = now
	}
	if now.Sub(co.holdSince) < co.fillWait {
		co.wake = co.holdSince.Add(co.fillWait)
		return true
	}
	co.holdSince = time.Time{} // what waited goes; the next ones wait anew
	return false
}

// armFillTurn starts the fillTurn timer while dispatch holds records back
// (holding): it fires when the hold is up.
func (co *coordinator) armFillTurn(c actor.Context) {
	if co.wake.IsZero() || co.filler != nil || co.stopped {
		return
	}
	wait := max(time.Until(co.wake), minRateTurn)
	co.filler = co.timers.SendOnce(wait, c.Self(), &fillTurn{})
}

// adjust feeds a runner's turn to the adaptive limit (concurrency_mode
// adaptive): its latency per call, and whether the downstream pushed back
// while busy runners were out; a Retry-After holds dispatch that long (at
// most retry.max_backoff).
func (co *coordinator) adjust(m *ranRecords, busy int) {
	if m.pushback {
		co.stats.pushbacks.Add(1)
	}
	if co.adapt == nil || m.calls == 0 {
		return
	}
	sig := adaptive.Done
	if m.pushback {
		sig = adaptive.Pushback
	}
	co.adapt.Observe(m.began, m.began.Add(m.elapsed/time.Duration(m.calls)), sig, busy)
	co.p.SetLimit(co.adapt.Limit())
	co.stats.limit.Store(int64(co.adapt.Limit()))
	if m.retryAfter > 0 {
		if until := time.Now().Add(min(m.retryAfter, co.maxBackoff)); until.After(co.backoffUntil) {
			co.backoffUntil = until
		}
	}
}

// minRateTurn bounds how often the rateTurn fires: at a high limit a token
// is due every few microseconds, and a turn gives out what came meanwhile.
const minRateTurn = time.Millisecond

// spawn makes runner id. Runners are made as work needs them rather than all
// at start: concurrency is a maximum, and 10,000,000 runners made up front
// took 2.8 GB before the first record.
func (co *coordinator) spawn(c actor.Context, id int) {
	r := &runner{id: id, ctx: co.ctx, handler: co.handler, maxTime: co.maxTime, outputs: co.outputs, since: co.stats.handlerClock(id),
		held: &co.stats.suspended, batch: co.batch, maxRecords: co.fill, maxBytes: co.maxBytes}
	if co.stats.handlerTime != nil {
		r.handlerTime, r.waitTime = co.stats.handlerTime.shard(id), co.stats.waitTime.shard(id)
	}
	co.pids = append(co.pids, c.Spawn(co.props(r)))
	co.runs = append(co.runs, r)
}

func (co *coordinator) handleSchedule(m *scheduleRecords) {
	if len(m.records) == 0 || co.p.Halted() {
		return // halted: they would never start (the claims are ending)
	}
	a := co.assignment(m.records[0]) // a batch comes from one assignment
	for _, rec := range m.records {
		rec.unit = co.unit(rec, a)
		rec.ctx = a.ctx
	}
	co.p.Add(m.records[0].epoch, m.records)
	if co.stats.partitionPaused(a.tp) {
		co.p.Hold(m.records[0].epoch) // paused (Consumer.Pause(tp)) before these came
	}
	co.dispatch()
}

// unit names what must not run twice at once under the ordering strategy.
// It is computed once per record and must not allocate per record: a key's
// unit is the record's private copy of its key (the claim's keyArena put it
// there, out of the handler's reach), a partition's unit string is made once
// per assignment. Two different things sharing a unit by accident (a key
// equal to a partition's unit string) would only serialize more, never less.
func (co *coordinator) unit(rec *envelope, a *assignment) string {
	switch {
	case co.ordering == config.OrderingUnordered:
		return ""
	case co.ordering == config.OrderingPartition, rec.Key == nil:
		return a.unit // records without a key keep their partition's order
	case len(rec.Key) == 0:
		return emptyKeyUnit
	default:
		return rec.unit // the private copy of the key (keyArena)
	}
}

// emptyKeyUnit is the unit of records whose key is empty but not null (unit
// "" means unordered).
const emptyKeyUnit = "\x00empty-key"

// recordItem tells the pipeline about records, and judges their failures.
type recordItem struct{ co *coordinator }

func (recordItem) Unit(r *envelope) string  { return r.unit }
func (recordItem) Epoch(r *envelope) uint64 { return r.epoch }
func (recordItem) Offset(r *envelope) int64 { return r.Offset }
func (it recordItem) Judge(r *envelope, err error) pipeline.Verdict {
	if it.co.lost(r) {
		// Cancelled because its partition was taken away: not a failure
		// and not finished. The next owner handles it again.
		return pipeline.Lost
	}
	return it.co.failed(r, err)
}

// lost reports whether rec's partition was taken from this consumer while
// the tree goes on (an expired revocation cancelled its assignment).
func (co *coordinator) lost(rec *envelope) bool {
	a := co.parts[rec.epoch]
	return co.ctx.Err() == nil && a != nil && a.ctx.Err() != nil
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

// observe folds a batch's handler time into the running average, which sizes
// the next batches.
func (co *coordinator) observe(elapsed time.Duration, n int) {
	if n == 0 || co.batch != nil { // batches are max_records, whatever the time
		return
	}
	per := float64(elapsed) / float64(n)
	if co.avgRecordTime == 0 {
		co.avgRecordTime = per
	} else {
		co.avgRecordTime = 0.8*co.avgRecordTime + 0.2*per
	}
	co.p.SetBatchSize(batchSize(co.avgRecordTime))
}

func (co *coordinator) scheduleFlush(c actor.Context) {
	if !co.flushPending {
		co.flushPending = true
		c.Send(c.Self(), &flushFinished{})
	}
}

// flush sends the completions gathered so far, then the partitions drained
// (so the orchestrator marks the completions done before it finalizes a
// partition).
func (co *coordinator) flush(c actor.Context) {
	co.flushPending = false
	r := co.p.Flush()
	if len(r.Done) > 0 || len(r.Failed) > 0 || len(r.Dead) > 0 {
		c.Send(c.Parent(), &recordsFinished{done: r.Done, failed: failures(r.Failed), dead: failures(r.Dead)})
	}
	for _, epoch := range r.Drained {
		a := co.parts[epoch]
		a.cancel()
		delete(co.parts, epoch)
		c.Send(c.Parent(), &partitionDrained{tp: a.tp, epoch: epoch})
	}
}

// failures converts the pipeline's failures for the orchestrator.
func failures(fs []pipeline.Failure[*envelope]) []recordFailure {
	if len(fs) == 0 {
		return nil
	}
	out := make([]recordFailure, len(fs))
	for i, f := range fs {
		out[i] = recordFailure{rec: f.Rec, err: f.Err}
	}
	return out
}

// handleRevoke drains a revoked partition (pipeline.Revoke says how); it is
// reported drained from flush. A rebalance waits only for the running
// records: the final commit's metadata lists what finished above the
// watermark, and the next owner skips it. A member that is leaving, or
// whose commits carry no metadata, first runs the records below the highest
// one started, so the committed offset passes every record that finished.
func (co *coordinator) handleRevoke(c actor.Context, m *revokePartition) {
	if !co.p.Revoke(m.epoch, m.leaving || !co.metaOn) { // nothing of it ever reached the coordinator
		co.drainedNow(c, m.tp, m.epoch)
		return
	}
	co.dispatch() // stealing may have left runners idle with work to do
}

// handleDrop drops a partition that is someone else's now (its revocation
// expired, or its session was lost): its unstarted records do not start,
// its running ones are cancelled (Judge counts them as lost, not failed),
// and it is reported drained once none of them runs — which ends the offset
// controller's tracking of it; the proxy no longer commits it.
func (co *coordinator) handleDrop(c actor.Context, m *dropPartition) {
	if !co.p.Drop(m.epoch) { // nothing of it here (or drained already)
		co.drainedNow(c, m.tp, m.epoch)
		return
	}
	co.parts[m.epoch].cancel()
	co.dispatch()
}

// drainedNow reports a partition the pipeline does not know as drained. An
// assignment the coordinator made but the pipeline never counted (its
// records came after Halt) goes with it.
func (co *coordinator) drainedNow(c actor.Context, tp TopicPartition, epoch uint64) {
	if a := co.parts[epoch]; a != nil {
		a.cancel()
		delete(co.parts, epoch)
	}
	c.Send(c.Parent(), &partitionDrained{tp: tp, epoch: epoch})
}

// stealCheckInterval is how late a batch's tail may be taken back; far above
// a fast batch's length (batchTarget), far below any handler worth waiting for.
const stealCheckInterval = 5 * time.Millisecond

// armStealCheck starts the stealCheck timer while a batch may still have a
// tail to take back or finished records to account for.
func (co *coordinator) armStealCheck(c actor.Context) {
	if co.check == nil && !co.stopped && co.p.Pending() {
		co.check = co.timers.SendOnce(stealCheckInterval, c.Self(), &stealCheck{})
	}
}

// forgetDropped tells their partitions' gates of records dropped unfinished
// (a revocation, a loss, the halt): they are no longer in the pipeline, but
// their credits stay taken (nothing more of the partition is to be read),
// as pipeline.Out.Dropped says. One call per run of records sharing a gate.
func forgetDropped(recs []*envelope) {
	for i := 0; i < len(recs); {
		j := i + 1
		for j < len(recs) && recs[j].gate == recs[i].gate {
			j++
		}
		if g := recs[i].gate; g != nil {
			g.discard(j - i)
		}
		i = j
	}
}

// returnCredits gives the fetch credits of finished records (one each, and
// their bytes) back to their partitions' gates, one call per run of records
// sharing a gate. A record with outputs keeps its credit until they are
// written (the orchestrator's releaseCredits): outputs in flight count
// against max_buffered like the records they belong to.
func returnCredits(recs []*envelope) { releaseCredits(recs, true) }

// releaseCredits is returnCredits, for every record unless keepOutputs
// (then those with outputs keep their credits).
func releaseCredits(recs []*envelope, keepOutputs bool) {
	for i := 0; i < len(recs); {
		g := recs[i].gate
		var n int
		var bytes int64
		j := i
		for ; j < len(recs) && recs[j].gate == g; j++ {
			if keepOutputs && len(recs[j].outputs) > 0 {
				continue
			}
			n++
			bytes += recs[j].size
		}
		if g != nil && n > 0 {
			g.release(n, bytes)
		}
		i = j
	}
}
