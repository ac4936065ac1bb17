package config

import (
	"fmt"
	"net/url"
	"path/filepath"
	"regexp"
	"strings"
	"time"
)

var (
	versionPattern = regexp.MustCompile(`^(0|[1-9]\d{0,2})\.(\d{1,3})\.(\d{1,3})(?:\.(\d{1,3}))?$`)
	// Kafka's own limit for group.instance.id.
	instanceIDPattern = regexp.MustCompile(`^[0-9a-zA-Z._-]{1,240}$`)
	// Names end up in metric labels, actor names and CLI flags, so they are
	// kept to characters that need no quoting anywhere.
	namePattern = regexp.MustCompile(`^[0-9a-zA-Z._-]+$`)
	// Transactional ids: room left for a swarm node's -n<index>.
	transactionalIDPattern = regexp.MustCompile(`^[0-9a-zA-Z._-]{1,200}$`)
	// Kafka's own rule for topic names ("." and ".." are refused apart).
	topicPattern = regexp.MustCompile(`^[0-9a-zA-Z._-]{1,249}$`)
)

// Bounds of Consumer.CommitMetadataBytes when it is not 0 (off). Below the
// minimum the record of finished offsets would hardly hold anything; the
// maximum is Kafka's default offset.metadata.max.bytes.
const (
	minCommitMetadataBytes = 64
	maxCommitMetadataBytes = 4096
)

// Validate checks the configuration and returns its first problem as a
// *FieldError naming the key, checking kafka, then the consumers in order,
// then shutdown_timeout, then log, then swarm, http and tracing. It does not modify c: call ApplyDefaults
// first on a configuration built in code with empty groups.
func (c *Config) Validate() error {
	if err := c.Kafka.validate(); err != nil {
		return err
	}
	if len(c.Consumers) == 0 {
		return fieldErr("consumers", "at least one consumer is required")
	}
	if len(c.Consumers) > MaxConsumers {
		return fieldErr("consumers", fmt.Sprintf("at most %d consumers (got %d)", MaxConsumers, len(c.Consumers)))
	}
	seen := make(map[string]int, len(c.Consumers))
	for i := range c.Consumers {
		key := fmt.Sprintf("consumers[%d]", i)
		cons := &c.Consumers[i]
		if err := cons.validate(key); err != nil {
			return err
		}
		if err := cons.Output.validateExactlyOnce(key+".output", &c.Kafka); err != nil {
			return err
		}
		if j, dup := seen[cons.Name]; dup {
			return fieldErr(key+".name", fmt.Sprintf("duplicate consumer name %q (also consumers[%d])", cons.Name, j))
		}
		seen[cons.Name] = i
	}
	if err := durRange("shutdown_timeout", c.ShutdownTimeout, MinShutdownTimeout, MaxShutdownTimeout); err != nil {
		return err
	}
	if err := oneOf("log.level", c.Log.Level, LogDebug, LogInfo, LogWarn, LogError); err != nil {
		return err
	}
	if err := oneOf("log.format", c.Log.Format, LogConsole, LogJSON); err != nil {
		return err
	}
	if err := c.Swarm.validate(); err != nil {
		return err
	}
	if err := c.HTTP.validate(); err != nil {
		return err
	}
	return c.Tracing.validate()
}

