package actors

import (
	"errors"
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/IBM/sarama"
	"github.com/rs/zerolog"
	"github.com/turbokafka/turbo/actors/offsetmeta"
)

// kafkaAux is the client proxy's second Kafka connection (a sarama consumer
// group cannot share its client): the admin requests that read the commit
// metadata of newly assigned partitions, and the dead-letter producer. It is
// owned by kafkaGroup, which closes it after the group.
type kafkaAux struct {
	groupID     string
	dlqTopic    string
	outputBytes int    // output.max_bytes; 0 without outputs
	txnID       string // output.exactly_once: the producer's transactional id ("" otherwise)
	instanceID  string // kafka.group_instance_id, which fences transactional commits too
	send        func(msg any)
	stats       *consumerStats
	log         zerolog.Logger

	client   sarama.Client
	admin    sarama.ClusterAdmin
	producer sarama.AsyncProducer // nil without a dead-letter topic or outputs
	// The dead letters waiting for the producer: a slice that grows with
	// them up to limit, not a channel of that capacity, which allocated the
	// whole pipeline's worth up front (max_buffered 9223372036854775807
	// panicked with "makechan: size out of range").
	mu    sync.Mutex
	queue []recordFailure
	limit int
	// The records whose outputs wait for the producer, in the order they
	// finished. Unbounded here: a record with outputs keeps its fetch
	// credit until they are written, so max_buffered bounds them.
	outQueue []*envelope
	// Exactly once (txn.go): the loop that writes outputs and commits in
	// transactions, instead of feed; nil writing at least once.
	txn      *txnLoop
	wake     chan struct{} // capacity 1: something was queued
	quit     chan struct{}
	fed      chan struct{} // closed when feed has returned
	wg       sync.WaitGroup
	warnOnce sync.Once

	// The high watermark refresh (hwmrefresh.go): requests reach its
	// goroutine only while it waits for one, so one runs at a time.
	hwmReq    chan []partitionHWM
	atReq     chan []partitionHWM // offsetsAt
	hwmDone   chan struct{}       // closed when the refresh goroutine has returned
	version   sarama.KafkaVersion
	isolation sarama.IsolationLevel
}

// auxOptions are what the aux connection's producer is for.
type auxOptions struct {
	groupID     string
	dlqTopic    string // "" without a dead-letter topic
	outputBytes int    // output.max_bytes; 0 without outputs
	txnID       string // output.exactly_once's transactional id; "" writes at least once
	queue       int    // dead letters that may wait for the producer
	stats       *consumerStats
	alive       func(epoch uint64) bool // exactly once: whether a claim is still this member's
}

