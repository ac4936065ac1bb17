package actors

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// queueMarks bound a franz-go claim's queue: the records the poll loop
// delivered that the claim has not taken yet. Past the high mark (in records
// or in bytes of keys and values) the partition is paused in the client,
// which then drops what it has buffered of it and stops fetching it; it
// resumes once the claim, with credits, has taken the queue down to the low
// mark. The high mark holds two fetches of a partition (partitionFetch): a
// pause drops what the client has buffered of the partition, and at 256
// records every fetch of small records was cut short and fetched again.
// Being per partition, the marks shrink with the fetch as partitions grow.
type queueMarks struct {
	high, low           int
	highBytes, lowBytes int64
}

// marksFor are the queue marks for partitions fetched fetch bytes at a time.
func marksFor(fetch int32) queueMarks {
	return queueMarks{high: 4096, low: 1024, highBytes: 2 * int64(fetch), lowBytes: int64(fetch) / 2}
}

// franzFeed feeds one claim from the records the poll loop delivers, and
// pauses and resumes its partition in the client: at the queue's marks, and
// at once when the claim is out of byte credits or held by Consumer.Pause
// (then resumed once its queue is empty, as on the sarama side).
//
// A partition merely waiting for record credits is not paused, unlike on
// the sarama side: its queue's high mark already bounds what the client
// fetches of it, and each of the client's pause and resume calls copies its
// whole set of paused partitions. At 4,096 partitions sharing a budget of a
// thousand or so records, most wait for credits at any moment, and pausing
// each after a while and resuming it once served made thousands of those
// copies of thousands of partitions: a quarter of turbo's CPU.
type franzFeed struct {
	g      *franzGroup
	pauses *fetchPauses // the client's
	tp     TopicPartition
	id     topicID // the topic's id when the claim started, for releasedAt
	epoch  uint64
	gt     *gate

	wake       chan struct{} // capacity 1: records were delivered
	revoked    chan struct{}
	revokeOnce sync.Once
	lost       chan struct{} // the partition is lost (its own, or its session's)
	loseOnce   sync.Once
	returned   chan struct{} // closed when the claim goroutine has returned

	marks queueMarks

	mu     sync.Mutex
	queue  []*kgo.Record
	head   int   // queue[head:] is what the claim has not taken
	bytes  int64 // of keys and values in queue[head:]
	back   *kgo.Record
	hw     int64
	paused bool
	// full: paused for the queue's high mark (it resumes at the low mark,
	// so the next fetch arrives before the claim runs dry); else for want
	// of credits or bytes, when it resumes, as the sarama side does, only
	// once the claim has taken everything queued.
	full   bool
	closed bool
}

func (f *franzFeed) revoke()                 { f.revokeOnce.Do(func() { close(f.revoked) }) }
func (f *franzFeed) lose()                   { f.loseOnce.Do(func() { close(f.lost) }) }
func (f *franzFeed) lostCh() <-chan struct{} { return f.lost }

func recBytes(r *kgo.Record) int64 { return int64(len(r.Key) + len(r.Value)) }

// deliver appends records the poll loop fetched (under the group's lock)
// and pauses the partition when the queue is past its high mark.
func (f *franzFeed) deliver(recs []*kgo.Record, hwm int64) {
	f.mu.Lock()
	if f.closed {
		f.mu.Unlock()
		return
	}
	if f.head > 0 && f.head >= len(f.queue)/2 {
		n := copy(f.queue, f.queue[f.head:])
		clear(f.queue[n:])
		f.queue, f.head = f.queue[:n], 0
	}
	f.queue = append(f.queue, recs...)
	for _, r := range recs {
		f.bytes += recBytes(r)
	}
	f.hw = max(f.hw, hwm)
	pause := !f.paused && (len(f.queue)-f.head >= f.marks.high || f.bytes >= f.marks.highBytes)
	if pause {
		f.paused, f.full = true, true
	}
	f.mu.Unlock()
	f.g.stats.readAhead.Add(int64(len(recs)))
	if pause {
		f.pauseInClient()
	}
	select {
	case f.wake <- struct{}{}:
	default:
	}
}

func (f *franzFeed) pauseInClient() {
	f.pauses.set(f.tp, true)
	f.g.stats.setPaused(f.gt, true)
}

func (f *franzFeed) resumeInClient() {
	f.pauses.set(f.tp, false)
	f.g.stats.setPaused(f.gt, false)
}