func (k *Kafka) validate() error {
	if len(k.Brokers) == 0 {
		return fieldErr("kafka.brokers", `at least one broker is required (or ["embedded"])`)
	}
	if len(k.Brokers) > MaxBrokers {
		return fieldErr("kafka.brokers", fmt.Sprintf("at most %d brokers (got %d)", MaxBrokers, len(k.Brokers)))
	}
	for i, b := range k.Brokers {
		key := fmt.Sprintf("kafka.brokers[%d]", i)
		switch {
		case strings.TrimSpace(b) == "":
			return fieldErr(key, "must not be empty")
		case b == EmbeddedBroker && len(k.Brokers) > 1:
			return fieldErr(key, fmt.Sprintf("%q must be the only broker", EmbeddedBroker))
		case b == EmbeddedBroker:
		case strings.EqualFold(b, EmbeddedBroker):
			// Not normalised: keys and values are case-sensitive everywhere
			// else, and a host named EMBEDDED would be ambiguous.
			return fieldErr(key, fmt.Sprintf("the embedded broker is spelt %q, in lower case (got %s)", EmbeddedBroker, quoteValue(b)))
		case !validHostPort(b, false):
			// sarama retried such an address forever.
			return fieldErr(key, fmt.Sprintf("must be host:port with a port from 1 to 65535, or the single entry %q (got %s)", EmbeddedBroker, quoteValue(b)))
		}
	}
	if v, ok := parseVersion(k.Version); !ok {
		return fieldErr("kafka.version", fmt.Sprintf("must be a Kafka version such as 3.6.0, at least 2.4.0 (got %s)", quoteValue(k.Version)))
	} else if versionLess(v, minCooperativeVersion) {
		return fieldErr("kafka.version", fmt.Sprintf("must be at least 2.4.0, which cooperative-sticky rebalancing needs (got %s)", quoteValue(k.Version)))
	}
	if err := oneOf("kafka.client", k.Client, ClientSarama, ClientFranz); err != nil {
		return err
	}
	if err := oneOf("kafka.group_protocol", k.GroupProtocol, GroupClassic, GroupConsumer); err != nil {
		return err
	}
	if k.GroupProtocol == GroupConsumer && k.Client != ClientFranz {
		return fieldErr("kafka.group_protocol", fmt.Sprintf("consumer needs kafka.client: %s (sarama speaks only the classic protocol)", ClientFranz))
	}
	if id := k.GroupInstanceID; id != "" && (!instanceIDPattern.MatchString(id) || id == "." || id == "..") {
		return fieldErr("kafka.group_instance_id", fmt.Sprintf("must be 1 to 240 characters of [0-9a-zA-Z._-], not . or .. (got %s)", quoteValue(id)))
	}
	if err := k.TLS.validate(k.IsEmbedded(), time.Now()); err != nil {
		return err
	}
	if err := k.SASL.validate(k.IsEmbedded()); err != nil {
		return err
	}
	// The embedded section is checked even when unused, so a mistake there
	// does not surface only on the day someone switches to ["embedded"].
	e := &k.Embedded
	if err := intRange("kafka.embedded.partitions", e.Partitions, 1, MaxEmbeddedPartitions); err != nil {
		return err
	}
	if err := intRange("kafka.embedded.seed.records", e.Seed.Records, 0, MaxSeedRecords); err != nil {
		return err
	}
	if e.Seed.Topic != "" && !validTopic(e.Seed.Topic) {
		return topicErr("kafka.embedded.seed.topic", e.Seed.Topic)
	}
	if e.Seed.Records > 0 {
		if e.Seed.Topic == "" {
			return fieldErr("kafka.embedded.seed.topic", "is required when seed.records > 0")
		}
		if e.Seed.Keys < 1 {
			return fieldErr("kafka.embedded.seed.keys", fmt.Sprintf("must be >= 1 when seed.records > 0 (got %d)", e.Seed.Keys))
		}
	}
	if e.Seed.Keys > MaxSeedKeys {
		return intRange("kafka.embedded.seed.keys", e.Seed.Keys, 1, MaxSeedKeys)
	}
	return nil
}

