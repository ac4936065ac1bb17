package actors

import (
	"cmp"
	"slices"
	"sync/atomic"
	"time"
)

// partWatch is what one partition assignment shows to observers (/status,
// /metrics): the actors that own each value write it with an atomic store
// as it changes, and readers copy them at any time. It lives on the
// assignment's gate, which every actor handling the partition already holds.
type partWatch struct {
	committed atomic.Int64 // offset last marked for commit, -1 if none (proxy)
	hwm       atomic.Int64 // high watermark as last known (a fetch, or a refresh: hwmrefresh.go), -1 if unknown (proxy)
	lag       atomic.Int64 // records between the committed offset and the high watermark (proxy)
	running   atomic.Int64 // records in a handler now (runners)
	paused    atomic.Bool  // not fetched now: its share of the budget is used up (claim)
	oldest    atomic.Int64 // unix ns: when the oldest unfinished record arrived, 0 if none (offset controller)
	oldestAt  atomic.Int64 // that record's offset, -1 if none (offset controller)
}

func newPartWatch() *partWatch {
	w := &partWatch{}
	w.committed.Store(-1)
	w.hwm.Store(-1)
	w.oldestAt.Store(-1)
	return w
}

// PartitionStats is a point-in-time copy of one owned partition's state.
type PartitionStats struct {
	TopicPartition
	Committed int64 // the offset committed (the next record to read), -1 before the first commit
	// HighWatermark is the partition's high watermark as last known, -1
	// before it is: each fetch brings it, and while the partition is not
	// fetched (paused, or its share of the budget used up) it is asked of
	// the brokers every few seconds.
	HighWatermark int64
	// Lag is the records between Committed (before this member's first
	// commit: the offset the group had committed, or else the first record
	// read) and HighWatermark.
	Lag      int64
	InFlight int64 // its records in a handler now
	// Buffered is its records fetched, not finished and not in a handler:
	// waiting for a runner, a retry or their key.
	Buffered int64
	Paused   bool // not fetched now: its share of the budget is used up
	Held     bool // paused by the operator: Pause(tp), or PauseTopics of its topic
	// OldestUnfinished is since when the oldest of its records that has
	// not finished has held the committed offset (zero when none is
	// unfinished): since it arrived or, if later, since every record before
	// it finished. A record waiting its turn in a backlog holds nothing
	// yet, so a growing age means a stuck key, not a busy partition.
	OldestUnfinished time.Time
	// OldestUnfinishedOffset is that record's offset (-1 when none is
	// unfinished): the one a stuck partition waits for, to Skip.
	OldestUnfinishedOffset int64
}

// trackPartition shows a newly assigned partition in Consumer.Partitions.
func (s *consumerStats) trackPartition(tp TopicPartition, g *gate) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.parts == nil {
		s.parts = make(map[TopicPartition]*gate)
	}
	s.parts[tp] = g
	g.partHeld.Store(s.heldLocked(tp))
	if !s.suspended.Load() {
		g.wakeUp() // a claim that began while paused may wait for it (see resumeGates)
	}
}

// resumeGates wakes every claim after Resume: a paused gate gave no
// credits, and its claim waits for a wake. A claim whose gate is not
// tracked yet is woken by trackPartition (it reads the flag under the same
// lock, after Resume cleared it).
func (s *consumerStats) resumeGates() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, g := range s.parts {
		g.wakeUp()
	}
}

// untrackPartition removes a partition that is no longer owned (unless a
// newer assignment of it replaced the gate already).
func (s *consumerStats) untrackPartition(tp TopicPartition, g *gate) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.parts[tp] == g {
		delete(s.parts, tp)
	}
}

// untrackAll forgets every partition (the tree is torn down).
func (s *consumerStats) untrackAll() {
	s.mu.Lock()
	defer s.mu.Unlock()
	clear(s.parts)
}

// owned is one tracked partition and its gate.
type owned struct {
	tp TopicPartition
	g  *gate
}

// owned copies the tracked partitions, so that their gates' locks are taken
// outside s.mu.
func (s *consumerStats) owned() []owned {
	s.mu.Lock()
	defer s.mu.Unlock()
	all := make([]owned, 0, len(s.parts))
	for tp, g := range s.parts {
		all = append(all, owned{tp, g})
	}
	return all
}

// Partitions returns the owned partitions' state, sorted by topic and
// partition.
func (s *consumerStats) Partitions() []PartitionStats {
	all := s.owned()
	out := make([]PartitionStats, len(all))
	for i, h := range all {
		out[i] = h.g.stats(h.tp)
	}
	slices.SortFunc(out, func(a, b PartitionStats) int {
		return cmp.Or(cmp.Compare(a.Topic, b.Topic), cmp.Compare(a.Partition, b.Partition))
	})
	return out
}

// status is a Snapshot with the partitions it sums: its Buffered is the sum
// of theirs, read once.
func (s *consumerStats) status() (Snapshot, []PartitionStats) {
	parts := s.Partitions()
	var buffered int64
	for _, p := range parts {
		buffered += p.Buffered
	}
	return s.snapshot(buffered), parts
}

