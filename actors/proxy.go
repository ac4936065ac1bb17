package actors

import (
	"fmt"
	"math/bits"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/asynkron/protoactor-go/scheduler"
	"github.com/rs/zerolog"
)

// clientProxy is the only actor that talks to Kafka. It owns the consumer
// group (through its kafkaSide: kafkaGroup for sarama), forwards fetched
// records to the orchestrator, shares the fetch budget among the partitions
// it holds, marks and commits the watermarks it is given (batched), and turns
// revocations into a handshake with the rest of the tree.
type clientProxy struct {
	group           kafkaSide
	budget          int        // records allowed in the pipeline: concurrency + the read-ahead
	readAhead       *readAhead // sizes budget to the work, within max_buffered
	budgetBytes     int64      // their bytes allowed: max_buffered_bytes
	pool            creditPool // the budgets less the gates' floors: lent to partitions with records
	floor           int        // each gate's own credits (resizeGates)
	floorBytes      int64
	fresh           []*gate // gates of claims started since the last resizeGates: no credits yet
	revokeTimeout   time.Duration
	shutdownTimeout time.Duration
	refreshEvery    time.Duration // the high watermark refresh (refreshInterval)
	stats           *consumerStats
	log             zerolog.Logger
	exactlyOnce     bool // output.exactly_once: commits go with their outputs (transact)

	sess     groupSession
	parts    map[TopicPartition]*ownedPartition
	lag      int64                     // the sum of parts' lag (relag keeps it, one partition at a time)
	lost     map[TopicPartition]uint64 // lost partitions (their epoch) whose final watermark is still to come
	stopping bool
	stopped  bool // the group's goroutine has ended (groupStopped arrived)

	refresh        scheduler.CancelFunc // the armed refreshTick, nil if none
	resharing      bool                 // a reshareBudget is on its way (reshare)
	sizing         scheduler.CancelFunc // the armed readAheadTick, nil if none
	refreshFailing bool                 // the last refresh failed (logged once per streak)

	seek  *seeking                 // the seek under way (Seek), nil if none
	seeks map[TopicPartition]int64 // partitions moved: their final commit (seekFinal)
}

type ownedPartition struct {
	epoch     uint64
	gate      *gate
	committed int64 // latest offset marked, -1 if none
	start     int64 // offset of the first record fetched, -1 before: where progress is counted from
	initial   int64 // the group's committed offset when the claim began, -1 if none
	meta      string
	hwm       int64     // the high watermark as last known (a batch, or a refresh), -1 before
	lag       int64     // what relag last counted (partLag)
	fetchedAt time.Time // when its last batch arrived, zero before the first
	ending    chan<- finalCommit
	revokedAt time.Time            // when the revocation in progress began
	timeout   scheduler.CancelFunc // of the revocation in progress
}

