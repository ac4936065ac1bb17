package actors_test

import (
	"runtime"
	"testing"

	"github.com/turbokafka/turbo/actors/harness"
	"github.com/turbokafka/turbo/config"
)

// A consumer at the largest concurrency and max_buffered config accepts
// handles records without allocating in proportion to them: both are
// maxima, not sizes to reserve. Spawning concurrency runners at start took
// 2.8 GB at concurrency 10000000; max_buffered sized a
// channel, which panicked at 9223372036854775807.
func TestConsumerAtTheLimits(t *testing.T) {
	// Not parallel: it counts the process's allocations, which other tests' would swell.
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	h := harness.New(t, consumer(func(c *config.Consumer) {
		c.Concurrency = config.MaxConcurrency
		c.MaxBuffered = config.MaxBuffered
		c.Ordering = config.OrderingPartition
	}), nil)
	feedAll(h, 2, 50, 5)
	h.AwaitAllCommitted()
	checkOnce(t, h, 2, 50)
	runtime.ReadMemStats(&after)
	// Measured under -race: 18.4 MB allocated (in 0.78 s) with every runner
	// spawned at start, 3.0 MB (0.03 s) with runners spawned as needed.
	const limit = 8 << 20
	alloc := after.TotalAlloc - before.TotalAlloc
	t.Logf("allocated %.1f MB for 100 records at concurrency %d, max_buffered %d", float64(alloc)/(1<<20), config.MaxConcurrency, config.MaxBuffered)
	if alloc > limit {
		t.Errorf("allocated %d bytes, want at most %d: something is sized by a maximum", alloc, limit)
	}
}
