package actors_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/turbokafka/turbo/actors"
	"github.com/turbokafka/turbo/config"
	"github.com/turbokafka/turbo/test/testkit"
)

// On the sarama side, the claims a session starts together read their
// commit metadata in one request (one each would queue on the coordinator's
// connection: at 4,096 partitions the claims took seconds to start).
func TestSessionReadsItsClaimsMetadataTogether(t *testing.T) {
	t.Parallel()
	const partitions = 32
	topic := testkit.TopicName("meta-ahead")
	cluster, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(partitions, topic))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cluster.Close)
	brokers := cluster.ListenAddrs()
	testkit.Produce(t, brokers, topic, 4*partitions, 4*partitions)

	var mu sync.Mutex
	var asked []int // partitions of topic in each OffsetFetch request
	cluster.ControlKey(int16(kmsg.OffsetFetch), func(req kmsg.Request) (kmsg.Response, error, bool) {
		cluster.KeepControl()
		r := req.(*kmsg.OffsetFetchRequest)
		n := 0
		for _, tp := range r.Topics {
			if tp.Topic == topic {
				n += len(tp.Partitions)
			}
		}
		for _, g := range r.Groups {
			for _, tp := range g.Topics {
				if tp.Topic == topic {
					n += len(tp.Partitions)
				}
			}
		}
		mu.Lock()
		asked = append(asked, n)
		mu.Unlock()
		return nil, nil, false
	})

	var handled sync.Map
	c := config.DefaultConsumer("ahead")
	c.Topics = []string{topic}
	k := config.Default().Kafka
	k.Brokers, k.Client = brokers, config.ClientSarama
	cons, err := actors.New(actors.Options{
		Consumer: c, Kafka: k, ShutdownTimeout: 5 * time.Second, Logger: testkit.Logger(t),
		Handler: actors.HandlerFunc(func(_ context.Context, rec *actors.Record) error {
			handled.Store(rec.Partition, true)
			return nil
		}),
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cons.Stop(context.Background()) })
	testkit.Eventually(t, 30*time.Second, "a record of every partition handled", func() bool {
		n := 0
		handled.Range(func(any, any) bool { n++; return true })
		return n == partitions
	})

	mu.Lock()
	defer mu.Unlock()
	all, single := 0, 0
	for _, n := range asked {
		switch n {
		case partitions:
			all++
		case 1:
			single++
		}
	}
	// sarama itself reads each partition's committed offset alone; turbo's
	// reading of the metadata adds one request for all of them.
	if all != 1 || single > partitions {
		t.Errorf("OffsetFetch requests for the topic's partitions: %v; want one for all %d, and at most one each besides (sarama's own)", asked, partitions)
	}
}