func (c *Consumer) validate(key string) error {
	switch {
	case c.Name == "":
		return fieldErr(key+".name", "is required")
	case !namePattern.MatchString(c.Name):
		return fieldErr(key+".name", fmt.Sprintf("must contain only [0-9a-zA-Z._-] (got %s)", quoteValue(c.Name)))
	case c.Group == "":
		return fieldErr(key+".group", "must not be empty (ApplyDefaults sets it to the name)")
	case len(c.Topics) == 0:
		return fieldErr(key+".topics", "at least one topic is required")
	case len(c.Topics) > MaxTopics:
		return fieldErr(key+".topics", fmt.Sprintf("at most %d topics (got %d)", MaxTopics, len(c.Topics)))
	}
	for i, t := range c.Topics {
		k := fmt.Sprintf("%s.topics[%d]", key, i)
		if strings.TrimSpace(t) == "" {
			return fieldErr(k, "must not be empty")
		}
		if IsTopicPattern(t) {
			if _, err := compileTopicPattern(t); err != nil {
				return fieldErr(k, err.Error())
			}
			continue
		}
		if !validTopic(t) {
			// `turbo dev` created such topics, and Kafka refuses them.
			return fieldErr(k, fmt.Sprintf("must be a Kafka topic name (1 to 249 characters of [a-zA-Z0-9._-], not . or ..) or a /regular expression/ (got %s)", quoteValue(t)))
		}
	}
	if len(c.ExcludeTopics) > MaxTopics {
		return fieldErr(key+".exclude_topics", fmt.Sprintf("at most %d topics (got %d)", MaxTopics, len(c.ExcludeTopics)))
	}
	for i, t := range c.ExcludeTopics {
		if !validTopic(t) {
			return topicErr(fmt.Sprintf("%s.exclude_topics[%d]", key, i), t)
		}
	}
	if err := durRange(key+".metadata_refresh", c.MetadataRefresh, MinMetadataRefresh, MaxDuration); err != nil {
		return err
	}
	if n := c.MaxPartitions; n != 0 && (n < 1 || n > MaxSubscribedPartitions) {
		return fieldErr(key+".max_partitions", fmt.Sprintf("must be 0 (the default, %d) or between 1 and %d (got %d)", DefaultMaxPartitions, MaxSubscribedPartitions, n))
	}
	if err := oneOf(key+".initial_offset", c.InitialOffset, OffsetOldest, OffsetNewest); err != nil {
		return err
	}
	if err := oneOf(key+".ordering", c.Ordering, OrderingKey, OrderingPartition, OrderingUnordered); err != nil {
		return err
	}
	if err := intRange(key+".concurrency", c.Concurrency, 1, MaxConcurrency); err != nil {
		return err
	}
	if c.ConcurrencyMode != "" {
		if err := oneOf(key+".concurrency_mode", c.ConcurrencyMode, ConcurrencyFixed, ConcurrencyAdaptive); err != nil {
			return err
		}
	}
	if err := intRange(key+".concurrency_min", c.ConcurrencyMin, 0, c.Concurrency); err != nil {
		return err
	}
	if c.ConcurrencyMin != 0 && !c.Adaptive() {
		return fieldErr(key+".concurrency_min", fmt.Sprintf("needs %s.concurrency_mode: adaptive (a fixed concurrency has no minimum)", key))
	}
	if err := intRange(key+".max_buffered", c.MaxBuffered, 0, MaxBuffered); err != nil {
		return err
	}
	if b := c.MaxBufferedBytes; b < MinMaxBufferedBytes || b > MaxMaxBufferedBytes {
		return fieldErr(key+".max_buffered_bytes", fmt.Sprintf("must be between %s and %s (got %s)", MinMaxBufferedBytes, MaxMaxBufferedBytes, b))
	}
	if err := durRange(key+".commit_interval", c.CommitInterval, MinCommitInterval, MaxDuration); err != nil {
		return err
	}
	if err := c.Handler.validate(key + ".handler"); err != nil {
		return err
	}
	if err := c.Retry.validate(key + ".retry"); err != nil {
		return err
	}
	if err := oneOf(key+".on_failure", c.OnFailure, OnFailureFail, OnFailureSkip, OnFailureDLQ); err != nil {
		return err
	}
	// A topic given while on_failure is not dlq is checked too, so a bad
	// name does not surface only on the day someone switches to dlq.
	switch {
	case c.DLQTopic == "" && c.OnFailure == OnFailureDLQ:
		return fieldErr(key+".dlq_topic", "required when on_failure is dlq")
	case c.DLQTopic != "" && !validTopic(c.DLQTopic):
		return topicErr(key+".dlq_topic", c.DLQTopic)
	}
	if t := c.MaxHandlerTime; t != 0 && (t < MinTimeout || t > MaxDuration) {
		return fieldErr(key+".max_handler_time", fmt.Sprintf("must be 0 (unlimited) or between %s and %s (got %s)", fmtDur(MinTimeout), fmtDur(MaxDuration), fmtDur(t)))
	}
	if n := c.CommitMetadataBytes; n != 0 && (n < minCommitMetadataBytes || n > maxCommitMetadataBytes) {
		return fieldErr(key+".commit_metadata_bytes", fmt.Sprintf("must be 0 (off) or %d to %d (got %d)", minCommitMetadataBytes, maxCommitMetadataBytes, n))
	}
	if err := c.Batch.validate(key+".batch", c.Concurrency+c.MaxBuffered); err != nil {
		return err
	}
	if err := c.Output.validate(key+".output", c.DLQTopic); err != nil {
		return err
	}
	// An endpoint's answers are read for outputs only when asked to: an
	// output block with answers ignored would write nothing, and outputs
	// read with nowhere to go would fail every record.
	remote := c.Handler.Type == HandlerHTTP || c.Handler.Type == HandlerGRPC
	switch {
	case c.Handler.Type == HandlerCopy && c.Output.Topic == "":
		return fieldErr(key+".output.topic", fmt.Sprintf("is required by the copy handler, which writes every record there (%s.output.topic)", key))
	case c.Handler.Response == ResponseOutputs && !c.Output.Enabled():
		return fieldErr(key+".handler.response", fmt.Sprintf("is outputs, but %s.output names no topic (output.topic or output.topics)", key))
	case remote && c.Output.Enabled() && c.Handler.Response != ResponseOutputs:
		return fieldErr(key+".output", fmt.Sprintf("is set, but the %s handler's answers are ignored: set %s.handler.response: outputs", c.Handler.Type, key))
	}
	return c.Rate.validate(key + ".rate")
}

