package config

import (
	"slices"
	"time"
)

// Config is the whole configuration of one turbo process.
type Config struct {
	// Kafka says how to reach the cluster (or start an embedded one).
	Kafka Kafka `mapstructure:"kafka"`
	// Consumers are the consumer groups this process runs, one actor tree each.
	Consumers []Consumer `mapstructure:"consumers"`
	// ShutdownTimeout bounds how long a graceful stop may take before
	// in-flight work is abandoned.
	ShutdownTimeout time.Duration `mapstructure:"shutdown_timeout"`
	// Log configures the process logger.
	Log Log `mapstructure:"log"`
	// Swarm configures `turbo swarm`; `turbo run` ignores it.
	Swarm Swarm `mapstructure:"swarm"`
	// HTTP configures the metrics, health, status and console listener.
	HTTP HTTP `mapstructure:"http"`
	// Tracing configures trace context and OpenTelemetry spans.
	Tracing Tracing `mapstructure:"tracing"`
}

// EmbeddedBroker is the broker address that, as the only entry of
// Kafka.Brokers, starts an in-memory broker inside the process instead of
// connecting to a cluster.
const EmbeddedBroker = "embedded"

// Kafka holds the client settings shared by all consumers.
type Kafka struct {
	// Brokers are the bootstrap addresses (host:port), or the single entry
	// EmbeddedBroker.
	Brokers []string `mapstructure:"brokers"`
	// ClientID is sent to the brokers to identify this client in their logs
	// and quotas.
	ClientID string `mapstructure:"client_id"`
	// Version is the Kafka protocol version to speak, e.g. "3.6.0" (the
	// sarama client; franz-go asks the brokers which versions they speak).
	Version string `mapstructure:"version"`
	// Client is the Kafka client library turbo consumes and produces with:
	// sarama or franz-go. Both keep the same guarantees; franz-go is the
	// faster, and the only one that speaks the consumer group protocol.
	Client KafkaClient `mapstructure:"client"`
	// GroupProtocol is the consumer group protocol: classic (the members
	// assign partitions among themselves, cooperative-sticky) or consumer
	// (the broker assigns them, one member at a time: Kafka 4.0 or later,
	// with the franz-go client).
	GroupProtocol GroupProtocol `mapstructure:"group_protocol"`
	// GroupInstanceID enables static group membership when non-empty, so a
	// quick restart does not trigger a rebalance.
	GroupInstanceID string `mapstructure:"group_instance_id"`
	// TLS encrypts the connections to the brokers (and, with a client
	// certificate, authenticates turbo to them).
	TLS TLS `mapstructure:"tls"`
	// SASL authenticates turbo to the brokers.
	SASL SASL `mapstructure:"sasl"`
	// Embedded configures the in-memory broker; used only when Brokers is
	// [EmbeddedBroker].
	Embedded Embedded `mapstructure:"embedded"`
}

// KafkaClient names the Kafka client library (Kafka.Client).
type KafkaClient string

const (
	// ClientSarama is github.com/IBM/sarama, the default.
	ClientSarama KafkaClient = "sarama"
	// ClientFranz is github.com/twmb/franz-go.
	ClientFranz KafkaClient = "franz-go"
)

// GroupProtocol names a consumer group protocol (Kafka.GroupProtocol).
type GroupProtocol string

const (
	// GroupClassic is the protocol of every Kafka version: JoinGroup and
	// SyncGroup, with the cooperative-sticky assignor.
	GroupClassic GroupProtocol = "classic"
	// GroupConsumer is the protocol of KIP-848 (Kafka 4.0 and later): the
	// group coordinator assigns partitions and moves them incrementally.
	GroupConsumer GroupProtocol = "consumer"
)

// IsEmbedded reports whether the configuration asks for an in-memory broker
// (Brokers is exactly [EmbeddedBroker]).
func (k Kafka) IsEmbedded() bool {
	return len(k.Brokers) == 1 && k.Brokers[0] == EmbeddedBroker
}

// Embedded configures the in-memory broker started when Kafka.IsEmbedded.
type Embedded struct {
	// Partitions is the partition count of topics the broker auto-creates.
	Partitions int `mapstructure:"partitions"`
	// Seed describes demo records written into the broker at start.
	Seed Seed `mapstructure:"seed"`
}

