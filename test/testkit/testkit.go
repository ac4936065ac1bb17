// Package testkit holds what turbo's own tests share: an embedded broker per
// test (or topics on a real Kafka cluster named by TURBO_TEST_BROKERS), demo
// records, a ledger handler that judges ordering and loss, and an
// "eventually" wait with a deadline.
package testkit

import (
	"context"
	"errors"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/rs/zerolog"
	"github.com/turbokafka/turbo/actors/embedded"
)

// Broker starts an embedded broker on a random loopback port for the test,
// creates topics on it with partitions partitions each (8 if not positive),
// and stops it when the test ends.
//
// When TURBO_TEST_BROKERS names a running cluster, Broker returns those
// brokers instead, with topics created there (replication 1) and deleted when
// the test ends. That cluster is shared by tests and runs: name the topics
// with TopicName.
func Broker(t testing.TB, partitions int, topics ...string) []string {
	t.Helper()
	if brokers := SharedBrokers(); brokers != nil {
		if partitions <= 0 {
			partitions = 8 // as the embedded broker
		}
		createTopics(t, brokers, partitions, topics)
		return brokers
	}
	b, err := embedded.Start(embedded.Options{Partitions: partitions, Topics: topics})
	if err != nil {
		t.Fatalf("starting embedded broker: %v", err)
	}
	t.Cleanup(b.Close)
	return b.Addrs()
}

// Produce writes count demo records over keys keys ("key-0"…) and fails the
// test if the broker does not acknowledge them all.
func Produce(t testing.TB, brokers []string, topic string, count, keys int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	if err := embedded.Produce(ctx, embedded.ProduceOptions{Brokers: brokers, Topic: topic, Count: count, Keys: keys, Secure: SecureProducer(t)}); err != nil {
		t.Fatalf("producing %d records to %s: %v", count, topic, err)
	}
}

// Eventually waits until cond holds, checking every few milliseconds, and fails
// the test naming what it waited for if timeout passes first.
func Eventually(t testing.TB, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", timeout, what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// Holds checks every few milliseconds, for d, that what must not happen did
// not: check returns an error saying what happened, and the first one fails
// the test. The wait is the observation, so it is not one a condition could
// shorten.
func Holds(t testing.TB, d time.Duration, what string, check func() error) {
	t.Helper()
	deadline := time.NewTimer(d)
	defer deadline.Stop()
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for {
		if err := check(); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		select {
		case <-deadline.C:
			if err := check(); err != nil {
				t.Fatalf("%s: %v", what, err)
			}
			return
		case <-tick.C:
		}
	}
}

// Logger returns a logger writing to the test's log, at info level, or at
// the level TURBO_TEST_LOG names (debug, to follow a failure).
func Logger(t testing.TB) zerolog.Logger {
	level := zerolog.InfoLevel
	if l, err := zerolog.ParseLevel(os.Getenv("TURBO_TEST_LOG")); err == nil && l != zerolog.NoLevel {
		level = l
	}
	return zerolog.New(zerolog.ConsoleWriter{Out: testWriter{t}, NoColor: true}).Level(level).With().Timestamp().Logger()
}

type testWriter struct{ t testing.TB }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(string(p))
	return len(p), nil
}

// CommittedOffsets returns the group's committed offset for every partition of
// topic (-1 where nothing is committed).
func CommittedOffsets(t testing.TB, brokers []string, group, topic string) map[int32]int64 {
	t.Helper()
	out := map[int32]int64{}
	for p, b := range committed(t, brokers, group, topic, nil) {
		out[p] = b.Offset
	}
	return out
}

// AwaitCommittedEnd waits, up to timeout, until group has committed the end
// of every partition of topic.
func AwaitCommittedEnd(t testing.TB, brokers []string, group, topic string, timeout time.Duration) {
	t.Helper()
	Eventually(t, timeout, fmt.Sprintf("group %s to commit the end of every partition of %s", group, topic), func() bool {
		committed := CommittedOffsets(t, brokers, group, topic)
		for p, end := range EndOffsets(t, brokers, topic) {
			if committed[p] < end {
				return false
			}
		}
		return true
	})
}

// CommittedMetadata returns the group's committed offset and its metadata
// for one partition (-1 and "" when nothing is committed).
func CommittedMetadata(t testing.TB, brokers []string, group, topic string, partition int32) (int64, string) {
	t.Helper()
	b := committed(t, brokers, group, topic, []int32{partition})[partition]
	return b.Offset, b.Metadata
}