// validate checks the output block; dlq is the consumer's dead-letter
// topic, which is no output topic (its records say why an input failed).
func (o *Output) validate(key, dlq string) error {
	if o.Topic != "" && !validTopic(o.Topic) {
		return topicErr(key+".topic", o.Topic)
	}
	if len(o.Topics) > MaxTopics {
		return fieldErr(key+".topics", fmt.Sprintf("at most %d topics (got %d)", MaxTopics, len(o.Topics)))
	}
	for i, t := range o.Topics {
		if !validTopic(t) {
			return topicErr(fmt.Sprintf("%s.topics[%d]", key, i), t)
		}
	}
	if dlq != "" && o.Allows(dlq) {
		return fieldErr(key, fmt.Sprintf("names the dead-letter topic %s as an output topic: write outputs elsewhere", quoteValue(dlq)))
	}
	if err := intRange(key+".max_per_record", o.MaxPerRecord, 1, MaxOutputsPerRecord); err != nil {
		return err
	}
	if b := o.MaxBytes; b < 1 || b > MaxOutputBytes {
		return fieldErr(key+".max_bytes", fmt.Sprintf("must be between 1 B and %s (got %s)", MaxOutputBytes, b))
	}
	if o.TransactionalID != "" {
		if !o.ExactlyOnce {
			return fieldErr(key+".transactional_id", "is set, but exactly_once is off: only a transactional producer has one")
		}
		if !transactionalIDPattern.MatchString(o.TransactionalID) {
			return fieldErr(key+".transactional_id", fmt.Sprintf("must be 1 to 200 letters, digits, '.', '_' or '-' (a swarm node appends its index) (got %s)", quoteValue(o.TransactionalID)))
		}
	}
	if o.ExactlyOnce && !o.Enabled() {
		return fieldErr(key+".exactly_once", fmt.Sprintf("is on, but %s names no topic (topic or topics): there is nothing to write exactly once", key))
	}
	return nil
}

// validateExactlyOnce checks what a transactional producer needs of the
// Kafka block: brokers from 2.5.0, which fence a zombie member's
// transactional commits by its generation (the sarama side is told the
// version; the franz-go side asks the brokers when it connects).
func (o *Output) validateExactlyOnce(key string, k *Kafka) error {
	if !o.ExactlyOnce || k.Client != ClientSarama {
		return nil
	}
	if v, ok := parseVersion(k.Version); ok && versionLess(v, minTransactionalVersion) {
		return fieldErr(key+".exactly_once", fmt.Sprintf("needs kafka.version 2.5.0 or later, whose brokers fence a stale member's transactional commits (got %s)", quoteValue(k.Version)))
	}
	return nil
}

