package actors

import (
	"fmt"
	"sort"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/asynkron/protoactor-go/scheduler"
	"github.com/rs/zerolog"
	"github.com/turbokafka/turbo/actors/offsetmeta"
	"github.com/turbokafka/turbo/actors/watermark"
)

// offsetController keeps one watermark per owned partition: every offset handed
// out is tracked, and the committable offset is the lowest unfinished one, so
// nothing is ever committed past a record that has not finished. Offsets that
// Kafka never delivers (compaction, transaction markers) are never tracked and
// so never waited for.
//
// It publishes what is worth committing once per commit_interval (sooner for
// a partition whose watermark moved a lot, and for one that has just
// drained: see commitAllowance), with commit metadata that
// records which offsets above the watermark already finished, so whoever
// holds the partition next skips them.
type offsetController struct {
	interval    time.Duration
	commitEvery int64 // publish a partition at once when its watermark moved this much
	metaBudget  int   // commit_metadata_bytes; 0 = off
	exactlyOnce bool  // output.exactly_once: outputs travel with the commits that pass them
	log         zerolog.Logger
	stats       *consumerStats

	parts   map[TopicPartition]*partitionWatermark
	timers  *scheduler.TimerScheduler
	ticker  scheduler.CancelFunc // the armed publishTick
	stopped bool
}

type partitionWatermark struct {
	tp        TopicPartition
	epoch     uint64
	tracker   *watermark.Tracker
	published int64 // last committable offset published, -1 if none
	dirty     bool  // finished records since the last publish
	last      int64 // highest offset tracked
	gate      *gate // the partition's fetch gate (to bound the watermark window)
	limitFrom int64 // the committable offset the gate's limit was last set from
	arrivals  arrivals
	// heldOff is the oldest unfinished offset showOldest last saw, and
	// heldSince when it became the oldest (unix ns; 0 before the first).
	heldOff, heldSince int64
	allowance          commitAllowance // drain commits
	// unrecorded is how many finished offsets above the committed one the
	// last metadata could not hold (commit_metadata_bytes): a next owner
	// would run them again.
	unrecorded int64
	// pending (exactly once) are the finished records with outputs or a
	// dead letter that no published watermark or metadata passes yet, in
	// the order they finished; fresh says some came since the last publish.
	pending []*envelope
	fresh   bool
	// inherited are the ranges an earlier owner finished above the
	// committed offset the claim started from, less those the watermark
	// has passed (see commitPoint).
	inherited []offsetmeta.Range
}

// commitPoint returns the offset to commit and the finished ranges above
// it. The tracker knows the records this claim has read; an earlier
// owner's finished ranges that it has not read yet are added: a commit
// before the claim reaches them (a revocation soon after the claim began,
// say) must still record them, or the partition's next owner would run
// those records again (and, exactly once, write their outputs twice). A
// finished range that starts at the tracker's offset moves the offset past
// it.
func (p *partitionWatermark) commitPoint() (offset int64, finished []offsetmeta.Range, ok bool) {
	offset, ok = p.tracker.Committable()
	if !ok {
		return offset, nil, false
	}
	p.tracker.FinishedAbove(func(from, to int64) { finished = append(finished, offsetmeta.Range{From: from, To: to}) })
	p.inherited = skipBelow(p.inherited, offset)
	if len(p.inherited) == 0 {
		return offset, finished, true
	}
	finished = unionRanges(append(finished, p.inherited...))
	for len(finished) > 0 && finished[0].From <= offset {
		offset = max(offset, finished[0].To+1)
		finished = finished[1:]
	}
	return offset, finished, true
}

// takePassed moves to out, in the order they finished, the pending records
// that a commit of offset with metadata recording the ranges passes: a
// next owner starts at offset and skips the ranges, so their outputs are
// written once, in the transaction that commits that. The others wait for
// a later commit.
func (p *partitionWatermark) takePassed(offset int64, recorded []offsetmeta.Range, out []*envelope) []*envelope {
	keep := p.pending[:0]
	for _, rec := range p.pending {
		if rec.Offset < offset || inRanges(recorded, rec.Offset) {
			out = append(out, rec)
		} else {
			keep = append(keep, rec)
		}
	}
	clear(p.pending[len(keep):])
	p.pending = keep
	return out
}