func newKafkaAux(brokers []string, base *sarama.Config, o auxOptions, send func(any), log zerolog.Logger) (*kafkaAux, error) {
	groupID, dlqTopic, outputBytes, queue := o.groupID, o.dlqTopic, o.outputBytes, o.queue
	cfg := *base
	cfg.ClientID = base.ClientID + "-aux"
	cfg.Producer.Return.Successes = true
	cfg.Producer.Return.Errors = true
	cfg.Producer.RequiredAcks = sarama.WaitForAll
	cfg.Producer.Retry.Max = 5
	cfg.Producer.Partitioner = newKafkaPartitioner
	// An output may be as large as output.max_bytes, plus its framing.
	cfg.Producer.MaxMessageBytes = max(cfg.Producer.MaxMessageBytes, outputBytes+4096)
	// Idempotent, as franz-go's producer is: a write whose answer was lost
	// with a leader that died is retried, and without a producer id the
	// new leader stored it a second time (1 of 2,400 dead letters written
	// twice when the dead-letter topic's leader was killed). Kafka before
	// 0.11 knows no producer ids.
	if cfg.Version.IsAtLeast(sarama.V0_11_0_0) {
		cfg.Producer.Idempotent = true
		cfg.Net.MaxOpenRequests = 1
	}
	if o.txnID != "" {
		// Creating the producer fences every earlier one with this id and
		// aborts what it left open (a crashed predecessor's transaction).
		cfg.Producer.Transaction.ID = o.txnID
		cfg.Producer.Transaction.Timeout = txnTimeout
	}
	client, err := sarama.NewClient(brokers, &cfg)
	if err != nil {
		return nil, err
	}
	admin, err := sarama.NewClusterAdminFromClient(client)
	if err != nil {
		client.Close()
		return nil, err
	}
	a := &kafkaAux{groupID: groupID, dlqTopic: dlqTopic, outputBytes: outputBytes, txnID: o.txnID, instanceID: cfg.Consumer.Group.InstanceId,
		send: send, stats: o.stats, log: log, client: client, admin: admin,
		limit: queue, wake: make(chan struct{}, 1), quit: make(chan struct{}), fed: make(chan struct{}),
		hwmReq: make(chan []partitionHWM), atReq: make(chan []partitionHWM, 1), hwmDone: make(chan struct{}), version: cfg.Version, isolation: cfg.Consumer.IsolationLevel}
	if dlqTopic != "" || outputBytes > 0 {
		if a.producer, err = sarama.NewAsyncProducerFromClient(client); err != nil {
			admin.Close()
			return nil, err
		}
		if a.txnID != "" {
			a.txn = newTxnLoop(saramaTxn{a}, a.txnID, o.alive, send, o.stats, log)
			a.wg.Go(func() {
				defer close(a.fed)
				a.txn.run()
			})
		} else {
			a.wg.Go(a.feed)
		}
		a.wg.Go(a.acks)
	}
	go func() {
		defer close(a.hwmDone)
		a.watermarks()
	}()
	return a, nil
}

// close stops the producer (after what was queued is sent), the client,
// and the refresh goroutine: last, since closing the client is what cuts
// short a request of its on the wire (bounded otherwise only by
// Net.ReadTimeout, above the rebalance timeout).
func (a *kafkaAux) close() {
	close(a.quit)
	if a.txn != nil {
		a.txn.stop()
	}
	if a.producer != nil {
		// feed has returned once quit is seen; then Close flushes and closes
		// the result channels, which ends acks.
		a.waitFeed()
		if err := a.producer.Close(); err != nil {
			a.log.Warn().Err(err).Msg("closing the dead-letter producer")
		}
	}
	a.wg.Wait()
	if err := a.admin.Close(); err != nil { // closes the client too
		a.log.Warn().Err(err).Msg("closing the admin client")
	}
	<-a.hwmDone
}

// waitFeed is separate from wg so close can stop feeding before it closes
// the producer (a send on a closed producer input panics).
func (a *kafkaAux) waitFeed() { <-a.fed }

// finishedAbove reads the committed offset and metadata of a partition and
// returns the offsets above it that an earlier owner already finished.
// Metadata turbo did not write, or cannot read, is ignored with one warning.
func (a *kafkaAux) finishedAbove(tp TopicPartition) []offsetmeta.Range {
	got, _, err := a.finishedAboveAll(map[string][]int32{tp.Topic: {tp.Partition}})
	if err != nil {
		a.log.Warn().Err(err).Str("partition", tp.String()).Msg("reading the committed offset metadata; not skipping finished records")
		return nil
	}
	return got[tp]
}

// finishedAboveAt is finishedAbove for a claim whose committed offset is
// committed (exactly once): the metadata must be the one written with that
// offset. A read that saw another commit (one that landed between sarama's
// read of the offset and this one) is made again, a few times; ok is false
// when none matched, and the claim then knows nothing above its offset.
func (a *kafkaAux) finishedAboveAt(tp TopicPartition, committed int64) (ranges []offsetmeta.Range, ok bool) {
	for attempt := 1; attempt <= auxAttempts; attempt++ {
		got, at, err := a.finishedAboveAll(map[string][]int32{tp.Topic: {tp.Partition}})
		if err == nil && committedAt(at, tp) == max(committed, -1) {
			return got[tp], true
		}
		t := time.NewTimer(time.Duration(attempt) * auxRetryWait)
		select {
		case <-t.C:
		case <-a.quit:
			t.Stop()
			return nil, false
		}
	}
	return nil, false
}

