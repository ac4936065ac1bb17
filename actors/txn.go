package actors

import (
	"cmp"
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/IBM/sarama"
)

// Exactly-once outputs on the sarama side (output.exactly_once).
//
// The offset controller hands the proxy each commit together with the
// records whose outputs (or dead letters) that commit passes for the first
// time: below its watermark, or in the finished ranges its metadata
// records. The proxy gives both to the Kafka side in one step (transact):
// under the aux producer's lock the marks and the records join the next
// transaction, so that whenever the feed goroutine takes a snapshot, the
// outputs it has sent and the offsets it commits cover the same records.
// The feed sends outputs as they come, into the open transaction; a commit
// request (txnSession.Commit, from the committer or a revoked claim) makes
// it send what is queued, add the marks with the group's generation, and
// commit.
//
// Only what a live claim holds may be committed: a claim that ended
// without its final commit (its partition lost with the session), or whose
// member was replaced by a new member id (a zombie that rejoined), makes
// the transaction start again without that claim's outputs and marks; the
// partition's next owner runs those records again. A commit the group
// refuses because it moved to a new generation meanwhile (a cooperative
// rebalance under the commit) is aborted and made again, with what live
// claims still hold, up to txnAttempts times; any other failure aborts the
// transaction and restarts the tree from the offsets last committed.
//
// The records of the open transaction keep their fetch credits until it
// commits: what is written but not committed counts against max_buffered.

// txnEvery is the shortest time between two transactions' commits: a
// transaction ends with a marker written to every partition it touched,
// so committing after every batch would cost the brokers more than the
// work; the outputs flow meanwhile, only their visibility waits.
const txnEvery = 100 * time.Millisecond

// errTxnClosed answers a commit asked of a producer that has stopped.
var errTxnClosed = errors.New("actors: the transactional producer has stopped")

// txnAttempts bounds the attempts of one transaction's commit that the
// group refuses for a generation it has left (a rebalance under the commit).
const txnAttempts = 5

// txnMark is one partition's offset to commit, with its metadata, and the
// claim (epoch) that marked it.
type txnMark struct {
	epoch  uint64
	offset int64
	meta   string
}

// txnSession is a sarama group session whose commits are transactions.
// Marks reach the next transaction through transact, with their claims'
// epochs; Commit has the aux producer commit it.
type txnSession struct {
	aux  *kafkaAux
	sess sarama.ConsumerGroupSession
	seq  uint64 // sessions in the order they began
}

var _ groupSession = (*txnSession)(nil)

// MarkOffset implements groupSession; a no-op: the proxy's transact has
// recorded every mark already (a revoked claim's final one too), with the
// outputs that go with it.
func (s *txnSession) MarkOffset(string, int32, int64, string) {}

// ResetOffset implements groupSession; a no-op (MarkOffset).
func (s *txnSession) ResetOffset(string, int32, int64, string) {}

// Commit implements groupSession: it returns once the transaction holding
// everything recorded so far has been committed, or has failed (which the
// tree learns from a transactionFailed).
func (s *txnSession) Commit() { _ = s.aux.commitTxn() }

// groupMetadata is what fences the session's transactional commits: its
// group, and its generation and member id now.
func (s *txnSession) groupMetadata() *sarama.ConsumerGroupMetadata {
	m := sarama.NewConsumerGroupMetadata(s.aux.groupID)
	m.GenerationID = s.sess.GenerationID()
	m.MemberID = s.sess.MemberID()
	if id := s.aux.instanceID; id != "" {
		m.GroupInstanceID = &id
	}
	return m
}

// txnMarks are the marks of a transaction, per session and partition.
type txnMarks map[*txnSession]map[TopicPartition]txnMark

// merge adds newer to m: a partition's newer mark replaces its older one.
func (m txnMarks) merge(newer txnMarks) txnMarks {
	if m == nil {
		m = make(txnMarks)
	}
	for s, ms := range newer {
		if m[s] == nil {
			m[s] = make(map[TopicPartition]txnMark, len(ms))
		}
		maps.Copy(m[s], ms)
	}
	return m
}

// live returns the marks of claims that are still this member's, and
// whether any were not.
func (m txnMarks) live(alive func(epoch uint64) bool) (txnMarks, bool) {
	out := make(txnMarks, len(m))
	stale := false
	for s, ms := range m {
		for tp, mk := range ms {
			if !alive(mk.epoch) {
				stale = true
				continue
			}
			if out[s] == nil {
				out[s] = make(map[TopicPartition]txnMark, len(ms))
			}
			out[s][tp] = mk
		}
	}
	return out, stale
}