func (p *clientProxy) Receive(c actor.Context) {
	switch m := c.Message().(type) {
	case *claimFetched:
		p.handleFetched(c, m)
	case *commitOffsets:
		p.handleCommit(m)
	case *produceOutputs:
		p.group.produceOutputs(m.records)
	case *outputsWritten:
		c.Send(c.Parent(), m)
	case *transactionFailed:
		c.Send(c.Parent(), m)
	case *produceDeadLetters:
		p.group.deadLetter(m.records)
	case *deadLetterWritten:
		p.handleDeadLetterWritten(c, m)
	case *claimStarted:
		p.handleClaimStarted(c, m)
		p.reshare(c)
	case *claimsStarted:
		for _, one := range m.starts {
			p.handleClaimStarted(c, one)
		}
		p.reshare(c)
	case *reshareBudget:
		p.resharing = false
		p.resizeGates()
	case *claimEnding:
		p.handleClaimEnding(c, m)
	case *claimLost:
		p.handleClaimLost(c, m)
	case *partitionReleased:
		if epoch, ok := p.lost[m.tp]; ok && epoch == m.epoch {
			delete(p.lost, m.tp)
			dropOutputs(m.outputs) // the partition is another member's
			p.group.rememberLost(m.tp, m.epoch, m.fc)
			break
		}
		p.finishRevocation(c, m.tp, m.epoch, m.fc, m.outputs)
	case *revokeTimeout:
		p.handleRevokeTimeout(c, m)
	case *refreshTick:
		p.handleRefreshTick(c)
	case *readAheadTick:
		p.handleReadAheadTick(c)
	case *watermarksRefreshed:
		p.handleWatermarks(m)
	case *seekPartitions:
		p.handleSeek(c, m)
	case *offsetsFound:
		p.applySeek(c, m.marks, m.err)
	case *sessionStarted:
		p.sess = m.sess
	case *stopIntake:
		p.stopping = true
		if p.refresh != nil { // no refresh while the partitions are handed over
			p.refresh()
			p.refresh = nil
		}
		if p.sizing != nil { // nothing more is read
			p.sizing()
			p.sizing = nil
		}
		// Revocations of the drain end within its budget, so that the final
		// commits and leaving the group fit in shutdown_timeout.
		p.revokeTimeout = min(p.revokeTimeout, newStopBudget(p.shutdownTimeout).revoke)
		p.group.stop()
		if p.stopped {
			// The group ended before the drain began (Kafka refused it at
			// start-up): there is nothing to wait for.
			c.Send(c.Parent(), &intakeStopped{})
		}
	case *groupStopped:
		p.handleGroupStopped(c, m)
	case *actor.Started:
		p.parts = make(map[TopicPartition]*ownedPartition)
		root, self := c.ActorSystem().Root, c.Self()
		p.group.start(func(msg any) { root.Send(self, msg) })
		p.armRefresh(c)
		p.armReadAhead(c)
	case *actor.Stopping:
		p.handleStopping()
	case *actor.Stopped, *actor.Restarting:
	default:
		unexpected(c)
	}
}

func (p *clientProxy) handleFetched(c actor.Context, m *claimFetched) {
	hp := p.parts[m.tp]
	if hp == nil || hp.epoch != m.epoch {
		return // a batch of an assignment that has ended
	}
	// Only forward: a refresh may have seen more than the fetch the batch
	// came from (sarama's records read ahead before a pause).
	hp.hwm = max(hp.hwm, m.hwm)
	if hp.start < 0 && len(m.records) > 0 {
		hp.start = m.records[0].Offset
	}
	at := time.Now()
	hp.fetchedAt = at
	now := at.UnixNano()
	for _, rec := range m.records {
		rec.arrived = now
	}
	hp.gate.watch.hwm.Store(hp.hwm)
	p.stats.fetched.Add(int64(len(m.records)))
	p.stats.lastFetch.Store(now)
	p.relag(hp)
	c.Send(c.Parent(), &recordsFetched{records: m.records, inherited: m.inherited})
}

// handleCommit marks the watermarks (with their metadata) and commits them.
// The offset controller already batches what it publishes (every
// commit_interval, sooner after a large move), so every message is one commit.
func (p *clientProxy) handleCommit(m *commitOffsets) {
	if p.exactlyOnce {
		p.commitWithOutputs(m)
		return
	}
	marked := false
	for _, o := range m.offsets {
		hp := p.parts[o.tp]
		if hp == nil || hp.epoch != o.epoch {
			continue
		}
		if p.mark(o.tp, hp, o.offset, o.meta, true) {
			marked = true
			p.relag(hp)
		}
	}
	if marked && p.sess != nil {
		p.stats.commits.Add(1)
		p.group.requestCommit(p.sess)
	}
}

