package actors_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/turbokafka/turbo/actors"
	"github.com/turbokafka/turbo/config"
	"github.com/turbokafka/turbo/test/testkit"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// A member stopped while its JoinGroup waits for an answer holds no
// partition and has nothing to commit: its stop is bounded by
// shutdown_timeout and clean. The chaos soak met it (a member SIGTERMed
// while a rebalance waited for a killed member), and the stop exited 1,
// "finished records may not be committed", though there were none. A
// member that never reached Kafka at all is still a failed stop
// (TestRunShutdownIsBoundedAgainstASilentBroker in test/e2e).
func TestStopWhileJoiningIsClean(t *testing.T) {
	// Timed (it times the stop to 250 ms): it runs alone, after the rest (the Makefile's TIMED).
	topic := testkit.TopicName("t-join")
	cluster, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(2, topic))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cluster.Close)
	release := make(chan struct{})
	var held atomic.Int32
	cluster.ControlKey(int16(kmsg.JoinGroup), func(kmsg.Request) (kmsg.Response, error, bool) {
		cluster.KeepControl()
		held.Add(1)
		cluster.SleepControl(func() { <-release }) // the join is answered only at the test's end
		return nil, nil, false
	})
	t.Cleanup(func() { close(release) })

	c := config.DefaultConsumer("joining")
	c.Topics = []string{topic}
	k := config.Default().Kafka
	k.Brokers = cluster.ListenAddrs()
	const shutdown = time.Second
	cons, err := actors.New(actors.Options{
		Consumer: c, Kafka: k, ShutdownTimeout: shutdown, Logger: testkit.Logger(t),
		Handler: actors.HandlerFunc(func(context.Context, *actors.Record) error { return nil }),
	})
	if err != nil {
		t.Fatal(err)
	}
	testkit.Eventually(t, 30*time.Second, "the member's JoinGroup to be held", func() bool { return held.Load() > 0 })

	began := time.Now()
	err = cons.Stop(context.Background())
	took := time.Since(began)
	if err != nil {
		t.Errorf("Stop of a member waiting in its join: %v, want nil (it held nothing)", err)
	}
	if took > shutdown+250*time.Millisecond {
		t.Errorf("Stop took %s, want at most shutdown_timeout (%s) + 250ms", took.Round(time.Millisecond), shutdown)
	}
	if s := cons.Stats(); s.Assigned != 0 || s.Restarts != 0 {
		t.Errorf("assigned %d, restarts %d; want 0 and 0", s.Assigned, s.Restarts)
	}
	t.Logf("FIGURES stop-while-joining: Stop → %v after %s", err, took.Round(time.Millisecond))
}
