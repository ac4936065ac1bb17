package actors

import (
	"testing"
	"time"

	"github.com/rs/zerolog"
	"github.com/turbokafka/turbo/actors/embedded"
	"github.com/turbokafka/turbo/actors/kafkanet"
	"github.com/turbokafka/turbo/config"
)

func TestPartitionFetchFollowsTheShare(t *testing.T) {
	def := int64(config.DefaultMaxBufferedBytes) // 64 MiB
	for _, c := range []struct {
		partitions int
		budget     int64
		want       int32
	}{
		{0, def, 256 << 10},    // not known: the largest
		{8, def, 256 << 10},    // the share (8 MiB) is more than a fetch
		{256, def, 256 << 10},  // 256 KiB: exactly the share
		{512, def, 128 << 10},  // half of it
		{4096, def, 16 << 10},  // the floor
		{65536, def, 16 << 10}, // never below the floor
		{8, int64(config.MinMaxBufferedBytes), 128 << 10},
		{1, int64(config.MaxMaxBufferedBytes), 256 << 10},
	} {
		if got := partitionFetch(c.partitions, c.budget); got != c.want {
			t.Errorf("partitionFetch(%d partitions, %d bytes) = %d, want %d", c.partitions, c.budget, got, c.want)
		}
	}
	// Past the floor, every partition's fetch together stays within the budget.
	for p := 1; p <= 4096; p *= 2 {
		if f := int64(partitionFetch(p, def)); f > minPartitionFetch && f*int64(p) > def {
			t.Errorf("%d partitions × %d bytes passes the budget of %d", p, f, def)
		}
	}
}

// Both Kafka sides size their fetches to the subscription when they
// connect: 1,024 partitions of the default 64 MiB budget fetch 64 KiB each,
// by name and by pattern; a pattern that matches nothing yet leaves the
// largest fetch.
func TestFetchSizedToTheSubscription(t *testing.T) {
	b, err := embedded.Start(embedded.Options{Partitions: 1024, Topics: []string{"wide"}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(b.Close)
	cfg := config.Default()
	cfg.Kafka.Brokers = b.Addrs()
	log := zerolog.New(zerolog.NewTestWriter(t))
	for _, c := range []struct {
		topics []string
		want   int32
	}{
		{[]string{"wide"}, 64 << 10},
		{[]string{"/wi.e/"}, 64 << 10},
		{[]string{"/nothing-.*/"}, maxPartitionFetch},
	} {
		consumer := config.DefaultConsumer("fetch-test")
		consumer.Topics = c.topics
		sub := mustSubscription(t, consumer)
		budget := int64(consumer.MaxBufferedBytes)

		sg := &kafkaGroup{partCap: newPartitionCap(consumer.PartitionCap(), log), brokers: b.Addrs(), groupID: consumer.Group, topics: sub, cfg: saramaConfig(cfg.Kafka, consumer, time.Second),
			budgetBytes: budget, net: kafkanet.New(cfg.Kafka, log), log: log}
		client, group, err := sg.dial()
		if err != nil {
			t.Fatalf("sarama side, %v: %v", c.topics, err)
		}
		if got := sg.cfg.Consumer.Fetch.Default; got != c.want {
			t.Errorf("sarama side, %v: fetches %d bytes of a partition, want %d", c.topics, got, c.want)
		}
		group.Close()
		client.Close()

		fg := &franzGroup{partCap: newPartitionCap(consumer.PartitionCap(), log), brokers: b.Addrs(), groupID: consumer.Group, topics: sub, opts: franzOpts(cfg.Kafka, b.Addrs(), consumer, time.Second),
			budgetBytes: budget, net: kafkanet.New(cfg.Kafka, log), log: log}
		fg.begin(func(any) {})
		cl, err := fg.dial()
		if err != nil {
			t.Fatalf("franz-go side, %v: %v", c.topics, err)
		}
		if fg.fetch != c.want {
			t.Errorf("franz-go side, %v: fetches %d bytes of a partition, want %d", c.topics, fg.fetch, c.want)
		}
		if m := marksFor(fg.fetch); m.highBytes != 2*int64(c.want) {
			t.Errorf("franz-go side, %v: queue's high mark %d bytes, want two fetches (%d)", c.topics, m.highBytes, 2*c.want)
		}
		cl.Close()
	}
}