// Seed describes demo records produced into the embedded broker at start,
// so `turbo run` has something to consume without a real cluster.
type Seed struct {
	// Topic receives the records; required when Records > 0.
	Topic string `mapstructure:"topic"`
	// Records is how many records to write; 0 disables seeding.
	Records int `mapstructure:"records"`
	// Keys is how many distinct record keys to spread the records over.
	Keys int `mapstructure:"keys"`
}

// Consumer is one consumer group and the handler its records go to.
type Consumer struct {
	// Name identifies the consumer in logs, metrics and CLI filters.
	Name string `mapstructure:"name"`
	// Group is the Kafka consumer group; empty means Name (Load and
	// ApplyDefaults fill it in).
	Group string `mapstructure:"group"`
	// Topics are the topics the group subscribes to.
	Topics []string `mapstructure:"topics"`
	// InitialOffset is where to start when the group has no committed offset.
	InitialOffset InitialOffset `mapstructure:"initial_offset"`
	// Ordering says which records must be handled one after another.
	Ordering Ordering `mapstructure:"ordering"`
	// Concurrency is the maximum number of records handled at once.
	Concurrency int `mapstructure:"concurrency"`
	// ConcurrencyMode is fixed (the default: up to Concurrency at once) or
	// adaptive: the limit moves between ConcurrencyMin and Concurrency by
	// the downstream's push-back and latency (actors/adaptive).
	ConcurrencyMode ConcurrencyMode `mapstructure:"concurrency_mode"`
	// ConcurrencyMin is where an adaptive limit starts and the lowest it
	// goes; 0 means 1.
	ConcurrencyMin int `mapstructure:"concurrency_min"`
	// MaxBuffered is the most fetched records that may wait for a worker
	// before fetching pauses (back-pressure). Within it the read-ahead sizes
	// itself to about a second of work at the rate records finish, and
	// never below 1,000 records, 32 per partition owned, or a batch's
	// max_records, whichever is largest.
	MaxBuffered int `mapstructure:"max_buffered"`
	// MaxBufferedBytes bounds the bytes (keys, values and headers) of the
	// records fetched and not yet finished, running ones included: the byte
	// counterpart of Concurrency + MaxBuffered, shared among the partitions
	// held the same way (a floor each, the rest lent to partitions with
	// records to read). A partition out of both is paused; a single record
	// larger than what it may hold is still read, alone.
	MaxBufferedBytes ByteSize `mapstructure:"max_buffered_bytes"`
	// CommitInterval is how often completed offsets are committed. A
	// partition whose work has all finished up to its high watermark
	// commits at once instead, within one commit per interval plus a burst
	// of two over any stretch of time (actors.commitAllowance).
	CommitInterval time.Duration `mapstructure:"commit_interval"`
	// Handler is what is done with each record.
	Handler Handler `mapstructure:"handler"`
	// Retry says how often, and how far apart, a failed record is tried
	// again.
	Retry Retry `mapstructure:"retry"`
	// OnFailure is what happens to a record once its attempts run out, or at
	// once when its handler reports a permanent error.
	OnFailure OnFailure `mapstructure:"on_failure"`
	// DLQTopic receives the records given up on when OnFailure is
	// OnFailureDLQ; required then, and a valid Kafka topic name.
	DLQTopic string `mapstructure:"dlq_topic"`
	// ExcludeTopics are never consumed, even when a pattern in Topics
	// matches them (internal topics, starting with "__", and the
	// dead-letter topics never are).
	ExcludeTopics []string `mapstructure:"exclude_topics"`
	// MetadataRefresh is how often the topics matching Topics' patterns
	// are looked up again: a new matching topic is consumed within it.
	MetadataRefresh time.Duration `mapstructure:"metadata_refresh"`
	// MaxPartitions caps the partitions the subscription covers: every
	// partition of every topic it reads, the whole group's (each member
	// holds a share). A subscription over it is refused at start-up (the
	// consumer gives up, naming the count); topics a pattern matches later
	// that would take it over are not taken in, and an error says so. 0
	// means the default, 4,096.
	MaxPartitions int `mapstructure:"max_partitions"`
	// MaxHandlerTime bounds one attempt: a handler running longer is
	// cancelled and the attempt counts as failed. 0 means unlimited.
	MaxHandlerTime time.Duration `mapstructure:"max_handler_time"`
	// CommitMetadataBytes is the byte budget for the record of finished
	// offsets (beyond the committed one) written into the commit metadata,
	// so a restart need not redo them. 0 turns it off; otherwise it is
	// 64 to 4096.
	CommitMetadataBytes int `mapstructure:"commit_metadata_bytes"`
	// Rate bounds how fast the consumer's handlers start attempts.
	Rate Rate `mapstructure:"rate"`
	// Batch is how many records one handler call takes.
	Batch Batch `mapstructure:"batch"`
	// Output is what the handlers may write back to Kafka for the records
	// they handle; off unless a topic is named.
	Output Output `mapstructure:"output"`
}

