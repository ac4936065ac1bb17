package actors

import (
	"context"
	"errors"
	"fmt"

	"github.com/asynkron/protoactor-go/actor"
)

// orchestrator is the only actor that knows the whole flow:
//
//	client proxy ─recordsFetched→ orchestrator ─trackRecords→ offset controller
//	                                           ─scheduleRecords→ coordinator ─runRecords→ runners
//	coordinator ─recordsFinished→ orchestrator ─markDone→ offset controller ─committable→
//	orchestrator ─commitOffsets→ client proxy
//
// It holds no records itself and judges nothing: it routes batches. What a
// failed attempt means is the coordinator's to judge (failurePolicy); the
// orchestrator passes an escalated failure on to the restarter.
type orchestrator struct {
	spec *treeSpec
	gen  int
	ctx  context.Context // cancelled by the restarter when this generation is torn down

	proxy, offsets, coord *actor.PID
	failed                bool
	leaving               bool // the tree is stopping (startDrain): revocations are not a rebalance's

	// Outputs being written, per partition assignment (epoch): a drained
	// partition is finalized only once they are acknowledged (held), so
	// that its final commit passes the records whose outputs are safe.
	writing map[uint64]int
	held    map[uint64]TopicPartition
}

// escalate makes a parent pass any failure of its children up, so that every
// failure reaches the restarter, which restarts the whole tree.
var escalate = actor.NewOneForOneStrategy(0, 0, func(any) actor.Directive { return actor.EscalateDirective })

func (o *orchestrator) Receive(c actor.Context) {
	switch m := c.Message().(type) {
	case *pingTree:
		c.Respond(&treePong{})
	case *controlChanged:
		c.Send(o.coord, m)
	case *skipRecord:
		c.Send(o.coord, m)
	case *seekPartitions:
		c.Send(o.proxy, m)
	case *reclaimTree:
		// Nothing starts any more in this generation, from now: a record of
		// a moved partition must not start between the seek's answer and
		// the restart (an operator's resume may come in between).
		c.Send(o.coord, &haltRunners{})
		c.Send(c.Parent(), &reclaimTree{gen: o.gen})
	case *recordsFetched:
		o.handleFetched(c, m)
	case *recordsFinished:
		o.handleFinished(c, m)
	case *committable:
		c.Send(o.proxy, &commitOffsets{offsets: m.offsets, outputs: m.outputs})
	case *partitionAssigned:
		c.Send(o.offsets, &trackPartition{tp: m.tp, epoch: m.epoch, finished: m.finished})
	case *partitionRevoked:
		c.Send(o.coord, &revokePartition{tp: m.tp, epoch: m.epoch, leaving: o.leaving})
	case *revocationExpired:
		c.Send(o.coord, &dropPartition{tp: m.tp, epoch: m.epoch})
	case *partitionLost:
		c.Send(o.coord, &dropPartition{tp: m.tp, epoch: m.epoch})
	case *partitionDrained:
		if o.writing[m.epoch] > 0 {
			o.held[m.epoch] = m.tp
			break
		}
		c.Send(o.offsets, &finalizePartition{tp: m.tp, epoch: m.epoch})
	case *outputsWritten:
		o.handleOutputsWritten(c, m)
	case *partitionFinal:
		c.Send(o.proxy, &partitionReleased{tp: m.tp, epoch: m.epoch, fc: finalCommit{offset: m.offset, meta: m.meta, ok: m.ok}, outputs: m.outputs})
	case *transactionFailed:
		o.spec.stats.outErrs.Add(1)
		o.fail(c, fmt.Errorf("%w: %w", ErrOutput, m.err))
	case *deadLetterDone:
		o.handleDeadLetterDone(c, m)
	case *startDrain:
		o.leaving = true
		if m.halt {
			c.Send(o.coord, &haltRunners{})
		}
		c.Send(o.proxy, &stopIntake{})
	case *intakeStopped:
		c.Send(c.Parent(), &treeDrained{gen: o.gen})
	case *actor.Started:
		o.spawnChildren(c)
	case *actor.Stopping, *actor.Stopped, *actor.Restarting, *actor.Terminated:
	default:
		unexpected(c)
	}
}