// take returns the next record of the queue, if any; resume reports that
// the partition was paused and the queue is now low enough to fetch again
// (the caller resumes it: it has credits): at the low mark after a pause
// for the high one, empty after one for want of credits or bytes.
func (f *franzFeed) take(resumeLow bool) (m *kgo.Record, ok, resume bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	switch {
	case f.back != nil:
		m, f.back = f.back, nil
	case f.head < len(f.queue):
		m = f.queue[f.head]
		f.queue[f.head] = nil
		f.head++
	}
	if m != nil {
		f.bytes -= recBytes(m)
	}
	low := f.head == len(f.queue) && f.back == nil
	if f.full {
		low = len(f.queue)-f.head <= f.marks.low && f.bytes <= f.marks.lowBytes
	}
	if resumeLow && f.paused && low {
		f.paused, f.full, resume = false, false, true
	}
	return m, m != nil, resume
}

// ending returns why the claim must end now, readOn if it need not.
func (f *franzFeed) ending() claimEnd {
	select {
	case <-f.g.abort:
		return endAborted
	case <-f.lost:
		return endLost
	case <-f.revoked:
		return endRevoked
	default:
		return readOn
	}
}

// idle implements claimFeed: a partition out of bytes, or held
// (Consumer.Pause), is paused at once; one waiting for record credits only
// waits (see franzFeed).
func (f *franzFeed) idle(gt *gate) claimEnd {
	if end := f.ending(); end != readOn {
		return end
	}
	f.mu.Lock()
	pause := !f.paused && (gt.isHeld() || gt.outOfBytes())
	if pause {
		f.paused = true
	}
	f.mu.Unlock()
	if pause {
		f.pauseInClient()
		return readOn
	}
	select {
	case <-gt.wake:
	case <-f.revoked:
		return endRevoked
	case <-f.lost:
		return endLost
	case <-f.g.abort:
		return endAborted
	}
	return readOn
}

// first implements claimFeed: it waits for a record, resuming the partition
// when the queue ran low.
func (f *franzFeed) first(int) (*kgo.Record, claimEnd) {
	for {
		if end := f.ending(); end != readOn {
			return nil, end
		}
		m, ok, resume := f.take(true)
		if resume {
			f.resumeInClient()
		}
		if ok {
			f.g.stats.readAhead.Add(-1)
			return m, readOn
		}
		select {
		case <-f.wake:
		case <-f.revoked:
			return nil, endRevoked
		case <-f.lost:
			return nil, endLost
		case <-f.g.abort:
			return nil, endAborted
		}
	}
}

// next implements claimFeed.
func (f *franzFeed) next() (*kgo.Record, bool) {
	m, ok, _ := f.take(false)
	if ok {
		f.g.stats.readAhead.Add(-1)
	}
	return m, ok
}

// ready implements claimFeed.
func (f *franzFeed) ready() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	n := len(f.queue) - f.head
	if f.back != nil {
		n++
	}
	return n
}

// backlog implements claimFeed: the claim's queue.
func (f *franzFeed) backlog() int { return f.ready() }

// unread implements claimFeed.
func (f *franzFeed) unread(m *kgo.Record) {
	f.mu.Lock()
	f.back = m
	f.bytes += recBytes(m)
	f.mu.Unlock()
	f.g.stats.readAhead.Add(1)
}

// hwm implements claimFeed.
func (f *franzFeed) hwm() int64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.hw
}

// batched implements claimFeed: an end is seen at the next take.
func (f *franzFeed) batched() claimEnd { return readOn }

// fill implements claimFeed.
func (f *franzFeed) fill(rec *Record, m *kgo.Record) {
	rec.Topic, rec.Partition, rec.Offset = m.Topic, m.Partition, m.Offset
	rec.Key, rec.Value, rec.Timestamp = m.Key, m.Value, m.Timestamp
	if len(m.Headers) > 0 {
		rec.Headers = make([]Header, len(m.Headers))
		for i, h := range m.Headers {
			rec.Headers[i] = Header{Key: h.Key, Value: h.Value}
		}
	}
}

// ended implements claimFeed, as saramaFeed.ended.
func (f *franzFeed) ended(end claimEnd, fc finalCommit) {
	if f.g.txnID == "" { // exactly once: see newFranzClaim
		f.g.released.remember(f.tp, f.id, fc)
	}
	if end == endLost {
		return
	}
	f.g.lost.forget(f.epoch)
}

// close gives back the stats of what the claim still had queued, or paused.
func (f *franzFeed) close() {
	f.mu.Lock()
	f.closed = true
	n := len(f.queue) - f.head
	if f.back != nil {
		n++
	}
	f.queue, f.back = nil, nil
	paused := f.paused
	f.mu.Unlock()
	f.g.stats.readAhead.Add(-int64(n))
	if paused {
		f.g.stats.setPaused(f.gt, false)
	}
}

