package actors

import (
	"fmt"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/turbokafka/turbo/actors/watermark"
)

// offsetController keeps one watermark per held partition: every offset handed
// out is tracked, and the committable offset is the lowest unfinished one, so
// nothing is ever committed past a record that has not finished. Offsets that
// Kafka never delivers (compaction, transaction markers) are never tracked and
// so never waited for.
type offsetController struct {
	parts map[TopicPartition]*partitionWatermark
}

type partitionWatermark struct {
	epoch    uint64
	tracker  *watermark.Tracker
	reported int64 // last committable offset sent, -1 if none
}

func newOffsetController() *offsetController {
	return &offsetController{parts: make(map[TopicPartition]*partitionWatermark)}
}

func (oc *offsetController) Receive(c actor.Context) {
	switch m := c.Message().(type) {
	case *trackRecords:
		oc.handleTrack(m)
	case *markDone:
		oc.handleDone(c, m)
	case *trackPartition:
		oc.parts[m.tp] = &partitionWatermark{epoch: m.epoch, tracker: watermark.New(), reported: -1}
	case *finalizePartition:
		oc.handleFinalize(c, m)
	case *actor.Started, *actor.Stopping, *actor.Stopped, *actor.Restarting:
	default:
		unexpected(c)
	}
}

// current returns the partition's watermark if rec belongs to its current
// assignment; records of an earlier assignment are ignored. last is the
// previous answer: neighbouring records mostly share a partition, and
// checking it first spares a map lookup per record.
func (oc *offsetController) current(rec *Record, last *partitionWatermark) *partitionWatermark {
	if last != nil && last.epoch == rec.epoch {
		return last
	}
	p := oc.parts[rec.TP()]
	if p == nil || p.epoch != rec.epoch {
		return nil
	}
	return p
}

func (oc *offsetController) handleTrack(m *trackRecords) {
	var p *partitionWatermark
	for _, rec := range m.records {
		if p = oc.current(rec, p); p != nil {
			if err := p.tracker.Track(rec.Offset); err != nil {
				// Offsets arrive in order within an assignment; anything else
				// means the bookkeeping is broken, and restarting the tree
				// from the committed offsets is the only safe answer.
				panic(fmt.Errorf("actors: tracking %s@%d: %w", rec.TP(), rec.Offset, err))
			}
		}
	}
}

func (oc *offsetController) handleDone(c actor.Context, m *markDone) {
	var changed []partitionOffset
	var p *partitionWatermark
	for _, rec := range m.records {
		if p = oc.current(rec, p); p == nil {
			continue
		}
		if err := p.tracker.Done(rec.Offset); err != nil {
			panic(fmt.Errorf("actors: finishing %s@%d: %w", rec.TP(), rec.Offset, err))
		}
		if off, ok := p.tracker.Committable(); ok && off > p.reported {
			if !containsTP(changed, rec.TP()) {
				changed = append(changed, partitionOffset{tp: rec.TP(), epoch: p.epoch})
			}
			p.reported = off
		}
	}
	if len(changed) == 0 {
		return
	}
	for i := range changed {
		changed[i].offset = oc.parts[changed[i].tp].reported
	}
	c.Send(c.Parent(), &committable{offsets: changed})
}

func containsTP(offs []partitionOffset, tp TopicPartition) bool {
	for _, o := range offs {
		if o.tp == tp {
			return true
		}
	}
	return false
}

func (oc *offsetController) handleFinalize(c actor.Context, m *finalizePartition) {
	p := oc.parts[m.tp]
	if p == nil || p.epoch != m.epoch {
		c.Send(c.Parent(), &partitionFinal{tp: m.tp, epoch: m.epoch})
		return
	}
	delete(oc.parts, m.tp)
	off, ok := p.tracker.Committable()
	c.Send(c.Parent(), &partitionFinal{tp: m.tp, epoch: m.epoch, offset: off, ok: ok})
}
