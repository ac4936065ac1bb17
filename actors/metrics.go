package actors

import (
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/turbokafka/turbo/actors/kafkanet"
)

// connErrorKind sorts the failed attempts to connect to Kafka, for
// turbo_kafka_connection_errors_total.
type connErrorKind int

const (
	connUnreachable connErrorKind = iota // no answer: the broker is down, or not at that address
	connTLS                              // TLS refused: certificates, or TLS on a plaintext listener
	connAuth                             // SASL refused: credentials, mechanism, OAuth token
	connConfig                           // a secret or certificate file went bad
	numConnErrorKinds
)

var connErrorKindNames = [numConnErrorKinds]string{"unreachable", "tls", "auth", "config"}

// refusalKind sorts a connection failure: nil is an unreachable broker
// (kafkanet.Explain found no refusal).
func refusalKind(r *kafkanet.Refusal) connErrorKind {
	switch {
	case r == nil:
		return connUnreachable
	case strings.HasPrefix(r.Cause, "TLS"):
		return connTLS
	case strings.HasPrefix(r.Cause, "kafka.") && strings.Contains(r.Cause, "_file"):
		return connConfig
	default:
		return connAuth
	}
}

func (s *consumerStats) connError(k connErrorKind) { s.connErrs[k].Add(1) }

// Histogram buckets, in seconds. Handler times span a no-op (microseconds)
// to a slow downstream (a minute); commits are a round trip to the group
// coordinator.
var (
	handlerBuckets = []float64{.0001, .00025, .0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60}
	commitBuckets  = []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10}
)

// enableHistograms makes the consumer's histograms: from then on every
// handler attempt, every record's wait in the buffer and every commit is
// observed (a lock-free atomic update, no allocation).
func (s *consumerStats) enableHistograms(consumer string) {
	labels := prometheus.Labels{"consumer": consumer}
	s.handlerTime = newHistogram("turbo_handler_duration_seconds", "Time one handler attempt took.", handlerBuckets, labels)
	s.waitTime = newHistogram("turbo_buffer_wait_seconds",
		"Time a record waited between its arrival from Kafka and the start of its first attempt.", handlerBuckets, labels)
	s.commitTime = newHistogram("turbo_commit_duration_seconds",
		"Time an offset commit took (a round trip to the group coordinator).", commitBuckets, labels)
	s.txnTime = newHistogram("turbo_transaction_commit_duration_seconds",
		"Time committing a transaction took (output.exactly_once): its offsets, the flush of its outputs, and its end.", commitBuckets, labels)
}

// observeTransaction counts a committed transaction, and records how long
// committing it took when histograms are on.
func (s *consumerStats) observeTransaction(start time.Time) {
	s.txns.Add(1)
	if s.txnTime != nil {
		s.txnTime.shard(0).Observe(time.Since(start).Seconds()) // one feed goroutine
	}
}

// observeCommit records a commit's duration when histograms are on.
func (s *consumerStats) observeCommit(start time.Time) {
	if s.commitTime != nil {
		s.commitTime.shard(0).Observe(time.Since(start).Seconds()) // one committer
	}
}

// Collector returns the consumer's Prometheus metrics, every series
// labelled consumer=<name>: counters and gauges read from its live
// counters when scraped (nothing is added to the record path), the
// per-partition gauges, and — when Options.Metrics is set — the handler,
// buffer-wait and commit duration histograms. Register it in a registry:
// `turbo run` serves it on http.listen's /metrics.
func (c *Consumer) Collector() prometheus.Collector { return newConsumerCollector(c.name, c.stats) }

type metricDesc struct {
	d    *prometheus.Desc
	kind prometheus.ValueType
	val  func(*Snapshot) float64
}

type consumerCollector struct {
	stats   *consumerStats
	metrics []metricDesc
	conn    *prometheus.Desc
	ready   *prometheus.Desc
	part    []partitionDesc
}

type partitionDesc struct {
	d   *prometheus.Desc
	val func(*PartitionStats, time.Time) float64
}

