package actors

import (
	"errors"
	"fmt"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/IBM/sarama"
	"github.com/asynkron/protoactor-go/actor"
	"github.com/rs/zerolog"
	"github.com/turbokafka/turbo/actors/backoff"
	"github.com/turbokafka/turbo/actors/internal/seam"
	"github.com/turbokafka/turbo/actors/kafkanet"
	"github.com/turbokafka/turbo/actors/memkafka"
	"github.com/turbokafka/turbo/config"
	"golang.org/x/time/rate"
)

// treeSpec is everything needed to build one generation of a consumer's tree.
type treeSpec struct {
	consumer        config.Consumer
	topics          config.Subscription
	joinGate        *joinGate // once per consumer, not per generation of the tree
	kafka           config.Kafka
	net             *kafkanet.Net // TLS and SASL, shared by every generation (one OAuth token)
	brokers         []string
	shutdownTimeout time.Duration
	handler         Handler      // one record per call; nil when batch is set
	batch           BatchHandler // batch.max_records per call
	stats           *consumerStats
	log             zerolog.Logger
	retry           backoff.Policy // for reconnecting to Kafka
	dispatcher      actor.Dispatcher
	inMemory        *memkafka.Cluster // replaces Kafka when set (actors/harness)
	// released outlives the generations: what this consumer finished on a
	// partition stays known across a tree restart, whose commits may not
	// have landed.
	released *releasedAt
	// partCap is max_partitions, with the subscription it admitted last:
	// a restarted tree keeps to it.
	partCap *partitionCap
	// limit is the consumer's rate.limit, shared by its runners and by the
	// generations (a restart does not refill the bucket); nil: no limit.
	limit *rate.Limiter
	// watermarkRefresh is the high watermark refresh interval (0: the
	// default; see refreshInterval).
	watermarkRefresh time.Duration
}

// props builds the props of one of the tree's actors.
func (s *treeSpec) props(a actor.Actor, opts ...actor.PropsOption) *actor.Props {
	return actor.PropsFromProducer(func() actor.Actor { return a }, append(opts, actor.WithDispatcher(s.dispatcher))...)
}

// maxFetchBatch bounds one batch read from a partition.
const maxFetchBatch = 512

func (s *treeSpec) newProxy() *clientProxy {
	c := s.consumer
	ahead := newReadAhead(c.Concurrency, c.MaxBuffered, c.Batch.Records())
	return &clientProxy{
		group:           s.newKafkaSide(c.Concurrency + c.MaxBuffered),
		budget:          ahead.budget(),
		readAhead:       ahead,
		budgetBytes:     int64(s.consumer.MaxBufferedBytes),
		revokeTimeout:   s.shutdownTimeout,
		shutdownTimeout: s.shutdownTimeout,
		refreshEvery:    refreshInterval(s.watermarkRefresh),
		stats:           s.stats,
		log:             s.log,
		exactlyOnce:     c.Output.ExactlyOnce,
	}
}

// newKafkaSide builds what talks to Kafka for one generation of the tree:
// sarama, franz-go (kafka.client), or the in-memory cluster of
// actors/harness.
func (s *treeSpec) newKafkaSide(budget int) kafkaSide {
	if s.inMemory != nil {
		return &memGroup{
			cluster:    s.inMemory,
			topics:     s.topics,
			newest:     s.consumer.InitialOffset == config.OffsetNewest,
			maxBatch:   maxFetchBatch,
			revokeWait: s.shutdownTimeout + 5*time.Second,
			dlqTopic:   dlqTopic(s.consumer),
			dlqLimit:   deadLetterLimit(outputBytes(s.consumer)),
			readMeta:   s.consumer.CommitMetadataBytes > 0,
			stats:      s.stats,
			log:        s.log,
		}
	}
	if s.kafka.Client == config.ClientFranz {
		return &franzGroup{
			released:    s.released,
			partCap:     s.partCap,
			brokers:     s.brokers,
			groupID:     s.consumer.Group,
			joinGate:    s.joinGate,
			topics:      s.topics,
			refresh:     s.consumer.MetadataRefresh,
			opts:        franzOpts(s.kafka, s.brokers, s.consumer, s.shutdownTimeout),
			budgetBytes: int64(s.consumer.MaxBufferedBytes),
			protocol:    s.kafka.GroupProtocol,
			instanceID:  s.kafka.GroupInstanceID,
			clientID:    s.kafka.ClientID,
			net:         s.net,
			log:         s.log,
			retry:       s.retry,
			maxBatch:    maxFetchBatch,
			revokeWait:  s.shutdownTimeout + 5*time.Second,
			dlqTopic:    dlqTopic(s.consumer),
			dlqLimit:    deadLetterLimit(outputBytes(s.consumer)),
			readMeta:    s.consumer.CommitMetadataBytes > 0,
			stats:       s.stats,
			txnID:       transactionalID(s.consumer),
			txnOpts:     franzTxnOptions(s.brokers, s.kafka.ClientID, s.consumer),
		}
	}
	return &kafkaGroup{
		released:    s.released,
		partCap:     s.partCap,
		brokers:     s.brokers,
		groupID:     s.consumer.Group,
		joinGate:    s.joinGate,
		topics:      s.topics,
		refresh:     s.consumer.MetadataRefresh,
		cfg:         saramaConfig(s.kafka, s.consumer, s.shutdownTimeout),
		budgetBytes: int64(s.consumer.MaxBufferedBytes),
		net:         s.net,
		log:         s.log,
		retry:       s.retry,
		maxBatch:    maxFetchBatch,
		revokeWait:  s.shutdownTimeout + 5*time.Second,
		dlqTopic:    dlqTopic(s.consumer),
		readMeta:    s.consumer.CommitMetadataBytes > 0,
		auxQueue:    budget + s.consumer.Concurrency,
		outputBytes: outputBytes(s.consumer),
		txnID:       transactionalID(s.consumer),
		stats:       s.stats,
	}
}

