package actors

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"
	"github.com/turbokafka/turbo/config"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/kversion"
)

// franzTxn is the franz-go side's transactional producer: a client of its
// own (the group member's client stays a plain consumer), whose
// transactions hold the outputs it produces and the offsets the member
// commits, sent with the member's generation.
//
// franz-go commits offsets inside a transaction only for a client that is
// itself the group member, and only the offsets it polled, without
// metadata; turbo commits watermarks with the metadata of what finished
// above them, so the offsets go by hand: AddOffsetsToTxn, then
// TxnOffsetCommit with the member id and generation (KIP-447), and when
// nothing was produced (a transaction of offsets only, which the client
// does not know it holds) EndTxn too. The client is held to the requests
// of Kafka 3.9 (the first transaction protocol: partitions and offsets are
// added explicitly, and an EndTxn leaves the producer epoch as it was), so
// that the requests sent by hand and the client's own agree on the
// producer's epoch.
type franzTxn struct {
	cl         *kgo.Client
	ctx        context.Context // cancelled when the side is killed or the producer closed
	cancel     context.CancelFunc
	groupID    string
	txnID      string
	instanceID string
	dlqTopic   string
	dlqLimit   int                                        // deadLetterLimit
	member     func() (memberID string, generation int32) // the group member's now
	alive      func(epoch uint64) bool                    // whether a claim may still commit (claimAlive)
	tell       func(msg any)                              // to the proxy
	log        zerolog.Logger

	open         bool          // a transaction is open (the loop's goroutine only)
	offsetsAdded bool          // the open transaction holds the group's offsets
	seq          atomic.Uint64 // transactions begun: an earlier one's outcomes are stale
	produced     atomic.Int64  // the open transaction's records acknowledged
	mu           sync.Mutex
	err          error // the open transaction's first failed record
}

var _ txnProducer = (*franzTxn)(nil)

// franzTxnOptions are the transactional client's options but its security
// and logger (nil without output.exactly_once): kafka.client_id with
// "-txn", the consumer's transactional id, and the keyed partitioning of
// Kafka's own producers.
func franzTxnOptions(brokers []string, clientID string, c config.Consumer) []kgo.Opt {
	txnID := transactionalID(c)
	if txnID == "" {
		return nil
	}
	return []kgo.Opt{
		kgo.SeedBrokers(brokers...),
		kgo.ClientID(clientID + "-txn"),
		kgo.TransactionalID(txnID),
		kgo.TransactionTimeout(txnTimeout),
		kgo.MaxVersions(kversion.V3_9_0()),
		kgo.RecordPartitioner(kgo.StickyKeyPartitioner(nil)),
		kgo.MaxBufferedRecords(franzBufferedRecords(c)),
		kgo.ProducerBatchMaxBytes(outputBatchBytes(c)),
		kgo.AllowAutoTopicCreation(),
	}
}

// outputBatchBytes is the franz-go producer's bound on a batch: one output
// of output.max_bytes with its framing, or the client's default if that is
// more.
func outputBatchBytes(c config.Consumer) int32 {
	return int32(max(1_000_012, outputBytes(c)+4096))
}

// init fences every earlier producer of the transactional id (and aborts
// the transaction one left open): before the member joins the group, so
// that the committed offsets it fetches are not held by that transaction.
func (t *franzTxn) init(ctx context.Context) error {
	_, _, err := t.cl.ProducerID(ctx)
	return err
}

func (t *franzTxn) begin() error {
	if err := t.cl.BeginTransaction(); err != nil {
		return err
	}
	t.seq.Add(1)
	t.produced.Store(0)
	t.mu.Lock()
	t.err = nil
	t.mu.Unlock()
	t.open, t.offsetsAdded = true, false
	return nil
}

func (t *franzTxn) inTxn() bool { return t.open }

func (t *franzTxn) send(rec *envelope, _ <-chan struct{}) bool {
	if rec.deadErr != nil {
		key, value, headers := deadLetter(recordFailure{rec: rec, err: rec.deadErr}, time.Now(), t.dlqLimit, func(k string, v []byte) kgo.RecordHeader {
			return kgo.RecordHeader{Key: k, Value: v}
		})
		if !t.produce(rec, &kgo.Record{Topic: t.dlqTopic, Key: key, Value: value, Headers: headers}) {
			return false
		}
	}
	for _, o := range rec.outputs {
		r := &kgo.Record{Topic: o.Topic, Key: o.Key, Value: o.Value}
		for _, h := range o.Headers {
			r.Headers = append(r.Headers, kgo.RecordHeader{Key: h.Key, Value: h.Value})
		}
		if !t.produce(rec, r) {
			return false
		}
	}
	return true
}