// franzSession is the groupSession of the franz-go side: the offsets marked
// (with their metadata), committed by Commit in one OffsetCommit request
// with the member's id and generation (member epoch under the consumer
// protocol), so that a member the group has moved past cannot commit. The
// client's own commit API carries no metadata.
//
// With output.exactly_once its commits are transactions instead (txn.go):
// the marks reach the transaction loop through transact, and Commit has
// the loop commit.
//
// Lock order: the group's mutex, then the session's (mu); nothing that
// holds mu takes the group's.
type franzSession struct {
	g        *franzGroup
	txn      *txnLoop   // exactly once; nil otherwise
	seq      uint64     // sessions in the order they began
	commitMu sync.Mutex // one commit at a time, in order
	mu       sync.Mutex
	marks    map[TopicPartition]franzMark
}

func (s *franzSession) order() uint64 { return s.seq }

type franzMark struct {
	offset int64
	meta   string
	dirty  bool
}

// MarkOffset implements groupSession: offsets only move forward.
func (s *franzSession) MarkOffset(topic string, partition int32, offset int64, meta string) {
	if s.txn != nil {
		return // recorded by transact already, with its outputs
	}
	tp := TopicPartition{Topic: topic, Partition: partition}
	s.mu.Lock()
	defer s.mu.Unlock()
	if m, ok := s.marks[tp]; !ok || offset > m.offset {
		s.marks[tp] = franzMark{offset: offset, meta: meta, dirty: true}
	}
}

// ResetOffset implements groupSession.
func (s *franzSession) ResetOffset(topic string, partition int32, offset int64, meta string) {
	if s.txn != nil {
		return // recorded by transact already
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.marks[TopicPartition{Topic: topic, Partition: partition}] = franzMark{offset: offset, meta: meta, dirty: true}
}

// forget drops a partition the member no longer owns.
func (s *franzSession) forget(tp TopicPartition) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.marks, tp)
}

// lose ends every claim of the session at once, without a commit.
func (s *franzSession) lose() {
	s.g.mu.Lock()
	defer s.g.mu.Unlock()
	for _, f := range s.g.feeds {
		f.lose()
	}
	for _, f := range s.g.ending {
		f.lose()
	}
}

// commitWait bounds one Commit, its retries included.
const commitWait = 10 * time.Second

// generationPoll is how often a commit refused for a stale generation
// looks for the member's next one.
const generationPoll = 20 * time.Millisecond

// Commit implements groupSession: it commits every mark not committed yet.
// A failed partition stays marked for the next commit; a refusal that
// says the member is no longer in the group loses the session's claims at
// once (the client's next heartbeat ends the session).
//
// A commit the group refuses because it moved to a new generation (member
// epoch) while the request was under way is sent again in the new one, for
// the partitions the member still holds (those it lost or handed over are
// forgotten, and not sent): a partition the member kept across a
// cooperative rebalance was nobody else's meanwhile. Only the last refusal
// is reported.
func (s *franzSession) Commit() {
	if s.txn != nil {
		_ = s.txn.commitTxn() // a failure reaches the tree as a transactionFailed
		return
	}
	s.commitMu.Lock()
	defer s.commitMu.Unlock()
	cl := s.g.client()
	if cl == nil {
		return
	}
	deadline := time.Now().Add(commitWait)
	for {
		memberID, generation := cl.GroupMetadata()
		if memberID == "" {
			return // between sessions: the marks wait
		}
		n, err := s.commitOnce(cl, memberID, generation, deadline)
		if err == nil {
			return
		}
		if retry := commitRetry(err); retry != retryNever && s.awaitGeneration(cl, generation, retry, deadline) {
			s.g.log.Debug().Err(err).Int32("generation", generation).Msg("commit refused while the group moved on: sending it again")
			continue
		}
		s.g.stats.commitErrs.Add(1)
		s.g.log.Warn().Err(err).Int("partitions", n).Msg("kafka commit refused")
		if errors.Is(err, kerr.UnknownMemberID) || errors.Is(err, kerr.FencedInstanceID) {
			s.g.log.Warn().Msg("the group no longer knows this member: its partitions are dropped without a commit")
			s.lose()
		}
		return
	}
}

// retryWhen says when a refused commit is worth sending again: never;
// once the member's generation has changed (the group moved past the one
// the request named); or after a pause (a rebalance is completing).
type retryWhen int

const (
	retryNever retryWhen = iota
	retryNewGeneration
	retryAfterPause
)

