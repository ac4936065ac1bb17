package actors

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/rs/zerolog"
	"github.com/turbokafka/turbo/actors/backoff"
	"github.com/turbokafka/turbo/actors/internal/seam"
	"github.com/turbokafka/turbo/actors/kafkanet"
	"github.com/turbokafka/turbo/actors/memkafka"
	"github.com/turbokafka/turbo/config"
	"go.opentelemetry.io/otel/trace"
	"golang.org/x/time/rate"
)

// Options configure one consumer: one actor tree under a restarter.
type Options struct {
	// Consumer is the consumer's configuration (config.DefaultConsumer gives
	// the defaults).
	Consumer config.Consumer
	// Kafka is the connection configuration. Brokers must be real addresses
	// here: starting an embedded broker is the caller's business (see the
	// embedded package).
	Kafka config.Kafka
	// ShutdownTimeout bounds every wait for running handlers: a revocation,
	// a restart after a failure, Stop.
	ShutdownTimeout time.Duration
	// Handler processes the records one at a time; BatchHandler, a batch
	// at a time (Consumer.Batch). Set one of them. With batch.max_records
	// above 1 and a Handler, the records go to its HandleBatch when it has
	// one (the http handler does), and otherwise to Handle one after the
	// other.
	Handler      Handler
	BatchHandler BatchHandler
	// Logger receives the consumer's logs; the zero value discards them.
	Logger zerolog.Logger
	// Restart is the backoff between tree restarts after failures, and
	// between attempts to reach Kafka; the zero value means backoff.Default.
	Restart backoff.Policy
	// Metrics turns on the handler, buffer-wait and commit duration
	// histograms of Consumer.Collector: each costs a clock read and a few
	// atomic adds per record or commit. Counters, gauges and the
	// per-partition state are kept either way.
	Metrics bool
	// TracerProvider, when set, makes one span per handler attempt (see
	// trace.go); nil makes none. Trace context reaches the handler's
	// context either way.
	TracerProvider trace.TracerProvider
	// JoinGate, when set, is called once the consumer has connected to
	// Kafka and before it first joins its group; the join waits until it
	// returns (or until the consumer is stopped: done closes). A swarm's
	// nodes use it to join together (supervisor.Link.AwaitStart).
	JoinGate func(done <-chan struct{})
	// Paused starts the consumer paused, and PausedPartitions with those
	// partitions paused, as Pause would before its first record: a
	// process that replaces a consumer (a configuration reload) carries
	// its operator's pauses over this way. Resume ends them.
	Paused           bool
	PausedPartitions []TopicPartition
	// PausedTopics starts the consumer with those topics paused
	// (PauseTopics).
	PausedTopics []string

	// watermarkRefresh replaces the high watermark refresh interval
	// (tests: export_test.go); 0 keeps the default.
	watermarkRefresh time.Duration
}

// Consumer is a running consumer. It is safe for concurrent use.
type Consumer struct {
	name       string
	group      string
	sys        *actor.ActorSystem // its own
	pid        *actor.PID
	stats      *consumerStats
	stopped    chan struct{}
	pool       *workerPool
	stopOnce   sync.Once
	stopErr    error
	shutdown   time.Duration // shutdown_timeout: Stop's hard bound
	maxHandler time.Duration // max_handler_time, for Live
	log        zerolog.Logger
	control    *controlLog // Pause and Resume's lines
	cfg        config.Consumer
}

// New validates the options and starts the consumer: its actor tree runs
// on an actor system of its own, which Stop shuts down. Records flow as
// soon as it returns; New does not wait for Kafka (Ready says when the
// consumer is in its group; Failed, when Kafka refuses it for good).
func New(opts Options) (*Consumer, error) { return start(opts, nil) }

func init() {
	seam.StartInMemory = func(opts any, cluster *memkafka.Cluster) (any, error) {
		return start(opts.(Options), cluster)
	}
}