// inRanges reports whether offset is in one of rs (sorted, disjoint).
func inRanges(rs []offsetmeta.Range, offset int64) bool {
	i := sort.Search(len(rs), func(i int) bool { return rs[i].To >= offset })
	return i < len(rs) && rs[i].From <= offset
}

// dropPending gives back the fetch credits of the pending records of a
// partition that goes away: they were never written, and whoever reads the
// partition next runs them again.
func (p *partitionWatermark) dropPending() {
	var withOutputs []*envelope
	for _, rec := range p.pending {
		if len(rec.outputs) > 0 { // a dead letter's credit came back already
			withOutputs = append(withOutputs, rec)
		}
	}
	releaseCredits(withOutputs, false)
	p.pending = nil
}

// drained reports whether every record of the partition up to its high
// watermark (as last known: a fetch, or a refresh while the partition is
// not fetched) has finished: nothing is left to run or to read. A refreshed
// high watermark above the last record read makes it false until those
// records are read and finished, which only moves a drain's commit to the
// next tick: what is committed comes from the tracker alone.
func (p *partitionWatermark) drained() bool {
	off, ok := p.tracker.Committable()
	if !ok || p.gate == nil || p.tracker.Pending() != 0 {
		return false
	}
	hwm := p.gate.watch.hwm.Load() // -1 until a fetch or a refresh reported it
	return hwm >= 0 && off >= hwm
}

// showOldest publishes since when the partition's oldest unfinished record
// has held its committed offset (0 when every tracked record finished), for
// observers: since it arrived or, if later, since it became the oldest (now
// returns the time, read only then). A record that merely waited behind
// others in a backlog has held nothing until they finished: counting from
// its arrival made every partition of a busy consumer look stuck.
func (p *partitionWatermark) showOldest(now func() int64) {
	if p.gate == nil {
		return
	}
	var at int64
	first := int64(-1)
	if off, ok := p.tracker.Committable(); ok && off <= p.last {
		if p.heldSince == 0 || off != p.heldOff {
			p.heldOff, p.heldSince = off, now()
		}
		at, first = max(p.arrivals.oldest(off), p.heldSince), off
	}
	p.gate.watch.oldestAt.Store(first) // before oldest: a reader that sees an age sees its offset
	p.gate.watch.oldest.Store(at)
}

// maxWatermarkWindow bounds how far a partition may be read beyond its oldest
// unfinished record. Credits bound the records in the pipeline, but a record
// stuck for a long time (its key waiting, others finishing) would otherwise
// let the watermark's window of finished offsets behind it grow without end.
var maxWatermarkWindow int64 = 100_000

// checkWindow keeps the gate's reading limit at the oldest unfinished
// offset plus the window, so that reading stops by itself once the window
// would grow past it (gate.setLimit), and starts again when the oldest
// unfinished record finishes. It takes the gate's lock only when that
// offset moved.
func (p *partitionWatermark) checkWindow() {
	if p.gate == nil {
		return
	}
	off, ok := p.tracker.Committable()
	if !ok || off == p.limitFrom {
		return
	}
	p.limitFrom = off
	p.gate.setLimit(off+maxWatermarkWindow, maxWatermarkWindow/2)
}

// publishTick is the offset controller's commit_interval timer.
type publishTick struct{}

// armTick schedules the next publishTick. A one-shot timer armed again on
// every tick rather than protoactor's SendRepeatedly: the repeating timer
// reads its state without synchronisation when it fires
// (scheduler/timer.go), a data race with its cancel whenever a tick and the
// tree's teardown coincide.
func (oc *offsetController) armTick(c actor.Context) {
	if !oc.stopped {
		oc.ticker = oc.timers.SendOnce(oc.interval, c.Self(), &publishTick{})
	}
}

func newOffsetController(spec *treeSpec) *offsetController {
	return &offsetController{
		interval:    spec.consumer.CommitInterval,
		commitEvery: int64(max(1000, spec.consumer.Concurrency+spec.consumer.MaxBuffered)),
		metaBudget:  spec.consumer.CommitMetadataBytes,
		exactlyOnce: spec.consumer.Output.ExactlyOnce,
		log:         spec.log,
		stats:       spec.stats,
		parts:       make(map[TopicPartition]*partitionWatermark),
	}
}

