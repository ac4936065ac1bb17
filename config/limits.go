package config

import (
	"fmt"
	"net"
	"strconv"
	"strings"
	"time"
)

// The bounds below are checked by Validate, so that every configuration it
// accepts can run: a review found values that passed validation and then ran
// out of memory (concurrency 1000000000), panicked (max_buffered
// 9223372036854775807: "makechan: size out of range"), burned a core
// (commit_interval 1ns) or killed every node (node_report_interval 1ns).
// Each maximum is far above real use and was measured to run, all at once:
// an embedded broker of MaxEmbeddedPartitions seeded with MaxSeedRecords
// over MaxSeedKeys, consumed by a consumer at MaxConcurrency and
// MaxBuffered with a dead-letter topic, ran to the end in 1.3 s at 195 MB
// resident. (With a million seed records and a million buffered it took
// 1.5 GB: the embedded broker, sarama's fetches and the buffer all hold
// records in memory.)
// The "Limits" table of config/README.md lists them; keep the two in step
// (config/REFERENCE.md is generated from these constants).
const (
	// MaxConcurrency bounds Consumer.Concurrency: a runner costs about
	// 1.4 KB, so 10,000 cost ~15 MB; 100,000 cost 140 MB for nothing a
	// process could use.
	MaxConcurrency = 10_000
	// MaxSubscribedPartitions bounds Consumer.MaxPartitions: Kafka's own
	// guidance for a whole cluster is about 200,000 partitions; a
	// consumer's share of a fetch and its per-partition state (about
	// 50 KB at 8,000) make 100,000 several GB.
	MaxSubscribedPartitions = 100_000
	// MaxBuffered bounds Consumer.MaxBuffered: ten records waiting for each
	// of MaxConcurrency runners. A buffered record costs its bytes plus
	// about 0.8 KB; a million small ones held 770 MB.
	MaxBuffered = 100_000
	// MaxEmbeddedPartitions bounds Embedded.Partitions (and `turbo dev
	// --partitions`): 10,000 partitions took the embedded broker 9 s and
	// 515 MB to serve one topic.
	MaxEmbeddedPartitions = 1_000
	// MaxSeedRecords bounds Seed.Records: demo records, which the embedded
	// broker keeps in memory (a million took 780 MB with 1,000 partitions).
	MaxSeedRecords = 100_000
	// MaxSeedKeys bounds Seed.Keys.
	MaxSeedKeys = 100_000
	// MaxAttempts bounds Retry.MaxAttempts: at the default max_backoff of
	// 10s, a million attempts is four months of retrying one record.
	MaxAttempts = 1_000_000
	// MaxRateBurst bounds Rate.Burst: attempts started at once, of which
	// max_buffered's bound is the most that can be waiting.
	MaxRateBurst = 100_000
	// MaxBatchRecords bounds Batch.MaxRecords: a call of more records than
	// this is a bulk load, not a batch, and is held in memory whole.
	MaxBatchRecords = 10_000
	// MaxBatchWait bounds Batch.MaxWait: records wait that long before
	// they start, and a revoked partition's drain with them.
	MaxBatchWait = 10 * time.Second
	// MaxOutputsPerRecord bounds Output.MaxPerRecord: a fan-out wider than
	// this belongs in a topic of its own, consumed again.
	MaxOutputsPerRecord = 10_000
	// DefaultOutputsPerRecord is Output.MaxPerRecord's default.
	DefaultOutputsPerRecord = 100
	// MaxOutputBytes bounds Output.MaxBytes: what a broker takes with its
	// message.max.bytes raised far above Kafka's 1 MiB default.
	MaxOutputBytes = 64 * MiB
	// DefaultOutputBytes is Output.MaxBytes's default: a record that fits
	// Kafka's default message.max.bytes with room for its framing.
	DefaultOutputBytes = MiB - 4*KiB
	// MaxHTTPHeaders bounds Handler.Headers.
	MaxHTTPHeaders = 64
	// MaxRestarts bounds Swarm.MaxRestarts (the supervisor remembers each
	// restart of the window).
	MaxRestarts = 10_000
	// MaxConsumers bounds the consumers of one process: each is an actor
	// tree with two Kafka clients of its own.
	MaxConsumers = 256
	// MaxTopics bounds the topics of one consumer.
	MaxTopics = 1_000
	// MaxBrokers bounds Kafka.Brokers (bootstrap addresses; a client needs
	// a few).
	MaxBrokers = 100
	// MaxMemoryLimit bounds Swarm.MemoryLimit: more than any one machine
	// has, so a larger value is a unit mistake.
	MaxMemoryLimit = 16 * TiB
	// MaxFileSize bounds the configuration file: a path to /dev/zero or to
	// a 300 MB log file was read whole (1.5 GB resident in 1.8 s).
	MaxFileSize = 16 * MiB
)

// Bounds of Rate.Limit, attempts per second: the minimum is one attempt
// per 100 s (a longer gap is an interval, not a rate); the maximum is above
// what one process runs even with a handler that does nothing (~1,000,000
// records/s, make bench), so a larger value is a mistake.
const (
	MinRateLimit = 0.01
	MaxRateLimit = 10_000_000
)

