package actors_test

import (
	"context"
	"encoding/base64"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"runtime"
	"runtime/metrics"
	"runtime/pprof"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/turbokafka/turbo/actors"
	"github.com/turbokafka/turbo/actors/handlers"
	"github.com/turbokafka/turbo/config"
	"github.com/turbokafka/turbo/test/testkit"
)

// BenchmarkNoopPipeline runs the whole tree — sarama, the claim, the
// coordinator and its runners, the offset controller — with a no-op handler
// over a topic already written (8 partitions, or TURBO_BENCH_PARTITIONS; 1,000
// keys, or TURBO_BENCH_KEYS; 200,000 records, or TURBO_BENCH_RECORDS), one ordering per sub-benchmark, until every record is
// committed. It is the in-process twin of test/bench's no-op scenario, there
// to be profiled:
//
//	go test -run '^$' -bench 'NoopPipeline/key' -benchtime 3x -cpuprofile cpu.out ./actors/
//	go tool pprof -tagfocus phase=consume -top cpu.out
//
// TURBO_BENCH_OUTPUTS=1 makes the handler copy each record to an output
// topic (at least once; TURBO_BENCH_OUTPUTS=exactly-once in transactions),
// for what an output costs.
//
// TURBO_BENCH_HANDLER=http puts the http handler in the no-op handler's
// place, toward an endpoint in the same process that answers at once (with
// TURBO_BENCH_OUTPUTS, one output per record: handler.response outputs);
// the endpoint's goroutines carry no label.
//
// TURBO_BENCH_METRICS=1 turns the histograms on (Options.Metrics, as
// http.listen does) and gathers the consumer's metrics every second, as a
// scrape of /metrics would (test/bench's metrics cost, in process).
//
// TURBO_BENCH_HEAPPROFILE=FILE writes a heap profile at the run's peak of
// live heap (sampled every 100 ms), for where memory goes at many
// partitions; with TURBO_TEST_BROKERS naming a broker in another process
// (turbo dev), the broker's own memory stays out of it.
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
	keys := 1000
	if v, err := strconv.Atoi(os.Getenv("TURBO_BENCH_KEYS")); err == nil && v > 0 {
		keys = v
	}
	topic := testkit.TopicName("noop-pipeline")
	out := testkit.TopicName("noop-pipeline-out")
	brokers := testkit.Broker(b, partitions, topic, out)
	outputs := os.Getenv("TURBO_BENCH_OUTPUTS")
	testkit.Produce(b, brokers, topic, records, keys)
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
				if outputs != "" {
					c.Output.Topic = out
					c.Output.ExactlyOnce = outputs == "exactly-once"
					if c.Output.ExactlyOnce {
						c.Output.TransactionalID = c.Group
					}
				}
				consumeAll(b, brokers, c, int64(records), benchHandler(b, c))
			}
			b.ReportMetric(float64(records)*float64(b.N)/b.Elapsed().Seconds(), "records/s")
		})
	}
}

// consumeAll runs a consumer of c until it has committed want records, then
// stops it, all under the profiler label phase=consume.
func consumeAll(b *testing.B, brokers []string, c config.Consumer, want int64, h actors.Handler) {
	b.Helper()
	pprof.Do(context.Background(), pprof.Labels("phase", "consume"), func(context.Context) {
		metrics := os.Getenv("TURBO_BENCH_METRICS") == "1"
		cons, err := actors.New(actors.Options{
			Consumer: c, Kafka: testkit.Kafka(b, brokers), ShutdownTimeout: 10 * time.Second,
			Handler: h,
			Logger:  testkit.Logger(b),
			Metrics: metrics,
		})
		if err != nil {
			b.Fatalf("starting consumer: %v", err)
		}
		if metrics {
			defer scrapeEverySecond(b, cons)()
		}
		peak := heapPeak(b, os.Getenv("TURBO_BENCH_HEAPPROFILE"))
		testkit.Eventually(b, 5*time.Minute, fmt.Sprintf("%d records committed", want), func() bool {
			return cons.Stats().Committed >= want
		})
		peak()
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := cons.Stop(ctx); err != nil {
			b.Fatalf("stopping: %v", err)
		}
	})
}

