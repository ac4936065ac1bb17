package actors

import (
	"errors"

	"github.com/IBM/sarama"
)

// txnSession is a sarama group session whose commits are transactions.
// Marks reach the next transaction through transact, with their claims'
// epochs; Commit has the transaction loop commit it.
type txnSession struct {
	aux  *kafkaAux
	sess sarama.ConsumerGroupSession
	seq  uint64 // sessions in the order they began
}

var (
	_ groupSession = (*txnSession)(nil)
	_ txnGroup     = (*txnSession)(nil)
	_ txnProducer  = (*saramaTxn)(nil)
)

// MarkOffset implements groupSession; a no-op: the proxy's transact has
// recorded every mark already (a revoked claim's final one too), with the
// outputs that go with it.
func (s *txnSession) MarkOffset(string, int32, int64, string) {}

// ResetOffset implements groupSession; a no-op (MarkOffset).
func (s *txnSession) ResetOffset(string, int32, int64, string) {}

// Commit implements groupSession: it returns once the transaction holding
// everything recorded so far has been committed, or has failed (which the
// tree learns from a transactionFailed).
func (s *txnSession) Commit() { _ = s.aux.txn.commitTxn() }

func (s *txnSession) order() uint64 { return s.seq }

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

// saramaTxn is the aux connection's transactional producer as the
// transaction loop drives it.
type saramaTxn struct{ a *kafkaAux }

func (t saramaTxn) begin() error { return t.a.producer.BeginTxn() }

func (t saramaTxn) inTxn() bool {
	return t.a.producer.TxnStatus()&sarama.ProducerTxnFlagInTransaction != 0
}

func (t saramaTxn) send(rec *envelope, quit <-chan struct{}) bool {
	in := t.a.producer.Input()
	if rec.deadErr != nil {
		m := t.a.deadLetterMessage(recordFailure{rec: rec, err: rec.deadErr})
		m.Metadata = (*outputOf)(rec) // judged like an output
		select {
		case in <- m:
		case <-quit:
			return false
		}
	}
	for j := range rec.outputs {
		select {
		case in <- outputMessage(rec, j):
		case <-quit:
			return false
		}
	}
	return true
}

// commit adds the marks, the newest session's first: sarama keeps one
// group metadata per partition, the last added, so an older session's
// marks are never hidden by a newer one's and always get the transaction
// refused. CommitTxn flushes the outputs sent first.
func (t saramaTxn) commit(marks txnMarks) error {
	for _, g := range marks.sessionsNewestFirst() {
		s := g.(*txnSession)
		offsets := make(map[string][]*sarama.PartitionOffsetMetadata)
		for tp, m := range marks[g] {
			meta := m.meta
			offsets[tp.Topic] = append(offsets[tp.Topic], &sarama.PartitionOffsetMetadata{Partition: tp.Partition, Offset: m.offset, LeaderEpoch: -1, Metadata: &meta})
		}
		if err := t.a.producer.AddOffsetsToTxnWithGroupMetadata(offsets, s.groupMetadata()); err != nil {
			return err
		}
	}
	return t.a.producer.CommitTxn()
}

func (t saramaTxn) abort() error { return t.a.producer.AbortTxn() }

func (t saramaTxn) abortAfter(error) {
	if t.a.producer.TxnStatus()&sarama.ProducerTxnFlagAbortableError != 0 {
		if err := t.a.producer.AbortTxn(); err != nil {
			t.a.log.Warn().Err(err).Msg("aborting the transaction")
		}
	}
}

func (saramaTxn) rebalanced(err error) bool {
	return errors.Is(err, sarama.ErrIllegalGeneration) || errors.Is(err, sarama.ErrRebalanceInProgress)
}

func (saramaTxn) fenced(err error) bool {
	return errors.Is(err, sarama.ErrProducerFenced) || errors.Is(err, sarama.ErrInvalidProducerEpoch)
}

// close is kafkaAux.close's: the producer is shared with the acks goroutine.
func (saramaTxn) close() {}
