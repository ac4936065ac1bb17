package actors

import (
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/turbokafka/turbo/config"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// listOffsets (what --exit-on-idle waits for) asks each leader broker once
// for all its partitions, answers what each partition holds, and names a
// partition it cannot learn about.
func TestListOffsetsOneRequestPerLeader(t *testing.T) {
	t.Parallel()
	const topic = "ends"
	cluster, brokers := threeBrokers(t, topic, 12, 600)
	var mu sync.Mutex
	requests := 0
	cluster.ControlKey(int16(kmsg.ListOffsets), func(kmsg.Request) (kmsg.Response, error, bool) {
		cluster.KeepControl()
		mu.Lock()
		requests++
		mu.Unlock()
		return nil, nil, false
	})
	cfg := config.Default()
	cfg.Kafka.Brokers = brokers
	client, err := sarama.NewClient(brokers, saramaConfig(cfg.Kafka, config.DefaultConsumer("ends"), time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	var tps []TopicPartition
	leaders := map[int32]bool{}
	for p := range int32(12) {
		tps = append(tps, TopicPartition{Topic: topic, Partition: p})
		b, err := client.Leader(topic, p)
		if err != nil {
			t.Fatal(err)
		}
		leaders[b.ID()] = true
	}
	ends, err := listOffsets(client, tps, sarama.OffsetNewest)
	if err != nil {
		t.Fatal(err)
	}
	starts, err := listOffsets(client, tps, sarama.OffsetOldest)
	if err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	batched := requests
	mu.Unlock()
	if len(leaders) < 2 || batched != 2*len(leaders) {
		t.Errorf("%d ListOffsets requests for two lookups of 12 partitions led by %d brokers, want one per leader per lookup (and several leaders)", batched, len(leaders))
	}
	var total int64
	for _, tp := range tps {
		end, err := client.GetOffset(topic, tp.Partition, sarama.OffsetNewest)
		if err != nil {
			t.Fatal(err)
		}
		if ends[tp] != end || starts[tp] != 0 {
			t.Errorf("%s: start %d, end %d; want 0 and %d", tp, starts[tp], ends[tp], end)
		}
		total += ends[tp]
	}
	if len(ends) != 12 || total != 600 {
		t.Errorf("%d partitions answered, %d records in all; want 12 and 600", len(ends), total)
	}
	_, err = listOffsets(client, append(tps, TopicPartition{Topic: topic, Partition: 99}), sarama.OffsetNewest)
	if err == nil || !strings.Contains(err.Error(), topic+"/99") {
		t.Errorf("err = %v, want one naming %s/99", err, topic)
	}
}