func newConsumerCollector(name string, s *consumerStats) *consumerCollector {
	labels := prometheus.Labels{"consumer": name}
	desc := func(fq, help string, kind prometheus.ValueType, val func(*Snapshot) float64) metricDesc {
		return metricDesc{prometheus.NewDesc(fq, help, nil, labels), kind, val}
	}
	counter := func(fq, help string, val func(*Snapshot) int64) metricDesc {
		return desc(fq, help, prometheus.CounterValue, func(s *Snapshot) float64 { return float64(val(s)) })
	}
	gauge := func(fq, help string, val func(*Snapshot) int64) metricDesc {
		return desc(fq, help, prometheus.GaugeValue, func(s *Snapshot) float64 { return float64(val(s)) })
	}
	part := func(fq, help string, val func(*PartitionStats, time.Time) float64) partitionDesc {
		return partitionDesc{prometheus.NewDesc(fq, help, []string{"topic", "partition"}, labels), val}
	}
	return &consumerCollector{
		stats: s,
		metrics: []metricDesc{
			counter("turbo_records_fetched_total", "Records received from Kafka.", func(s *Snapshot) int64 { return s.Fetched }),
			counter("turbo_records_processed_total", "Records whose handler succeeded.", func(s *Snapshot) int64 { return s.Processed }),
			counter("turbo_handler_failures_total", "Failed handler attempts (errors, panics, timeouts).", func(s *Snapshot) int64 { return s.Failed }),
			counter("turbo_retries_total", "Failed attempts scheduled again.", func(s *Snapshot) int64 { return s.Retries }),
			counter("turbo_records_skipped_total", "Records given up on and skipped (on_failure: skip).", func(s *Snapshot) int64 { return s.Skipped }),
			counter("turbo_records_dead_lettered_total", "Records written to the dead-letter topic.", func(s *Snapshot) int64 { return s.Dead }),
			counter("turbo_outputs_written_total", "Output records the brokers acknowledged.", func(s *Snapshot) int64 { return s.Outputs }),
			counter("turbo_output_errors_total", "Output writes that failed (each restarts the consumer).", func(s *Snapshot) int64 { return s.OutputErrors }),
			counter("turbo_transactions_committed_total", "Transactions committed (output.exactly_once): outputs with the input offsets they answer.", func(s *Snapshot) int64 { return s.Transactions }),
			counter("turbo_transactions_aborted_total", "Transactions aborted (each restarts the consumer).", func(s *Snapshot) int64 { return s.TransactionsAborted }),
			counter("turbo_records_inherited_total", "Records not run again: an earlier owner of the partition had finished them.", func(s *Snapshot) int64 { return s.Inherited }),
			counter("turbo_committed_records_total", "Records covered by committed offsets.", func(s *Snapshot) int64 { return s.Committed }),
			counter("turbo_commits_total", "Offset commits sent.", func(s *Snapshot) int64 { return s.Commits }),
			counter("turbo_commit_metadata_overflows_total", "Times a partition's offsets finished above its committed one began to overflow commit_metadata_bytes (the commit records the lowest).", func(s *Snapshot) int64 { return s.MetaOverflows }),
			gauge("turbo_commit_metadata_unrecorded_offsets", "Offsets finished above the committed ones that the commit metadata does not hold now: a next owner of their partitions would run them again.", func(s *Snapshot) int64 { return s.MetaUnrecorded }),
			counter("turbo_commit_errors_total", "Errors Kafka returned for the consumer group (mostly refused commits).", func(s *Snapshot) int64 { return s.CommitErrs }),
			counter("turbo_watermark_refresh_errors_total", "Failed refreshes of the high watermarks of partitions not being read (their lag may be stale meanwhile).", func(s *Snapshot) int64 { return s.WatermarkErrs }),
			counter("turbo_rebalances_total", "Consumer group sessions started (each rebalance starts one).", func(s *Snapshot) int64 { return s.Rebalances }),
			counter("turbo_partitions_assigned_total", "Partitions assigned to the consumer.", func(s *Snapshot) int64 { return s.Gained }),
			counter("turbo_partitions_revoked_total", "Partitions revoked from the consumer or lost with its session.", func(s *Snapshot) int64 { return s.Released }),
			counter("turbo_tree_restarts_total", "Actor tree restarts after a failure.", func(s *Snapshot) int64 { return s.Restarts }),
			desc("turbo_rate_limit_wait_seconds_total", "Time the rate limit (rate.limit) held runnable records back from free runners.",
				prometheus.CounterValue, func(s *Snapshot) float64 { return s.RateWait.Seconds() }),
			counter("turbo_pushbacks_total", "Runner turns in which the downstream pushed back (HTTP 429 or 503, ErrBackpressure).", func(s *Snapshot) int64 { return s.Pushbacks }),
			gauge("turbo_concurrency_limit", "Handler calls allowed in flight now: concurrency, or the adaptive limit (concurrency_mode adaptive).", func(s *Snapshot) int64 { return s.Limit }),
			gauge("turbo_in_flight_records", "Records in a handler now.", func(s *Snapshot) int64 { return s.InFlight }),
			gauge("turbo_buffered_records", "Records fetched and not finished that are not in a handler (waiting for a runner, a retry or their key): the sum of turbo_partition_buffered_records.", func(s *Snapshot) int64 { return s.Buffered }),
			gauge("turbo_paused_partitions", "Partitions not fetched now: their share of the buffer is used up.", func(s *Snapshot) int64 { return s.Paused }),
			gauge("turbo_assigned_partitions", "Partitions assigned now.", func(s *Snapshot) int64 { return s.Assigned }),
			gauge("turbo_consumer_paused", "1 while the consumer is paused by its operator (Pause, POST /consumers/{name}/pause), else 0.", func(s *Snapshot) int64 {
				if s.Suspended {
					return 1
				}
				return 0
			}),
		},
		conn: prometheus.NewDesc("turbo_kafka_connection_errors_total", "Failed attempts to connect to Kafka, by kind (unreachable, tls, auth, config).",
			[]string{"kind"}, labels),
		ready: prometheus.NewDesc("turbo_consumer_ready", "1 while the consumer is in a group session and Kafka does not refuse it (GET /readyz), else 0.", nil, labels),
		part: []partitionDesc{
			part("turbo_partition_committed_offset", "The offset committed for the partition (the next record to read); -1 before the first commit.",
				func(p *PartitionStats, _ time.Time) float64 { return float64(p.Committed) }),
			part("turbo_partition_high_watermark", "The partition's high watermark as last known: from the last fetch, or asked of the brokers every few seconds while the partition is not fetched; -1 before it is known.",
				func(p *PartitionStats, _ time.Time) float64 { return float64(p.HighWatermark) }),
			part("turbo_partition_lag", "Records between the committed offset and the high watermark.",
				func(p *PartitionStats, _ time.Time) float64 { return float64(p.Lag) }),
			part("turbo_partition_oldest_unfinished_age_seconds", "How long the partition's oldest unfinished record has held its committed offset (0 when none): since it arrived or, if later, since the records before it finished.",
				func(p *PartitionStats, now time.Time) float64 { return unfinishedAge(p, now).Seconds() }),
			part("turbo_partition_in_flight_records", "The partition's records in a handler now.",
				func(p *PartitionStats, _ time.Time) float64 { return float64(p.InFlight) }),
			part("turbo_partition_buffered_records", "The partition's records fetched and not finished that are not in a handler (waiting for a runner, a retry or their key).",
				func(p *PartitionStats, _ time.Time) float64 { return float64(p.Buffered) }),
			part("turbo_partition_paused", "1 while the partition is not fetched (its share of the buffer is used up), else 0.",
				func(p *PartitionStats, _ time.Time) float64 { return bool01(p.Paused) }),
		},
	}
}

