package actors_test

import (
	"context"
	"fmt"
	"os"
	"runtime/pprof"
	"strconv"
	"testing"
	"time"

	"github.com/turbokafka/turbo/actors"
	"github.com/turbokafka/turbo/config"
	"github.com/turbokafka/turbo/test/testkit"
)

// BenchmarkNoopPipeline runs the whole tree — sarama, the claim, the
// coordinator and its runners, the offset controller — with a no-op handler
// over a topic already written (8 partitions, or TURBO_BENCH_PARTITIONS; 1,000
// keys; 200,000 records, or TURBO_BENCH_RECORDS), one ordering per sub-benchmark, until every record is
// committed. It is the in-process twin of test/bench's no-op scenario, there
// to be profiled:
//
//	go test -run '^$' -bench 'NoopPipeline/key' -benchtime 3x -cpuprofile cpu.out ./actors/
//	go tool pprof -tagfocus phase=consume -top cpu.out
//
// The broker runs in the same process (kfake, or TURBO_TEST_BROKERS), so the
// consuming goroutines carry the profiler label phase=consume: everything
// the tree starts inherits it, while the broker's goroutines and the
// producer that writes the topic do not.
func BenchmarkNoopPipeline(b *testing.B) {
	records := 200_000
	if v, err := strconv.Atoi(os.Getenv("TURBO_BENCH_RECORDS")); err == nil && v > 0 {
		records = v
	}
	partitions := 8
	if v, err := strconv.Atoi(os.Getenv("TURBO_BENCH_PARTITIONS")); err == nil && v > 0 {
		partitions = v
	}
	topic := testkit.TopicName("noop-pipeline")
	brokers := testkit.Broker(b, partitions, topic)
	testkit.Produce(b, brokers, topic, records, 1000)
	groups := 0 // testing calls each sub-benchmark more than once: a new group every run
	for _, o := range []config.Ordering{config.OrderingKey, config.OrderingPartition, config.OrderingUnordered} {
		b.Run(string(o), func(b *testing.B) {
			for range b.N {
				groups++
				c := config.DefaultConsumer("noop")
				c.Group = fmt.Sprintf("noop-%s-%d", o, groups)
				c.Topics = []string{topic}
				c.Ordering = o
				c.Concurrency = 16
				if v, err := strconv.Atoi(os.Getenv("TURBO_BENCH_MAX_BUFFERED")); err == nil && v >= 0 {
					c.MaxBuffered = v
				}
				c.CommitInterval = 100 * time.Millisecond
				consumeAll(b, brokers, c, int64(records))
			}
			b.ReportMetric(float64(records)*float64(b.N)/b.Elapsed().Seconds(), "records/s")
		})
	}
}

// consumeAll runs a consumer of c until it has committed want records, then
// stops it, all under the profiler label phase=consume.
func consumeAll(b *testing.B, brokers []string, c config.Consumer, want int64) {
	b.Helper()
	pprof.Do(context.Background(), pprof.Labels("phase", "consume"), func(context.Context) {
		cons, err := actors.New(actors.Options{
			Consumer: c, Kafka: testkit.Kafka(b, brokers), ShutdownTimeout: 10 * time.Second,
			Handler: actors.HandlerFunc(func(context.Context, *actors.Record) error { return nil }),
			Logger:  testkit.Logger(b),
		})
		if err != nil {
			b.Fatalf("starting consumer: %v", err)
		}
		testkit.Eventually(b, 5*time.Minute, fmt.Sprintf("%d records committed", want), func() bool {
			return cons.Stats().Committed >= want
		})
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := cons.Stop(ctx); err != nil {
			b.Fatalf("stopping: %v", err)
		}
	})
}
