// Package harness runs a turbo consumer's real actor tree in a test, against
// an in-memory Kafka: no broker, no network, and fast enough to run a
// scenario thousands of times under -race.
//
// Everything of the tree runs as in production — the backoff supervisor and
// its restarts, the orchestrator, the client proxy (budget sharing, gates,
// the revocation handshake, commit batching), the offset controller with its
// commit metadata, the coordinator and its runners — and only what talks to
// sarama is replaced by a scripted cluster (actors/memkafka): a log per
// partition that the test feeds, an assignment the test decides, and the
// group's committed offsets and metadata. Like Kafka, a partition is read
// from its committed offset whenever it is taken again: after a revocation
// and a new assignment, or after the tree restarted.
//
//	h := harness.New(t, harness.Config{Consumer: harness.Consumer("orders", "orders")}, handler)
//	h.Assign("orders", 0, 1)
//	h.Feed(harness.Rec("orders", 0, 0, "k1", "v"), harness.Rec("orders", 1, 0, "k2", "v"))
//	h.AwaitAllCommitted()
//	h.HandledOffsets("k1") // [0]
//
// The harness wraps the handler and judges the ordering guarantee on every
// call: two calls of the same unit (key, partition, as the consumer's
// ordering says) never run at once, and within one assignment of a
// partition a unit's records start in offset order. Breaches fail the test
// when it ends (Violations lists them). Fail, FailTimes and Block script a
// handler's failures and stalls.
//
// Waits (the Await methods) check their condition whenever the cluster or
// the handler calls change, and otherwise every few milliseconds; each has a
// deadline (Config.Timeout) and fails the test naming what it waited for,
// with the state of every partition. Call them, like every method that can
// fail the test, from the test's goroutine.
//
// The package depends only on the module's own packages and the standard
// library (and zerolog, which actors.Options requires), so importing it does
// not pull a broker into a test binary.
package harness

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/rs/zerolog"
	"github.com/turbokafka/turbo/actors"
	"github.com/turbokafka/turbo/actors/backoff"
	"github.com/turbokafka/turbo/actors/internal/seam"
	"github.com/turbokafka/turbo/actors/memkafka"
	"github.com/turbokafka/turbo/config"
)

// T is what the harness needs of a test; *testing.T and *testing.B (any
// testing.TB) satisfy it.
type T interface {
	Helper()
	Cleanup(func())
	Logf(format string, args ...any)
	Errorf(format string, args ...any)
	Fatalf(format string, args ...any)
}

// Config configures a Harness.
type Config struct {
	// Consumer is the consumer's configuration, as in production: start
	// from Consumer(name, topics...), which shortens the timings. Only the
	// partitions of its topics can be assigned.
	Consumer config.Consumer
	// ShutdownTimeout bounds every wait for running handlers (a revocation,
	// a restart, Stop). Default 5s.
	ShutdownTimeout time.Duration
	// Restart is the backoff between tree restarts. Default FastRestart.
	Restart backoff.Policy
	// Timeout is the deadline of every Await. Default 10s.
	Timeout time.Duration
	// LogLevel is the lowest level of the consumer's logs written to the
	// test's log. Default warn (restarts and failures show; partition moves
	// do not).
	LogLevel config.LogLevel
	// Paused starts the consumer paused (actors.Options.Paused); Resume
	// lets it go.
	Paused bool
}

// FastRestart restarts a failed tree after 10 to 100 ms.
var FastRestart = backoff.Policy{Initial: 10 * time.Millisecond, Max: 100 * time.Millisecond, Multiplier: 2, Jitter: 0.2}

// Consumer returns config.DefaultConsumer(name) subscribed to topics, with
// timings for tests: commits every 10 ms (config.MinCommitInterval), retries
// after 5 to 50 ms.
func Consumer(name string, topics ...string) config.Consumer {
	c := config.DefaultConsumer(name)
	c.Topics = topics
	c.CommitInterval = config.MinCommitInterval
	c.Retry.InitialBackoff = 5 * time.Millisecond
	c.Retry.MaxBackoff = 50 * time.Millisecond
	return c
}

// Harness is one consumer running against an in-memory cluster. Its methods
// are safe for concurrent use, but those that can fail the test (Feed,
// Assign, the Awaits) must be called from the test's goroutine.
type Harness struct {
	t        T
	cfg      Config
	cluster  *memkafka.Cluster
	consumer *actors.Consumer
	handler  actors.Handler
	batch    actors.BatchHandler
	log      *testLog

	stopOnce sync.Once
	stopErr  error

	rec recorder
}

