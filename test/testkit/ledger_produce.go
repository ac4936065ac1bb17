package testkit

import (
	"context"
	"fmt"
	mrand "math/rand/v2"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/IBM/sarama"
)

// The ledger's producer: the records whose identity is in their value (see
// Ledger), written to a real broker and registered before they are sent.

// newRecord registers the next record of key (before it is sent) and
// returns its key and value.
func (l *Ledger) newRecord(topic, key string) *lrecord {
	l.mu.Lock()
	defer l.mu.Unlock()
	u := l.unitLocked("key:" + key)
	r := &lrecord{id: l.prefix + "." + strconv.FormatInt(l.nextID, 10), unit: "key:" + key, key: key, topic: topic, seq: len(u.seqs),
		partition: -1, offset: -1, state: lSent}
	l.nextID++
	u.seqs = append(u.seqs, r)
	l.produced[r.id] = r
	l.sent++
	return r
}

func (r *lrecord) value() []byte {
	return []byte(r.key + ":" + strconv.Itoa(r.seq) + ":" + r.id)
}

// ack records the broker's acknowledgement of a record.
func (l *Ledger) ack(r *lrecord, partition int32, offset int64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	r.state, r.partition, r.offset = lAcked, partition, offset
	l.acked++
	if r.finishes > 0 {
		l.finished++
	}
	if r.seq > 0 {
		if prev := l.units[r.unit].seqs[r.seq-1]; prev.state == lAcked && prev.partition == partition && prev.offset > offset {
			l.produceDisorder++
		}
	}
	l.notifyLocked()
}

// giveUp records that the producer failed to write a record.
func (l *Ledger) giveUp(r *lrecord) {
	l.mu.Lock()
	defer l.mu.Unlock()
	r.state = lNotProduced
	l.notProduced++
	l.notifyLocked()
}

// withdraw takes back a record registered but never handed to the producer
// (the producer was stopped first): not a failure of the broker, and never
// required. It was counted as one (a Stop while the producer's input was
// full failed TestRebalancesUnderLoad with "1 records were not
// acknowledged").
func (l *Ledger) withdraw(r *lrecord) {
	l.mu.Lock()
	defer l.mu.Unlock()
	r.state = lNotProduced
	l.sent--
	l.notifyLocked()
}

// ProducerOptions describe what Ledger.Produce writes.
type ProducerOptions struct {
	// Keys is the number of keys ("k0"…), each record's key drawn at
	// random (seeded); 100 if not positive.
	Keys int
	// Rate is in records per second; 0 means as fast as the broker takes
	// them.
	Rate float64
	// Count is the number of records in all; 0 means until Stop.
	Count int
	// Seed seeds the choice of keys.
	Seed uint64
}

// Producer writes a ledger's records in the background. Only what the
// broker acknowledged counts as produced.
type Producer struct {
	l        *Ledger
	p        sarama.AsyncProducer
	stop     chan struct{}
	stopOnce sync.Once
	done     chan struct{} // the send loop ended and every answer is in
	sendDone chan struct{}

	mu  sync.Mutex
	err error // the first record the producer gave up on
}

// Produce starts writing records to topic, each registered with the ledger
// before it is sent. The producer is idempotent with one request in flight,
// so a key's records land in the order of their sequence numbers (the order
// verdict relies on it, and Report.ProduceDisorder checks it). It stops
// at Stop, when Count records were written, or when the test ends.
func (l *Ledger) Produce(t testing.TB, brokers []string, topic string, o ProducerOptions) *Producer {
	t.Helper()
	if o.Keys <= 0 {
		o.Keys = 100
	}
	cfg := ClientConfig(t)
	cfg.ClientID = "turbo-ledger"
	cfg.Producer.Idempotent = true
	cfg.Net.MaxOpenRequests = 1
	cfg.Producer.RequiredAcks = sarama.WaitForAll
	cfg.Producer.Retry.Max = 10
	cfg.Producer.Return.Successes = true
	cfg.Producer.Return.Errors = true
	cfg.Producer.Flush.Frequency = 5 * time.Millisecond
	cfg.Producer.Partitioner = sarama.NewHashPartitioner
	p, err := sarama.NewAsyncProducer(brokers, cfg)
	if err != nil {
		t.Fatalf("ledger: producer for %s on %v: %v", topic, brokers, err)
	}
	kp := &Producer{l: l, p: p, stop: make(chan struct{}), done: make(chan struct{}), sendDone: make(chan struct{})}
	go kp.answers()
	go kp.send(topic, o)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := kp.Stop(ctx); err != nil && ctx.Err() != nil {
			t.Errorf("ledger: stopping the producer at the end of the test: %v", err)
		}
	})
	return kp
}

// paceTick is how often a rate-limited producer tops up what it is due.
const paceTick = 10 * time.Millisecond

func (kp *Producer) send(topic string, o ProducerOptions) {
	defer close(kp.sendDone)
	defer kp.p.AsyncClose() // flushes, then closes Successes and Errors: answers returns
	rng := mrand.New(mrand.NewPCG(o.Seed, 0x70726f64))
	start := time.Now()
	var tick <-chan time.Time
	if o.Rate > 0 {
		tk := time.NewTicker(paceTick)
		defer tk.Stop()
		tick = tk.C
	}
	for n := 0; o.Count == 0 || n < o.Count; {
		if o.Rate > 0 && float64(n) >= o.Rate*time.Since(start).Seconds() {
			select {
			case <-tick:
				continue
			case <-kp.stop:
				return
			}
		}
		r := kp.l.newRecord(topic, "k"+strconv.Itoa(rng.IntN(o.Keys)))
		msg := &sarama.ProducerMessage{Topic: topic, Key: sarama.StringEncoder(r.key), Value: sarama.ByteEncoder(r.value()), Metadata: r}
		select {
		case kp.p.Input() <- msg:
			n++
		case <-kp.stop:
			kp.l.withdraw(r) // registered, never sent
			return
		}
	}
}

func (kp *Producer) answers() {
	defer close(kp.done)
	succ, errs := kp.p.Successes(), kp.p.Errors()
	for succ != nil || errs != nil {
		select {
		case m, ok := <-succ:
			if !ok {
				succ = nil
				continue
			}
			kp.l.ack(m.Metadata.(*lrecord), m.Partition, m.Offset)
		case e, ok := <-errs:
			if !ok {
				errs = nil
				continue
			}
			kp.l.giveUp(e.Msg.Metadata.(*lrecord))
			kp.mu.Lock()
			if kp.err == nil {
				kp.err = fmt.Errorf("ledger: producing %s: %w", e.Msg.Value, e.Err)
			}
			kp.mu.Unlock()
		}
	}
}

// Done is closed once the producer stopped and every record it sent was
// answered (after Count records, or after Stop).
func (kp *Producer) Done() <-chan struct{} { return kp.done }

// Stop stops sending and waits until every record sent was answered; it
// returns the first produce error, or ctx's error if the answers do not come
// in time. It is idempotent.
func (kp *Producer) Stop(ctx context.Context) error {
	kp.stopOnce.Do(func() { close(kp.stop) })
	select {
	case <-kp.done:
	case <-ctx.Done():
		return fmt.Errorf("ledger: waiting for the producer's last answers: %w", ctx.Err())
	}
	return kp.Err()
}

// Err returns the first produce error so far.
func (kp *Producer) Err() error {
	kp.mu.Lock()
	defer kp.mu.Unlock()
	return kp.err
}
