// Package bench measures turbo against its peers on the same broker, the same
// topic and the same simulated work, one after the other in one run, and
// reports ratios: absolute figures on a shared machine are noise, ratios
// within one run are not.
//
//	make bench         # 1,000,000 records
//	make bench-quick   # 200,000 records
//
// TURBO_TEST_BROKERS=host:port uses an existing broker; otherwise `turbo dev`
// runs as a separate process. TURBO_BENCH_RECORDS overrides the record count.
package bench

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/turbokafka/turbo/actors"
	"github.com/turbokafka/turbo/actors/handlers"
	"github.com/turbokafka/turbo/config"
	"github.com/turbokafka/turbo/test/testkit"
)

// result is one row of the table.
type result struct {
	Scenario string  `json:"scenario"`
	Peer     string  `json:"peer"`
	Records  int     `json:"records"`
	Seconds  float64 `json:"seconds"`
	PerSec   float64 `json:"records_per_s"`
	Ratio    float64 `json:"ratio"`
	RatioTo  string  `json:"ratio_to"`
	CPUus    float64 `json:"cpu_us_per_record"` // this process's CPU time (user+system) per record
}

// cpuTime is the CPU time this process has used so far.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

var (
	resultsMu sync.Mutex
	results   []result
)

func record(r result) {
	resultsMu.Lock()
	defer resultsMu.Unlock()
	results = append(results, r)
}

func TestMain(m *testing.M) {
	code := m.Run()
	if len(results) > 0 {
		report()
	}
	testkit.RemoveBinary()
	os.Exit(code)
}

var (
	brokerOnce sync.Once
	brokerAddr []string
	topicsMu   sync.Mutex
	topics     = map[string]bool{}
)

// broker returns the brokers to use: TURBO_TEST_BROKERS, or a `turbo dev`
// process that lives as long as the benchmark that started it... and is
// shared: it is started under the first benchmark and killed with it, so
// every benchmark function asks again.
func broker(b *testing.B) []string {
	if env := os.Getenv("TURBO_TEST_BROKERS"); env != "" {
		return strings.Split(env, ",")
	}
	return []string{testkit.Dev(b)}
}

// topicWith produces count records over keys keys into a fresh topic.
func topicWith(b *testing.B, brokers []string, name string, count, keys int) string {
	topic := fmt.Sprintf("%s-%d", name, time.Now().UnixNano())
	testkit.ProduceWithBinary(b, brokers[0], topic, count, keys)
	return topic
}

func recordsFromEnv(def int) int {
	if v, err := strconv.Atoi(os.Getenv("TURBO_BENCH_RECORDS")); err == nil && v > 0 {
		return v
	}
	return def
}

// runTurbo consumes the whole topic with turbo and returns the wall time
// from start to the last record handled.
func runTurbo(b *testing.B, brokers []string, topic string, ordering config.Ordering, concurrency int, h actors.Handler, want int) time.Duration {
	b.Helper()
	handled := newCounter(want)
	counting := actors.HandlerFunc(func(ctx context.Context, rec *actors.Record) error {
		if err := h.Handle(ctx, rec); err != nil {
			return err
		}
		handled.add()
		return nil
	})
	c := config.DefaultConsumer("bench")
	c.Group = fmt.Sprintf("turbo-%s-%d", ordering, time.Now().UnixNano())
	c.Topics = []string{topic}
	c.Ordering = ordering
	c.Concurrency = concurrency
	if v, err := strconv.Atoi(os.Getenv("TURBO_BENCH_MAX_BUFFERED")); err == nil {
		c.MaxBuffered = v
	}
	k := config.Default().Kafka
	k.Brokers = brokers
	sys := actors.NewSystem(testkit.Logger(b).Level(3)) // errors only
	start := time.Now()
	cons, err := actors.Start(sys, actors.Options{Consumer: c, Kafka: k, ShutdownTimeout: 10 * time.Second, Handler: counting})
	if err != nil {
		b.Fatal(err)
	}
	handled.wait(b, 10*time.Minute, "turbo to handle every record")
	elapsed := time.Since(start)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := cons.Stop(ctx); err != nil {
		b.Errorf("stopping turbo: %v", err)
	}
	return elapsed
}

// plainSarama is what people write today: a sarama consumer group, one
// goroutine per partition handling records one after the other, marking each
// and auto-committing.
type plainSarama struct {
	h       actors.Handler
	handled *counter
}

func (p *plainSarama) Setup(sarama.ConsumerGroupSession) error   { return nil }
func (p *plainSarama) Cleanup(sarama.ConsumerGroupSession) error { return nil }
func (p *plainSarama) ConsumeClaim(sess sarama.ConsumerGroupSession, claim sarama.ConsumerGroupClaim) error {
	for msg := range claim.Messages() {
		rec := &actors.Record{Topic: msg.Topic, Partition: msg.Partition, Offset: msg.Offset, Key: msg.Key, Value: msg.Value, Timestamp: msg.Timestamp}
		if err := p.h.Handle(sess.Context(), rec); err != nil {
			return err
		}
		sess.MarkMessage(msg, "")
		p.handled.add()
	}
	return nil
}

