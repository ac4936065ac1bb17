package testkit

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/IBM/sarama"
)

// BrokersEnv names the environment variable that points Broker at a running
// Kafka cluster (comma-separated HOST:PORT, e.g. from `make test-kafka`)
// instead of an embedded broker per test.
const BrokersEnv = "TURBO_TEST_BROKERS"

const (
	// topicReadyTimeout bounds the wait for a created topic's partitions to
	// answer on their leaders.
	topicReadyTimeout = 2 * time.Minute
	// maxTopicLen is Kafka's limit on a topic name's length.
	maxTopicLen = 249
)

// SharedBrokers returns the brokers named by TURBO_TEST_BROKERS, or nil when
// it is unset or empty.
func SharedBrokers() []string {
	var out []string
	for _, b := range strings.Split(os.Getenv(BrokersEnv), ",") {
		if b = strings.TrimSpace(b); b != "" {
			out = append(out, b)
		}
	}
	return out
}

var (
	// runID tells this test process's topics from those of other processes
	// and earlier runs on the same shared broker.
	runID    = newRunID()
	topicSeq atomic.Int64
)

func newRunID() string {
	b := make([]byte, 4)
	_, _ = rand.Read(b) // never fails (crypto/rand panics instead)
	return hex.EncodeToString(b)
}

// TopicName returns the name a test should use for a topic it would call
// base. With an embedded broker per test that is base itself. On a shared
// broker (TURBO_TEST_BROKERS) it is base with the characters Kafka rejects
// replaced by '-' and a suffix unique to this call in this process, so that
// tests, repeated runs (-count) and concurrent test processes never share a
// topic, and stale topics of earlier runs are never read.
func TopicName(base string) string {
	if SharedBrokers() == nil {
		return base
	}
	suffix := fmt.Sprintf("-%s-%d", runID, topicSeq.Add(1))
	name := strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_' || r == '.' {
			return r
		}
		return '-' // Kafka allows only ASCII letters, digits, '.', '_' and '-'
	}, base)
	if len(name) > maxTopicLen-len(suffix) {
		name = name[:maxTopicLen-len(suffix)]
	}
	return name + suffix
}

// createTopics creates topics with partitions partitions each on the shared
// brokers (replicated on every node of a test cluster, TURBO_TEST_KAFKA_NODES;
// else once), waits until every partition has a leader in the
// metadata, and deletes the topics when the test ends (best effort).
func createTopics(t testing.TB, brokers []string, partitions int, topics []string) {
	t.Helper()
	if len(topics) == 0 {
		return
	}
	admin, client := Admin(t, brokers)
	defer admin.Close()
	for _, topic := range topics {
		err := admin.CreateTopic(topic, &sarama.TopicDetail{NumPartitions: int32(partitions), ReplicationFactor: replicas()}, false)
		if errors.Is(err, sarama.ErrTopicAlreadyExists) {
			t.Fatalf("topic %q already exists on the shared broker %v: name it with testkit.TopicName so that tests and runs do not share topics", topic, brokers)
		}
		if err != nil {
			t.Fatalf("creating topic %q (%d partitions) on %v: %v", topic, partitions, brokers, err)
		}
		t.Cleanup(func() { deleteTopic(t, brokers, topic) })
	}
	deadline := time.Now().Add(topicReadyTimeout)
	for _, topic := range topics {
		for {
			err := client.RefreshMetadata(topic)
			var ready []int32
			if err == nil {
				ready, err = client.WritablePartitions(topic)
			}
			serving := 0
			if err == nil && len(ready) == partitions {
				serving, err = partitionsServing(client, topic)
				if err == nil && serving == partitions {
					break
				}
			}
			if time.Now().After(deadline) {
				t.Fatalf("topic %q on %v: %d of %d partitions have a leader in the metadata and %d answer as leaders %s after it was created (last error: %v)",
					topic, brokers, len(ready), partitions, serving, topicReadyTimeout, err)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
}

// partitionsServing counts the partitions of topic whose leader, as the
// metadata names it, answers a ListOffsets request as their leader. A
// broker of a real cluster is named leader in the metadata before it has
// created the partition's log: at thousands of partitions, for seconds,
// during which a producer's retries run out on "not the leader".
func partitionsServing(client sarama.Client, topic string) (int, error) {
	parts, err := client.Partitions(topic)
	if err != nil {
		return 0, err
	}
	reqs := make(map[*sarama.Broker]*sarama.OffsetRequest)
	for _, p := range parts {
		leader, err := client.Leader(topic, p)
		if err != nil {
			return 0, err
		}
		req := reqs[leader]
		if req == nil {
			req = &sarama.OffsetRequest{Version: 1}
			reqs[leader] = req
		}
		req.AddBlock(topic, p, sarama.OffsetNewest, 1)
	}
	serving := 0
	var last error
	for leader, req := range reqs {
		resp, err := leader.GetAvailableOffsets(req)
		if err != nil {
			last = err
			continue
		}
		for _, p := range parts {
			if b := resp.GetBlock(topic, p); b != nil {
				if b.Err == sarama.ErrNoError {
					serving++
				} else {
					last = b.Err
				}
			}
		}
	}
	return serving, last
}

// deleteTopic deletes topic from the shared brokers; a failure is only
// logged, the topic's name being unique to its test.
func deleteTopic(t testing.TB, brokers []string, topic string) {
	cfg := ClientConfig(t)
	admin, err := sarama.NewClusterAdmin(brokers, cfg)
	if err != nil {
		t.Logf("topic %q left on %v: connecting to delete it: %v", topic, brokers, err)
		return
	}
	defer admin.Close()
	if err := admin.DeleteTopic(topic); err != nil && !errors.Is(err, sarama.ErrUnknownTopicOrPartition) {
		t.Logf("topic %q left on %v: deleting it: %v", topic, brokers, err)
	}
}

// CreateTopics creates topics (partitions each) on the broker at addr, a
// shared cluster's or a test's own `turbo dev`, and waits until they can
// be written to; they are deleted at cleanup.
func CreateTopics(t testing.TB, addr string, partitions int, topics ...string) {
	t.Helper()
	createTopics(t, []string{addr}, partitions, topics)
}

// NodesEnv names the environment variable that says how many nodes the test
// cluster of TURBO_TEST_BROKERS has (test/kafka/kafka.sh's cluster mode).
const NodesEnv = "TURBO_TEST_KAFKA_NODES"

// replicas is the replication factor of the topics tests create: one per
// node of a test cluster (the cluster's min.insync.replicas is 2), else 1.
func replicas() int16 {
	if n, err := strconv.Atoi(os.Getenv(NodesEnv)); err == nil && n > 1 {
		return int16(n)
	}
	return 1
}
