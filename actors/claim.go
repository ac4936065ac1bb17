package actors

import (
	"time"
	"unsafe"

	"github.com/rs/zerolog"
	"github.com/turbokafka/turbo/actors/offsetmeta"
)

// claimEnd is why a claim stops reading its partition.
type claimEnd uint8

const (
	readOn     claimEnd = iota // not an end: read on
	endRevoked                 // hand the partition over (handshake, final commit)
	endLost                    // drop it: no handover, no commit
	endAborted                 // the side was killed: return at once
)

// claimFeed is what one side does for a claim: where records come from, and
// how it waits. M is the side's record type (sarama's message, memkafka's
// record); fill alone turns it into a Record, and only the claim batches
// records, so batch assembly, credit return and the end paths exist once
// (runClaim). The contract names no actor message: a feed only waits,
// returns records and says why it stopped.
type claimFeed[M any] interface {
	// idle is called when the gate gave no credits: it waits for its wake
	// (or does what the side does about a starved partition) and returns
	// readOn to take credits again, or why the claim ends.
	idle(gt *gate) claimEnd
	// first waits for the first record of a batch of at most n.
	first(n int) (M, claimEnd)
	// next returns the batch's next record if one is ready now; it never
	// waits.
	next() (M, bool)
	// ready is how many records next would return now (more may arrive
	// meanwhile): it sizes the batch's allocation.
	ready() int
	// backlog is how many records the feed holds for the claim, read or
	// not yet returned: what the claim may borrow credits for beyond its
	// gate's own (creditPool). Never less than ready.
	backlog() int
	// unread gives back the record first returned, to be returned first
	// again: the consumer was paused while the claim waited for it.
	unread(m M)
	// hwm is the partition's high-water mark as last seen, sent with each
	// batch.
	hwm() int64
	// batched is called once a batch went to the proxy: it returns whether
	// the feed ended while the batch was assembled (readOn if not).
	batched() claimEnd
	// fill sets the Kafka fields (topic, partition, offset, key, value,
	// timestamp, headers) of a zeroed rec from m; the claim sets the rest.
	fill(rec *Record, m M)
	// ended learns how the claim ended (revoked or lost) and the final
	// watermark the handover or the loss returned. It is not called for a
	// killed side.
	ended(end claimEnd, fc finalCommit)
}

// claimSpec is what a side knows of a claim before it starts.
type claimSpec struct {
	tp         TopicPartition
	committed  int64              // the group's committed offset, -1 if none: where the lag counts from before a batch
	finished   []offsetmeta.Range // finished by an earlier owner, ascending
	maxBatch   int
	revokeWait time.Duration   // upper bound on the revocation handshake
	lost       <-chan struct{} // closed when the partition is lost (nil: never)
	sess       groupSession    // where the handover commits
	log        zerolog.Logger
}

// claim is one owned partition's claim, as both sides run it: its gate and
// epoch, the offsets an earlier owner finished (inherited records), the
// session to commit on, and the channels that end it.
type claim struct {
	claimSpec
	side  *sideLife
	epoch uint64
	gate  *gate
	keys  keyArena
}

// newClaim takes the claim's epoch and makes its gate, which the proxy
// sizes when it gets claimStarted (start).
func (l *sideLife) newClaim(s claimSpec) *claim {
	c := &claim{claimSpec: s, side: l, epoch: l.epochs.Add(1), gate: newGate(0, 0)}
	c.gate.held = l.held
	return c
}

// start tells the proxy of the claim.
func (c *claim) start() { c.side.send(c.started()) }

func (c *claim) started() *claimStarted {
	return &claimStarted{tp: c.tp, epoch: c.epoch, gate: c.gate, committed: max(c.committed, -1), finished: c.finished}
}

// startAll tells the proxy of claims that start together (one message: the
// budgets are shared among them at once).
func (l *sideLife) startAll(cs []*claim) {
	starts := make([]*claimStarted, len(cs))
	for i, c := range cs {
		starts[i] = c.started()
	}
	l.send(&claimsStarted{starts: starts})
}