// New starts a consumer with cfg and handler h (nil: every record succeeds)
// on a fresh in-memory cluster. The consumer is stopped when the test ends
// (see Stop), and ordering violations are reported then.
func New(t T, cfg Config, h actors.Handler) *Harness {
	t.Helper()
	return start(t, cfg, h, nil)
}

// NewBatch is New with a BatchHandler (nil: every record succeeds): the
// consumer calls it with up to cfg.Consumer.Batch.MaxRecords records at a
// time. Call.Batch tells the calls apart, and a record that followed a
// failed one of its unit in a batch is recorded with ErrNotRun.
func NewBatch(t T, cfg Config, h actors.BatchHandler) *Harness {
	t.Helper()
	return start(t, cfg, nil, h)
}

func start(t T, cfg Config, h actors.Handler, bh actors.BatchHandler) *Harness {
	t.Helper()
	if cfg.Consumer.Name == "" {
		t.Fatalf("harness: Config.Consumer is empty; start from harness.Consumer(name, topics...)")
	}
	if cfg.ShutdownTimeout <= 0 {
		cfg.ShutdownTimeout = 5 * time.Second
	}
	if cfg.Restart == (backoff.Policy{}) {
		cfg.Restart = FastRestart
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = 10 * time.Second
	}
	if cfg.LogLevel == "" {
		cfg.LogLevel = config.LogWarn
	}
	level, err := zerolog.ParseLevel(string(cfg.LogLevel))
	if err != nil {
		t.Fatalf("harness: Config.LogLevel: %v", err)
	}
	hs := &Harness{t: t, cfg: cfg, cluster: memkafka.New(), handler: h, batch: bh, log: &testLog{t: t}}
	hs.rec.init(cfg.Consumer.Ordering, hs.cluster)
	logger := zerolog.New(zerolog.ConsoleWriter{Out: hs.log, NoColor: true, TimeFormat: "15:04:05"}).
		Level(level).With().Timestamp().Logger()
	// The brokers are never dialled with an in-memory cluster; validation
	// still wants a list of host:port.
	kafka := config.Default().Kafka
	kafka.Brokers = []string{"in-memory:9092"}
	opts := actors.Options{
		Consumer:        cfg.Consumer,
		Kafka:           kafka,
		ShutdownTimeout: cfg.ShutdownTimeout,
		Handler:         actors.HandlerFunc(hs.handle),
		Logger:          logger,
		Restart:         cfg.Restart,
		Paused:          cfg.Paused,
	}
	if h == nil && bh != nil || h == nil && cfg.Consumer.Batch.Records() > 1 {
		opts.Handler, opts.BatchHandler = nil, actors.BatchHandlerFunc(hs.handleBatch)
	}
	started, err := seam.StartInMemory(opts, hs.cluster)
	if err != nil {
		t.Fatalf("harness: starting the consumer: %v", err)
	}
	hs.consumer = started.(*actors.Consumer)
	t.Cleanup(func() {
		if err := hs.Stop(); err != nil {
			t.Errorf("harness: stopping the consumer: %v", err)
		}
		if n := seam.UnexpectedMessages(); n != 0 {
			t.Errorf("harness: actors of this process received %d messages they do not handle (a wiring mistake in turbo)", n)
		}
		for _, v := range hs.Violations() {
			t.Errorf("harness: ordering violated: %s", v)
		}
		hs.log.close()
	})
	return hs
}

// Stop stops the consumer gracefully, as SIGTERM does: every owned partition
// is revoked (running records finish, the watermark is committed), then the
// actors stop. It is idempotent; the test's end calls it too. Awaits on the
// cluster (commits, dead letters) still work afterwards.
func (h *Harness) Stop() error {
	h.stopOnce.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*h.cfg.ShutdownTimeout+5*time.Second)
		defer cancel()
		h.stopErr = h.consumer.Stop(ctx)
	})
	return h.stopErr
}

// Pause pauses the consumer as actors.Consumer.Pause does: nothing starts
// and nothing is fetched until Resume; its partitions stay its own.
// With partitions, only those pause (actors.Consumer.Pause(tps...)).
func (h *Harness) Pause(tps ...actors.TopicPartition) { h.consumer.Pause(tps...) }