// Duration bounds. A day is longer than any of these settings sensibly is,
// so a larger value is a unit mistake; it also keeps the timeouts derived
// from them (3 × supervision_interval, shutdown_timeout + 15 s, Kafka's
// rebalance timeout in int32 milliseconds) far from overflowing.
const (
	MaxDuration = 24 * time.Hour
	// MinCommitInterval: commit_interval 1ns kept a core busy while idle;
	// at 10ms an idle consumer uses about 1.6% of a core, at 1ms 5.6%.
	MinCommitInterval = 10 * time.Millisecond
	// MinMetadataRefresh: each refresh asks the brokers for every topic.
	MinMetadataRefresh = 100 * time.Millisecond
	// MaxTopicPatternBytes bounds a /regex/ entry of topics.
	MaxTopicPatternBytes = 1000
	// MinSupervisionInterval: supervision_interval 1ns kept a core busy.
	MinSupervisionInterval = 10 * time.Millisecond
	// MinNodeReportInterval: each report is a protobuf message per node.
	MinNodeReportInterval = 100 * time.Millisecond
	// NodeReportTimeoutIntervals is how many report intervals a node may
	// miss before it counts as silent: node_report_timeout 2ns with
	// node_report_interval 1ns killed every node right after its start.
	NodeReportTimeoutIntervals = 3
	// MinRestartWindow: a window shorter than a restart never fills, which
	// turns max_restarts off.
	MinRestartWindow = time.Second
	// MinTimeout bounds handler.timeout, max_handler_time (when not 0) and
	// retry.initial_backoff from below: less cannot complete anything.
	MinTimeout = time.Millisecond
	// MinShutdownTimeout and MaxShutdownTimeout bound shutdown_timeout;
	// the Kafka rebalance timeout and read timeout grow with it. A stop
	// keeps min(2s, a quarter) of it for the final commits, leaving the
	// group and the teardown (actors' stopBudget): below a second that
	// reserve is too short to commit, and every stop would exit 1.
	MinShutdownTimeout = time.Second
	MaxShutdownTimeout = time.Hour
)

// minCooperativeVersion is the oldest kafka.version sarama's cooperative-
// sticky strategy accepts (it refuses older ones when the client is built,
// which turbo used to retry forever as "cannot reach Kafka").
var minCooperativeVersion = [3]int{2, 4, 0}

// minTransactionalVersion is the oldest kafka.version whose brokers take a
// transactional offset commit with the member's generation (KIP-447), which
// exactly-once outputs need to fence a zombie member.
var minTransactionalVersion = [3]int{2, 5, 0}

func intRange(key string, v, lo, hi int) error {
	if v < lo || v > hi {
		return fieldErr(key, fmt.Sprintf("must be between %d and %d (got %d)", lo, hi, v))
	}
	return nil
}

func durRange(key string, v, lo, hi time.Duration) error {
	if v < lo || v > hi {
		return fieldErr(key, fmt.Sprintf("must be between %s and %s (got %s)", fmtDur(lo), fmtDur(hi), fmtDur(v)))
	}
	return nil
}

// fmtDur is time.Duration's String without the zero tails: 24h, not
// 24h0m0s.
func fmtDur(d time.Duration) string {
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}

// validHostPort reports whether s is host:port with a port from 1 to
// 65535 and, unless emptyHost, a non-empty host without spaces or control
// characters.
func validHostPort(s string, emptyHost bool) bool {
	return hostPort(s, emptyHost, validPort)
}

// validListen reports whether s is an address to listen on: host:port with
// an optional host and a port from 0 to 65535. Port 0 lets the kernel pick
// a free port (turbo logs the one it got); an address turbo connects to has
// no such meaning for 0, so only listeners take it.
func validListen(s string) bool {
	return hostPort(s, true, func(p string) bool { return p == "0" || validPort(p) })
}

func hostPort(s string, emptyHost bool, port func(string) bool) bool {
	host, p, err := net.SplitHostPort(s)
	if err != nil || (host == "" && !emptyHost) || !port(p) {
		return false
	}
	return !strings.ContainsFunc(host, func(r rune) bool { return r <= ' ' || r == 0x7f })
}

func validPort(p string) bool {
	n, err := strconv.Atoi(p)
	return err == nil && n >= 1 && n <= 65535 && p[0] != '+'
}

// parseVersion splits a Kafka version (3.6.0, or 0.10.2.1 before 1.0) into
// its first three numbers.
func parseVersion(s string) ([3]int, bool) {
	var v [3]int
	m := versionPattern.FindStringSubmatch(s)
	if m == nil || (m[4] != "" && m[1] != "0") { // four parts only before 1.0
		return v, false
	}
	for i := range v {
		v[i], _ = strconv.Atoi(m[i+1])
	}
	return v, true
}

func versionLess(a, b [3]int) bool {
	for i := range a {
		if a[i] != b[i] {
			return a[i] < b[i]
		}
	}
	return false
}