// commitWithOutputs is handleCommit for output.exactly_once: the offsets
// and the outputs their commit passes go to the Kafka side together
// (transact), so that one transaction holds both. The outputs of a
// partition this member no longer holds are dropped with its offsets:
// whoever holds it now runs their records again.
func (p *clientProxy) commitWithOutputs(m *commitOffsets) {
	var marks []partitionOffset
	for _, o := range m.offsets {
		hp := p.parts[o.tp]
		if hp == nil || hp.epoch != o.epoch {
			continue
		}
		if p.mark(o.tp, hp, o.offset, o.meta, false) {
			marks = append(marks, o)
			p.relag(hp)
		}
	}
	outs := p.owned(m.outputs)
	if (len(marks) == 0 && len(outs) == 0) || p.sess == nil {
		dropOutputs(outs)
		return
	}
	p.stats.commits.Add(1)
	p.group.transact(p.sess, marks, outs)
	p.group.requestCommit(p.sess)
}

// owned returns the records of recs whose partition assignment is still
// this member's, and drops the others' outputs.
func (p *clientProxy) owned(recs []*envelope) []*envelope {
	keep := recs[:0]
	var gone []*envelope
	for _, rec := range recs {
		if hp := p.parts[rec.TP()]; hp != nil && hp.epoch == rec.epoch {
			keep = append(keep, rec)
		} else {
			gone = append(gone, rec)
		}
	}
	dropOutputs(gone)
	return keep
}

// dropOutputs lets go of records whose outputs will not be written here
// (exactly once: their partition went to another member, which runs them
// again): the credits they kept come back.
func dropOutputs(recs []*envelope) {
	var credited []*envelope
	for _, rec := range recs {
		if len(rec.outputs) > 0 {
			credited = append(credited, rec)
		}
	}
	releaseCredits(credited, false)
}

// mark records an offset to commit, on the session too when onSess
// (exactly once, transact records it). sarama's MarkOffset only moves
// forward, so new metadata for the same offset goes through ResetOffset.
func (p *clientProxy) mark(tp TopicPartition, hp *ownedPartition, offset int64, meta string, onSess bool) bool {
	switch {
	case offset > hp.committed:
		p.stats.countCommitted(tp, max(hp.committed, hp.start), offset)
		if p.sess != nil && onSess {
			// The group's committed offset may already be offset (a new
			// assignment starts there): MarkOffset would ignore it, and
			// ResetOffset still records the metadata.
			p.sess.MarkOffset(tp.Topic, tp.Partition, offset, meta)
			p.sess.ResetOffset(tp.Topic, tp.Partition, offset, meta)
		}
	case offset == hp.committed && meta != hp.meta:
		if p.sess != nil && onSess {
			p.sess.ResetOffset(tp.Topic, tp.Partition, offset, meta)
		}
	default:
		return false
	}
	hp.committed, hp.meta = offset, meta
	hp.gate.watch.committed.Store(offset)
	return true
}

func (p *clientProxy) handleDeadLetterWritten(c actor.Context, m *deadLetterWritten) {
	if m.err != nil {
		c.Send(c.Parent(), &deadLetterDone{failed: []*envelope{m.rec}, err: fmt.Errorf("%s@%d: %w", m.rec.TP(), m.rec.Offset, m.err)})
		return
	}
	c.Send(c.Parent(), &deadLetterDone{written: []*envelope{m.rec}})
}

// handleClaimStarted takes a new claim; the caller then shares the budgets
// among the partitions (resizeGates), once for claims that start together.
func (p *clientProxy) handleClaimStarted(c actor.Context, m *claimStarted) {
	p.parts[m.tp] = &ownedPartition{epoch: m.epoch, gate: m.gate, committed: -1, start: -1, initial: m.committed, hwm: -1}
	p.fresh = append(p.fresh, m.gate)
	p.stats.trackPartition(m.tp, m.gate)
	p.stats.assigned.Store(int64(len(p.parts)))
	p.stats.moves.Add(1)
	p.stats.gained.Add(1)
	p.log.Info().Str("partition", m.tp.String()).Msg("partition assigned")
	c.Send(c.Parent(), &partitionAssigned{tp: m.tp, epoch: m.epoch, finished: m.finished})
}

