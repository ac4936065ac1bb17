package embedded

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
)

// Either client writes the same records to the same partitions: every key
// on one partition, the one sarama's hash partitioner picks, its values in
// sequence; so a test or a demo sees the same layout on either Kafka side.
func TestProduceWritesTheSameLayoutOnEitherClient(t *testing.T) {
	t.Parallel()
	const partitions, count, keys = 6, 600, 40
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(partitions, "by-sarama", "by-franz"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	brokers := c.ListenAddrs()
	if err := Produce(ctx, ProduceOptions{Brokers: brokers, Topic: "by-sarama", Count: count, Keys: keys}); err != nil {
		t.Fatalf("sarama: %v", err)
	}
	if err := Produce(ctx, ProduceOptions{Brokers: brokers, Topic: "by-franz", Count: count, Keys: keys, Franz: true}); err != nil {
		t.Fatalf("franz-go: %v", err)
	}
	layout := func(topic string) map[string]int32 {
		cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
		if err != nil {
			t.Fatal(err)
		}
		defer cl.Close()
		where := map[string]int32{}
		next := map[string]int{}
		for n := 0; n < count; {
			fs := cl.PollFetches(ctx)
			if err := ctx.Err(); err != nil {
				t.Fatalf("%s: read %d of %d records: %v", topic, n, count, err)
			}
			fs.EachRecord(func(r *kgo.Record) {
				n++
				var v struct {
					Key string
					Seq int
				}
				if err := json.Unmarshal(r.Value, &v); err != nil || v.Key != string(r.Key) {
					t.Errorf("%s: record %q=%q: value does not carry its key (%v)", topic, r.Key, r.Value, err)
				}
				if p, ok := where[v.Key]; ok && p != r.Partition {
					t.Errorf("%s: key %s on partitions %d and %d", topic, v.Key, p, r.Partition)
				}
				where[v.Key] = r.Partition
				if v.Seq != next[v.Key] {
					t.Errorf("%s: key %s: seq %d after %d", topic, v.Key, v.Seq, next[v.Key]-1)
				}
				next[v.Key] = v.Seq + 1
			})
		}
		return where
	}
	bySarama, byFranz := layout("by-sarama"), layout("by-franz")
	if len(bySarama) != keys {
		t.Errorf("sarama wrote %d keys, want %d", len(bySarama), keys)
	}
	used := map[int32]bool{}
	for k, p := range bySarama {
		used[p] = true
		if q, ok := byFranz[k]; !ok || q != p {
			t.Errorf("key %s: partition %d by sarama, %d by franz-go (present: %v)", k, p, q, ok)
		}
	}
	if len(used) < 2 {
		t.Errorf("every key on one partition: the layout says nothing")
	}
}
