package actors_test

import (
	"context"
	"regexp"
	"testing"
	"time"

	"github.com/turbokafka/turbo/actors"
	"github.com/turbokafka/turbo/config"
	"github.com/turbokafka/turbo/test/testkit"
)

// WaitCaughtUp judges what each group reads: with one consumer's pattern
// matching another's dead-letter topic, which holds records nobody will
// commit under the first group, it returns once the topics the groups read
// are committed — and not before.
func TestWaitCaughtUpJudgesWhatEachGroupReads(t *testing.T) {
	t.Parallel()
	base := testkit.TopicName("caughtup")
	in, dlq := base+".in", base+".dlq"
	brokers := testkit.Broker(t, 2, in, dlq)
	testkit.Produce(t, brokers, in, 40, 10)
	testkit.Produce(t, brokers, dlq, 40, 10)

	cfg := config.Default()
	cfg.Kafka = testkit.Kafka(t, brokers)
	a := config.DefaultConsumer(base + "-a")
	a.Topics = []string{"/" + regexp.QuoteMeta(base) + `\..*/`}
	b := config.DefaultConsumer(base + "-b")
	b.Topics, b.OnFailure, b.DLQTopic = []string{in}, config.OnFailureDLQ, dlq
	cfg.Consumers = []config.Consumer{a, b}
	cfg.ApplyDefaults()
	cfg.ExcludeDeadLetters() // as config.Load does

	wait := func(d time.Duration) error {
		ctx, cancel := context.WithTimeout(context.Background(), d)
		defer cancel()
		return actors.WaitCaughtUp(ctx, cfg.Kafka, cfg.Consumers, testkit.Logger(t))
	}
	if err := wait(time.Second); err == nil {
		t.Fatal("caught up before anything was committed")
	}
	// The consumers themselves, doing nothing with their records.
	noop := actors.HandlerFunc(func(context.Context, *actors.Record) error { return nil })
	for _, cc := range cfg.Consumers {
		cc.CommitInterval = 50 * time.Millisecond
		c, err := actors.New(actors.Options{Consumer: cc, Kafka: cfg.Kafka, Handler: noop, Logger: testkit.Logger(t)})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = c.Stop(context.Background()) })
	}
	if err := wait(30 * time.Second); err != nil {
		t.Fatalf("the groups committed what they read (%s; not %s, which no pattern matches): %v", in, dlq, err)
	}
	for p, off := range testkit.CommittedOffsets(t, brokers, a.Group, dlq) {
		if off >= 0 {
			t.Fatalf("%s read the dead-letter topic %s (committed %d on partition %d)", a.Group, dlq, off, p)
		}
	}
}