// transactionalID is the consumer's transactional id with
// output.exactly_once, "" without.
func transactionalID(c config.Consumer) string {
	if !c.Output.ExactlyOnce {
		return ""
	}
	return c.TransactionalID()
}

// outputBytes is the consumer's output.max_bytes, 0 without outputs.
func outputBytes(c config.Consumer) int {
	if !c.Output.Enabled() {
		return 0
	}
	return int(c.Output.MaxBytes)
}

func dlqTopic(c config.Consumer) string {
	if c.OnFailure == config.OnFailureDLQ {
		return c.DLQTopic
	}
	return ""
}

// fetchMaxWait is how long a fetch may wait on the broker for new records
// (see saramaConfig).
const fetchMaxWait = 100 * time.Millisecond

// saramaConfig maps turbo's configuration onto sarama's. The version was
// validated by CheckKafka.
func saramaConfig(k config.Kafka, c config.Consumer, shutdownTimeout time.Duration) *sarama.Config {
	cfg := sarama.NewConfig()
	cfg.Version, _ = sarama.ParseKafkaVersion(k.Version)
	cfg.ClientID = k.ClientID
	cfg.Consumer.Return.Errors = true
	cfg.Consumer.Offsets.AutoCommit.Enable = false // turbo commits watermarks itself
	cfg.Consumer.Offsets.Initial = sarama.OffsetOldest
	if c.InitialOffset == config.OffsetNewest {
		cfg.Consumer.Offsets.Initial = sarama.OffsetNewest
	}
	// Cooperative-sticky: a rebalance moves only the partitions that change
	// owner; the others keep running.
	cfg.Consumer.Group.Rebalance.GroupStrategies = []sarama.BalanceStrategy{sarama.NewBalanceStrategyCooperativeSticky()}
	// A revoked partition waits for its running records (up to
	// shutdown_timeout) before it is released; the broker must wait longer.
	cfg.Consumer.Group.Rebalance.Timeout = max(cfg.Consumer.Group.Rebalance.Timeout, shutdownTimeout+10*time.Second)
	// Members learn of a rebalance from a heartbeat's answer, and a
	// cooperative one takes two rounds: sarama's 3 s interval made every
	// join cost several seconds of a member idling. At 1 s, a swarm's start
	// still lost 3-4 s: the first member to join took every partition,
	// started records for a second before it heard of the others, and
	// then drained what it had started of the partitions it gave up
	// (measured, TestSwarmExitOnIdle: 4.0 s from the first assignment to
	// the last; 0.75 s at 250 ms). Four small requests a second per member
	// are cheap for a broker.
	cfg.Consumer.Group.Heartbeat.Interval = 250 * time.Millisecond
	// A JoinGroup waits on the broker until every member has rejoined, up
	// to the rebalance timeout — and a member rejoins only once its revoked
	// partitions drained (up to shutdown_timeout). sarama reads every
	// answer within Net.ReadTimeout (30 s): a member waiting longer for a
	// draining peer gave up, lost its connection and with it its session,
	// and so released every partition it owned, turning a cooperative
	// rebalance into a stop of the whole member. As Kafka's Java client does
	// for JoinGroup, wait the rebalance timeout and 5 s more. (sarama has a
	// single read timeout, so other requests to an unresponsive broker wait
	// as long; a broker that is down fails them at once.)
	cfg.Net.ReadTimeout = max(cfg.Net.ReadTimeout, cfg.Consumer.Group.Rebalance.Timeout+5*time.Second)
	// What sarama holds beyond turbo's own budget: per partition, one decoded
	// fetch response and a channel of messages. Keep both modest, so memory
	// follows concurrency + max_buffered rather than the broker's defaults.
	// A record larger than Fetch.Default is still read: the broker returns
	// at least one whole batch (KIP-74), or sarama asks again for the
	// batch's size, and goes back to the default after it. The fetch shrinks
	// with the subscription's partitions once they are known (dial,
	// partitionFetch).
	cfg.Consumer.Fetch.Default = maxPartitionFetch
	cfg.ChannelBufferSize = 64
	// A record's key and value point into the fetch response they came in
	// (sarama decodes without copying), so a record that waits keeps its
	// whole response alive: bound a response by a quarter of the byte
	// budget (sarama's 50 MiB otherwise), never below 1 MiB. The broker
	// still returns one batch larger than that, so nothing gets stuck.
	cfg.Consumer.Fetch.MaxBytes = int32(min(max(c.MaxBufferedBytes/4, config.MiB), 50*config.MiB))
	// sarama holds a broker connection's lock for a whole request, and a
	// fetch with nothing new to return waits MaxWaitTime on the broker: a
	// commit (or heartbeat) to the same broker waits behind it. sarama's
	// 500 ms made every commit of a caught-up consumer up to half a second
	// late (the last commit of a drained backlog arrived ~350 ms after the
	// last record finished); 100 ms bounds the delay at ten idle fetches per
	// second and broker.
	cfg.Consumer.MaxWaitTime = fetchMaxWait
	if k.GroupInstanceID != "" {
		cfg.Consumer.Group.InstanceId = k.GroupInstanceID
	}
	if c.Output.ExactlyOnce {
		// Read committed, as a transactional pipeline must: its inputs
		// may be another's outputs, and a claim's committed offset is
		// then read only once no transaction holds it (sarama sets
		// require_stable), so a member never starts below offsets that a
		// zombie's transaction is still committing.
		cfg.Consumer.IsolationLevel = sarama.ReadCommitted
		// sarama retries that read every Metadata.Retry.Backoff, three
		// times by default, then leaves the partition unread until the
		// next rebalance: wait as long as a dead producer's transaction
		// may stay open instead.
		cfg.Consumer.Offsets.Retry.Max = int(stableWait / cfg.Metadata.Retry.Backoff)
	}
	return cfg
}

