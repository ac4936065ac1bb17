package actors

import (
	"cmp"
	"slices"
	"sync"
	"time"

	"github.com/turbokafka/turbo/actors/offsetmeta"
)

// releasedAt remembers, per partition, the final watermark (and its
// metadata) at which this consumer group's member last released it. When
// the member claims the partition again, what it finished before is known
// without the broker: that matters when the release's final commit never
// reached the broker — a broker restart ends the session while records
// still finish, and none of those commits lands — so the broker's committed
// offset lags what this member really finished. Those records are then
// inherited (skipped, yet counted for the watermark) instead of run again.
//
// The broker may also have no commit at all for the partition: one claimed
// shortly before the broker went away may never have had one land (in
// TestBrokerRestartMidRun under CPU load, a partition had 136 records
// finished and none committed when the broker stopped 2 s after the start).
// Its next claim starts from the initial offset (sarama's claim then
// reports a negative one), and without the memory everything the member
// had finished there ran again: 3 runs of 6 re-ran one partition from
// offset 0 (136, 330 and 360 records). "No commit" is also what a
// topic deleted and created again under the same name looks like, and
// there the memory must not be used (its offsets name other records), so it
// is trusted without a commit only when the topic's id (KIP-516) is known
// and the same as when the memory was taken; a known and different id
// discards it in every case.
//
// Only what this member itself finished is remembered, so skipping it never
// loses a record whoever owned the partition meanwhile. The memory lives as
// long as the Consumer: a tree restart keeps it, since the commit before a
// restart may not land either (TestRestartKeepsWhatTheTreeFinishedWhenCommitsFail:
// with every commit refused, 3 restarts ran each of 99 finished records 3
// times). It is consulted only when the broker's committed offset lies below
// it.
type releasedAt struct {
	mu    sync.Mutex
	final map[TopicPartition]releasedFinal
}

// releasedFinal is what this member finished of a partition, as its
// releases said: everything below offset, and ranges above it; and the id
// of the topic it was read from.
type releasedFinal struct {
	offset int64
	ranges []offsetmeta.Range // sorted, disjoint, above offset
	topic  topicID
}

// topicID is a topic's id (KIP-516): a topic deleted and created again under
// the same name gets a new one. The zero value means unknown (brokers before
// Kafka 2.8 send none, or the lookup failed).
type topicID [16]byte

func (id topicID) known() bool { return id != topicID{} }

// remember records that tp, read from the topic with id, was released at fc.
//
// Releases of the same topic add up: everything any of them says was
// finished was finished here. The last release alone may know less than
// an earlier one — a lost claim's final watermark may come after a later
// claim of the partition was released, and a tree restarting over one
// record that never succeeds releases at that record every time, each
// generation having read only part of what the one before finished — so
// it must not replace it. A different topic id replaces everything.
func (r *releasedAt) remember(tp TopicPartition, id topicID, fc finalCommit) {
	if !fc.ok || fc.offset < 0 {
		return
	}
	ranges, err := offsetmeta.Decode(fc.offset, fc.meta)
	if err != nil {
		ranges = nil // our own encoding; unreadable would be a bug, and the offset alone is still true
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.final == nil {
		r.final = make(map[TopicPartition]releasedFinal)
	}
	next := releasedFinal{offset: fc.offset, ranges: ranges, topic: id}
	if old, ok := r.final[tp]; ok && old.topic == id && !fc.moved { // a seek back must not be undone
		next.offset = max(old.offset, fc.offset)
		next.ranges = above(next.offset, unionRanges(append(slices.Clone(old.ranges), ranges...)))
	}
	if len(next.ranges) > maxReleasedRanges {
		next.ranges = next.ranges[:maxReleasedRanges:maxReleasedRanges] // the lowest: a new claim reads them first
	}
	r.final[tp] = next
}

// lostClaims are a group's claims that may yet be lost, by epoch, with the
// id of the topic each read. The final watermark of a lost claim —
// everything it finished, once its cancelled records returned — comes after
// the claim has gone, and rememberLost gives it to releasedAt then. What
// lose remembered at once is only the last watermark the offset controller
// published; without this, the records finished since (up to a commit
// interval's worth, above any unfinished one) ran again when the partition
// came back: 161 duplicates of 9,000 in TestBrokerRestartMidRun, whose
// SIGKILLed broker ends the session.
//
// A new claim of the same partition must wait for them (settled): a session
// lost while the broker restarted was joined again within moments, and a
// claim that started before the old one's final watermark came ran again
// what the old one had finished since its last published watermark (45 and
// 48 records run twice in TestBrokerRestartMidRun under load, against a
// bound of 32).
type lostClaims struct {
	mu      sync.Mutex
	claims  map[uint64]expectedClaim
	changed chan struct{} // closed, and replaced, when a claim goes
}

type expectedClaim struct {
	tp TopicPartition
	id topicID
}

// expect notes a claim that may be lost.
func (l *lostClaims) expect(epoch uint64, tp TopicPartition, id topicID) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.claims == nil {
		l.claims = make(map[uint64]expectedClaim)
	}
	l.claims[epoch] = expectedClaim{tp: tp, id: id}
}