// Resume resumes the consumer (actors.Consumer.Resume).
// With partitions, it resumes those.
func (h *Harness) Resume(tps ...actors.TopicPartition) { h.consumer.Resume(tps...) }

// PausedPartitions lists the partitions paused by Pause(tps...).
func (h *Harness) PausedPartitions() []actors.TopicPartition { return h.consumer.PausedPartitions() }

// PauseTopics pauses whole topics (actors.Consumer.PauseTopics): their
// partitions, held now or assigned later.
func (h *Harness) PauseTopics(topics ...string) { h.consumer.PauseTopics(topics...) }

// ResumeTopics resumes topics (actors.Consumer.ResumeTopics).
func (h *Harness) ResumeTopics(topics ...string) { h.consumer.ResumeTopics(topics...) }

// PausedTopics lists the topics paused by PauseTopics.
func (h *Harness) PausedTopics() []string { return h.consumer.PausedTopics() }

// SetConcurrency retunes the consumer's concurrency live
// (actors.Consumer.SetConcurrency).
func (h *Harness) SetConcurrency(n int) error { return h.consumer.SetConcurrency(n) }

// SetRate retunes the consumer's rate limit live (actors.Consumer.SetRate).
func (h *Harness) SetRate(r config.Rate) error { return h.consumer.SetRate(r) }

// Skip skips a record (actors.Consumer.Skip).
func (h *Harness) Skip(topic string, partition int32, offset int64) (actors.SkipResult, error) {
	return h.consumer.Skip(context.Background(), actors.TopicPartition{Topic: topic, Partition: partition}, offset)
}

// Seek moves partitions to an offset or a time (actors.Consumer.Seek): the
// consumer's tree restarts and reads them from there.
func (h *Harness) Seek(to actors.SeekTo) (actors.SeekResult, error) {
	return h.consumer.Seek(context.Background(), to)
}

// Tuning reports the consumer's concurrency and rate limit as they stand.
func (h *Harness) Tuning() actors.Tuning { return h.consumer.Tuning() }

// Stats returns the consumer's live counters.
func (h *Harness) Stats() actors.Snapshot { return h.consumer.Stats() }

// Restarts returns how many times the tree was restarted after a failure.
func (h *Harness) Restarts() int { return int(h.consumer.Stats().Restarts) }

func (h *Harness) handleBatch(ctx context.Context, recs []*actors.Record) actors.BatchResult {
	return h.rec.callBatch(ctx, recs, h.batch)
}

func (h *Harness) handle(ctx context.Context, rec *actors.Record) error {
	return h.rec.call(ctx, rec, h.handler)
}

// testLog writes the consumer's logs to the test's log until the test ends:
// a log line from a goroutine still winding down after that would panic in
// package testing.
type testLog struct {
	mu     sync.RWMutex
	t      T
	closed bool
}

func (l *testLog) Write(p []byte) (int, error) {
	l.mu.RLock()
	defer l.mu.RUnlock()
	if !l.closed {
		l.t.Logf("%s", strings.TrimRight(string(p), "\n"))
	}
	return len(p), nil
}

func (l *testLog) close() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.closed = true
}

// describe is the state shown when an Await times out.
func (h *Harness) describe() string {
	var b strings.Builder
	for _, tp := range h.cluster.Partitions() {
		p := h.cluster.Partition(tp)
		fmt.Fprintf(&b, "  %s: %d records up to offset %d; assigned %v, held %v (taken %d times); committed %d",
			tp, p.Records, p.End, p.Assigned, p.Owned, p.Claims, p.Committed)
		if c := decodeCommit(p); len(c.Finished) > 0 {
			fmt.Fprintf(&b, " with finished above it %v", c.Finished)
		}
		fmt.Fprintf(&b, " (%d commits)\n", p.Commits)
	}
	fmt.Fprintf(&b, "  %s\n", h.rec.summary())
	s := h.consumer.Stats()
	fmt.Fprintf(&b, "  stats: fetched %d, processed %d, failed attempts %d, retries %d, skipped %d, dead %d, inherited %d, restarts %d, in flight %d, buffered %d, assigned %d",
		s.Fetched, s.Processed, s.Failed, s.Retries, s.Skipped, s.Dead, s.Inherited, s.Restarts, s.InFlight, s.Buffered, s.Assigned)
	if n := len(h.cluster.DeadLetters()); n > 0 {
		fmt.Fprintf(&b, "\n  dead letters: %d", n)
	}
	return b.String()
}