func runPlainSarama(b *testing.B, brokers []string, topic string, h actors.Handler, want int) time.Duration {
	b.Helper()
	cfg := sarama.NewConfig()
	cfg.Version = sarama.V3_6_0_0
	cfg.Consumer.Offsets.Initial = sarama.OffsetOldest
	cfg.Consumer.Group.Rebalance.GroupStrategies = []sarama.BalanceStrategy{sarama.NewBalanceStrategyCooperativeSticky()}
	handled := newCounter(want)
	start := time.Now()
	group, err := sarama.NewConsumerGroup(brokers, fmt.Sprintf("plain-%d", time.Now().UnixNano()), cfg)
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var consuming sync.WaitGroup
	consuming.Go(func() {
		handler := &plainSarama{h: h, handled: handled}
		for ctx.Err() == nil {
			if err := group.Consume(ctx, []string{topic}, handler); err != nil && ctx.Err() == nil {
				b.Errorf("plain sarama: %v", err)
				return
			}
		}
	})
	handled.wait(b, 10*time.Minute, "plain sarama to handle every record")
	elapsed := time.Since(start)
	cancel()
	consuming.Wait()
	if err := group.Close(); err != nil {
		b.Errorf("closing plain sarama: %v", err)
	}
	return elapsed
}

// counter counts handled records and signals when want is reached. Both
// peers pay the same for it: one atomic add per record. (Neither peer
// redelivers here: one member, no failures.)
type counter struct {
	n    atomic.Int64
	want int64
	done chan struct{}
}

func newCounter(want int) *counter { return &counter{want: int64(want), done: make(chan struct{})} }

func (c *counter) add() {
	if c.n.Add(1) == c.want {
		close(c.done)
	}
}

func (c *counter) wait(b *testing.B, timeout time.Duration, what string) {
	b.Helper()
	select {
	case <-c.done:
	case <-time.After(timeout):
		b.Fatalf("timed out after %s waiting for %s (%d of %d)", timeout, what, c.n.Load(), c.want)
	}
}

// BenchmarkNoop: the pipeline's own ceiling, every ordering mode, against
// plain sarama reading the same topic. The peers take turns, rounds times
// (TURBO_BENCH_ROUNDS, default 3), and each reports its median: on a shared
// 2-core machine (the broker runs on it too) single runs vary by ±30 %.
func BenchmarkNoop(b *testing.B) {
	n := recordsFromEnv(1_000_000)
	rounds := 3
	if v, err := strconv.Atoi(os.Getenv("TURBO_BENCH_ROUNDS")); err == nil && v > 0 {
		rounds = v
	}
	brokers := broker(b)
	topic := topicWith(b, brokers, "noop", n, 1000)
	scenario := fmt.Sprintf("no-op, %d records, 1000 keys, 8 partitions (median of %d)", n, rounds)
	type peer struct {
		name string
		run  func() time.Duration
	}
	type sample struct{ wall, cpu time.Duration }
	peers := []peer{{"plain sarama", func() time.Duration { return runPlainSarama(b, brokers, topic, handlers.Noop(), n) }}}
	for _, o := range []config.Ordering{config.OrderingKey, config.OrderingPartition, config.OrderingUnordered} {
		peers = append(peers, peer{"turbo " + string(o), func() time.Duration { return runTurbo(b, brokers, topic, o, 16, handlers.Noop(), n) }})
	}
	if only := os.Getenv("TURBO_BENCH_PEERS"); only != "" { // e.g. "turbo key", for profiling
		peers = slices.DeleteFunc(peers, func(p peer) bool { return p.name != "plain sarama" && !strings.Contains(only, p.name) })
	}
	for range b.N {
		times := make([][]time.Duration, len(peers))
		cpus := make([][]time.Duration, len(peers))
		for range rounds {
			for i, p := range peers {
				c0 := cpuTime()
				times[i] = append(times[i], p.run())
				cpus[i] = append(cpus[i], cpuTime()-c0)
			}
		}
		base := float64(n) / median(times[0]).Seconds()
		for i, p := range peers {
			d := median(times[i])
			rate := float64(n) / d.Seconds()
			cpu := float64(median(cpus[i]).Microseconds()) / float64(n)
			record(result{Scenario: scenario, Peer: p.name, Records: n, Seconds: d.Seconds(), PerSec: rate, Ratio: rate / base, RatioTo: "plain sarama", CPUus: cpu})
			if i > 0 {
				b.ReportMetric(rate/base, "x-sarama-"+strings.TrimPrefix(p.name, "turbo "))
			}
		}
	}
}