// benchHandler is the handler of c's runs: a no-op, or one that copies
// each record to the output topic, or with TURBO_BENCH_HANDLER=http the
// http handler toward an endpoint that answers at once (with one output per
// record when c has an output topic).
func benchHandler(b *testing.B, c config.Consumer) actors.Handler {
	b.Helper()
	if os.Getenv("TURBO_BENCH_HANDLER") != "http" {
		return actors.HandlerFunc(func(ctx context.Context, rec *actors.Record) error {
			if c.Output.Topic == "" {
				return nil
			}
			return actors.Emit(ctx, rec, actors.Output{Key: rec.Key, Value: rec.Value})
		})
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if c.Output.Topic == "" {
			w.WriteHeader(http.StatusNoContent)
			return
		}
		w.Header().Set("Content-Type", "application/x-ndjson")
		fmt.Fprintf(w, "{\"key\":%q,\"value\":%q}\n", r.Header.Get("Kafka-Key"), base64.StdEncoding.EncodeToString(body))
	}))
	b.Cleanup(srv.Close)
	hc := config.Handler{Type: config.HandlerHTTP, URL: srv.URL, Timeout: 30 * time.Second, Response: config.ResponseIgnore}
	if c.Output.Topic != "" {
		hc.Response = config.ResponseOutputs
	}
	h, err := handlers.New(hc, c.Concurrency, io.Discard)
	if err != nil {
		b.Fatalf("the http handler: %v", err)
	}
	return h
}

// scrapeEverySecond gathers cons's metrics every second until the returned
// func is called, which waits for it.
func scrapeEverySecond(b *testing.B, cons *actors.Consumer) (stop func()) {
	reg := prometheus.NewRegistry()
	if err := reg.Register(cons.Collector()); err != nil {
		b.Fatalf("registering the consumer's metrics: %v", err)
	}
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		tick := time.NewTicker(time.Second)
		defer tick.Stop()
		for {
			select {
			case <-tick.C:
				if _, err := reg.Gather(); err != nil {
					b.Errorf("gathering the metrics: %v", err)
				}
			case <-done:
				return
			}
		}
	})
	return func() { close(done); wg.Wait() }
}

// heapPeak samples the live heap every 100 ms and, whenever it passes its
// highest so far by a tenth, writes a heap profile to file (after a GC, so
// the profile shows what is live); the returned func stops it and waits.
// An empty file does nothing.
func heapPeak(b *testing.B, file string) (stop func()) {
	if file == "" {
		return func() {}
	}
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		sample := []metrics.Sample{{Name: "/gc/heap/live:bytes"}, {Name: "/memory/classes/heap/stacks:bytes"},
			{Name: "/sched/goroutines:goroutines"}, {Name: "/memory/classes/total:bytes"}}
		var highest, stacks, goroutines, total uint64
		defer func() {
			fmt.Fprintf(os.Stderr, "peaks: live heap %d MiB, stacks %d MiB, goroutines %d, memory from the OS %d MiB\n", highest>>20, stacks>>20, goroutines, total>>20)
		}()
		tick := time.NewTicker(100 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-done:
				return
			case <-tick.C:
			}
			metrics.Read(sample)
			live := sample[0].Value.Uint64()
			stacks = max(stacks, sample[1].Value.Uint64())
			goroutines = max(goroutines, sample[2].Value.Uint64())
			total = max(total, sample[3].Value.Uint64())
			if live < highest+highest/10 {
				continue
			}
			highest = live
			runtime.GC()
			f, err := os.Create(file)
			if err != nil {
				b.Errorf("heap profile: %v", err)
				return
			}
			if err := pprof.Lookup("heap").WriteTo(f, 0); err != nil {
				b.Errorf("heap profile: %v", err)
			}
			f.Close()
			if g, err := os.Create(file + ".goroutines"); err == nil {
				pprof.Lookup("goroutine").WriteTo(g, 1)
				g.Close()
			}
		}
	}()
	return func() { close(done); wg.Wait() }
}