// runClaim reads c's partition through feed within its gate's credits and
// forwards batches to the proxy until the feed, a loss or a kill ends it;
// it then ends the claim (finish).
func runClaim[M any](c *claim, feed claimFeed[M]) {
	defer c.gate.close()
	for {
		// Borrowed credits only for what the feed holds (one, to wait for
		// the first record): a partition waiting for records must not sit
		// on what the others could read with.
		n, room := c.gate.take(c.maxBatch, max(1, feed.backlog()))
		if n == 0 {
			if end := feed.idle(c.gate); end != readOn {
				c.finish(feed, end)
				return
			}
			continue
		}
		// Like a claim blocked on sarama's channel, it holds its credits
		// while it waits for records.
		m, end := feed.first(n)
		if end != readOn {
			c.finish(feed, end)
			return
		}
		if c.gate.isHeld() {
			// Paused while it waited (Consumer.Pause): nothing is fetched
			// until Resume. The gate gives no credits now, so the claim
			// idles, and the side stops fetching the partition.
			feed.unread(m)
			c.gate.give(n)
			continue
		}
		batch, inherited, used := assemble(c, feed, m, n, room)
		select {
		case <-c.lost: // not one more record of a lost partition
			c.gate.give(n) // nothing of the batch goes on: every credit taken comes back
			c.finish(feed, endLost)
			return
		default:
		}
		// Inherited records never run: their credits come back at once.
		c.gate.settle(n, len(batch)-inherited, used, batch[len(batch)-1].Offset+1)
		c.side.batches.Add(1)
		c.side.send(&claimFetched{tp: c.tp, epoch: c.epoch, records: batch, inherited: inherited, hwm: feed.hwm()})
		if end := feed.batched(); end != readOn {
			c.finish(feed, end)
			return
		}
	}
}

// assemble makes the batch from first and whatever else the feed has ready,
// up to n records and room bytes of records that will run. Records an
// earlier owner finished are marked inherited: they never run, and cost no
// bytes. The records share one allocation rather than one each, sized by
// what the feed has ready rather than by the credits taken: a batch is often
// a small part of them, and the rest of a slab of n would be garbage to
// clear and collect (in the no-op benchmark, 287 bytes per record against
// 218 sized). Records that arrive while it is assembled get a second slab.
func assemble[M any](c *claim, feed claimFeed[M], first M, n int, room int64) (batch []*envelope, inherited int, used int64) {
	size := min(n, 1+feed.ready())
	slab := make([]envelope, size)
	batch = make([]*envelope, 0, size)
	for m, ok := first, true; ok; m, ok = feed.next() {
		if len(slab) == 0 {
			slab = make([]envelope, min(n-len(batch), max(len(batch), 1+feed.ready())))
		}
		rec := &slab[0]
		slab = slab[1:]
		feed.fill(&rec.Record, m)
		rec.epoch, rec.gate = c.epoch, c.gate
		rec.unit = c.keys.copy(rec.Key)
		rec.size = recordSize(&rec.Record)
		if c.finished = skipBelow(c.finished, rec.Offset); len(c.finished) > 0 && rec.Offset >= c.finished[0].From {
			rec.inherited = true
			inherited++
		} else {
			used += rec.size
		}
		batch = append(batch, rec)
		if used >= room || len(batch) == n {
			break // out of bytes or credits: the rest is read later
		}
	}
	return batch, inherited, used
}

// keyArena gives each record a private copy of its key (in envelope.unit,
// which the coordinator keeps under key ordering): the scheduler keys its
// map by a record's key bytes, which must not change while the record is in
// the pipeline, and a handler sees the Key slice itself. The copies are
// carved out of shared chunks, one allocation per keyChunk bytes of keys
// rather than one per key; a chunk lives as long as a record's unit points
// into it (as the fetch buffer does that the record's Key and Value point
// into). A claim's arena is used by its goroutine alone.
type keyArena struct{ chunk []byte }