// Output is where, and how much, a consumer's handlers may write for the
// records they handle (a Go handler through actors.Emit). An input record
// counts as finished only once every record written for it is acknowledged
// by the brokers (an idempotent producer, acks from all in-sync replicas),
// so the committed offset never passes an input whose outputs could still
// be lost; a crash in between writes them again (at least once).
type Output struct {
	// Topic is where an output that names no topic goes. Empty: every
	// output must name one of Topics.
	Topic string `mapstructure:"topic"`
	// Topics are the other topics an output may name; Topic is always
	// allowed. An output naming a topic in neither fails its input record
	// at once (a permanent failure: on_failure decides what follows).
	Topics []string `mapstructure:"topics"`
	// MaxPerRecord bounds the outputs of one input record; one more fails
	// the record at once (a permanent failure).
	MaxPerRecord int `mapstructure:"max_per_record"`
	// MaxBytes bounds one output's key, value and headers; a larger output
	// fails its input record at once (a permanent failure). Keep it within
	// the output topics' max.message.bytes (1 MiB by default in Kafka).
	MaxBytes ByteSize `mapstructure:"max_bytes"`
	// ExactlyOnce writes each commit's outputs (and dead letters) in one
	// Kafka transaction with the input offsets it commits: a reader of the
	// output topics with isolation.level=read_committed sees every input
	// record's outputs exactly once. Off, outputs are written at least once.
	ExactlyOnce bool `mapstructure:"exactly_once"`
	// TransactionalID names this consumer's transactional producer when
	// ExactlyOnce is on. Empty: turbo-<group>, and a swarm node appends
	// -n<index>. It must be unique among the processes running at once and
	// stable across their restarts: a restarted process with the same id
	// aborts what its predecessor left open at once, instead of readers
	// waiting for the transaction timeout.
	TransactionalID string `mapstructure:"transactional_id"`
}

// TransactionalID is the id of the consumer's transactional producer
// (output.exactly_once): output.transactional_id, or turbo-<group>.
func (c *Consumer) TransactionalID() string {
	if c.Output.TransactionalID != "" {
		return c.Output.TransactionalID
	}
	return "turbo-" + c.Group
}

// Enabled reports whether the handlers may write outputs: a topic is named.
func (o Output) Enabled() bool { return o.Topic != "" || len(o.Topics) > 0 }

// Allows reports whether an output may be written to topic.
func (o Output) Allows(topic string) bool {
	return topic != "" && (topic == o.Topic || slices.Contains(o.Topics, topic))
}

// Batch is how records are grouped into one handler call (a Go
// BatchHandler's HandleBatch, or one http request). Ordering holds inside
// a batch: a key's (or partition's) records in one batch are consecutive and
// in offset order, and a key is never in two batches at once.
type Batch struct {
	// MaxRecords is the most records of one call; 1, the default (0 too),
	// is one record per call.
	MaxRecords int `mapstructure:"max_records"`
	// MaxWait is how long records may wait for a batch to fill before a
	// smaller one starts; 0, the default, starts whatever is there at once.
	MaxWait time.Duration `mapstructure:"max_wait"`
	// MaxBytes bounds a call's keys and values; 0 is no bound. A record
	// larger than it still goes, alone.
	MaxBytes ByteSize `mapstructure:"max_bytes"`
}

// Records is MaxRecords with 0 (left out) meaning 1.
func (b Batch) Records() int { return max(1, b.MaxRecords) }

// Rate is a token bucket in front of the handler, for a downstream that
// must not be sent more than it takes: every attempt (a retry too) takes a
// token; tokens come at Limit per second, and at most Burst wait unused.
type Rate struct {
	// Limit is the attempts per second the consumer may start; 0, the
	// default, is no limit. In a swarm it is the whole consumer's: each
	// node takes an equal share (PerNode).
	Limit float64 `mapstructure:"limit"`
	// Burst is how many attempts may start at once after a quiet spell;
	// 0 means a tenth of a second's worth (at least 1).
	Burst int `mapstructure:"burst"`
}

