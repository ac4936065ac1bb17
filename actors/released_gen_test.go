package actors_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/turbokafka/turbo/actors"
	"github.com/turbokafka/turbo/config"
	"github.com/turbokafka/turbo/test/testkit"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// A tree restart keeps the member's memory of what it finished (releasedAt):
// when the commit before a restart cannot land (here every commit is
// refused with an error that is not a loss of the session), the next
// generation still skips what the last one finished instead of running it
// again. One record fails for good, so the tree restarts over and over.
func TestRestartKeepsWhatTheTreeFinishedWhenCommitsFail(t *testing.T) {
	t.Parallel()
	const records, bad = 100, 50
	topic := testkit.TopicName("t-gen")
	cluster, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(1, topic))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cluster.Close)
	brokers := cluster.ListenAddrs()
	testkit.Produce(t, brokers, topic, records, records)
	cluster.ControlKey(int16(kmsg.OffsetCommit), func(req kmsg.Request) (kmsg.Response, error, bool) {
		cluster.KeepControl()
		return refuseCommit(req.(*kmsg.OffsetCommitRequest), kerr.InvalidCommitOffsetSize.Code), nil, true
	})

	var mu sync.Mutex
	handled := map[int64]int{}
	c := config.DefaultConsumer("gen")
	c.Topics, c.Concurrency = []string{topic}, 4
	c.Retry.MaxAttempts = 1
	k := config.Default().Kafka
	k.Brokers = brokers
	cons, err := actors.New(actors.Options{
		Consumer: c, Kafka: k, ShutdownTimeout: 5 * time.Second, Logger: testkit.Logger(t), Restart: fastRestart,
		Handler: actors.HandlerFunc(func(_ context.Context, rec *actors.Record) error {
			if rec.Offset == bad {
				return errors.New("this record never succeeds")
			}
			mu.Lock()
			handled[rec.Offset]++
			mu.Unlock()
			return nil
		}),
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cons.Stop(context.Background()) })
	testkit.Eventually(t, 60*time.Second, "three restarts", func() bool { return cons.Stats().Restarts >= 3 })
	testkit.Eventually(t, 30*time.Second, "every good record handled", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(handled) == records-1
	})
	mu.Lock()
	defer mu.Unlock()
	again := 0
	for _, n := range handled {
		again += n - 1
	}
	if again != 0 {
		t.Errorf("after %d restarts, good records were handled %d times more than once: the new generation forgot what the old one finished", cons.Stats().Restarts, again)
	}
	t.Logf("FIGURES restart-memory: %d restarts, %d good records, %d handled again", cons.Stats().Restarts, len(handled), again)
}