// transact records offsets to commit on s and queues the records whose
// outputs the same commit passes, in one step (see the top of this file).
func (a *kafkaAux) transact(s *txnSession, offsets []partitionOffset, recs []*envelope) {
	a.mu.Lock()
	if len(offsets) > 0 {
		if a.txnMarks == nil {
			a.txnMarks = make(txnMarks)
		}
		ms := a.txnMarks[s]
		if ms == nil {
			ms = make(map[TopicPartition]txnMark, len(offsets))
			a.txnMarks[s] = ms
		}
		for _, o := range offsets {
			ms[o.tp] = txnMark{epoch: o.epoch, offset: o.offset, meta: o.meta}
		}
	}
	a.outQueue = append(a.outQueue, recs...)
	a.mu.Unlock()
	a.wakeFeed()
}

func (a *kafkaAux) wakeFeed() {
	select {
	case a.wake <- struct{}{}:
	default: // feed has a wake-up pending already
	}
}

// commitTxn asks the feed for a transaction commit holding everything
// recorded so far, and waits for it.
func (a *kafkaAux) commitTxn() error {
	done := make(chan error, 1)
	a.mu.Lock()
	if a.txnClosed {
		a.mu.Unlock()
		return errTxnClosed
	}
	a.txnWaiters = append(a.txnWaiters, done)
	a.mu.Unlock()
	a.wakeFeed()
	return <-done // the feed answers every waiter, at the latest when it returns
}

// openTxn is the feed's view of the open transaction: the records whose
// outputs it holds, in the order they were sent.
type openTxn struct {
	recs []*envelope
}

// feedTxn is feed for a transactional producer: it hands the queued
// records' outputs and dead letters to the open transaction, and commits
// it when asked (at most every txnEvery). After a failed commit nothing
// more goes into the producer: the tree is restarting.
func (a *kafkaAux) feedTxn() {
	var outs []*envelope
	var open openTxn
	var last time.Time // when the last commit began
	var broken error
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	defer func() {
		timer.Stop()
		a.mu.Lock()
		a.txnClosed = true
		waiters := a.txnWaiters
		a.txnWaiters = nil
		a.mu.Unlock()
		for _, w := range waiters {
			w <- errTxnClosed
		}
		close(a.fed)
	}()
	for {
		var marks txnMarks
		var waiters []chan error
		var wait time.Duration
		a.mu.Lock()
		outs, a.outQueue = a.outQueue, outs[:0]
		if len(a.txnWaiters) > 0 {
			if wait = txnEvery - time.Since(last); wait <= 0 || broken != nil {
				marks, a.txnMarks = a.txnMarks, nil
				waiters, a.txnWaiters = a.txnWaiters, nil
			}
		}
		a.mu.Unlock()
		if broken != nil {
			clear(outs)
			for _, w := range waiters {
				w <- broken
			}
		} else {
			for i, rec := range outs {
				if !a.sendTxn(rec) {
					return
				}
				open.recs = append(open.recs, rec)
				outs[i] = nil
			}
			if waiters != nil {
				last = time.Now()
				written, dropped, err := a.commit(marks, open.recs)
				open.recs = nil
				if len(written) > 0 || len(dropped) > 0 {
					a.send(&outputsWritten{written: written, dropped: dropped})
				}
				for _, w := range waiters {
					w <- err
				}
				if err != nil {
					broken = err
					a.send(&transactionFailed{err: err})
				}
				continue
			}
		}
		if len(outs) > 0 {
			continue // more may have come while these were fed
		}
		if wait > 0 && broken == nil {
			timer.Reset(wait)
		}
		select {
		case <-a.wake:
		case <-timer.C:
		case <-a.quit:
			return
		}
		timer.Stop()
	}
}

// sendTxn hands rec's outputs, or its dead letter, to the producer; it
// reports false if the producer is being closed.
func (a *kafkaAux) sendTxn(rec *envelope) bool {
	if rec.deadErr != nil {
		m := deadLetterMessage(a.dlqTopic, recordFailure{rec: rec, err: rec.deadErr})
		m.Metadata = (*outputOf)(rec) // judged like an output
		select {
		case a.producer.Input() <- m:
		case <-a.quit:
			return false
		}
	}
	for j := range rec.outputs {
		select {
		case a.producer.Input() <- outputMessage(rec, j):
		case <-a.quit:
			return false
		}
	}
	return true
}