// Bucket returns the token rate and bucket size to run; ok is false when
// there is no limit.
func (r Rate) Bucket() (perSecond float64, burst int, ok bool) {
	if r.Limit == 0 {
		return 0, 0, false
	}
	if burst = r.Burst; burst == 0 {
		burst = max(1, int(r.Limit/10))
	}
	return r.Limit, burst, true
}

// PerNode is one node's share of the limit when nodes processes run the
// consumer (turbo swarm); the burst is shared the same way, at least 1.
func (r Rate) PerNode(nodes int) Rate {
	if r.Limit == 0 || nodes <= 1 {
		return r
	}
	share := Rate{Limit: r.Limit / float64(nodes)}
	if r.Burst > 0 {
		share.Burst = max(1, r.Burst/nodes)
	}
	return share
}

// Retry says how a failed record is tried again.
type Retry struct {
	// MaxAttempts is the number of attempts in all, the first included:
	// 1 means no retry. At least 1.
	MaxAttempts int `mapstructure:"max_attempts"`
	// InitialBackoff is the wait before the second attempt; it doubles for
	// each further attempt, with jitter, up to MaxBackoff. Greater than 0.
	InitialBackoff time.Duration `mapstructure:"initial_backoff"`
	// MaxBackoff caps the wait between attempts; at least InitialBackoff.
	MaxBackoff time.Duration `mapstructure:"max_backoff"`
}

// Bounds of Consumer.MaxBufferedBytes. Below the minimum a share per
// partition would hold hardly one typical large record (and a bare number is
// easily meant as MiB); above the maximum the budget bounds nothing a
// machine has.
const (
	DefaultMaxBufferedBytes = 64 * MiB
	MinMaxBufferedBytes     = 1 * MiB
	MaxMaxBufferedBytes     = 16 * GiB
)

// MaxHashBytes bounds Handler.Bytes: a gibibyte per record is already
// minutes of CPU; more is a typo.
const MaxHashBytes = 1 << 30

// Handler says what is done with each record.
type Handler struct {
	// Type selects the handler implementation.
	Type HandlerType `mapstructure:"type"`
	// URL is the endpoint records are POSTed to (HandlerHTTP only).
	URL string `mapstructure:"url"`
	// Target is the gRPC service's address (HandlerGRPC only), in gRPC's
	// name syntax: host:port, dns:///host:port, unix:///path.
	Target string `mapstructure:"target"`
	// Timeout bounds one HTTP request or gRPC call (its deadline).
	Timeout time.Duration `mapstructure:"timeout"`
	// Duration is the simulated work per record (HandlerSleep only).
	Duration time.Duration `mapstructure:"duration"`
	// Bytes is how many bytes are hashed per record (HandlerHash only).
	Bytes int `mapstructure:"bytes"`
	// Headers are static request headers (HandlerHTTP; HandlerGRPC sends
	// them as call metadata, names in lower case), e.g. an Authorization
	// header from a mounted secret. Their values are never logged or shown.
	Headers []HTTPHeader `mapstructure:"headers"`
	// Encoding is how keys and values appear in a batch request's body
	// (HandlerHTTP with batch.max_records above 1): base64, the default,
	// or utf8 (as JSON strings when they are valid UTF-8, else in base64
	// under key_base64 and value_base64).
	Encoding Encoding `mapstructure:"encoding"`
	// Response is what turbo does with a successful answer (HandlerHTTP and
	// HandlerGRPC): ignore, the default (empty too), or outputs: the answer
	// lists the records to write for the record (the consumer's output
	// block says where they may go).
	Response Response `mapstructure:"response"`
	// TLS is how the handler's server is checked and how turbo proves
	// itself to it (HandlerHTTP and HandlerGRPC): ca_file, cert_file and
	// key_file (mTLS), server_name, insecure_skip_verify. For HandlerHTTP
	// an https:// URL turns TLS on by itself and enabled is refused; for
	// HandlerGRPC any of its keys turns TLS on (enabled: true alone: the
	// system's roots).
	TLS TLS `mapstructure:"tls"`
}

// Response is what turbo reads from a handler's successful answer.
type Response string

const (
	ResponseIgnore  Response = "ignore"
	ResponseOutputs Response = "outputs"
)

// Encoding is how the http handler writes bytes into a JSON batch body.
type Encoding string