// committed reads the group's commits for the given partitions of topic (all
// of them when nil); a partition without a commit has offset -1.
func committed(t testing.TB, brokers []string, group, topic string, parts []int32) map[int32]*sarama.OffsetFetchResponseBlock {
	t.Helper()
	admin, client := Admin(t, brokers)
	defer admin.Close()
	if parts == nil {
		var err error
		if parts, err = client.Partitions(topic); err != nil {
			t.Fatalf("partitions of %s: %v", topic, err)
		}
	}
	var resp *sarama.OffsetFetchResponse
	var err error
	// A coordinator that is loading the group's offsets, or moving, answers
	// again shortly.
	for deadline := time.Now().Add(coordinatorWait); ; {
		resp, err = admin.ListConsumerGroupOffsets(group, map[string][]int32{topic: parts})
		if !coordinatorBusy(err) || time.Now().After(deadline) {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if err != nil && !errors.Is(err, sarama.ErrGroupIDNotFound) { // not created yet: nothing committed
		t.Fatalf("committed offsets of %s: %v", group, err)
	}
	out := map[int32]*sarama.OffsetFetchResponseBlock{}
	for _, p := range parts {
		out[p] = &sarama.OffsetFetchResponseBlock{Offset: -1}
		if resp != nil {
			if b := resp.GetBlock(topic, p); b != nil {
				out[p] = b
			}
		}
	}
	return out
}

// coordinatorWait bounds how long committed waits out a busy coordinator.
const coordinatorWait = 15 * time.Second

// coordinatorBusy reports whether err is a group coordinator that is
// loading offsets, moving or not yet available: worth asking again.
func coordinatorBusy(err error) bool {
	return errors.Is(err, sarama.ErrOffsetsLoadInProgress) || errors.Is(err, sarama.ErrNotCoordinatorForConsumer) ||
		errors.Is(err, sarama.ErrConsumerCoordinatorNotAvailable)
}

// EndOffsets returns the high watermark of every partition of topic.
func EndOffsets(t testing.TB, brokers []string, topic string) map[int32]int64 {
	t.Helper()
	admin, client := Admin(t, brokers)
	defer admin.Close()
	parts, err := client.Partitions(topic)
	if err != nil {
		t.Fatalf("partitions of %s: %v", topic, err)
	}
	out := map[int32]int64{}
	for _, p := range parts {
		end, err := client.GetOffset(topic, p, sarama.OffsetNewest)
		if err != nil {
			t.Fatalf("end offset of %s/%d: %v", topic, p, err)
		}
		out[p] = end
	}
	return out
}

// Admin connects an admin client to brokers and fails the test if it
// cannot; close both when done.
func Admin(t testing.TB, brokers []string) (sarama.ClusterAdmin, sarama.Client) {
	t.Helper()
	cfg := ClientConfig(t)
	client, err := sarama.NewClient(brokers, cfg)
	if err != nil {
		t.Fatalf("connecting to %v: %v", brokers, err)
	}
	admin, err := sarama.NewClusterAdminFromClient(client)
	if err != nil {
		client.Close()
		t.Fatalf("admin for %v: %v", brokers, err)
	}
	return admin, client
}

// ReadTopic reads every record of topic (all partitions, from the oldest)
// until want records arrived or the timeout passes, and fails the test then.
func ReadTopic(t testing.TB, brokers []string, topic string, want int, timeout time.Duration) []*sarama.ConsumerMessage {
	t.Helper()
	cfg := ClientConfig(t)
	c, err := sarama.NewConsumer(brokers, cfg)
	if err != nil {
		t.Fatalf("consumer for %s: %v", topic, err)
	}
	defer c.Close()
	parts, err := c.Partitions(topic)
	if err != nil {
		t.Fatalf("partitions of %s: %v", topic, err)
	}
	var pcs []sarama.PartitionConsumer
	for _, p := range parts {
		pc, err := c.ConsumePartition(topic, p, sarama.OffsetOldest)
		if err != nil {
			t.Fatalf("consuming %s/%d: %v", topic, p, err)
		}
		pcs = append(pcs, pc)
	}
	defer func() {
		for _, pc := range pcs {
			pc.AsyncClose()
		}
	}()
	merged := make(chan *sarama.ConsumerMessage)
	stop := make(chan struct{})
	defer close(stop)
	for _, pc := range pcs {
		go func() {
			for m := range pc.Messages() {
				select {
				case merged <- m:
				case <-stop:
					return
				}
			}
		}()
	}
	deadline := time.After(timeout)
	var got []*sarama.ConsumerMessage
	for len(got) < want {
		select {
		case m := <-merged:
			got = append(got, m)
		case <-deadline:
			t.Fatalf("read %d of %d records from %s within %s", len(got), want, topic, timeout)
		}
	}
	return got
}