// validate checks the batch block; room is what the consumer may hold at
// once (concurrency + max_buffered), which a batch must fit in.
func (b *Batch) validate(key string, room int) error {
	if err := intRange(key+".max_records", b.MaxRecords, 0, MaxBatchRecords); err != nil {
		return err
	}
	if b.MaxRecords > room {
		return fieldErr(key+".max_records", fmt.Sprintf("is %d, above concurrency + max_buffered (%d): a batch could never fill; raise max_buffered or lower max_records", b.MaxRecords, room))
	}
	if w := b.MaxWait; w != 0 && (w < MinTimeout || w > MaxBatchWait) {
		return fieldErr(key+".max_wait", fmt.Sprintf("must be 0 (no wait) or between %s and %s (got %s)", fmtDur(MinTimeout), fmtDur(MaxBatchWait), fmtDur(w)))
	}
	if b.MaxWait != 0 && b.Records() == 1 {
		return fieldErr(key+".max_wait", fmt.Sprintf("needs %s.max_records above 1: a batch of one record is always full", key))
	}
	if n := b.MaxBytes; n < 0 || n > MaxMaxBufferedBytes {
		return fieldErr(key+".max_bytes", fmt.Sprintf("must be 0 (no bound) or at most %s (got %d)", MaxMaxBufferedBytes, int64(n)))
	}
	return nil
}

func (r *Rate) validate(key string) error {
	// NaN fails every comparison: it is caught by asking for the valid range.
	if l := r.Limit; l != 0 && !(l >= MinRateLimit && l <= MaxRateLimit) {
		return fieldErr(key+".limit", fmt.Sprintf("must be 0 (no limit) or between %g and %d attempts per second (got %g)", MinRateLimit, MaxRateLimit, l))
	}
	if err := intRange(key+".burst", r.Burst, 0, MaxRateBurst); err != nil {
		return err
	}
	if r.Burst != 0 && r.Limit == 0 {
		return fieldErr(key+".burst", fmt.Sprintf("needs %s.limit: a burst of a rate without a limit bounds nothing", key))
	}
	return nil
}

func (r *Retry) validate(key string) error {
	if err := intRange(key+".max_attempts", r.MaxAttempts, 1, MaxAttempts); err != nil {
		return err
	}
	if err := durRange(key+".initial_backoff", r.InitialBackoff, MinTimeout, MaxDuration); err != nil {
		return err
	}
	if r.MaxBackoff < r.InitialBackoff || r.MaxBackoff > MaxDuration {
		return fieldErr(key+".max_backoff", fmt.Sprintf("must be between retry.initial_backoff (%s) and %s (got %s)", fmtDur(r.InitialBackoff), fmtDur(MaxDuration), fmtDur(r.MaxBackoff)))
	}
	return nil
}

func validTopic(t string) bool {
	return t != "." && t != ".." && topicPattern.MatchString(t)
}

func topicErr(key, t string) error {
	return fieldErr(key, fmt.Sprintf("must be a Kafka topic name: 1 to 249 characters of [a-zA-Z0-9._-], not . or .. (got %s)", quoteValue(t)))
}