// committedAt is the committed offset finishedAboveAll saw for tp, -1 for
// none.
func committedAt(at map[TopicPartition]int64, tp TopicPartition) int64 {
	if o, ok := at[tp]; ok {
		return max(o, -1)
	}
	return -1
}

// finishedAboveAll is finishedAbove for many partitions in one request (a
// session's new claims: one request each, at 4,096 partitions, queued on
// the coordinator's connection and held the claims' start for seconds). A
// partition with no committed offset, or one the broker answered with an
// error, has no entry. at holds the committed offset each entry's ranges
// were written with.
func (a *kafkaAux) finishedAboveAll(parts map[string][]int32) (got map[TopicPartition][]offsetmeta.Range, at map[TopicPartition]int64, err error) {
	var resp *sarama.OffsetFetchResponse
	err = a.reconnecting(func() (err error) {
		if a.txnID != "" {
			resp, err = a.stableOffsets(parts)
		} else {
			resp, err = a.admin.ListConsumerGroupOffsets(a.groupID, parts)
		}
		return err
	}, func() (*sarama.Broker, error) { return a.admin.Coordinator(a.groupID) })
	if err != nil {
		return nil, nil, err
	}
	got, at = make(map[TopicPartition][]offsetmeta.Range), make(map[TopicPartition]int64)
	for topic, ps := range parts {
		for _, p := range ps {
			b := resp.GetBlock(topic, p)
			if b == nil || b.Err != sarama.ErrNoError {
				continue
			}
			tp := TopicPartition{Topic: topic, Partition: p}
			got[tp] = finishedIn(tp, b.Offset, b.Metadata, &a.warnOnce, a.log)
			at[tp] = b.Offset
		}
	}
	return got, at, nil
}

// stableOffsets reads the group's committed offsets and metadata once no
// transaction holds any of them (require_stable, KIP-447): exactly once, a
// claim must skip what the last committed transaction says finished, not
// what was committed before it, or those records' outputs would be written
// twice. A transaction still open is waited for, up to stableWait (the
// broker aborts one whose producer died after its transaction timeout).
func (a *kafkaAux) stableOffsets(parts map[string][]int32) (*sarama.OffsetFetchResponse, error) {
	deadline := time.Now().Add(stableWait)
	for attempt := 1; ; attempt++ {
		coordinator, err := a.admin.Coordinator(a.groupID)
		if err != nil {
			return nil, err
		}
		req := sarama.NewOffsetFetchRequest(a.version, a.groupID, parts)
		req.RequireStable = true
		resp, err := coordinator.FetchOffset(req)
		if err != nil {
			return nil, err
		}
		if gerr := resp.GroupError(); !errors.Is(gerr, sarama.ErrNoError) && !errors.Is(gerr, sarama.ErrUnstableOffsetCommit) {
			return nil, gerr
		}
		if !unstable(resp, parts) {
			return resp, nil
		}
		if attempt == 1 {
			a.log.Info().Any("partitions", parts).Stringer("at_most", stableWait).
				Msg("an open transaction holds committed offsets of partitions this member starts: waiting for it to end")
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("the committed offsets stayed held by an open transaction for %s: %w", stableWait, sarama.ErrUnstableOffsetCommit)
		}
		t := time.NewTimer(min(time.Duration(attempt)*auxRetryWait, time.Second))
		select {
		case <-t.C:
		case <-a.quit:
			t.Stop()
			return nil, sarama.ErrUnstableOffsetCommit
		}
	}
}

// txnTimeout is how long the brokers let a transaction stay open before
// they abort it themselves: what readers and the next owner of a partition
// wait for at most when a producer died and never came back. Kafka Streams
// uses the same 10 s with exactly once; turbo commits every 100 ms.
const txnTimeout = 10 * time.Second

// stableWait bounds stableOffsets' wait: the transaction timeout, and a few
// seconds more.
const stableWait = txnTimeout + 5*time.Second