// buffered is the consumer's buffered records: the sum of its partitions'
// (gate.buffered), so that the two add up. A partition no longer held
// (revoked, lost, or the tree torn down) is not counted, though its
// records may still be on their way out of the pipeline.
func (s *consumerStats) buffered() int64 {
	var n int64
	for _, h := range s.owned() {
		n += h.g.buffered()
	}
	return n
}

// stats copies the partition's state: the watch's values, and from the
// gate the records it holds in the pipeline.
func (g *gate) stats(tp TopicPartition) PartitionStats {
	w := g.watch
	p := PartitionStats{
		TopicPartition: tp,
		Committed:      w.committed.Load(),
		HighWatermark:  w.hwm.Load(),
		Lag:            w.lag.Load(),
		Paused:         w.paused.Load(),
		Held:           g.partHeld.Load(),

		OldestUnfinishedOffset: -1,
	}
	p.InFlight, p.Buffered = g.pipeline()
	if ns := w.oldest.Load(); ns != 0 {
		p.OldestUnfinished = time.Unix(0, ns)
		p.OldestUnfinishedOffset = w.oldestAt.Load()
	}
	return p
}

// buffered is the partition's records in the pipeline and not in a
// handler (see pipeline).
func (g *gate) buffered() int64 {
	_, b := g.pipeline()
	return b
}

// pipeline returns the partition's records in a handler, and those in the
// pipeline and not in a handler. A record counts in the pipeline from the
// claim's settle to the coordinator's release, and as running while its
// runner's counter holds it, which is within that span: so the difference
// is never negative, and both are 0 once everything fetched has finished.
// The two are read apart, the pipeline first: a record that finishes in
// between counts as buffered for that instant (it is, until the
// coordinator releases it); one settled and started in between could make
// the difference negative, which is floored at 0.
func (g *gate) pipeline() (running, buffered int64) {
	piped := int64(g.inPipeline())
	running = max(g.watch.running.Load(), 0)
	return running, max(piped-running, 0)
}

// pausePartitions pauses (on) or resumes the partitions: their gates give
// no credits while paused, and a resumed one's claim is woken. A partition
// not held now is paused from its next assignment. A partition of a paused
// topic stays paused until its topic is resumed.
func (s *consumerStats) pausePartitions(tps []TopicPartition, on bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.pausedParts == nil {
		s.pausedParts = make(map[TopicPartition]bool)
	}
	for _, tp := range tps {
		if on {
			s.pausedParts[tp] = true
		} else {
			delete(s.pausedParts, tp)
		}
		s.rehold(tp)
	}
	s.pausesCountedLocked()
}

// pauseTopics pauses (on) or resumes whole topics: every partition of
// them, held now or assigned later. Resuming a topic resumes its partitions
// paused one by one too: nothing of it stays paused.
func (s *consumerStats) pauseTopics(topics []string, on bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.pausedTopics == nil {
		s.pausedTopics = make(map[string]bool)
	}
	for _, t := range topics {
		if on {
			s.pausedTopics[t] = true
			continue
		}
		delete(s.pausedTopics, t)
		for tp := range s.pausedParts {
			if tp.Topic == t {
				delete(s.pausedParts, tp)
			}
		}
	}
	for tp := range s.parts {
		if slices.Contains(topics, tp.Topic) {
			s.rehold(tp)
		}
	}
	s.pausesCountedLocked()
}

// rehold sets the gate of tp, if it is held now, to what the pauses say,
// and wakes its claim when it is free to go on. s.mu is held.
func (s *consumerStats) rehold(tp TopicPartition) {
	g := s.parts[tp]
	if g == nil {
		return
	}
	held := s.heldLocked(tp)
	g.partHeld.Store(held)
	if !held {
		g.wakeUp()
	}
}

// pausesCountedLocked publishes the number of pauses (read without the
// lock) and counts the change. s.mu is held.
func (s *consumerStats) pausesCountedLocked() {
	s.partsPaused.Store(int64(len(s.pausedParts) + len(s.pausedTopics)))
	s.pausesChanged.Add(1)
}

// heldLocked reports whether tp is paused, by itself or by its topic. s.mu
// is held.
func (s *consumerStats) heldLocked(tp TopicPartition) bool {
	return s.pausedParts[tp] || s.pausedTopics[tp.Topic]
}

// partitionPaused reports whether tp is paused (Consumer.Pause(tp), or
// PauseTopics of its topic); cheap while none is.
func (s *consumerStats) partitionPaused(tp TopicPartition) bool {
	if s.partsPaused.Load() == 0 {
		return false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.heldLocked(tp)
}

// pausedTopicList lists the topics paused by PauseTopics.
func (s *consumerStats) pausedTopicList() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]string, 0, len(s.pausedTopics))
	for t := range s.pausedTopics {
		out = append(out, t)
	}
	slices.Sort(out)
	return out
}

// pausedPartitions lists the paused partitions.
func (s *consumerStats) pausedPartitions() []TopicPartition {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]TopicPartition, 0, len(s.pausedParts))
	for tp := range s.pausedParts {
		out = append(out, tp)
	}
	slices.SortFunc(out, compareTP)
	return out
}

// compareTP orders partitions by topic, then number.
func compareTP(a, b TopicPartition) int {
	return cmp.Or(cmp.Compare(a.Topic, b.Topic), cmp.Compare(a.Partition, b.Partition))
}