func (oc *offsetController) Receive(c actor.Context) {
	switch m := c.Message().(type) {
	case *trackRecords:
		oc.handleTrack(m)
	case *markDone:
		oc.handleDone(c, m)
	case *publishTick:
		oc.publish(c)
		oc.armTick(c)
	case *trackPartition:
		if old := oc.parts[m.tp]; old != nil {
			oc.unrecorded(m.tp, old, 0)
			old.dropPending()
		}
		oc.parts[m.tp] = &partitionWatermark{tp: m.tp, epoch: m.epoch, tracker: watermark.New(), published: -1, limitFrom: -1, inherited: m.finished}
	case *finalizePartition:
		oc.handleFinalize(c, m)
	case *actor.Started:
		oc.timers = scheduler.NewTimerScheduler(c)
		oc.armTick(c)
	case *actor.Stopping:
		oc.stopped = true
		if oc.ticker != nil {
			oc.ticker()
		}
	case *actor.Stopped:
		for tp, p := range oc.parts { // the next generation starts from nothing
			oc.unrecorded(tp, p, 0)
		}
	case *actor.Restarting:
	default:
		unexpected(c)
	}
}

// current returns the partition's watermark if rec belongs to its current
// assignment; records of an earlier assignment are ignored. last is the
// previous answer: neighbouring records mostly share a partition, and
// checking it first spares a map lookup per record.
func (oc *offsetController) current(rec *envelope, last *partitionWatermark) *partitionWatermark {
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
	for i, rec := range m.records {
		if p = oc.current(rec, p); p != nil {
			if i == 0 {
				p.arrivals.add(rec.Offset, rec.arrived)
			}
			if err := p.tracker.Track(rec.Offset); err != nil {
				// Offsets arrive in order within an assignment; anything else
				// means the bookkeeping is broken, and restarting the tree
				// from the committed offsets is the only safe answer.
				panic(fmt.Errorf("actors: tracking %s@%d: %w", rec.TP(), rec.Offset, err))
			}
			p.last, p.gate = rec.Offset, rec.gate
		}
	}
	if p != nil { // a batch comes from one assignment
		p.checkWindow()
		// A record that becomes the oldest as it is tracked arrived with
		// this batch (the tracker held nothing unfinished before it).
		p.showOldest(func() int64 { return arrivedOrNow(m.records[0].arrived) })
	}
}

// arrivedOrNow is a record's arrival, or the clock when it has none.
func arrivedOrNow(arrived int64) int64 {
	if arrived != 0 {
		return arrived
	}
	return time.Now().UnixNano()
}

func (oc *offsetController) handleDone(c actor.Context, m *markDone) {
	var p *partitionWatermark
	var touched []*partitionWatermark // for checkWindow, once per partition run
	for _, rec := range m.records {
		if p = oc.current(rec, p); p == nil {
			continue
		}
		if n := len(touched); n == 0 || touched[n-1] != p {
			touched = append(touched, p)
		}
		if err := p.tracker.Done(rec.Offset); err != nil {
			panic(fmt.Errorf("actors: finishing %s@%d: %w", rec.TP(), rec.Offset, err))
		}
		p.dirty = true
		if oc.exactlyOnce && (len(rec.outputs) > 0 || rec.deadErr != nil) {
			p.pending = append(p.pending, rec)
			p.fresh = true
		}
	}
	// Only the partitions this batch touched can have become due: at 4,096
	// partitions, looking at every one on every batch was the offset
	// controller's largest cost.
	var now time.Time
	clock := func() time.Time { // read once, and only if needed
		if now.IsZero() {
			now = time.Now()
		}
		return now
	}
	due := touched[:0]
	for _, p := range touched {
		p.checkWindow()
		p.showOldest(func() int64 { return clock().UnixNano() })
		if !p.dirty {
			continue
		}
		drainNow := false
		if p.drained() {
			drainNow = p.allowance.drained(clock(), oc.interval)
		}
		// Exactly once, a commit that passes new outputs goes at once: the
		// outputs are written when it is published, and their records'
		// credits come back when they are acknowledged (the transaction
		// itself commits at most every few milliseconds: txnLoop.run).
		if off, ok := p.tracker.Committable(); ok && (drainNow || p.fresh || (p.published >= 0 && off-p.published >= oc.commitEvery)) {
			due = append(due, p)
		}
	}
	if len(due) > 0 {
		oc.send(c, due, time.Time{})
	}
}

