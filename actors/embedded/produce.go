package embedded

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/IBM/sarama"
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
	p, err := sarama.NewAsyncProducer(o.Brokers, cfg)
	if err != nil {
		return fmt.Errorf("embedded: connecting producer to %v: %w", o.Brokers, err)
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

	// With a rate, record n is sent at start + n/rate.
	start := time.Now()
	pace := time.NewTimer(0)
	defer pace.Stop()
	sent := 0
	for sent < o.Count {
		if o.Rate > 0 {
			due := start.Add(time.Duration(float64(sent) / o.Rate * float64(time.Second)))
			if d := time.Until(due); d > 0 {
				pace.Reset(d)
				select {
				case <-pace.C:
				case <-ctx.Done():
					return abort()
				}
			}
		}
		k := sent % o.Keys
		seq := sent / o.Keys
		key := "key-" + strconv.Itoa(k)
		val := `{"key":"` + key + `","seq":` + strconv.Itoa(seq) + `,"n":` + strconv.Itoa(sent) + `}`
		select {
		case p.Input() <- &sarama.ProducerMessage{Topic: o.Topic, Key: sarama.StringEncoder(key), Value: sarama.StringEncoder(val)}:
			sent++
		case <-ctx.Done():
			return abort()
		}
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