func median(ds []time.Duration) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[len(s)/2]
}

// BenchmarkIOBound: the seed blog post's demo — 1,000 records, 100 keys, 100 ms
// each, key ordering, 10 runners; ideal 10 s. Plain sarama runs one record per
// partition at a time.
func BenchmarkIOBound(b *testing.B) {
	const n, work, conc = 1000, 100 * time.Millisecond, 10
	brokers := broker(b)
	topic := topicWith(b, brokers, "io", n, 100)
	ideal := time.Duration(n) * work / conc
	scenario := "I/O-bound, 1000 records, 100 keys, 100 ms, concurrency 10"
	for range b.N {
		d := runTurbo(b, brokers, topic, config.OrderingKey, conc, handlers.Sleep(work), n)
		record(result{Scenario: scenario, Peer: "turbo key", Records: n, Seconds: d.Seconds(), PerSec: n / d.Seconds(), Ratio: d.Seconds() / ideal.Seconds(), RatioTo: "ideal 10 s (time)"})
		b.ReportMetric(d.Seconds()/ideal.Seconds(), "x-ideal-time")
		d = runPlainSarama(b, brokers, topic, handlers.Sleep(work), n)
		record(result{Scenario: scenario, Peer: "plain sarama", Records: n, Seconds: d.Seconds(), PerSec: n / d.Seconds(), Ratio: d.Seconds() / ideal.Seconds(), RatioTo: "ideal 10 s (time)"})
	}
}

// report prints the table and writes it under .bench/ at the module root.
func report() {
	var md strings.Builder
	fmt.Fprintf(&md, "| scenario | peer | wall time | records/s | ratio | CPU µs/record |\n|---|---|---:|---:|---:|---:|\n")
	for _, r := range results {
		cpu := "—"
		if r.CPUus > 0 {
			cpu = fmt.Sprintf("%.2f", r.CPUus)
		}
		fmt.Fprintf(&md, "| %s | %s | %.2f s | %.0f | %.2f× %s | %s |\n", r.Scenario, r.Peer, r.Seconds, r.PerSec, r.Ratio, r.RatioTo, cpu)
	}
	fmt.Print("\n" + md.String())
	dir := filepath.Join("..", "..", ".bench")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		fmt.Fprintln(os.Stderr, "bench: ", err)
		return
	}
	js, _ := json.MarshalIndent(results, "", "  ")
	_ = os.WriteFile(filepath.Join(dir, "results.json"), js, 0o644)
	_ = os.WriteFile(filepath.Join(dir, "results.md"), []byte(md.String()), 0o644)
}

// BenchmarkRetryIsolation: while one key waits 5 s in backoff after a
// failure, the other keys keep their throughput. 20,000 records over 200 keys,
// 5 ms each, concurrency 20: the time to finish every other key's records,
// with the failure, against a run without failures.
func BenchmarkRetryIsolation(b *testing.B) {
	const n, keys, work, conc = 20_000, 200, 5 * time.Millisecond, 20
	brokers := broker(b)
	scenario := "retry isolation: 20,000 records, 200 keys, 5 ms, concurrency 20; key-0 backs off 5 s"
	measure := func(fail bool) time.Duration {
		topic := topicWith(b, brokers, "retry", n, keys)
		others := newCounter(n - n/keys)
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
			others.add()
			return nil
		})
		c := config.DefaultConsumer("bench")
		c.Group = fmt.Sprintf("retry-%d", time.Now().UnixNano())
		c.Topics = []string{topic}
		c.Concurrency = conc
		c.Retry = config.Retry{MaxAttempts: 3, InitialBackoff: 5 * time.Second, MaxBackoff: 5 * time.Second}
		k := config.Default().Kafka
		k.Brokers = brokers
		start := time.Now()
		cons, err := actors.Start(actors.NewSystem(testkit.Logger(b).Level(3)), actors.Options{Consumer: c, Kafka: k, ShutdownTimeout: 10 * time.Second, Handler: h})
		if err != nil {
			b.Fatal(err)
		}
		others.wait(b, 5*time.Minute, "the other keys' records")
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
		base := measure(false)
		with := measure(true)
		record(result{Scenario: scenario, Peer: "turbo, no failure", Records: n - n/keys, Seconds: base.Seconds(), PerSec: float64(n-n/keys) / base.Seconds(), Ratio: 1, RatioTo: "no failure"})
		record(result{Scenario: scenario, Peer: "turbo, key-0 in backoff", Records: n - n/keys, Seconds: with.Seconds(), PerSec: float64(n-n/keys) / with.Seconds(), Ratio: base.Seconds() / with.Seconds(), RatioTo: "no failure (throughput)"})
		b.ReportMetric(base.Seconds()/with.Seconds(), "x-throughput")
	}
}