// commitRetry says when a commit refused with err is sent again.
func commitRetry(err error) retryWhen {
	switch {
	case errors.Is(err, kerr.IllegalGeneration), errors.Is(err, kerr.StaleMemberEpoch):
		return retryNewGeneration
	case errors.Is(err, kerr.RebalanceInProgress):
		return retryAfterPause
	}
	return retryNever
}

// awaitGeneration waits, until deadline, for what retry needs: the
// member's generation to differ from sent, or one pause. It reports
// whether to send again.
func (s *franzSession) awaitGeneration(cl *kgo.Client, sent int32, retry retryWhen, deadline time.Time) bool {
	t := time.NewTicker(generationPoll)
	defer t.Stop()
	for time.Now().Add(generationPoll).Before(deadline) {
		select {
		case <-s.g.killCtx.Done():
			return false
		case <-t.C:
		}
		memberID, generation := cl.GroupMetadata()
		switch {
		case memberID == "":
			return false // out of the group: nothing to commit in
		case retry == retryAfterPause || generation != sent:
			return true
		}
	}
	return false
}

// commitOnce sends the marks not committed yet in one OffsetCommit request
// of generation, and returns how many partitions it named and the first
// error (of the request, or of a partition). A refused partition stays
// marked.
func (s *franzSession) commitOnce(cl *kgo.Client, memberID string, generation int32, deadline time.Time) (int, error) {
	req := kmsg.NewPtrOffsetCommitRequest()
	req.Group, req.MemberID, req.Generation = s.g.groupID, memberID, generation
	if id := s.g.instanceID; id != "" {
		req.InstanceID = &id
	}
	all := s.takeDirty()
	if len(all) == 0 {
		return 0, nil
	}
	byTopic := map[string]int{}
	for _, x := range all {
		i, ok := byTopic[x.tp.Topic]
		if !ok {
			i = len(req.Topics)
			byTopic[x.tp.Topic] = i
			t := kmsg.NewOffsetCommitRequestTopic()
			t.Topic = x.tp.Topic
			t.TopicID = s.g.topicIDOf(x.tp)
			req.Topics = append(req.Topics, t)
		}
		p := kmsg.NewOffsetCommitRequestTopicPartition()
		p.Partition, p.Offset, p.LeaderEpoch = x.tp.Partition, x.m.offset, -1
		meta := x.m.meta
		p.Metadata = &meta
		req.Topics[i].Partitions = append(req.Topics[i].Partitions, p)
	}
	failed := map[TopicPartition]error{}
	ctx, cancel := context.WithDeadline(s.g.killCtx, deadline)
	resp, err := req.RequestWith(ctx, cl)
	cancel()
	if err == nil {
		for i, t := range resp.Topics {
			topic := t.Topic
			if topic == "" && i < len(req.Topics) {
				topic = req.Topics[i].Topic // v10 answers by topic id, in the request's order
			}
			for _, p := range t.Partitions {
				if perr := kerr.ErrorForCode(p.ErrorCode); perr != nil {
					failed[TopicPartition{Topic: topic, Partition: p.Partition}] = perr
				}
			}
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, x := range all {
		ferr := err
		if ferr == nil {
			ferr = failed[x.tp]
		}
		if ferr == nil {
			continue
		}
		if m, ok := s.marks[x.tp]; ok && !m.dirty && m.offset == x.m.offset {
			m.dirty = true // again at the next commit
			s.marks[x.tp] = m
		}
		if err == nil {
			err = ferr
		}
	}
	return len(all), err
}

// sentMark is a mark as a commit sent it.
type sentMark struct {
	tp TopicPartition
	m  franzMark
}

// takeDirty returns the marks not committed yet, and marks them clean (a
// failed commit makes them dirty again). It holds the session's lock alone:
// endClaims takes the session's lock with the group's held (it forgets a
// partition), so the session's must never be held while taking the
// group's; a commit that did so while the group ended its claims stopped
// them both, until shutdown_timeout gave up on the group.
func (s *franzSession) takeDirty() []sentMark {
	s.mu.Lock()
	defer s.mu.Unlock()
	var all []sentMark
	for tp, m := range s.marks {
		if !m.dirty {
			continue
		}
		m.dirty = false
		s.marks[tp] = m
		all = append(all, sentMark{tp, m})
	}
	return all
}

// topicIDOf returns the id of tp's topic as last read (zero when unknown).
func (g *franzGroup) topicIDOf(tp TopicPartition) [16]byte {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.topicIDs[tp.Topic]
}

var (
	_ kafkaSide              = (*franzGroup)(nil)
	_ groupSession           = (*franzSession)(nil)
	_ txnGroup               = (*franzSession)(nil)
	_ claimFeed[*kgo.Record] = (*franzFeed)(nil)
)