const (
	EncodingBase64 Encoding = "base64"
	EncodingUTF8   Encoding = "utf8"
)

// HTTPHeader is one static request header of the http handler. Its value
// comes from exactly one of Value, ValueEnv and ValueFile; Prefix goes in
// front of it ("Bearer ").
type HTTPHeader struct {
	// Name is the header's name, e.g. Authorization.
	Name string `mapstructure:"name"`
	// Value is the header's value, written in the file.
	Value Secret `mapstructure:"value"`
	// ValueEnv names an environment variable read at start.
	ValueEnv string `mapstructure:"value_env"`
	// ValueFile is a file read at start and again when it changes (looked
	// at once a second at most), as a rotated secret is: trailing line
	// breaks are dropped, at most 64 KiB, not empty.
	ValueFile string `mapstructure:"value_file"`
	// Prefix goes in front of the value, e.g. "Bearer ".
	Prefix string `mapstructure:"prefix"`
}

// Log configures the process logger.
type Log struct {
	// Level is the minimum level written.
	Level LogLevel `mapstructure:"level"`
	// Format is the output encoding.
	Format LogFormat `mapstructure:"format"`
}

// ConcurrencyMode says how many handler calls a consumer keeps in flight.
type ConcurrencyMode string

// Concurrency modes.
const (
	ConcurrencyFixed    ConcurrencyMode = "fixed"
	ConcurrencyAdaptive ConcurrencyMode = "adaptive"
)

// Adaptive reports whether the concurrency limit adapts to the downstream.
func (c *Consumer) Adaptive() bool { return c.ConcurrencyMode == ConcurrencyAdaptive }

// MinConcurrency is ConcurrencyMin with 0 meaning 1.
func (c *Consumer) MinConcurrency() int { return max(1, c.ConcurrencyMin) }

// Ordering says which records of a consumer must be handled sequentially.
type Ordering string

// Orderings.
const (
	// OrderingKey handles records with the same key one after another;
	// different keys run in parallel.
	OrderingKey Ordering = "key"
	// OrderingPartition handles the records of one partition in order.
	OrderingPartition Ordering = "partition"
	// OrderingUnordered handles every record independently.
	OrderingUnordered Ordering = "unordered"
)

// OnFailure is what happens to a record whose handling has failed for good:
// its attempts ran out, or the handler reported a permanent error.
type OnFailure string

// Failure policies.
const (
	// OnFailureFail fails the consumer's actor tree, which restarts after
	// a backoff; the record was not committed, so it comes again.
	OnFailureFail OnFailure = "fail"
	// OnFailureSkip gives the record up and carries on as if it had been
	// handled.
	OnFailureSkip OnFailure = "skip"
	// OnFailureDLQ writes the record to Consumer.DLQTopic and carries on.
	OnFailureDLQ OnFailure = "dlq"
)

// InitialOffset is where a group without committed offsets starts.
type InitialOffset string

// Initial offsets.
const (
	// OffsetOldest starts at the oldest retained record.
	OffsetOldest InitialOffset = "oldest"
	// OffsetNewest starts after the last record, ignoring the backlog.
	OffsetNewest InitialOffset = "newest"
)

// HandlerType selects a record handler implementation.
type HandlerType string

// Handler types.
const (
	// HandlerHTTP POSTs each record to Handler.URL.
	HandlerHTTP HandlerType = "http"
	// HandlerNoop acknowledges records without doing anything.
	HandlerNoop HandlerType = "noop"
	// HandlerLog writes each record to the log.
	HandlerLog HandlerType = "log"
	// HandlerSleep simulates work by sleeping Handler.Duration per record.
	HandlerSleep HandlerType = "sleep"
	// HandlerHash simulates CPU-bound work: SHA-256 over Handler.Bytes bytes
	// per record.
	HandlerHash HandlerType = "hash"
	// HandlerGRPC calls the RecordHandler service (proto/handler.proto) at
	// Handler.Target.
	HandlerGRPC HandlerType = "grpc"
	// HandlerCopy writes each record (key, value, headers) to the
	// consumer's output.topic: a topic copied, or re-partitioned by key,
	// with the output block's guarantees (exactly once when asked).
	HandlerCopy HandlerType = "copy"
)

// LogLevel is the minimum log level written.
type LogLevel string

// Log levels.
const (
	LogDebug LogLevel = "debug"
	LogInfo  LogLevel = "info"
	LogWarn  LogLevel = "warn"
	LogError LogLevel = "error"
)

