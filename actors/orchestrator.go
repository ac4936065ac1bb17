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
// It holds no records itself; it routes batches and decides what a failure
// means.
type orchestrator struct {
	spec *treeSpec
	gen  int
	ctx  context.Context // cancelled by the supervisor when this generation is torn down

	proxy, offsets, coord *actor.PID
	failed                bool
}

// escalate makes a parent pass any failure of its children up, so that every
// failure reaches the backoff supervisor, which restarts the whole tree.
var escalate = actor.NewOneForOneStrategy(0, 0, func(any) actor.Directive { return actor.EscalateDirective })

func (o *orchestrator) Receive(c actor.Context) {
	switch m := c.Message().(type) {
	case *recordsFetched:
		c.Send(o.offsets, &trackRecords{records: m.records})
		c.Send(o.coord, &scheduleRecords{records: m.records})
	case *recordsFinished:
		o.handleFinished(c, m)
	case *committable:
		c.Send(o.proxy, &commitOffsets{offsets: m.offsets})
	case *partitionAssigned:
		c.Send(o.offsets, &trackPartition{tp: m.tp, epoch: m.epoch})
	case *partitionRevoked:
		c.Send(o.coord, &revokePartition{tp: m.tp, epoch: m.epoch})
	case *revocationExpired:
		c.Send(o.coord, &dropPartition{epoch: m.epoch})
	case *partitionDrained:
		c.Send(o.offsets, &finalizePartition{tp: m.tp, epoch: m.epoch})
	case *partitionFinal:
		c.Send(o.proxy, &partitionReleased{tp: m.tp, epoch: m.epoch, offset: m.offset, ok: m.ok})
	case *startDrain:
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
	o.offsets = c.Spawn(s.props(newOffsetController()))
	co := newCoordinator(o.ctx, s)
	o.coord = c.Spawn(s.props(co, actor.WithSupervisor(escalate)))
	// The proxy starts last: records may flow as soon as it runs.
	p := s.newProxy()
	o.proxy = c.Spawn(s.props(p))
}

// ErrHandlerFailed wraps the error of a record whose handler failed and made
// the tree restart.
var ErrHandlerFailed = errors.New("actors: handler failed")

func (o *orchestrator) handleFinished(c actor.Context, m *recordsFinished) {
	s := o.spec
	if len(m.done) > 0 {
		s.stats.processed.Add(int64(len(m.done)))
		c.Send(o.offsets, &markDone{records: m.done})
	}
	if len(m.failed) == 0 || o.failed {
		return
	}
	s.stats.failed.Add(int64(len(m.failed)))
	f := m.failed[0]
	if o.ctx.Err() != nil && errors.Is(f.err, context.Canceled) {
		return // cancelled by a teardown already under way
	}
	o.failed = true
	s.log.Error().Err(f.err).Str("topic", f.rec.Topic).Int32("partition", f.rec.Partition).Int64("offset", f.rec.Offset).
		Msg("handler failed; restarting the consumer")
	c.Send(c.Parent(), &treeFailed{gen: o.gen, err: fmt.Errorf("%w: %s@%d: %w", ErrHandlerFailed, f.rec.TP(), f.rec.Offset, f.err)})
}