// forget drops a claim that ended without being lost.
func (l *lostClaims) forget(epoch uint64) {
	l.mu.Lock()
	l.drop(epoch)
	l.mu.Unlock()
}

// drop removes epoch's claim and wakes settled; l.mu is held.
func (l *lostClaims) drop(epoch uint64) (expectedClaim, bool) {
	c, ok := l.claims[epoch]
	if ok {
		delete(l.claims, epoch)
		if l.changed != nil {
			close(l.changed)
			l.changed = nil
		}
	}
	return c, ok
}

// rememberLost gives r the final watermark of the lost claim of epoch.
func (l *lostClaims) rememberLost(r *releasedAt, tp TopicPartition, epoch uint64, fc finalCommit) {
	l.mu.Lock()
	c, ok := l.drop(epoch)
	l.mu.Unlock()
	if ok {
		r.remember(tp, c.id, fc)
	}
}

// settled waits until no earlier claim of tp waits for its final watermark,
// and reports true; or false once timeout passes or done closes (then the
// new claim starts knowing less, and may run records twice).
func (l *lostClaims) settled(tp TopicPartition, timeout time.Duration, done <-chan struct{}) bool {
	var deadline <-chan time.Time
	for {
		l.mu.Lock()
		pending := false
		for _, c := range l.claims {
			pending = pending || c.tp == tp
		}
		if !pending {
			l.mu.Unlock()
			return true
		}
		if l.changed == nil {
			l.changed = make(chan struct{})
		}
		changed := l.changed
		l.mu.Unlock()
		if deadline == nil {
			t := time.NewTimer(timeout)
			defer t.Stop()
			deadline = t.C
		}
		select {
		case <-changed:
		case <-deadline:
			return false
		case <-done:
			return false
		}
	}
}

// maxReleasedRanges bounds what a partition's memory keeps above its
// watermark (16 bytes a range). Each release's ranges fit in the commit
// metadata budget, but their union could grow with every release.
const maxReleasedRanges = 4096

// above returns the parts of the sorted, disjoint ranges rs above offset.
func above(offset int64, rs []offsetmeta.Range) []offsetmeta.Range {
	out := rs[:0]
	for _, r := range rs {
		if r.To < offset {
			continue
		}
		r.From = max(r.From, offset)
		out = append(out, r)
	}
	return out
}

// finished returns the offsets at or above committed (where a new claim of
// tp starts reading; negative when the group has no commit) known to be
// finished: broker's ranges (from the committed metadata) and what this
// member had finished when it released tp, merged, sorted and disjoint. id
// is the topic's id now (zero if unknown).
func (r *releasedAt) finished(tp TopicPartition, id topicID, committed int64, broker []offsetmeta.Range) []offsetmeta.Range {
	r.mu.Lock()
	m, ok := r.final[tp]
	r.mu.Unlock()
	switch {
	case !ok:
		return broker
	case id.known() && m.topic.known() && id != m.topic:
		return broker // the topic was created again: other records
	case committed < 0 && !(id.known() && id == m.topic):
		return broker // no commit, and no proof it is the same topic
	case m.offset <= committed && len(above(committed, slices.Clone(m.ranges))) == 0:
		return broker // the broker knows as much, or more
	}
	out := slices.Clone(broker)
	if m.offset > committed {
		out = append(out, offsetmeta.Range{From: max(committed, 0), To: m.offset - 1})
	}
	out = append(out, above(max(committed, 0), slices.Clone(m.ranges))...)
	return unionRanges(out)
}

// unionRanges sorts rs and merges overlapping and adjacent ranges.
func unionRanges(rs []offsetmeta.Range) []offsetmeta.Range {
	slices.SortFunc(rs, func(a, b offsetmeta.Range) int { return cmp.Compare(a.From, b.From) })
	out := rs[:0]
	for _, r := range rs {
		if n := len(out); n > 0 && r.From <= out[n-1].To+1 {
			out[n-1].To = max(out[n-1].To, r.To)
			continue
		}
		out = append(out, r)
	}
	return out
}