// LogFormat is the log output encoding.
type LogFormat string

// Log formats.
const (
	// LogConsole is human-readable output.
	LogConsole LogFormat = "console"
	// LogJSON is one JSON object per line.
	LogJSON LogFormat = "json"
)

// Default returns the default configuration, with no consumers. Go code
// that builds a configuration starts here and appends DefaultConsumer values.
func Default() Config {
	return Config{
		Kafka: Kafka{
			Brokers:       []string{"127.0.0.1:9092"},
			ClientID:      "turbo",
			Version:       "3.6.0",
			Client:        ClientSarama,
			GroupProtocol: GroupClassic,
			SASL:          SASL{OAuth: OAuth{AuthStyle: AuthStyleHeader}},
			Embedded: Embedded{
				Partitions: 8,
				Seed:       Seed{Keys: 100},
			},
		},
		ShutdownTimeout: 30 * time.Second,
		Log:             Log{Level: LogInfo, Format: LogConsole},
		Swarm:           DefaultSwarm(),
	}
}

// DefaultConsumer returns a consumer named name with every default applied
// (Group is name). Topics is nil: the caller must set it.
func DefaultConsumer(name string) Consumer {
	return Consumer{
		Name:          name,
		Group:         name,
		InitialOffset: OffsetOldest,
		Ordering:      OrderingKey,
		Concurrency:   16,
		// A ceiling: the read-ahead sizes itself to about a second of work
		// (at least 1,000 records), so this bounds fast handlers only.
		MaxBuffered: 20_000,
		// 64 MiB: what bounds memory once records are large (20,016 records
		// of 3 KiB).
		MaxBufferedBytes: DefaultMaxBufferedBytes,
		CommitInterval:   time.Second,
		MetadataRefresh:  time.Minute,
		MaxPartitions:    DefaultMaxPartitions,
		Handler: Handler{
			Type:    HandlerNoop,
			Timeout: 10 * time.Second,
		},
		Retry: Retry{
			MaxAttempts:    3,
			InitialBackoff: 100 * time.Millisecond,
			MaxBackoff:     10 * time.Second,
		},
		OnFailure:           OnFailureFail,
		CommitMetadataBytes: 4000,
		Batch:               Batch{MaxRecords: 1},
		Output:              Output{MaxPerRecord: DefaultOutputsPerRecord, MaxBytes: DefaultOutputBytes},
	}
}

// DefaultMaxPartitions is Consumer.MaxPartitions's default: the breadth
// turbo is measured at (64 topics of 64 partitions); a pattern that took
// 8,000 partitions held 402 MB.
const DefaultMaxPartitions = 4096

// PartitionCap is MaxPartitions, or its default when 0.
func (c Consumer) PartitionCap() int {
	if c.MaxPartitions == 0 {
		return DefaultMaxPartitions
	}
	return c.MaxPartitions
}

// ApplyDefaults fills the optional consumer fields whose zero value means
// "use the default": today only Group, which defaults to Name. Other zero
// values are left alone on purpose, because a zero there (concurrency 0,
// commit_interval 0) is a mistake that Validate should report rather than
// something to paper over.
func (c *Config) ApplyDefaults() {
	for i := range c.Consumers {
		if c.Consumers[i].Group == "" {
			c.Consumers[i].Group = c.Consumers[i].Name
		}
	}
}

// ExcludeDeadLetters applies the one rule between consumers: every
// consumer's dead-letter topic joins every consumer's exclude_topics, so
// that no topic pattern ever reads a dead-letter topic, whoever's — and
// --exit-on-idle, which judges what each consumer reads, never waits for
// one. Load applies it after Validate (so an error about a dead-letter
// topic names dlq_topic); it is idempotent. A program that builds several
// consumers in Go calls it on the whole configuration.
func (c *Config) ExcludeDeadLetters() {
	var deadLetters []string
	for _, cc := range c.Consumers {
		if cc.DLQTopic != "" && !slices.Contains(deadLetters, cc.DLQTopic) {
			deadLetters = append(deadLetters, cc.DLQTopic)
		}
	}
	for i := range c.Consumers {
		cc := &c.Consumers[i]
		for _, t := range deadLetters {
			if !slices.Contains(cc.ExcludeTopics, t) {
				cc.ExcludeTopics = append(cc.ExcludeTopics, t)
			}
		}
	}
}
