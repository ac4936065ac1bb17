// Package kafka_test checks the broker the tests run on, the way turbo uses
// it: an embedded one, or the real Kafka of TURBO_TEST_BROKERS that
// kafka.sh starts (`make test-kafka`, `make kafka-start`).
package kafka_test

import (
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/turbokafka/turbo/test/testkit"
)

// Topics made by testkit.Broker, records produced and read back, and a
// group's commit, all with the Kafka protocol version turbo speaks.
func TestBrokerRoundTrip(t *testing.T) {
	const partitions, records, keys = 3, 300, 30
	topic := testkit.TopicName("roundtrip-" + t.Name())
	brokers := testkit.Broker(t, partitions, topic)
	t.Logf("brokers %v (shared: %t), topic %s", brokers, testkit.SharedBrokers() != nil, topic)

	testkit.Produce(t, brokers, topic, records, keys)
	ends := testkit.EndOffsets(t, brokers, topic)
	var total int64
	for _, end := range ends {
		total += end
	}
	if len(ends) != partitions || total != records {
		t.Fatalf("end offsets %v: want %d partitions holding %d records", ends, partitions, records)
	}
	partitionOf := map[string]int32{}
	for _, m := range testkit.ReadTopic(t, brokers, topic, records, 30*time.Second) {
		if p, ok := partitionOf[string(m.Key)]; ok && p != m.Partition {
			t.Errorf("key %s in partitions %d and %d", m.Key, p, m.Partition)
		}
		partitionOf[string(m.Key)] = m.Partition
	}
	if len(partitionOf) != keys {
		t.Errorf("read %d distinct keys, want %d", len(partitionOf), keys)
	}

	group := "g-" + topic
	commit(t, brokers, group, topic, 0, 42)
	if got := testkit.CommittedOffsets(t, brokers, group, topic); got[0] != 42 || got[1] != -1 {
		t.Errorf("committed offsets %v: want 42 for partition 0 and nothing for the others", got)
	}
}

// TopicName keeps names as they are for an embedded broker per test and
// makes them legal and unique on a shared one.
func TestTopicName(t *testing.T) {
	a, b := testkit.TopicName("t-Test/sub case"), testkit.TopicName("t-Test/sub case")
	if testkit.SharedBrokers() == nil {
		if a != "t-Test/sub case" || b != a {
			t.Errorf("TopicName gave %q and %q, want the name unchanged", a, b)
		}
		return
	}
	if a == b {
		t.Errorf("TopicName gave %q twice", a)
	}
	for _, r := range a + b {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_' || r == '.') {
			t.Errorf("TopicName gave %q and %q: %q is not legal in a Kafka topic name", a, b, r)
		}
	}
}

// commit commits offset for one partition of topic as group, outside any
// group session (generation -1, as a standalone consumer does). A broker
// just started may answer that it does not coordinate the group yet, or is
// still loading its offsets (the offsets topic is created by the first
// lookup): that is retried, for up to 30 s, asking for the coordinator again.
func commit(t *testing.T, brokers []string, group, topic string, partition int32, offset int64) {
	t.Helper()
	admin, client := testkit.Admin(t, brokers)
	defer admin.Close() // and the client
	req := &sarama.OffsetCommitRequest{Version: 7, ConsumerGroup: group, ConsumerGroupGeneration: -1}
	req.AddBlock(topic, partition, offset, 0, "")
	deadline := time.Now().Add(30 * time.Second)
	for {
		kerr := sarama.ErrConsumerCoordinatorNotAvailable
		coordinator, err := client.Coordinator(group)
		if err == nil {
			resp, err := coordinator.CommitOffset(req)
			if err != nil {
				t.Fatalf("committing %s/%d for %s: %v", topic, partition, group, err)
			}
			kerr = resp.Errors[topic][partition]
		}
		switch kerr {
		case sarama.ErrNoError:
			return
		case sarama.ErrNotCoordinatorForConsumer, sarama.ErrOffsetsLoadInProgress, sarama.ErrConsumerCoordinatorNotAvailable:
			if time.Now().After(deadline) {
				t.Fatalf("committing %s/%d for %s: still %v after 30 s (coordinator lookup: %v)", topic, partition, group, kerr, err)
			}
			_ = client.RefreshCoordinator(group)
			time.Sleep(100 * time.Millisecond)
		default:
			t.Fatalf("committing %s/%d for %s: %v", topic, partition, group, kerr)
		}
	}
}
