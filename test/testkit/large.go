package testkit

import (
	"strconv"
	"testing"

	"github.com/IBM/sarama"
)

// MaxRecordValue is the largest value ProduceSized can write: Kafka's (and
// the embedded broker's) default message.max.bytes, 1,048,588 bytes, bounds a
// whole record batch, so a value of exactly 1 MiB does not fit; 1 MiB less
// 1 KiB leaves room for the batch and record headers.
const MaxRecordValue = 1<<20 - 1<<10

// ProduceSized writes count records of valueSize bytes each (keys "key-0"…
// round robin over keys, spread over the partitions by key hash), one record
// per batch, and fails the test unless the broker acknowledges them all.
func ProduceSized(t testing.TB, brokers []string, topic string, count, keys, valueSize int) {
	t.Helper()
	if valueSize > MaxRecordValue {
		t.Fatalf("ProduceSized: a %d-byte value exceeds the broker's message.max.bytes", valueSize)
	}
	cfg := ClientConfig(t)
	cfg.ClientID = "turbo-test-sized"
	cfg.Producer.Return.Successes = true
	cfg.Producer.RequiredAcks = sarama.WaitForAll
	cfg.Producer.Partitioner = sarama.NewHashPartitioner
	cfg.Producer.MaxMessageBytes = 1048588 // the broker's limit; sarama's default (1,000,000) refuses a ~1 MiB value
	p, err := sarama.NewSyncProducer(brokers, cfg)
	if err != nil {
		t.Fatalf("producer for %s: %v", topic, err)
	}
	defer p.Close()
	value := make([]byte, valueSize)
	for i := range value {
		value[i] = byte('a' + i%26)
	}
	for n := range count {
		msg := &sarama.ProducerMessage{Topic: topic, Key: sarama.StringEncoder("key-" + strconv.Itoa(n%keys)), Value: sarama.ByteEncoder(value)}
		if _, _, err := p.SendMessage(msg); err != nil {
			t.Fatalf("producing record %d of %d (%d bytes) to %s: %v", n, count, valueSize, topic, err)
		}
	}
}