// produce hands r, one of rec's outputs, to the client; false once the
// producer is closing. The client's buffer holds the whole pipeline's
// outputs (franzBufferedRecords), so it does not block.
func (t *franzTxn) produce(rec *envelope, r *kgo.Record) bool {
	if t.ctx.Err() != nil {
		return false
	}
	seq := t.seq.Load()
	t.cl.Produce(t.ctx, r, func(_ *kgo.Record, err error) {
		if t.seq.Load() != seq {
			return // of an aborted transaction
		}
		if err == nil {
			t.produced.Add(1)
			return
		}
		t.mu.Lock()
		first := t.err == nil
		if first {
			t.err = err
		}
		t.mu.Unlock()
		if first {
			t.tell(&outputsWritten{failed: rec, err: err})
		}
	})
	return true
}

// txnRequestWait bounds the requests of one commit or abort.
const txnRequestWait = txnTimeout

func (t *franzTxn) commit(marks txnMarks) error {
	ctx, cancel := context.WithTimeout(t.ctx, txnRequestWait)
	defer cancel()
	if err := t.cl.Flush(ctx); err != nil {
		return err
	}
	t.mu.Lock()
	err := t.err
	t.mu.Unlock()
	if err != nil {
		return err
	}
	if len(marks) > 0 {
		if err := t.commitOffsets(ctx, marks); err != nil {
			return err
		}
	}
	produced := t.produced.Load() > 0
	// With records, the client ends the transaction (the offsets are in
	// it already); without, it sends nothing, and the offsets' EndTxn goes
	// by hand.
	if err := t.cl.EndTransaction(ctx, kgo.TryCommit); err != nil {
		return err
	}
	t.open = false
	if !produced && t.offsetsAdded {
		if err := t.endTxn(ctx, true); err != nil {
			return err
		}
	}
	return nil
}

// commitOffsets adds the group's offsets to the open transaction and
// commits them in it, with the member's id and generation now (every
// session of this side is the same client's: the newest session's mark of
// a partition wins).
func (t *franzTxn) commitOffsets(ctx context.Context, marks txnMarks) error {
	memberID, generation := t.member()
	if memberID == "" {
		return kerr.RebalanceInProgress // between sessions: again once the member is back
	}
	// The membership read above must be the one the marks' claims ran in:
	// a member that lost its partitions since the loop judged them (a
	// zombie fenced and joined again, with the same member id under the
	// consumer protocol) would commit them in a membership that never held
	// them. Read after the member, a loss before it shows here.
	for _, ms := range marks {
		for tp, m := range ms {
			if !t.alive(m.epoch) {
				return fmt.Errorf("the claim of %s ended with a loss of the member's partitions: %w", tp, kerr.RebalanceInProgress)
			}
		}
	}
	id, epoch, err := t.cl.ProducerID(ctx)
	if err != nil {
		return err
	}
	if !t.offsetsAdded {
		err := t.retryConcurrent(ctx, func() error {
			req := kmsg.NewPtrAddOffsetsToTxnRequest()
			req.TransactionalID, req.ProducerID, req.ProducerEpoch, req.Group = t.txnID, id, epoch, t.groupID
			resp, err := req.RequestWith(ctx, t.cl)
			if err != nil {
				return err
			}
			return kerr.ErrorForCode(resp.ErrorCode)
		})
		if err != nil {
			return fmt.Errorf("adding the offsets to the transaction: %w", err)
		}
		t.offsetsAdded = true
	}
	merged := map[TopicPartition]txnMark{}
	sessions := marks.sessionsNewestFirst()
	for _, s := range slices.Backward(sessions) {
		for tp, m := range marks[s] {
			merged[tp] = m
		}
	}
	req := kmsg.NewPtrTxnOffsetCommitRequest()
	req.TransactionalID, req.Group, req.ProducerID, req.ProducerEpoch = t.txnID, t.groupID, id, epoch
	req.Generation, req.MemberID = generation, memberID
	if t.instanceID != "" {
		id := t.instanceID
		req.InstanceID = &id
	}
	byTopic := map[string]int{}
	for tp, m := range merged {
		i, ok := byTopic[tp.Topic]
		if !ok {
			i = len(req.Topics)
			byTopic[tp.Topic] = i
			rt := kmsg.NewTxnOffsetCommitRequestTopic()
			rt.Topic = tp.Topic
			req.Topics = append(req.Topics, rt)
		}
		p := kmsg.NewTxnOffsetCommitRequestTopicPartition()
		p.Partition, p.Offset, p.LeaderEpoch = tp.Partition, m.offset, -1
		meta := m.meta
		p.Metadata = &meta
		req.Topics[i].Partitions = append(req.Topics[i].Partitions, p)
	}
	return t.retryConcurrent(ctx, func() error {
		resp, err := req.RequestWith(ctx, t.cl)
		if err != nil {
			return err
		}
		for _, rt := range resp.Topics {
			for _, p := range rt.Partitions {
				if err := kerr.ErrorForCode(p.ErrorCode); err != nil {
					return fmt.Errorf("committing the offsets of %s[%d] in the transaction: %w", rt.Topic, p.Partition, err)
				}
			}
		}
		return nil
	})
}