// start starts a consumer whose Kafka is sarama, or cluster when set (the
// seam of actors/harness: only what talks to sarama is swapped).
func start(opts Options, cluster *memkafka.Cluster) (*Consumer, error) {
	if (opts.Handler == nil) == (opts.BatchHandler == nil) {
		return nil, fmt.Errorf("%w: set one of Handler and BatchHandler", config.ErrInvalid)
	}
	cfg := config.Default()
	cfg.Kafka = opts.Kafka
	cfg.Consumers = []config.Consumer{opts.Consumer}
	cfg.ApplyDefaults()
	if opts.ShutdownTimeout > 0 {
		cfg.ShutdownTimeout = opts.ShutdownTimeout
	}
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.Kafka.IsEmbedded() {
		return nil, fmt.Errorf("%w: kafka.brokers: start the embedded broker first and pass its address", config.ErrInvalid)
	}
	if err := CheckKafka(&cfg); err != nil {
		return nil, err
	}
	policy := opts.Restart
	if policy == (backoff.Policy{}) {
		policy = backoff.Default
	}
	if err := policy.Validate(); err != nil {
		return nil, fmt.Errorf("%w: %w", config.ErrInvalid, err)
	}
	cc := cfg.Consumers[0]
	log := opts.Logger.With().Str("consumer", cc.Name).Logger()
	kn := kafkanet.New(cfg.Kafka, log)
	if cluster == nil {
		kn.Warn()
	}
	sys := newSystem(log)
	c := &Consumer{name: cc.Name, group: cc.Group, sys: sys, stats: &consumerStats{}, stopped: make(chan struct{}), pool: newWorkerPool(300),
		shutdown: cfg.ShutdownTimeout, maxHandler: cc.MaxHandlerTime, log: log, cfg: cc}
	c.control = newControlLog(log, func() (bool, int) { return c.stats.suspended.Load(), int(c.stats.partsPaused.Load()) })
	if opts.Metrics {
		c.stats.enableHistograms(cc.Name)
	}
	if opts.Paused {
		c.stats.suspended.Store(true)
		log.Info().Msg("consumer starts paused: no record starts and nothing is fetched until it is resumed")
	}
	if len(opts.PausedPartitions) > 0 {
		c.stats.pausePartitions(opts.PausedPartitions, true)
		log.Info().Stringer("partitions", tpList(opts.PausedPartitions)).Msg("consumer starts with partitions paused")
	}
	if len(opts.PausedTopics) > 0 {
		c.stats.pauseTopics(opts.PausedTopics, true)
		log.Info().Strs("topics", opts.PausedTopics).Msg("consumer starts with topics paused")
	}
	topics, err := cc.Subscription()
	if err != nil {
		return nil, err
	}
	spec := &treeSpec{
		consumer:         cc,
		topics:           topics,
		kafka:            cfg.Kafka,
		net:              kn,
		brokers:          cfg.Kafka.Brokers,
		shutdownTimeout:  cfg.ShutdownTimeout,
		batch:            batchHandler(opts, cc),
		stats:            c.stats,
		log:              log,
		retry:            policy,
		dispatcher:       c.pool,
		inMemory:         cluster,
		released:         &releasedAt{},
		partCap:          newPartitionCap(cc.PartitionCap(), log),
		joinGate:         &joinGate{wait: opts.JoinGate},
		watermarkRefresh: opts.watermarkRefresh,
	}
	if spec.batch == nil {
		spec.handler = traced(opts.Handler, cc.Name, opts.TracerProvider)
	}
	if perSecond, burst, ok := cc.Rate.Bucket(); ok {
		spec.limit = rate.NewLimiter(rate.Limit(perSecond), burst)
	}
	sup := &restarter{spec: spec, policy: policy, stopped: c.stopped}
	props := actor.PropsFromProducer(func() actor.Actor { return sup }, actor.WithSupervisor(sup), actor.WithDispatcher(c.pool))
	pid, err := sys.Root.SpawnNamed(props, "turbo-"+cc.Name)
	if err != nil {
		sys.Shutdown()
		return nil, fmt.Errorf("actors: starting consumer %q: %w", cc.Name, err)
	}
	c.pid = pid
	return c, nil
}

// Name returns the consumer's configured name.
func (c *Consumer) Name() string { return c.name }

// Stats returns the consumer's live counters.
func (c *Consumer) Stats() Snapshot { return c.stats.Snapshot() }

// Partitions returns the state of the partitions the consumer holds now,
// sorted by topic and partition.
func (c *Consumer) Partitions() []PartitionStats { return c.stats.Partitions() }

// Status returns Stats and Partitions read together: the snapshot's
// Buffered is the sum of the partitions' Buffered. (Stats and Partitions
// called one after the other agree once nothing moves; under load, records
// move between the two reads.)
func (c *Consumer) Status() (Snapshot, []PartitionStats) { return c.stats.status() }

// Group returns the consumer group's id.
func (c *Consumer) Group() string { return c.group }

// Failed is closed when the consumer gives up for good: Kafka refused every
// attempt to connect at start-up (a wrong password, an untrusted
// certificate, TLS or SASL on the wrong listener), which retrying will not
// cure. Err then says why. The consumer must still be stopped.
func (c *Consumer) Failed() <-chan struct{} {
	ch, _ := c.stats.gaveUpWith()
	return ch
}

// Err returns why the consumer gave up (see Failed), or nil. The error
// wraps kafkanet.ErrRefused.
func (c *Consumer) Err() error {
	_, err := c.stats.gaveUpWith()
	return err
}