// publish sends the committable offset and metadata of every partition with
// records finished since its last publish (the commit interval's tick).
func (oc *offsetController) publish(c actor.Context) {
	var dirty []*partitionWatermark
	for _, p := range oc.parts {
		if p.dirty {
			dirty = append(dirty, p)
		}
	}
	oc.send(c, dirty, time.Now())
}

// send publishes the committable offset and metadata of ps, in one
// message; a tick (at, not zero) also counts as each one's interval commit
// (commitAllowance).
func (oc *offsetController) send(c actor.Context, ps []*partitionWatermark, at time.Time) {
	var out []partitionOffset
	var outputs []*envelope
	for _, p := range ps {
		if !p.dirty { // listed twice, sent already
			continue
		}
		off, finished, ok := p.commitPoint()
		if !ok {
			continue
		}
		if !at.IsZero() {
			p.allowance.ticked(at, oc.interval)
		}
		p.dirty, p.fresh = false, false
		p.published = off
		meta, recorded := oc.metadata(p.tp, p, off, finished)
		if len(p.pending) > 0 {
			outputs = p.takePassed(off, recorded, outputs)
		}
		out = append(out, partitionOffset{tp: p.tp, epoch: p.epoch, offset: off, meta: meta})
	}
	if len(out) > 0 {
		c.Send(c.Parent(), &committable{offsets: out, outputs: outputs})
	}
}

// metadata encodes ranges, the offsets above the watermark that already
// finished (commitPoint), within the byte budget (a prefix of them when
// they do not all fit: still true, and the lowest are the next owner's
// first records). It returns the ranges it recorded too.
func (oc *offsetController) metadata(tp TopicPartition, p *partitionWatermark, committed int64, ranges []offsetmeta.Range) (string, []offsetmeta.Range) {
	if oc.metaBudget <= 0 {
		return "", nil
	}
	if len(ranges) == 0 {
		oc.unrecorded(tp, p, 0)
		return "", nil
	}
	meta, n, err := offsetmeta.Encode(committed, ranges, oc.metaBudget)
	if err != nil {
		oc.log.Error().Err(err).Str("partition", tp.String()).Msg("encoding commit metadata; committing without it")
		return "", nil
	}
	var left int64
	for _, r := range ranges[n:] {
		left += r.To - r.From + 1
	}
	oc.unrecorded(tp, p, left)
	return meta, ranges[:n]
}

// unrecorded sets how many finished offsets of the partition the commit
// metadata could not hold, in the consumer's gauge; a partition that
// starts to overflow counts once and is logged once (and again when it
// fits again), however many commits it overflows.
func (oc *offsetController) unrecorded(tp TopicPartition, p *partitionWatermark, n int64) {
	if n == p.unrecorded {
		return
	}
	oc.stats.metaUnrecorded.Add(n - p.unrecorded)
	switch {
	case p.unrecorded == 0:
		oc.stats.metaOverflows.Add(1)
		oc.log.Warn().Str("partition", tp.String()).Int64("unrecorded", n).Int("commit_metadata_bytes", oc.metaBudget).
			Msg("the offsets finished above the committed one do not all fit in commit_metadata_bytes: the commit records the lowest, and a next owner of the partition would run the others again (turbo_commit_metadata_unrecorded_offsets)")
	case n == 0:
		oc.log.Info().Str("partition", tp.String()).Msg("the finished offsets above the committed one fit in commit_metadata_bytes again")
	}
	p.unrecorded = n
}

func (oc *offsetController) handleFinalize(c actor.Context, m *finalizePartition) {
	p := oc.parts[m.tp]
	if p == nil || p.epoch != m.epoch {
		c.Send(c.Parent(), &partitionFinal{tp: m.tp, epoch: m.epoch})
		return
	}
	delete(oc.parts, m.tp)
	off, finished, ok := p.commitPoint()
	final := &partitionFinal{tp: m.tp, epoch: m.epoch, offset: off, ok: ok}
	if ok {
		var recorded []offsetmeta.Range
		final.meta, recorded = oc.metadata(m.tp, p, off, finished)
		if len(p.pending) > 0 {
			final.outputs = p.takePassed(off, recorded, nil)
		}
	}
	p.dropPending()           // what the final commit does not pass runs again elsewhere
	oc.unrecorded(m.tp, p, 0) // the partition is no longer this consumer's
	c.Send(c.Parent(), final)
}