// unfinishedAge is how long the partition's oldest unfinished record has
// waited; 0 when none.
func unfinishedAge(p *PartitionStats, now time.Time) time.Duration {
	if p.OldestUnfinished.IsZero() {
		return 0
	}
	return max(now.Sub(p.OldestUnfinished), 0)
}

func bool01(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

func (cc *consumerCollector) histograms() []*histogram {
	if cc.stats.handlerTime == nil {
		return nil
	}
	return []*histogram{cc.stats.handlerTime, cc.stats.waitTime, cc.stats.commitTime, cc.stats.txnTime}
}

// Describe implements prometheus.Collector.
func (cc *consumerCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, m := range cc.metrics {
		ch <- m.d
	}
	ch <- cc.conn
	ch <- cc.ready
	for _, p := range cc.part {
		ch <- p.d
	}
	for _, h := range cc.histograms() {
		h.Describe(ch)
	}
}

// Collect implements prometheus.Collector.
func (cc *consumerCollector) Collect(ch chan<- prometheus.Metric) {
	s, parts := cc.stats.status() // turbo_buffered_records is the sum of the partitions'
	for _, m := range cc.metrics {
		ch <- prometheus.MustNewConstMetric(m.d, m.kind, m.val(&s))
	}
	for k := range numConnErrorKinds {
		ch <- prometheus.MustNewConstMetric(cc.conn, prometheus.CounterValue, float64(cc.stats.connErrs[k].Load()), connErrorKindNames[k])
	}
	ch <- prometheus.MustNewConstMetric(cc.ready, prometheus.GaugeValue, bool01(readiness(s).OK))
	now := time.Now()
	for _, p := range parts {
		partition := strconv.Itoa(int(p.Partition))
		for _, d := range cc.part {
			ch <- prometheus.MustNewConstMetric(d.d, prometheus.GaugeValue, d.val(&p, now), p.Topic, partition)
		}
	}
	for _, h := range cc.histograms() {
		h.Collect(ch)
	}
}