func (o *orchestrator) spawnChildren(c actor.Context) {
	s := o.spec
	o.offsets = c.Spawn(s.props(newOffsetController(s)))
	co := newCoordinator(o.ctx, s)
	o.coord = c.Spawn(s.props(co, actor.WithSupervisor(escalate)))
	// The proxy starts last: records may flow as soon as it runs.
	p := s.newProxy()
	o.proxy = c.Spawn(s.props(p))
}

func (o *orchestrator) handleFetched(c actor.Context, m *recordsFetched) {
	c.Send(o.offsets, &trackRecords{records: m.records})
	if m.inherited == 0 {
		c.Send(o.coord, &scheduleRecords{records: m.records})
		return
	}
	// Records an earlier owner finished (per the commit metadata) are
	// tracked and marked done at once, so the watermark passes them, but
	// never run again.
	var run, skip []*envelope
	for _, rec := range m.records {
		if rec.inherited {
			skip = append(skip, rec)
		} else {
			run = append(run, rec)
		}
	}
	o.spec.stats.inherited.Add(int64(len(skip)))
	c.Send(o.offsets, &markDone{records: skip})
	if len(run) > 0 {
		c.Send(o.coord, &scheduleRecords{records: run})
	}
}

func (o *orchestrator) handleFinished(c actor.Context, m *recordsFinished) {
	done := m.done
	switch {
	case o.spec.consumer.Output.ExactlyOnce:
		// Done at once, outputs and dead letters included: the offset
		// controller hands them to the proxy with the commit that passes
		// them, and the Kafka side writes both in one transaction.
		done = o.deadInTransaction(c, done, m.dead)
		m.dead = nil
	case o.spec.consumer.Output.Enabled():
		done = o.writeOutputs(c, done)
	}
	if len(done) > 0 {
		c.Send(o.offsets, &markDone{records: done})
	}
	if len(m.dead) > 0 {
		c.Send(o.proxy, &produceDeadLetters{records: m.dead})
	}
	if len(m.failed) > 0 {
		f := m.failed[0]
		if o.ctx.Err() != nil && errors.Is(f.err, context.Canceled) {
			return // cancelled by a teardown already under way
		}
		o.fail(c, fmt.Errorf("%w: %s@%d after %d attempt(s): %w", ErrHandlerFailed, f.rec.TP(), f.rec.Offset, f.rec.attempts, f.err))
	}
}

// writeOutputs sends the records that have outputs to be written (in the
// order they finished, which keeps a key's outputs in its records' order)
// and returns the others, which are done.
func (o *orchestrator) writeOutputs(c actor.Context, done []*envelope) []*envelope {
	var out []*envelope
	rest := done[:0:0]
	for _, rec := range done {
		if len(rec.outputs) == 0 {
			rest = append(rest, rec)
			continue
		}
		out = append(out, rec)
		if o.writing == nil {
			o.writing, o.held = make(map[uint64]int), make(map[uint64]TopicPartition)
		}
		o.writing[rec.epoch]++
	}
	if len(out) == 0 {
		return done
	}
	c.Send(o.proxy, &produceOutputs{records: out})
	return rest
}

// deadInTransaction makes the records to dead-letter done records whose
// one output is their dead letter (exactly once): the coordinator lets go
// of them now, and the dead letter is written in the transaction of the
// commit that passes them.
func (o *orchestrator) deadInTransaction(c actor.Context, done []*envelope, dead []recordFailure) []*envelope {
	if len(dead) == 0 {
		return done
	}
	recs := make([]*envelope, len(dead))
	for i, f := range dead {
		f.rec.outputs, f.rec.deadErr = nil, f.err
		recs[i] = f.rec
	}
	c.Send(o.coord, &deadLettered{records: recs})
	return append(done, recs...)
}

