package actors

import (
	"time"

	"github.com/turbokafka/turbo/actors/memkafka"
)

// UnexpectedMessages counts the messages actors received and do not handle.
func UnexpectedMessages() int64 { return unexpectedMessages.Load() }

// StartInMemory starts a consumer on an in-memory cluster, as
// actors/harness does, for tests that need options the harness does not
// offer.
func StartInMemory(opts Options, cluster *memkafka.Cluster) (*Consumer, error) {
	return start(opts, cluster)
}

// SetMaxWatermarkWindow lets tests use a small window; it returns a restore.
func SetMaxWatermarkWindow(n int64) func() {
	old := maxWatermarkWindow
	maxWatermarkWindow = n
	return func() { maxWatermarkWindow = old }
}

// WithWatermarkRefresh returns opts with the high watermark refresh
// interval set to every (see watermarkRefresh), so that tests need not wait
// the default.
func WithWatermarkRefresh(opts Options, every time.Duration) Options {
	opts.watermarkRefresh = every
	return opts
}

// FranzQueueHigh is the franz-go side's queue high mark in records: past it
// a partition is paused in the client even while it waits only for credits.
// A test that needs a stuck partition paused on both sides holds more than
// this many records in it.
var FranzQueueHigh = marksFor(maxPartitionFetch).high