// retryConcurrent runs call again while the coordinator says the previous
// transaction is still being completed (it writes its markers after
// answering the EndTxn), or that it is loading, until ctx ends.
func (t *franzTxn) retryConcurrent(ctx context.Context, call func() error) error {
	for attempt := 1; ; attempt++ {
		err := call()
		if !errors.Is(err, kerr.ConcurrentTransactions) && !errors.Is(err, kerr.CoordinatorLoadInProgress) {
			return err
		}
		tm := time.NewTimer(min(time.Duration(attempt)*10*time.Millisecond, 200*time.Millisecond))
		select {
		case <-tm.C:
		case <-ctx.Done():
			tm.Stop()
			return err
		}
	}
}

// endTxn ends the open transaction by hand (one of offsets only). An abort
// the client has made already is answered as a retry of it.
func (t *franzTxn) endTxn(ctx context.Context, commit bool) error {
	id, epoch, err := t.cl.ProducerID(ctx)
	if err != nil {
		return err
	}
	return t.retryConcurrent(ctx, func() error {
		req := kmsg.NewPtrEndTxnRequest()
		req.TransactionalID, req.ProducerID, req.ProducerEpoch, req.Commit = t.txnID, id, epoch, commit
		resp, err := req.RequestWith(ctx, t.cl)
		if err != nil {
			return err
		}
		return kerr.ErrorForCode(resp.ErrorCode)
	})
}

func (t *franzTxn) abort() error {
	ctx, cancel := context.WithTimeout(t.ctx, txnRequestWait)
	defer cancel()
	t.seq.Add(1) // what the aborted records' promises say is stale
	t.open = false
	if err := t.cl.AbortBufferedRecords(ctx); err != nil {
		return err
	}
	if err := t.cl.EndTransaction(ctx, kgo.TryAbort); err != nil {
		return err
	}
	if t.offsetsAdded {
		// Nothing may have been produced, in which case the client sent
		// no EndTxn; if it did, this one is answered as its retry.
		if err := t.endTxn(ctx, false); err != nil && !errors.Is(err, kerr.InvalidTxnState) {
			return err
		}
	}
	return nil
}

func (t *franzTxn) abortAfter(err error) {
	if !t.open && !t.offsetsAdded {
		return
	}
	if aerr := t.abort(); aerr != nil {
		t.log.Debug().Err(aerr).AnErr("after", err).Msg("aborting the transaction")
	}
}

func (*franzTxn) rebalanced(err error) bool {
	return errors.Is(err, kerr.IllegalGeneration) || errors.Is(err, kerr.RebalanceInProgress) || errors.Is(err, kerr.StaleMemberEpoch)
}

func (*franzTxn) fenced(err error) bool {
	return errors.Is(err, kerr.ProducerFenced) || errors.Is(err, kerr.InvalidProducerEpoch)
}

// close closes the client: a transaction still open is aborted by its
// successor's InitProducerID, or by the brokers after the timeout.
func (t *franzTxn) close() {
	t.cancel()
	t.cl.Close()
}
