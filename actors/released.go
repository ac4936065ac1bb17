package actors

import (
	"cmp"
	"slices"
	"sync"

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

// releasedFinal is a partition's final watermark at its last release, and
// the id of the topic it was read from.
type releasedFinal struct {
	fc    finalCommit
	topic topicID
}

// topicID is a topic's id (KIP-516): a topic deleted and created again under
// the same name gets a new one. The zero value means unknown (brokers before
// Kafka 2.8 send none, or the lookup failed).
type topicID [16]byte

func (id topicID) known() bool { return id != topicID{} }

// remember records that tp, read from the topic with id, was released at fc.
func (r *releasedAt) remember(tp TopicPartition, id topicID, fc finalCommit) {
	if !fc.ok || fc.offset < 0 {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.final == nil {
		r.final = make(map[TopicPartition]releasedFinal)
	}
	// A lost claim's final watermark may come after a later claim of the
	// partition was released: the higher one of the same topic stays
	// (everything below either was finished here).
	if old, ok := r.final[tp]; ok && old.topic == id && old.fc.offset > fc.offset {
		return
	}
	r.final[tp] = releasedFinal{fc: fc, topic: id}
}

// finished returns the offsets at or above committed (where a new claim of
// tp starts reading; negative when the group has no commit) known to be
// finished: broker's ranges (from the committed metadata) and what this
// member had finished when it last released tp, merged, sorted and
// disjoint. id is the topic's id now (zero if unknown).
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
	case m.fc.offset <= committed:
		return broker // the broker knows as much, or more
	}
	out := slices.Clone(broker)
	out = append(out, offsetmeta.Range{From: max(committed, 0), To: m.fc.offset - 1})
	if mine, err := offsetmeta.Decode(m.fc.offset, m.fc.meta); err == nil {
		out = append(out, mine...)
	}
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