// handleOutputsWritten completes the records whose outputs were all
// acknowledged: done, their credit back (the coordinator kept it while they
// were written, so outputs in flight count against max_buffered), and a
// drained partition waiting for them finalized. A write that failed (after
// the producer's own retries) fails the tree: the record runs again.
func (o *orchestrator) handleOutputsWritten(c actor.Context, m *outputsWritten) {
	if o.spec.consumer.Output.ExactlyOnce {
		o.outputsInTransaction(c, m)
		return
	}
	if len(m.written) > 0 {
		var n int
		for _, rec := range m.written {
			n += len(rec.outputs)
		}
		o.spec.stats.outputs.Add(int64(n))
		c.Send(o.offsets, &markDone{records: m.written})
		releaseCredits(m.written, false)
	}
	for _, rec := range m.written {
		rec.outputs = nil // written: its bytes may go
		o.wrote(c, rec.epoch)
	}
	if m.failed != nil {
		o.spec.stats.outErrs.Add(1)
		o.wrote(c, m.failed.epoch)
		o.fail(c, fmt.Errorf("%w: for %s@%d: %w", ErrOutput, m.failed.TP(), m.failed.Offset, m.err))
	}
}

// outputsInTransaction is handleOutputsWritten when the outputs are written
// in transactions: their records were done already (the commit that passes
// them is the one whose transaction holds the outputs); a committed
// transaction gives their credits back, a failed write restarts the tree,
// which aborts the transaction. (Their outputs stay: the producer's
// goroutine may still read them, and nothing else holds the records.)
func (o *orchestrator) outputsInTransaction(c actor.Context, m *outputsWritten) {
	var n, dead int
	credited := m.written[:0:0]
	for _, rec := range m.written {
		if rec.deadErr != nil {
			dead++
			continue
		}
		n += len(rec.outputs)
		credited = append(credited, rec)
	}
	o.spec.stats.outputs.Add(int64(n))
	o.spec.stats.dead.Add(int64(dead))
	releaseCredits(credited, false)
	dropOutputs(m.dropped)
	if m.failed != nil {
		o.spec.stats.outErrs.Add(1)
		o.fail(c, fmt.Errorf("%w: for %s@%d: %w", ErrOutput, m.failed.TP(), m.failed.Offset, m.err))
	}
}

// wrote counts one record's outputs of epoch out of writing, and finalizes
// the partition if its drain waited for them.
func (o *orchestrator) wrote(c actor.Context, epoch uint64) {
	if o.writing[epoch]--; o.writing[epoch] > 0 {
		return
	}
	delete(o.writing, epoch)
	if tp, ok := o.held[epoch]; ok {
		delete(o.held, epoch)
		c.Send(o.offsets, &finalizePartition{tp: tp, epoch: epoch})
	}
}

// handleDeadLetterDone completes records the dead-letter topic acknowledged;
// a write that failed (after the producer's own retries) fails the tree:
// a record is never dropped silently.
func (o *orchestrator) handleDeadLetterDone(c actor.Context, m *deadLetterDone) {
	if len(m.written) > 0 {
		o.spec.stats.dead.Add(int64(len(m.written)))
		c.Send(o.offsets, &markDone{records: m.written})
	}
	if len(m.written) > 0 || len(m.failed) > 0 {
		c.Send(o.coord, &deadLettered{records: m.written, failed: m.failed})
	}
	if m.err != nil {
		o.fail(c, fmt.Errorf("%w: %w", ErrDeadLetter, m.err))
	}
}

// fail asks the restarter to restart the tree (once per generation).
func (o *orchestrator) fail(c actor.Context, err error) {
	if o.failed {
		return
	}
	o.failed = true
	o.spec.log.Error().Err(err).Msg("restarting the consumer")
	c.Send(c.Parent(), &treeFailed{gen: o.gen, err: err, commit: true})
}