// unstable reports whether the answer says an open transaction holds an
// offset of parts.
func unstable(resp *sarama.OffsetFetchResponse, parts map[string][]int32) bool {
	if errors.Is(resp.GroupError(), sarama.ErrUnstableOffsetCommit) {
		return true
	}
	for topic, ps := range parts {
		for _, p := range ps {
			if b := resp.GetBlock(topic, p); b != nil && errors.Is(b.Err, sarama.ErrUnstableOffsetCommit) {
				return true
			}
		}
	}
	return false
}

// auxAttempts bounds reconnecting's tries, auxRetryWait the wait before each
// retry (times the attempt).
const (
	auxAttempts  = 3
	auxRetryWait = 100 * time.Millisecond
)

// reconnecting runs call, and again (auxAttempts in all) while it fails
// because the broker it went to is "not connected": a broker restart leaves
// sarama's cached connection to the controller or coordinator closed, and
// sarama retries the admin calls on EOF only, so every later call failed at
// once (after a restart in CI, no commit metadata or topic id could be read,
// and 124 finished records ran again). Closing the cached broker makes the
// next call open it anew.
func (a *kafkaAux) reconnecting(call func() error, broker func() (*sarama.Broker, error)) error {
	var err error
	for attempt := 1; ; attempt++ {
		if err = call(); err == nil || attempt == auxAttempts || !(errors.Is(err, sarama.ErrNotConnected) || errors.Is(err, io.EOF)) {
			return err
		}
		if b, berr := broker(); berr == nil {
			_ = b.Close()
		}
		t := time.NewTimer(time.Duration(attempt) * auxRetryWait)
		select {
		case <-t.C:
		case <-a.quit:
			t.Stop()
			return err
		}
	}
}

// topicID returns the id of topic (KIP-516), zero when it is unknown: a
// broker before Kafka 2.8 (or a kafka.version below it) sends none, and a
// failed lookup is logged and taken as unknown.
func (a *kafkaAux) topicID(topic string) topicID {
	var md []*sarama.TopicMetadata
	err := a.reconnecting(func() (err error) {
		md, err = a.admin.DescribeTopics([]string{topic})
		return err
	}, a.admin.Controller)
	if err != nil {
		a.log.Warn().Err(err).Str("topic", topic).Msg("reading the topic's id; not skipping records finished before a commit landed")
		return topicID{}
	}
	for _, t := range md {
		if t.Name == topic && t.Err == sarama.ErrNoError {
			return topicID(t.Uuid)
		}
	}
	return topicID{}
}

// deadLetter queues records for the dead-letter topic; their outcomes come
// back to the proxy as deadLetterWritten messages.
func (a *kafkaAux) deadLetter(fs []recordFailure) {
	a.mu.Lock()
	for _, f := range fs {
		if len(a.queue) < a.limit {
			a.queue = append(a.queue, f)
		} else { // cannot happen while the limit is the pipeline's size
			a.send(&deadLetterWritten{rec: f.rec, err: errors.New("actors: dead-letter queue full")})
		}
	}
	a.mu.Unlock()
	select {
	case a.wake <- struct{}{}:
	default: // feed has a wake-up pending already
	}
}

// produceOutputs queues records whose outputs to write; each comes back
// to the proxy in an outputsWritten.
func (a *kafkaAux) produceOutputs(recs []*envelope) {
	a.mu.Lock()
	a.outQueue = append(a.outQueue, recs...)
	a.mu.Unlock()
	select {
	case a.wake <- struct{}{}:
	default: // feed has a wake-up pending already
	}
}