// CheckKafka validates what the config package cannot without sarama: the
// sarama configuration each consumer's client would be built with. sarama
// refuses a bad one only when the client is made, which the tree retries
// forever as "cannot reach Kafka" (kafka.version 2.3.0 did). The error is a
// *config.FieldError naming the key at fault, so the CLI exits 2.
func CheckKafka(cfg *config.Config) error {
	for _, c := range cfg.Consumers {
		err := validSarama(cfg.Kafka, c, cfg.ShutdownTimeout)
		if err == nil {
			continue
		}
		// Find the key by putting each suspect back to its default: what
		// sarama checks beyond timeouts turbo sets itself depends on these.
		key := "kafka"
		for _, k := range []struct {
			name  string
			reset func(*config.Kafka)
		}{
			{"kafka.version", func(k *config.Kafka) { k.Version = config.Default().Kafka.Version }},
			{"kafka.group_instance_id", func(k *config.Kafka) { k.GroupInstanceID = "" }},
			{"kafka.client_id", func(k *config.Kafka) { k.ClientID = config.Default().Kafka.ClientID }},
		} {
			kc := cfg.Kafka
			k.reset(&kc)
			if validSarama(kc, c, cfg.ShutdownTimeout) == nil {
				key = k.name
				break
			}
		}
		return &config.FieldError{Key: key, Msg: "refused by the Kafka client: " + err.Error()}
	}
	return nil
}

func validSarama(k config.Kafka, c config.Consumer, shutdownTimeout time.Duration) error {
	if _, err := sarama.ParseKafkaVersion(k.Version); err != nil {
		return err
	}
	cfg := saramaConfig(k, c, shutdownTimeout)
	if err := kafkanet.New(k, zerolog.Nop()).Apply(cfg); err != nil {
		return err
	}
	return cfg.Validate()
}

// FailureError is the reason recorded when an actor of the tree panicked.
type FailureError struct {
	Reason any
}

func (e *FailureError) Error() string { return fmt.Sprintf("actors: actor failed: %v", e.Reason) }

// Unwrap exposes the panic value when it is an error.
func (e *FailureError) Unwrap() error {
	err, _ := e.Reason.(error)
	return err
}

var errDrainTimeout = errors.New("actors: drain did not finish within shutdown_timeout")

var unexpectedMessages atomic.Int64

func init() { seam.UnexpectedMessages = unexpectedMessages.Load }

func unexpected(c actor.Context) {
	unexpectedMessages.Add(1)
	c.Logger().Warn("unexpected message", slog.String("actor", c.Self().Id), slog.String("type", fmt.Sprintf("%T", c.Message())))
}

// newSystem returns an actor system whose own logging goes to log (at warn and
// above: protoactor is chatty at info).
func newSystem(log zerolog.Logger) *actor.ActorSystem {
	l := log.With().Str("component", "protoactor").Logger()
	if l.GetLevel() < zerolog.WarnLevel {
		l = l.Level(zerolog.WarnLevel)
	}
	return actor.NewActorSystem(actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger {
		return slog.New(zerolog.NewSlogHandler(l))
	}))
}