// Pause stops the consumer from starting records and from fetching, until
// Resume: it keeps its group membership and its partitions (no rebalance),
// the records running finish and are committed, and lag grows. Records
// already fetched wait, and so does what sarama read ahead (at most a fetch
// per partition). Liveness and readiness are unchanged: a paused consumer
// is healthy. Pause and Resume are idempotent, safe from any goroutine, and
// hold across tree restarts.
//
// With partitions, only those pause: none of their records starts (those
// running finish), nothing more of them is fetched, they stay this
// consumer's (no rebalance) and keep committing what finishes; the other
// partitions go on. A partition not assigned now is paused from when it is.
// The whole consumer's pause and the partitions' are separate: Resume()
// ends the first, Resume(tps...) the others.
func (c *Consumer) Pause(tps ...TopicPartition) {
	if len(tps) == 0 {
		c.setSuspended(true)
		return
	}
	c.stats.pausePartitions(tps, true)
	c.control.change(func(log zerolog.Logger) {
		log.Info().Stringer("partitions", tpList(tps)).Msg("partitions paused: none of their records starts and nothing of them is fetched until they are resumed")
	})
	c.tellCoordinator()
}

// Resume undoes Pause: records start again, and partitions are fetched.
// With partitions, it resumes those (paused by Pause(tps...)).
func (c *Consumer) Resume(tps ...TopicPartition) {
	if len(tps) == 0 {
		c.setSuspended(false)
		return
	}
	c.stats.pausePartitions(tps, false)
	c.control.change(func(log zerolog.Logger) { log.Info().Stringer("partitions", tpList(tps)).Msg("partitions resumed") })
	c.tellCoordinator()
}

// PausedPartitions lists the partitions paused by Pause(tps...).
func (c *Consumer) PausedPartitions() []TopicPartition { return c.stats.pausedPartitions() }

// tpList prints partitions as topic/partition, comma-separated.
type tpList []TopicPartition

func (l tpList) String() string {
	s := make([]string, len(l))
	for i, tp := range l {
		s[i] = tp.String()
	}
	return strings.Join(s, ",")
}

// Paused reports whether Pause was called and Resume not since.
func (c *Consumer) Paused() bool { return c.stats.suspended.Load() }

func (c *Consumer) setSuspended(on bool) {
	if c.stats.suspended.Swap(on) == on {
		return
	}
	if on {
		c.control.change(func(log zerolog.Logger) {
			log.Info().Msg("consumer paused: no record starts and nothing is fetched until it is resumed")
		})
	} else {
		c.stats.resumeGates()
		c.control.change(func(log zerolog.Logger) { log.Info().Msg("consumer resumed") })
	}
	c.tellCoordinator()
}

// tellCoordinator has the tree's coordinator look at the pauses again.
func (c *Consumer) tellCoordinator() {
	select {
	case <-c.stopped: // its actor system is gone
	default:
		c.sys.Root.Send(c.pid, &controlChanged{})
	}
}

// Done is closed once the consumer has stopped.
func (c *Consumer) Done() <-chan struct{} { return c.stopped }

// Stop shuts the consumer down in order: stop taking records, let the running
// ones finish, commit the watermarks, leave the group, stop the actors. It
// returns within the configured shutdown timeout (or ctx, if that ends
// first), is idempotent, and is safe to call concurrently; every call returns
// the same result. A nil result means every finished record was committed;
// otherwise the error wraps ErrUncommitted, ErrAbandoned or ErrStopTimeout.
func (c *Consumer) Stop(ctx context.Context) error {
	c.stopOnce.Do(func() {
		ctx, cancel := context.WithTimeout(ctx, c.shutdown)
		defer cancel()
		c.stopErr = c.stop(ctx)
		c.sys.Shutdown()
		c.control.close()
	})
	return c.stopErr
}

func (c *Consumer) stop(ctx context.Context) error {
	drained := make(chan drainResult, 1)
	c.sys.Root.Send(c.pid, &drainTree{done: drained})
	var res drainResult
	select {
	case res = <-drained:
	case <-ctx.Done():
		c.sys.Root.Stop(c.pid)
		return fmt.Errorf("%w: draining: %w", ErrStopTimeout, ctx.Err())
	}
	c.sys.Root.Stop(c.pid)
	if res.abandoned > 0 {
		// Actors of an abandoned generation never terminate, so neither
		// will the restarter: do not wait for it, and leave the workers
		// that still run them alone.
		c.pool.release()
		err := fmt.Errorf("%w: %d generation(s) of the tree", ErrAbandoned, res.abandoned)
		if res.expired {
			err = errors.Join(ErrUncommitted, err)
		}
		return err
	}
	select {
	case <-c.stopped:
		c.pool.close()
		if res.expired {
			return ErrUncommitted
		}
		return nil
	case <-ctx.Done():
		c.pool.release()
		return fmt.Errorf("%w: stopping actors: %w", ErrStopTimeout, ctx.Err())
	}
}

// batchHandler is the handler of a consumer that runs records in batches,
// nil for one that runs them one at a time (Options.Handler and
// batch.max_records 1). A Handler without a batch form runs a batch's
// records one after the other, traced one by one.
func batchHandler(opts Options, cc config.Consumer) BatchHandler {
	switch {
	case opts.BatchHandler != nil:
		return opts.BatchHandler
	case cc.Batch.Records() == 1:
		return nil
	}
	if bh, ok := opts.Handler.(BatchHandler); ok {
		return bh
	}
	return oneByOne{traced(opts.Handler, cc.Name, opts.TracerProvider)}
}