// reshare has the budgets shared out again once the messages already in
// the mailbox are handled: claims start and end in bursts (4,096 at a
// rebalance), and sharing after each one was quadratic — at 4,096
// partitions the proxy's largest cost. Until then a new claim has no
// credits and waits; the others keep the share they had.
func (p *clientProxy) reshare(c actor.Context) {
	if !p.resharing {
		p.resharing = true
		c.Send(c.Self(), &reshareBudget{})
	}
}

// resizeGates gives each owned partition its floor, an even share of half
// the read-ahead's lowest budget (records) and of half the byte budget, and
// leaves the rest to the pool, which lends it to the partitions that have
// records fetched (creditPool). A partition whose records cannot run (one
// hot key, say) fills its floor and at most the pool's ceiling, and gets
// paused, while the others keep flowing. The floors are shares of the
// partition count rounded up to a power of two, so they change (and every
// gate is resized) only when it crosses one — at a rebalance of 4,096
// partitions, a dozen times rather than thousands; otherwise only the new
// claims' gates get theirs (and start borrowing). A new read-ahead resizes
// the pool alone.
func (p *clientProxy) resizeGates() {
	if n := len(p.parts); n > 0 {
		m := 1 << bits.Len(uint(n-1)) // n rounded up to a power of two
		if p.readAhead != nil && p.readAhead.setPartitions(m) {
			p.budget = p.readAhead.budget()
		}
		floor, floorBytes := max(1, p.floorBudget()/(2*m)), max(1, p.budgetBytes/int64(2*m))
		if floor != p.floor || floorBytes != p.floorBytes {
			p.floor, p.floorBytes = floor, floorBytes
			for _, hp := range p.parts {
				hp.gate.resize(p.floor, p.floorBytes)
			}
		} else {
			for _, g := range p.fresh {
				g.resize(p.floor, p.floorBytes)
			}
		}
	}
	p.resizePool()
	for _, g := range p.fresh {
		g.attach(&p.pool)
	}
	p.fresh = nil
}

// resizePool gives the pool the budgets less the owned partitions' floors.
func (p *clientProxy) resizePool() {
	n := len(p.parts)
	p.pool.set(p.budget, p.budgetBytes, n*p.floor, int64(n)*p.floorBytes, n)
}

// floorBudget is the lowest record budget the read-ahead sets (the budget
// itself when it is fixed): the floors never depend on the rate.
func (p *clientProxy) floorBudget() int {
	if p.readAhead == nil {
		return p.budget
	}
	return p.readAhead.concurrency + p.readAhead.floor
}

func (p *clientProxy) handleClaimEnding(c actor.Context, m *claimEnding) {
	hp := p.parts[m.tp]
	if hp == nil || hp.epoch != m.epoch {
		m.reply <- finalCommit{}
		return
	}
	hp.ending, hp.revokedAt = m.reply, time.Now()
	c.Send(c.Parent(), &partitionRevoked{tp: m.tp, epoch: m.epoch})
	hp.timeout = scheduler.NewTimerScheduler(c).SendOnce(p.revokeTimeout, c.Self(), &revokeTimeout{tp: m.tp, epoch: m.epoch})
}

// handleRevokeTimeout answers a revocation that did not drain in time with the
// last watermark known, which never passes an unfinished record.
func (p *clientProxy) handleRevokeTimeout(c actor.Context, m *revokeTimeout) {
	hp := p.parts[m.tp]
	if hp == nil || hp.epoch != m.epoch || hp.ending == nil {
		return
	}
	p.log.Warn().Str("partition", m.tp.String()).Stringer("waited", p.revokeTimeout).
		Msg("revoked partition still has running records; releasing it at its last watermark")
	p.finishRevocation(c, m.tp, m.epoch, finalCommit{offset: hp.committed, meta: hp.meta, ok: hp.committed >= 0}, nil)
	c.Send(c.Parent(), &revocationExpired{tp: m.tp, epoch: m.epoch})
}