func (h *Handler) validate(key string) error {
	if err := oneOf(key+".type", h.Type, HandlerHTTP, HandlerGRPC, HandlerNoop, HandlerLog, HandlerSleep, HandlerHash, HandlerCopy); err != nil {
		return err
	}
	if h.TLS.IsSet() && h.Type != HandlerHTTP && h.Type != HandlerGRPC {
		return fieldErr(key+".tls", fmt.Sprintf("is for handler types http and grpc only (the handler is %s)", h.Type))
	}
	if h.Target != "" && h.Type != HandlerGRPC {
		return fieldErr(key+".target", fmt.Sprintf("is for handler type grpc only (the handler is %s)", h.Type))
	}
	if h.Response != "" {
		if h.Type != HandlerHTTP && h.Type != HandlerGRPC {
			return fieldErr(key+".response", fmt.Sprintf("is for handler types http and grpc only (the handler is %s)", h.Type))
		}
		if err := oneOf(key+".response", h.Response, ResponseIgnore, ResponseOutputs); err != nil {
			return err
		}
	}
	if h.Encoding != "" && h.Type != HandlerHTTP && h.Type != HandlerGRPC {
		return fieldErr(key+".encoding", fmt.Sprintf("is for handler type http only (the handler is %s)", h.Type))
	}
	switch h.Type {
	case HandlerGRPC:
		if h.URL != "" {
			return fieldErr(key+".url", "is for handler type http; a grpc handler names its service with target")
		}
		if h.Target == "" || len(h.Target) > 1024 || strings.ContainsAny(h.Target, " \t\r\n") {
			return fieldErr(key+".target", fmt.Sprintf("is required for handler type grpc: host:port, dns:///host:port or unix:///path (got %s)", quoteValue(h.Target)))
		}
		if err := validateHeaders(key+".headers", h.Headers); err != nil {
			return err
		}
		if h.Encoding != "" {
			return fieldErr(key+".encoding", "is for handler type http (gRPC carries bytes as they are)")
		}
		if h.TLS.IsSet() {
			if err := h.TLS.validateFiles(key+".tls", time.Now()); err != nil {
				return err
			}
		}
		return durRange(key+".timeout", h.Timeout, MinTimeout, MaxDuration)
	case HandlerHTTP:
		if h.URL == "" {
			return fieldErr(key+".url", "is required for handler type http")
		}
		if socket, path, ok := UnixURL(h.URL); ok {
			if !filepath.IsAbs(socket) || len(socket) > maxSocketPath || !strings.HasPrefix(path, "/") {
				return fieldErr(key+".url", fmt.Sprintf("a unix socket URL is unix://<absolute socket path, at most %d bytes>:<request path from />, e.g. unix:///run/app.sock:/records (got %s)", maxSocketPath, quoteValue(h.URL)))
			}
		} else if u, err := url.Parse(h.URL); err != nil || (strings.ToLower(u.Scheme) != "http" && strings.ToLower(u.Scheme) != "https") ||
			u.Hostname() == "" || (u.Port() != "" && !validPort(u.Port())) {
			return fieldErr(key+".url", fmt.Sprintf("must be an absolute http:// or https:// URL with a host and, if given, a port from 1 to 65535, or unix:///path/to.sock:/path (got %s)", quoteValue(h.URL)))
		}
		if err := validateHeaders(key+".headers", h.Headers); err != nil {
			return err
		}
		if h.Encoding != "" {
			if err := oneOf(key+".encoding", h.Encoding, EncodingBase64, EncodingUTF8); err != nil {
				return err
			}
		}
		if err := h.validateTLS(key + ".tls"); err != nil {
			return err
		}
		return durRange(key+".timeout", h.Timeout, MinTimeout, MaxDuration)
	case HandlerSleep:
		if err := durRange(key+".duration", h.Duration, 0, MaxDuration); err != nil {
			return err
		}
	case HandlerHash:
		if h.Bytes <= 0 || h.Bytes > MaxHashBytes {
			return fieldErr(key+".bytes", fmt.Sprintf("must be between 1 and %d for handler type hash (got %d)", MaxHashBytes, h.Bytes))
		}
	}
	return nil
}

// validateTLS checks an http handler's tls block: only with an https://
// URL, without enabled (the scheme says it), and with good files.
func (h *Handler) validateTLS(key string) error {
	t := h.TLS
	switch {
	case !t.IsSet():
		return nil
	case t.Enabled:
		return fieldErr(key+".enabled", "leave it out: an https:// url turns TLS on (enabled is for kafka.tls)")
	case !strings.HasPrefix(strings.ToLower(h.URL), "https://"):
		return fieldErr(key, fmt.Sprintf("needs an https:// url (got %s)", quoteValue(h.URL)))
	}
	return t.validateFiles(key, time.Now())
}

func oneOf[T ~string](key string, v T, allowed ...T) error {
	names := make([]string, len(allowed))
	for i, a := range allowed {
		if v == a {
			return nil
		}
		names[i] = string(a)
	}
	return fieldErr(key, fmt.Sprintf("must be one of %s (got %s)", strings.Join(names, ", "), quoteValue(string(v))))
}

// Check validates a rate given at run time (a consumer retuned live), with
// the rules and the messages of the configuration's rate block.
func (r Rate) Check() error { return r.validate("rate") }
