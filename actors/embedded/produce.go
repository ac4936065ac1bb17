package embedded

import (
	"context"
	"fmt"
	"hash/fnv"
	"strconv"
	"sync"
	"time"

	"github.com/IBM/sarama"
	"github.com/twmb/franz-go/pkg/kgo"
)

// ProduceOptions describe demo records: Count records spread over Keys keys
// ("key-0" … "key-<Keys-1>", round robin), each value a small JSON document
// carrying its key and its sequence number within the key.
type ProduceOptions struct {
	Brokers []string
	Topic   string
	Count   int
	Keys    int
	Rate    float64 // records per second; 0 = as fast as possible
	Version string  // Kafka protocol version; "" = sarama's default
	// Secure, when set, adds TLS and SASL to the producer's configuration
	// (kafkanet.Net.Apply).
	Secure func(*sarama.Config) error
	// Franz writes with franz-go (kafka.client: franz-go) instead of
	// sarama, each key on the partition sarama's hash partitioner picks, so
	// that either side writes the same layout; FranzSecure, when set, gives
	// its TLS and SASL options (kafkanet.Net.Franz).
	Franz       bool
	FranzSecure func() ([]kgo.Opt, error)
}

// Produce writes the records and returns once the broker acknowledged all of
// them (or the first error).
func Produce(ctx context.Context, o ProduceOptions) error {
	if o.Count <= 0 {
		return ErrNoRecords
	}
	if o.Keys <= 0 {
		o.Keys = 1
	}
	if o.Franz {
		return produceFranz(ctx, o)
	}
	cfg := sarama.NewConfig()
	if o.Version != "" {
		v, err := sarama.ParseKafkaVersion(o.Version)
		if err != nil {
			return fmt.Errorf("embedded: version %q: %w", o.Version, err)
		}
		cfg.Version = v
	}
	cfg.ClientID = "turbo-produce"
	cfg.Producer.Return.Successes = true
	cfg.Producer.Return.Errors = true
	cfg.Producer.RequiredAcks = sarama.WaitForAll
	cfg.Producer.Flush.Messages = 5000
	cfg.Producer.Flush.Bytes = 1 << 20
	cfg.Producer.Flush.Frequency = 5 * time.Millisecond
	cfg.Producer.Partitioner = sarama.NewHashPartitioner
	if o.Secure != nil {
		if err := o.Secure(cfg); err != nil {
			return err
		}
	}
	p, err := connectSarama(ctx, o.Brokers, cfg)
	if err != nil {
		return fmt.Errorf("cannot connect to Kafka at %v: %w", o.Brokers, err)
	}

	// Acknowledgements are counted by a goroutine of this call, which every
	// return path waits for. It ends when all records are acknowledged or
	// when the producer is closed (its channels close).
	acked := make(chan error, 1)
	go func() {
		var first error
		succ, errs := p.Successes(), p.Errors()
		for n := 0; n < o.Count && (succ != nil || errs != nil); {
			select {
			case _, ok := <-succ:
				if !ok {
					succ = nil
					continue
				}
				n++
			case perr, ok := <-errs:
				if !ok {
					errs = nil
					continue
				}
				n++
				if first == nil {
					first = perr.Err
				}
			}
		}
		acked <- first
	}()
	abort := func() error {
		p.AsyncClose()
		<-acked
		return ctx.Err()
	}

	err = each(ctx, o, func(key, val string) bool {
		select {
		case p.Input() <- &sarama.ProducerMessage{Topic: o.Topic, Key: sarama.StringEncoder(key), Value: sarama.StringEncoder(val)}:
			return true
		case <-ctx.Done():
			return false
		}
	})
	if err != nil {
		return abort()
	}
	var ackErr error
	select {
	case ackErr = <-acked:
		if err := p.Close(); err != nil && ackErr == nil {
			ackErr = err
		}
	case <-ctx.Done():
		ackErr = abort()
	}
	if ackErr != nil {
		return fmt.Errorf("embedded: producing to %s: %w", o.Topic, ackErr)
	}
	return nil
}

