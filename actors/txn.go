package actors

import (
	"errors"
	"fmt"
	"time"

	"github.com/IBM/sarama"
)

// Exactly-once outputs on the sarama side (output.exactly_once).
//
// The offset controller hands the proxy each commit together with the
// records whose outputs (or dead letters) that commit passes for the first
// time: below its watermark, or in the finished ranges its metadata
// records. The proxy gives both to the Kafka side in one step (transact):
// under the aux producer's lock the marks join the session's and the
// records join the output queue, so that whenever the feed goroutine takes
// a snapshot, the outputs it has sent and the offsets it commits cover the
// same records. The feed sends outputs as they come, into the open
// transaction; a commit request (txnSession.Commit, from the committer or a
// revoked claim) makes it send what is queued, add the marks to the
// transaction with the session's generation (a member that lost its
// partitions is refused: KIP-447), and commit. A commit that fails aborts
// the transaction and restarts the tree from the offsets last committed.

// txnEvery is the shortest time between two transactions' commits: a
// transaction ends with a marker written to every partition it touched,
// so committing after every batch would cost the brokers more than the
// work; the outputs flow meanwhile, only their visibility waits.
const txnEvery = 100 * time.Millisecond

// errTxnClosed answers a commit asked of a producer that has stopped.
var errTxnClosed = errors.New("actors: the transactional producer has stopped")

// txnMark is one partition's offset to commit, with its metadata.
type txnMark struct {
	offset int64
	meta   string
}

// txnSession is a sarama group session whose commits are transactions:
// marks are kept here (under the aux producer's lock), never in sarama's
// session, and Commit has the aux producer commit them with the outputs
// queued with them.
type txnSession struct {
	aux  *kafkaAux
	sess sarama.ConsumerGroupSession
}

var _ groupSession = (*txnSession)(nil)

// MarkOffset implements groupSession: offsets only move forward.
func (s *txnSession) MarkOffset(topic string, partition int32, offset int64, meta string) {
	s.aux.mark(s, TopicPartition{Topic: topic, Partition: partition}, offset, meta, false)
}

// ResetOffset implements groupSession.
func (s *txnSession) ResetOffset(topic string, partition int32, offset int64, meta string) {
	s.aux.mark(s, TopicPartition{Topic: topic, Partition: partition}, offset, meta, true)
}

// Commit implements groupSession: it returns once the transaction holding
// every mark made so far has been committed, or has failed (which the tree
// learns from a transactionFailed).
func (s *txnSession) Commit() { _ = s.aux.commitTxn() }

// groupMetadata is what fences the session's transactional commits: its
// group, generation and member id.
func (s *txnSession) groupMetadata() *sarama.ConsumerGroupMetadata {
	m := sarama.NewConsumerGroupMetadata(s.aux.groupID)
	m.GenerationID = s.sess.GenerationID()
	m.MemberID = s.sess.MemberID()
	if id := s.aux.instanceID; id != "" {
		m.GroupInstanceID = &id
	}
	return m
}

// mark records an offset of s to commit in the next transaction. With
// reset, it replaces what is marked; otherwise it only moves forward.
func (a *kafkaAux) mark(s *txnSession, tp TopicPartition, offset int64, meta string, reset bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.markLocked(s, tp, offset, meta, reset)
}

func (a *kafkaAux) markLocked(s *txnSession, tp TopicPartition, offset int64, meta string, reset bool) {
	if a.txnMarks == nil {
		a.txnMarks = make(map[*txnSession]map[TopicPartition]txnMark)
	}
	ms := a.txnMarks[s]
	if ms == nil {
		ms = make(map[TopicPartition]txnMark)
		a.txnMarks[s] = ms
	}
	if cur, ok := ms[tp]; ok && !reset && offset <= cur.offset {
		return
	}
	ms[tp] = txnMark{offset: offset, meta: meta}
}

// transact records offsets to commit on s and queues the records whose
// outputs the same commit passes, in one step (see the top of this file).
func (a *kafkaAux) transact(s *txnSession, offsets []partitionOffset, recs []*envelope) {
	a.mu.Lock()
	for _, o := range offsets {
		a.markLocked(s, o.tp, o.offset, o.meta, true)
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
// marked and queued so far, and waits for it.
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

// feedTxn is feed for a transactional producer: it hands the queued
// records' outputs and dead letters to the open transaction, and commits
// it when asked (at most every txnEvery). After a failed commit nothing
// more goes into the producer: the tree is restarting.
func (a *kafkaAux) feedTxn() {
	var outs []*envelope
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
		var marks map[*txnSession]map[TopicPartition]txnMark
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
				outs[i] = nil
			}
			if waiters != nil {
				last = time.Now()
				err := a.commitMarks(marks)
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
	n := len(rec.outputs)
	if rec.deadErr != nil {
		n++
	}
	rec.outLeft.Store(int32(n))
	if rec.deadErr != nil {
		m := deadLetterMessage(a.dlqTopic, recordFailure{rec: rec, err: rec.deadErr})
		m.Metadata = (*outputOf)(rec) // acknowledged like an output
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

// commitMarks adds the marks to the open transaction, each session's with
// its generation, commits it (sarama flushes the outputs sent first), and
// opens the next one. A failure aborts the transaction when it still can.
func (a *kafkaAux) commitMarks(marks map[*txnSession]map[TopicPartition]txnMark) error {
	start := time.Now()
	for s, ms := range marks {
		offsets := make(map[string][]*sarama.PartitionOffsetMetadata)
		for tp, m := range ms {
			meta := m.meta
			offsets[tp.Topic] = append(offsets[tp.Topic], &sarama.PartitionOffsetMetadata{Partition: tp.Partition, Offset: m.offset, LeaderEpoch: -1, Metadata: &meta})
		}
		if err := a.producer.AddOffsetsToTxnWithGroupMetadata(offsets, s.groupMetadata()); err != nil {
			return a.abortTxn(err)
		}
	}
	if err := a.producer.CommitTxn(); err != nil {
		return a.abortTxn(err)
	}
	a.stats.observeTransaction(start)
	if err := a.producer.BeginTxn(); err != nil {
		a.stats.txnAborts.Add(1)
		return fmt.Errorf("opening the next transaction: %w", err)
	}
	return nil
}

// abortTxn aborts the open transaction after err, and returns err as what
// the tree is told.
func (a *kafkaAux) abortTxn(err error) error {
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