// handleClaimLost forgets a partition of a lost session at once — it is not
// committed again — and has the tree drop its records.
func (p *clientProxy) handleClaimLost(c actor.Context, m *claimLost) {
	hp := p.parts[m.tp]
	if hp == nil || hp.epoch != m.epoch {
		m.reply <- finalCommit{}
		return
	}
	m.reply <- finalCommit{offset: hp.committed, meta: hp.meta, ok: hp.committed >= 0}
	if hp.ending != nil { // a revocation was under way: its claim no longer waits
		hp.ending <- finalCommit{}
		hp.timeout()
	}
	p.forget(m.tp, hp)
	p.stats.released.Add(1)
	if p.lost == nil {
		p.lost = make(map[TopicPartition]uint64)
	}
	p.lost[m.tp] = m.epoch // its final watermark comes once its cancelled records returned
	p.stats.assigned.Store(int64(len(p.parts)))
	p.stats.moves.Add(1)
	p.reshare(c)
	p.log.Warn().Str("partition", m.tp.String()).Int64("committed", hp.committed).
		Msg("partition lost with the group session: its running records are cancelled, nothing more of it starts or is committed")
	c.Send(c.Parent(), &partitionLost{tp: m.tp, epoch: m.epoch})
}

func (p *clientProxy) finishRevocation(c actor.Context, tp TopicPartition, epoch uint64, fc finalCommit, outputs []*envelope) {
	hp := p.parts[tp]
	if hp == nil || hp.epoch != epoch || hp.ending == nil {
		dropOutputs(outputs)
		return
	}
	fc = p.seekFinal(tp, fc)
	if fc.ok && fc.offset > hp.committed {
		p.stats.countCommitted(tp, max(hp.committed, hp.start), fc.offset)
	}
	if p.exactlyOnce && fc.ok && p.sess != nil {
		// The final watermark and the outputs it passes, together; the
		// claim marks the same and commits (the transaction).
		p.group.transact(p.sess, []partitionOffset{{tp: tp, epoch: epoch, offset: fc.offset, meta: fc.meta}}, outputs)
	} else {
		dropOutputs(outputs)
	}
	hp.ending <- fc // buffered: the claim goroutine may have given up waiting
	hp.timeout()
	p.forget(tp, hp)
	p.stats.released.Add(1)
	p.stats.assigned.Store(int64(len(p.parts)))
	p.stats.moves.Add(1)
	p.reshare(c)
	p.log.Info().Str("partition", tp.String()).Int64("committed", fc.offset).
		Stringer("revocation", time.Since(hp.revokedAt).Round(time.Microsecond)).Msg("partition released")
}

// armRefresh schedules the next refreshTick.
func (p *clientProxy) armRefresh(c actor.Context) {
	if !p.stopping {
		p.refresh = scheduler.NewTimerScheduler(c).SendOnce(p.refreshEvery, c.Self(), &refreshTick{})
	}
}

// armReadAhead schedules the next readAheadTick (none without a readAhead:
// the budget is fixed).
func (p *clientProxy) armReadAhead(c actor.Context) {
	if !p.stopping && p.readAhead != nil {
		p.sizing = scheduler.NewTimerScheduler(c).SendOnce(readAheadEvery, c.Self(), &readAheadTick{})
	}
}

// handleReadAheadTick sizes the budget to the rate records finish at, and
// shares it out again when it moved.
func (p *clientProxy) handleReadAheadTick(c actor.Context) {
	p.sizing = nil
	if p.stopping {
		return
	}
	if p.readAhead.sample(time.Now(), p.stats.processed.Load()) {
		p.budget = p.readAhead.budget()
		p.resizePool()
	}
	p.armReadAhead(c)
}