// keyChunk is the largest size of an arena's chunks; keys above a quarter
// of it get an allocation of their own, so a chunk wastes at most a
// quarter. A claim's first chunk is firstKeyChunk and each next one twice
// the last: at 4,096 partitions, each with a few dozen records, a first
// chunk of keyChunk held 16 MiB for a few hundred KiB of keys.
const (
	keyChunk      = 4 << 10
	firstKeyChunk = 256
)

// copy returns a private copy of key as a string.
func (a *keyArena) copy(key []byte) string {
	n := len(key)
	switch {
	case n == 0:
		return ""
	case n > keyChunk/4:
		return string(key)
	case n > cap(a.chunk)-len(a.chunk):
		a.chunk = make([]byte, 0, max(n, min(keyChunk, max(firstKeyChunk, 2*cap(a.chunk)))))
	}
	from := len(a.chunk)
	a.chunk = append(a.chunk, key...) // within capacity: never moves
	return unsafe.String(&a.chunk[from], n)
}

// skipBelow drops the ranges that end before offset (offsets only grow).
func skipBelow(rs []offsetmeta.Range, offset int64) []offsetmeta.Range {
	for len(rs) > 0 && rs[0].To < offset {
		rs = rs[1:]
	}
	return rs
}

// finish ends the claim in one place: a revoked claim is handed over, a lost
// one dropped, and the side learns the final watermark. A killed side's
// claims just return: its proxy is gone. (A kill also ends the session, so
// a claim may see both; returning at once is what the kill asks.)
func (c *claim) finish(feed interface{ ended(claimEnd, finalCommit) }, end claimEnd) {
	if end == endAborted || c.side.aborted() {
		return
	}
	var fc finalCommit
	if end == endRevoked {
		fc = c.handOver()
	} else {
		fc = c.dropLost()
	}
	feed.ended(end, fc)
}

// handOver is the claim's end of the revocation handshake: it tells the
// proxy (claimEnding), waits for the partition's final watermark — bounded
// by revokeWait, and cut short by a kill — and commits it before the claim
// lets the partition go. It returns that final watermark (ok false when
// there was none, or no answer).
//
// A partition lost meanwhile (lost closed) ends the handshake without a
// commit: it is dropped as lost (claimLost).
func (c *claim) handOver() finalCommit {
	reply := make(chan finalCommit, 1)
	c.side.send(&claimEnding{tp: c.tp, epoch: c.epoch, reply: reply})
	t := time.NewTimer(c.revokeWait)
	defer t.Stop()
	select {
	case fc := <-reply:
		if fc.ok {
			// MarkOffset only moves forward; ResetOffset then sets the
			// metadata even when the offset is the one already marked.
			c.sess.MarkOffset(c.tp.Topic, c.tp.Partition, fc.offset, fc.meta)
			c.sess.ResetOffset(c.tp.Topic, c.tp.Partition, fc.offset, fc.meta)
		}
		c.side.commits.commit(c.sess)
		return fc
	case <-c.lost:
		return c.dropLost()
	case <-c.side.abort:
	case <-t.C:
		c.log.Error().Str("partition", c.tp.String()).Msg("revocation handshake timed out; releasing without a final commit")
	}
	return finalCommit{}
}

// lostReplyWait bounds a lost claim's wait for the proxy's answer (the
// proxy answers at once; a tree being torn down may not).
const lostReplyWait = time.Second

// dropLost is the claim's end of a loss: it tells the proxy, and returns the
// last watermark the proxy marked for the partition (ok false if none, or
// no answer): what this member finished, never committed.
func (c *claim) dropLost() finalCommit {
	reply := make(chan finalCommit, 1)
	c.side.send(&claimLost{tp: c.tp, epoch: c.epoch, reply: reply})
	t := time.NewTimer(lostReplyWait)
	defer t.Stop()
	select {
	case fc := <-reply:
		return fc
	case <-c.side.abort:
	case <-t.C:
	}
	return finalCommit{}
}