// feed hands what was queued to the producer: dead letters, and outputs in
// the order their records finished (the producer keeps that order per
// partition: it is idempotent, one request in flight per broker).
func (a *kafkaAux) feed() {
	defer close(a.fed)
	var batch []recordFailure
	var outs []*envelope
	for {
		a.mu.Lock()
		batch, a.queue = a.queue, batch[:0]
		outs, a.outQueue = a.outQueue, outs[:0]
		a.mu.Unlock()
		for i, f := range batch {
			select {
			case a.producer.Input() <- a.deadLetterMessage(f):
				batch[i] = recordFailure{} // the record is the producer's now
			case <-a.quit:
				return
			}
		}
		for i, rec := range outs {
			rec.outLeft.Store(int32(len(rec.outputs)))
			for j := range rec.outputs {
				select {
				case a.producer.Input() <- outputMessage(rec, j):
				case <-a.quit:
					return
				}
			}
			outs[i] = nil
		}
		if len(batch) > 0 || len(outs) > 0 {
			continue // more may have come while these were fed
		}
		select {
		case <-a.wake:
		case <-a.quit:
			return
		}
	}
}

// acks passes the producer's outcomes on: one deadLetterWritten per dead
// letter, and outputsWritten batches of the records whose outputs are all
// acknowledged, sent whenever no other outcome is ready.
func (a *kafkaAux) acks() {
	succ, errs := a.producer.Successes(), a.producer.Errors()
	var written []*envelope
	for succ != nil || errs != nil {
		select {
		case m, ok := <-succ:
			if !ok {
				succ = nil
				break
			}
			if out, isOut := m.Metadata.(*outputOf); isOut {
				if a.txnID != "" {
					break // written when its transaction commits (txnLoop)
				}
				if rec := (*envelope)(out); rec.outLeft.Add(-1) == 0 {
					written = append(written, rec)
				}
				break
			}
			a.send(&deadLetterWritten{rec: m.Metadata.(*envelope)})
		case e, ok := <-errs:
			if !ok {
				errs = nil
				break
			}
			if out, isOut := e.Msg.Metadata.(*outputOf); isOut {
				if rec := (*envelope)(out); a.txnID != "" || rec.outLeft.Swap(-1) > 0 { // its first failure
					a.send(&outputsWritten{failed: rec, err: e.Err})
				}
				break
			}
			a.send(&deadLetterWritten{rec: e.Msg.Metadata.(*envelope), err: e.Err})
		}
		if len(written) > 0 && (len(written) >= maxOutputsBatch || len(succ) == 0 && len(errs) == 0) {
			a.send(&outputsWritten{written: written})
			written = nil
		}
	}
	if len(written) > 0 {
		a.send(&outputsWritten{written: written})
	}
}

// maxOutputsBatch bounds the records of one outputsWritten.
const maxOutputsBatch = 512

// outputOf marks a producer message's Metadata as an output of the record
// (an *envelope, converted), not a dead letter.
type outputOf envelope

// outputMessage is the i-th output of rec as the producer takes it.
func outputMessage(rec *envelope, i int) *sarama.ProducerMessage {
	o := &rec.outputs[i]
	m := &sarama.ProducerMessage{Topic: o.Topic, Metadata: (*outputOf)(rec)}
	if o.Key != nil {
		m.Key = sarama.ByteEncoder(o.Key)
	}
	if o.Value != nil { // nil: a tombstone
		m.Value = sarama.ByteEncoder(o.Value)
	}
	if len(o.Headers) > 0 {
		m.Headers = make([]sarama.RecordHeader, len(o.Headers))
		for k, h := range o.Headers {
			m.Headers[k] = sarama.RecordHeader{Key: []byte(h.Key), Value: h.Value}
		}
	}
	return m
}

// deadLetterMessage is the record as written to the dead-letter topic: its
// key, value and headers, plus where it came from and why it failed,
// within deadLetterLimit (deadLetter).
func (a *kafkaAux) deadLetterMessage(f recordFailure) *sarama.ProducerMessage {
	key, value, headers := deadLetter(f, time.Now(), deadLetterLimit(a.outputBytes), func(k string, v []byte) sarama.RecordHeader {
		return sarama.RecordHeader{Key: []byte(k), Value: v}
	})
	m := &sarama.ProducerMessage{Topic: a.dlqTopic, Headers: headers, Metadata: f.rec}
	if key != nil {
		m.Key = sarama.ByteEncoder(key)
	}
	if value != nil {
		m.Value = sarama.ByteEncoder(value)
	}
	return m
}