// handleRefreshTick asks the side for the high watermarks of the
// partitions that sent no batch for an interval (hwmrefresh.go).
func (p *clientProxy) handleRefreshTick(c actor.Context) {
	p.refresh = nil
	if p.stopping || p.stopped {
		return
	}
	if q := staleWatermarks(p.parts, time.Now(), p.refreshEvery); len(q) > 0 {
		p.group.refreshWatermarks(q)
	}
	p.armRefresh(c)
}

// handleWatermarks applies a refresh's answer. A failure is counted, and
// logged once per streak of failures: the lag of partitions not read may
// be stale meanwhile, and nothing else depends on it.
func (p *clientProxy) handleWatermarks(m *watermarksRefreshed) {
	for _, hp := range applyWatermarks(p.parts, m.marks) {
		p.relag(hp)
	}
	switch {
	case m.err != nil:
		p.stats.hwmErrs.Add(1)
		if !p.refreshFailing {
			p.refreshFailing = true
			p.log.Warn().Err(m.err).Msg("refreshing the high watermarks of partitions not being read; their lag may be stale until it works again (warned once until then)")
		}
	case p.refreshFailing:
		p.refreshFailing = false
		p.log.Info().Msg("refreshing high watermarks works again")
	}
}

// partLag is how many records of the partition are not committed yet, as
// far as its high watermark is known. Before this member's first commit it
// counts from the offset the group had committed, or else from the first
// record read.
func (hp *ownedPartition) partLag() int64 {
	if from := max(hp.committed, hp.start, hp.initial); hp.hwm >= 0 && from >= 0 && hp.hwm > from {
		return hp.hwm - from
	}
	return 0
}

// relag brings one partition's lag, and the consumer's, up to date after
// its watermark or its high watermark moved: one partition at a time, so a
// batch costs the same at 8 partitions as at 4,096.
func (p *clientProxy) relag(hp *ownedPartition) {
	l := hp.partLag()
	if l == hp.lag {
		return
	}
	p.lag += l - hp.lag
	hp.lag = l
	hp.gate.watch.lag.Store(l)
	p.stats.lag.Store(p.lag)
}

// forget drops a partition that has left, and its lag.
func (p *clientProxy) forget(tp TopicPartition, hp *ownedPartition) {
	delete(p.parts, tp)
	p.stats.untrackPartition(tp, hp.gate)
	p.lag -= hp.lag
	p.stats.lag.Store(p.lag)
}

func (p *clientProxy) handleGroupStopped(c actor.Context, m *groupStopped) {
	if m.err != nil {
		p.log.Warn().Err(m.err).Msg("closing the consumer group")
	}
	p.sess = nil
	p.stopped = true
	if p.stopping {
		c.Send(c.Parent(), &intakeStopped{})
	}
}

// handleStopping runs when the tree is torn down (after a failure, or after a
// drain). A group still running is left without handshakes: the orchestrator
// is going away and cannot answer them.
func (p *clientProxy) handleStopping() {
	p.stats.untrackAll()
	if p.refresh != nil {
		p.refresh()
	}
	if p.sizing != nil {
		p.sizing()
	}
	for _, hp := range p.parts {
		if hp.timeout != nil {
			hp.timeout()
		}
	}
	done := p.group.kill()
	if done == nil {
		return
	}
	// Claims return at once when killed; what may take longer is sarama
	// itself (still dialling an unresponsive broker, or leaving the group).
	// Its calls are bounded by sarama's network timeouts, so the group's
	// goroutine is left to finish on its own rather than hold the teardown,
	// which would count as a hung handler.
	wait := newStopBudget(p.shutdownTimeout).groupCloseWait()
	select {
	case <-done:
	case <-time.After(wait):
		p.log.Warn().Stringer("waited", wait).Msg("consumer group still connecting or closing; leaving it to finish in the background")
	}
	p.stats.assigned.Store(0)
	p.stats.lag.Store(0)
}
