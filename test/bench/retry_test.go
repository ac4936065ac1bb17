package bench

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/turbokafka/turbo/actors"
	"github.com/turbokafka/turbo/actors/handlers"
	"github.com/turbokafka/turbo/config"
	"github.com/turbokafka/turbo/test/testkit"
)

// BenchmarkRetryIsolation: while one key waits 5 s in backoff after a
// failure, the other keys keep their throughput. 20,000 records over 200 keys,
// 5 ms each, concurrency 20: the time to finish every other key's records,
// with the failure, against a run without failures. turbo against itself, so
// it runs in this process (its handler fails key-0 once, which no
// configuration can say), timed from start to the last other record handled;
// once on each Kafka side.
func BenchmarkRetryIsolation(b *testing.B) {
	const n, keys, work, conc = 20_000, 200, 5 * time.Millisecond, 20
	const others = n - n/keys
	bro := brokers(b)
	scenario := "retry isolation: 20,000 records, 200 keys, 5 ms, concurrency 20; key-0 backs off 5 s (in process)"
	measure := func(client config.KafkaClient, fail bool) time.Duration {
		j := newTopic(b, bro, "retry", n, uniformKeys(keys))
		var handled atomic.Int64
		allHandled := make(chan struct{})
		var failed atomic.Bool
		h := actors.HandlerFunc(func(ctx context.Context, rec *actors.Record) error {
			if string(rec.Key) == "key-0" {
				if fail && failed.CompareAndSwap(false, true) {
					return errors.New("fails once")
				}
				return nil
			}
			if err := handlers.Sleep(work).Handle(ctx, rec); err != nil {
				return err
			}
			if handled.Add(1) == others {
				close(allHandled)
			}
			return nil
		})
		c := config.DefaultConsumer("bench")
		c.Group = fmt.Sprintf("retry-%d", time.Now().UnixNano())
		c.Topics = []string{j.topic}
		c.Concurrency = conc
		c.Retry = config.Retry{MaxAttempts: 3, InitialBackoff: 5 * time.Second, MaxBackoff: 5 * time.Second}
		k := config.Default().Kafka
		k.Brokers, k.Client = bro, client
		start := time.Now()
		cons, err := actors.New(actors.Options{Consumer: c, Kafka: k, ShutdownTimeout: 10 * time.Second, Handler: h, Logger: testkit.Logger(b).Level(3)})
		if err != nil {
			b.Fatal(err)
		}
		select {
		case <-allHandled:
		case <-time.After(5 * time.Minute):
			b.Fatalf("the other keys' records: %d of %d handled after 5 minutes", handled.Load(), others)
		}
		d := time.Since(start)
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := cons.Stop(ctx); err != nil {
			b.Errorf("stopping: %v", err)
		}
		if fail && !failed.Load() {
			b.Error("key-0 never failed")
		}
		return d
	}
	for range b.N {
		for _, side := range []struct {
			client config.KafkaClient
			name   string
		}{{config.ClientSarama, "turbo"}, {config.ClientFranz, "turbo franz-go"}} {
			base := measure(side.client, false)
			with := measure(side.client, true)
			record(result{Scenario: scenario, Peer: side.name + ", no failure", Records: others, Seconds: base.Seconds(), PerSec: others / base.Seconds(), Ratio: 1, RatioTo: "no failure"})
			record(result{Scenario: scenario, Peer: side.name + ", key-0 in backoff", Records: others, Seconds: with.Seconds(), PerSec: others / with.Seconds(), Ratio: base.Seconds() / with.Seconds(), RatioTo: "no failure (throughput)"})
			if side.client == config.ClientSarama {
				b.ReportMetric(base.Seconds()/with.Seconds(), "x-throughput")
			}
		}
	}
}