// each calls put with the key and value of every record in turn, paced by
// o.Rate (record n is due at start + n/rate), until put returns false or
// ctx ends (its error).
func each(ctx context.Context, o ProduceOptions, put func(key, val string) bool) error {
	start := time.Now()
	pace := time.NewTimer(0)
	defer pace.Stop()
	for sent := 0; sent < o.Count; sent++ {
		if o.Rate > 0 {
			due := start.Add(time.Duration(float64(sent) / o.Rate * float64(time.Second)))
			if d := time.Until(due); d > 0 {
				pace.Reset(d)
				select {
				case <-pace.C:
				case <-ctx.Done():
					return ctx.Err()
				}
			}
		}
		k := sent % o.Keys
		seq := sent / o.Keys
		key := "key-" + strconv.Itoa(k)
		val := `{"key":"` + key + `","seq":` + strconv.Itoa(seq) + `,"n":` + strconv.Itoa(sent) + `}`
		if !put(key, val) {
			return ctx.Err()
		}
	}
	return nil
}

// connectWait bounds the first answer of the brokers; deliveryWait, each
// record's delivery, retries included (franz-go's producer).
const (
	connectWait  = 30 * time.Second
	deliveryWait = 2 * time.Minute
)

// produceFranz is Produce with franz-go.
// connectSarama creates sarama's producer, which connects before it
// returns and cannot be interrupted (against a broker that accepts and
// never answers, minutes of retries). It runs on a goroutine of its own;
// the call returns when the producer is there, when ctx ends (a signal) or
// after connectWait, whichever comes first. A producer that connects after
// the call gave up is closed by that goroutine, which ends with sarama's
// own attempts (its timeouts bound them).
func connectSarama(ctx context.Context, brokers []string, cfg *sarama.Config) (sarama.AsyncProducer, error) {
	type result struct {
		p   sarama.AsyncProducer
		err error
	}
	got := make(chan result)
	abandon := make(chan struct{})
	go func() {
		p, err := sarama.NewAsyncProducer(brokers, cfg)
		select {
		case got <- result{p, err}:
		case <-abandon:
			if p != nil {
				p.AsyncClose()
			}
		}
	}()
	wait := time.NewTimer(connectWait)
	defer wait.Stop()
	select {
	case r := <-got:
		return r.p, r.err
	case <-ctx.Done():
		close(abandon)
		return nil, ctx.Err()
	case <-wait.C:
		close(abandon)
		return nil, fmt.Errorf("no broker answered within %s: %w", connectWait, context.DeadlineExceeded)
	}
}

func produceFranz(ctx context.Context, o ProduceOptions) error {
	opts := []kgo.Opt{
		kgo.SeedBrokers(o.Brokers...),
		kgo.ClientID("turbo-produce"),
		kgo.RequiredAcks(kgo.AllISRAcks()),
		kgo.ProducerLinger(5 * time.Millisecond),
		kgo.MaxBufferedRecords(10_000),
		kgo.RecordDeliveryTimeout(deliveryWait),
		kgo.RecordPartitioner(kgo.StickyKeyPartitioner(kgo.SaramaCompatHasher(fnv32a))),
		kgo.AllowAutoTopicCreation(), // as sarama does
	}
	if o.FranzSecure != nil {
		sec, err := o.FranzSecure()
		if err != nil {
			return err
		}
		opts = append(opts, sec...)
	}
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		return fmt.Errorf("cannot connect to Kafka at %v: %w", o.Brokers, err)
	}
	defer cl.Close()
	// As sarama's producer, which connects before it returns: a broker
	// that refuses the connection (TLS, SASL) fails the call at once
	// rather than every record being retried.
	pctx, cancel := context.WithTimeout(ctx, connectWait)
	err = cl.Ping(pctx)
	cancel()
	if err != nil {
		return fmt.Errorf("cannot connect to Kafka at %v: %w", o.Brokers, err)
	}
	var mu sync.Mutex
	var first error
	done := func(_ *kgo.Record, err error) {
		if err != nil {
			mu.Lock()
			if first == nil {
				first = err
			}
			mu.Unlock()
		}
	}
	err = each(ctx, o, func(key, val string) bool {
		cl.Produce(ctx, &kgo.Record{Topic: o.Topic, Key: []byte(key), Value: []byte(val)}, done)
		return ctx.Err() == nil
	})
	if err == nil {
		err = cl.Flush(ctx)
	}
	mu.Lock()
	defer mu.Unlock()
	if first != nil {
		err = first
	}
	if err != nil {
		return fmt.Errorf("embedded: producing to %s: %w", o.Topic, err)
	}
	return nil
}

// fnv32a is sarama's key hash (its hash partitioner's).
func fnv32a(b []byte) uint32 {
	h := fnv.New32a()
	h.Write(b)
	return h.Sum32()
}
