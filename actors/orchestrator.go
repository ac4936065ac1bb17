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
}

// escalate makes a parent pass any failure of its children up, so that every
// failure reaches the restarter, which restarts the whole tree.
var escalate = actor.NewOneForOneStrategy(0, 0, func(any) actor.Directive { return actor.EscalateDirective })

func (o *orchestrator) Receive(c actor.Context) {
	switch m := c.Message().(type) {
	case *pingTree:
		c.Respond(&treePong{})
	case *pauseChanged:
		c.Send(o.coord, m)
	case *recordsFetched:
		o.handleFetched(c, m)
	case *recordsFinished:
		o.handleFinished(c, m)
	case *committable:
		c.Send(o.proxy, &commitOffsets{offsets: m.offsets})
	case *partitionAssigned:
		c.Send(o.offsets, &trackPartition{tp: m.tp, epoch: m.epoch})
	case *partitionRevoked:
		c.Send(o.coord, &revokePartition{tp: m.tp, epoch: m.epoch, leaving: o.leaving})
	case *revocationExpired:
		c.Send(o.coord, &dropPartition{tp: m.tp, epoch: m.epoch})
	case *partitionLost:
		c.Send(o.coord, &dropPartition{tp: m.tp, epoch: m.epoch})
	case *partitionDrained:
		c.Send(o.offsets, &finalizePartition{tp: m.tp, epoch: m.epoch})
	case *partitionFinal:
		c.Send(o.proxy, &partitionReleased{tp: m.tp, epoch: m.epoch, fc: finalCommit{offset: m.offset, meta: m.meta, ok: m.ok}})
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
	if len(m.done) > 0 {
		c.Send(o.offsets, &markDone{records: m.done})
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