// commit commits the open transaction with marks, its outputs (recs) sent
// already. It returns the records it committed and those it left out
// (their claims ended without a commit: their partitions' next owners run
// them again).
func (a *kafkaAux) commit(marks txnMarks, recs []*envelope) (written, dropped []*envelope, err error) {
	for attempt := 1; ; attempt++ {
		// One answer per claim for the whole attempt: a claim that ended
		// between the marks and the records would otherwise commit its
		// offsets without its outputs.
		alive := a.aliveOnce()
		live, stale := marks.live(alive)
		kept := recs[:0:0]
		for _, rec := range recs {
			if alive(rec.epoch) {
				kept = append(kept, rec)
			} else {
				dropped = append(dropped, rec)
			}
		}
		if stale || len(kept) < len(recs) {
			// The open transaction holds outputs of a claim that is no
			// longer this member's: again without them.
			if err := a.again(kept); err != nil {
				return nil, append(dropped, kept...), err
			}
		}
		marks, recs = live, kept
		start := time.Now()
		err = a.commitOnce(marks)
		if err == nil {
			a.stats.observeTransaction(start)
			if err := a.producer.BeginTxn(); err != nil {
				return recs, dropped, fmt.Errorf("opening the next transaction: %w", err)
			}
			return recs, dropped, nil
		}
		err = a.aborted(err)
		if !errors.Is(err, sarama.ErrIllegalGeneration) && !errors.Is(err, sarama.ErrRebalanceInProgress) || attempt == txnAttempts {
			return nil, append(dropped, recs...), err
		}
		// The group moved to a new generation under the commit (a
		// rebalance): after a pause, again with what live claims hold.
		a.log.Info().Err(err).Int("attempt", attempt).Msg("the group rebalanced under a transaction's commit; committing it again")
		t := time.NewTimer(time.Duration(attempt) * txnEvery)
		select {
		case <-t.C:
		case <-a.quit:
			t.Stop()
			return nil, append(dropped, recs...), errTxnClosed
		}
		if err := a.again(recs); err != nil {
			return nil, append(dropped, recs...), err
		}
	}
}

// aliveOnce returns a.alive memoized: each claim's answer is the first one.
func (a *kafkaAux) aliveOnce() func(epoch uint64) bool {
	seen := map[uint64]bool{}
	return func(epoch uint64) bool {
		ok, asked := seen[epoch]
		if !asked {
			ok = a.alive(epoch)
			seen[epoch] = ok
		}
		return ok
	}
}

// commitOnce adds marks to the open transaction, each session's with its
// generation now, and commits it (sarama flushes the outputs sent first).
func (a *kafkaAux) commitOnce(marks txnMarks) error {
	// The newest session first: sarama keeps one group metadata per
	// partition, the last added, so an older session's marks are never
	// hidden by a newer one's and always get the transaction refused.
	sessions := slices.SortedFunc(maps.Keys(marks), func(x, y *txnSession) int { return cmp.Compare(y.seq, x.seq) })
	for _, s := range sessions {
		offsets := make(map[string][]*sarama.PartitionOffsetMetadata)
		for tp, m := range marks[s] {
			meta := m.meta
			offsets[tp.Topic] = append(offsets[tp.Topic], &sarama.PartitionOffsetMetadata{Partition: tp.Partition, Offset: m.offset, LeaderEpoch: -1, Metadata: &meta})
		}
		if err := a.producer.AddOffsetsToTxnWithGroupMetadata(offsets, s.groupMetadata()); err != nil {
			return err
		}
	}
	return a.producer.CommitTxn()
}

// again aborts the open transaction and opens a new one holding the
// outputs of recs, sent again.
func (a *kafkaAux) again(recs []*envelope) error {
	if a.producer.TxnStatus()&sarama.ProducerTxnFlagInTransaction != 0 {
		if err := a.producer.AbortTxn(); err != nil {
			return a.aborted(err)
		}
		a.stats.txnAborts.Add(1)
	}
	if err := a.producer.BeginTxn(); err != nil {
		return fmt.Errorf("opening a transaction: %w", err)
	}
	for _, rec := range recs {
		if !a.sendTxn(rec) {
			return errTxnClosed
		}
	}
	return nil
}

// aborted aborts the open transaction after err if it still can, counts
// it, and returns err as the tree is told.
func (a *kafkaAux) aborted(err error) error {
	a.stats.txnAborts.Add(1)
	if a.producer.TxnStatus()&sarama.ProducerTxnFlagAbortableError != 0 {
		if aerr := a.producer.AbortTxn(); aerr != nil {
			a.log.Warn().Err(aerr).Msg("aborting the transaction")
		}
	}
	if errors.Is(err, sarama.ErrProducerFenced) || errors.Is(err, sarama.ErrInvalidProducerEpoch) {
		return fmt.Errorf("committing the transaction: another producer took transactional id %q over (this process's successor, or a second process with the same output.transactional_id): %w", a.txnID, err)
	}
	return fmt.Errorf("committing the transaction: %w", err)
}
