package actors

import (
	"errors"
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
	groupID  string
	dlqTopic string
	send     func(msg any)
	log      zerolog.Logger

	client   sarama.Client
	admin    sarama.ClusterAdmin
	producer sarama.AsyncProducer // nil without a dead-letter topic
	// The dead letters waiting for the producer: a slice that grows with
	// them up to limit, not a channel of that capacity, which allocated the
	// whole pipeline's worth up front (max_buffered 9223372036854775807
	// panicked with "makechan: size out of range").
	mu       sync.Mutex
	queue    []recordFailure
	limit    int
	wake     chan struct{} // capacity 1: something was queued
	quit     chan struct{}
	fed      chan struct{} // closed when feed has returned
	wg       sync.WaitGroup
	warnOnce sync.Once

	// The high watermark refresh (hwmrefresh.go): requests reach its
	// goroutine only while it waits for one, so one runs at a time.
	hwmReq    chan []partitionHWM
	hwmDone   chan struct{} // closed when the refresh goroutine has returned
	version   sarama.KafkaVersion
	isolation sarama.IsolationLevel
}

func newKafkaAux(brokers []string, base *sarama.Config, groupID, dlqTopic string, queue int, send func(any), log zerolog.Logger) (*kafkaAux, error) {
	cfg := *base
	cfg.ClientID = base.ClientID + "-aux"
	cfg.Producer.Return.Successes = true
	cfg.Producer.Return.Errors = true
	cfg.Producer.RequiredAcks = sarama.WaitForAll
	cfg.Producer.Retry.Max = 5
	cfg.Producer.Partitioner = sarama.NewHashPartitioner
	// Idempotent, as franz-go's producer is: a write whose answer was lost
	// with a leader that died is retried, and without a producer id the
	// new leader stored it a second time (1 of 2,400 dead letters written
	// twice when the dead-letter topic's leader was killed). Kafka before
	// 0.11 knows no producer ids.
	if cfg.Version.IsAtLeast(sarama.V0_11_0_0) {
		cfg.Producer.Idempotent = true
		cfg.Net.MaxOpenRequests = 1
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
	a := &kafkaAux{groupID: groupID, dlqTopic: dlqTopic, send: send, log: log, client: client, admin: admin,
		limit: queue, wake: make(chan struct{}, 1), quit: make(chan struct{}), fed: make(chan struct{}),
		hwmReq: make(chan []partitionHWM), hwmDone: make(chan struct{}), version: cfg.Version, isolation: cfg.Consumer.IsolationLevel}
	if dlqTopic != "" {
		if a.producer, err = sarama.NewAsyncProducerFromClient(client); err != nil {
			admin.Close()
			return nil, err
		}
		a.wg.Go(a.feed)
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
	got, err := a.finishedAboveAll(map[string][]int32{tp.Topic: {tp.Partition}})
	if err != nil {
		a.log.Warn().Err(err).Str("partition", tp.String()).Msg("reading the committed offset metadata; not skipping finished records")
		return nil
	}
	return got[tp]
}

// finishedAboveAll is finishedAbove for many partitions in one request (a
// session's new claims: one request each, at 4,096 partitions, queued on
// the coordinator's connection and held the claims' start for seconds). A
// partition with no committed offset, or one the broker answered with an
// error, has no entry.
func (a *kafkaAux) finishedAboveAll(parts map[string][]int32) (map[TopicPartition][]offsetmeta.Range, error) {
	var resp *sarama.OffsetFetchResponse
	err := a.reconnecting(func() (err error) {
		resp, err = a.admin.ListConsumerGroupOffsets(a.groupID, parts)
		return err
	}, func() (*sarama.Broker, error) { return a.admin.Coordinator(a.groupID) })
	if err != nil {
		return nil, err
	}
	got := make(map[TopicPartition][]offsetmeta.Range)
	for topic, ps := range parts {
		for _, p := range ps {
			b := resp.GetBlock(topic, p)
			if b == nil || b.Err != sarama.ErrNoError {
				continue
			}
			tp := TopicPartition{Topic: topic, Partition: p}
			got[tp] = finishedIn(tp, b.Offset, b.Metadata, &a.warnOnce, a.log)
		}
	}
	return got, nil
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

func (a *kafkaAux) feed() {
	defer close(a.fed)
	var batch []recordFailure
	for {
		a.mu.Lock()
		batch, a.queue = a.queue, batch[:0]
		a.mu.Unlock()
		for i, f := range batch {
			select {
			case a.producer.Input() <- deadLetterMessage(a.dlqTopic, f):
				batch[i] = recordFailure{} // the record is the producer's now
			case <-a.quit:
				return
			}
		}
		if len(batch) > 0 {
			continue // more may have come while these were fed
		}
		select {
		case <-a.wake:
		case <-a.quit:
			return
		}
	}
}

func (a *kafkaAux) acks() {
	succ, errs := a.producer.Successes(), a.producer.Errors()
	for succ != nil || errs != nil {
		select {
		case m, ok := <-succ:
			if !ok {
				succ = nil
				continue
			}
			a.send(&deadLetterWritten{rec: m.Metadata.(*envelope)})
		case e, ok := <-errs:
			if !ok {
				errs = nil
				continue
			}
			a.send(&deadLetterWritten{rec: e.Msg.Metadata.(*envelope), err: e.Err})
		}
	}
}

// deadLetterMessage is the record as written to the dead-letter topic: its
// key, value and headers, plus where it came from and why it failed.
func deadLetterMessage(topic string, f recordFailure) *sarama.ProducerMessage {
	rec := f.rec
	headers := deadLetterHeaders(f, time.Now(), func(k string, v []byte) sarama.RecordHeader {
		return sarama.RecordHeader{Key: []byte(k), Value: v}
	})
	m := &sarama.ProducerMessage{Topic: topic, Value: sarama.ByteEncoder(rec.Value), Headers: headers, Metadata: rec}
	if rec.Key != nil {
		m.Key = sarama.ByteEncoder(rec.Key)
	}
	return m
}
