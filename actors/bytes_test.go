package actors_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/turbokafka/turbo/actors"
	"github.com/turbokafka/turbo/config"
	"github.com/turbokafka/turbo/test/testkit"
)

// Through sarama: a partition whose share of max_buffered_bytes is used up is
// paused (at once), though its share of the record budget is far from used,
// and it is resumed once its records finish; a record larger than the whole
// share (about twice) still runs.
func TestByteBudgetPausesAndResumesPartitions(t *testing.T) {
	t.Parallel()
	const valueSize = 200 << 10 // a share of 512 KiB holds three (the third overshoots)
	r := newRun(t, 2, 0, 0)
	testkit.ProduceSized(t, r.brokers, r.topic, 20, 8, valueSize)
	testkit.ProduceSized(t, r.brokers, r.topic, 1, 1, testkit.MaxRecordValue) // ~1 MiB: twice a share
	release := make(chan struct{})
	var started, processed atomic.Int64
	var biggest atomic.Int64
	h := actors.HandlerFunc(func(ctx context.Context, rec *actors.Record) error {
		started.Add(1)
		select {
		case <-release:
		case <-ctx.Done():
			return ctx.Err()
		}
		if n := int64(len(rec.Value)); n > biggest.Load() {
			biggest.Store(n)
		}
		processed.Add(1)
		return nil
	})
	c := r.consumer("bytes", func(c *config.Consumer) {
		c.Concurrency = 2
		c.MaxBuffered = 1000 // a share of 501 records: never what stops the reading here
		c.MaxBufferedBytes = config.MiB
	})
	a := r.start(c, h)
	testkit.Eventually(t, 30*time.Second, "both partitions paused with their byte shares used", func() bool {
		s := a.Stats()
		return s.Assigned == 2 && s.Paused == 2
	})
	// At most three records of each partition entered the pipeline (the
	// oversize one, if first, alone); what sarama had read ahead waits in Held.
	s := a.Stats()
	t.Logf("paused: fetched %d, in flight %d, buffered %d, read ahead by the paused claims %d", s.Fetched, s.InFlight, s.Buffered, s.ReadAhead)
	if s.Fetched > 6 {
		t.Errorf("fetched %d records of %d KiB with a byte share of 512 KiB per partition, want at most 6", s.Fetched, valueSize>>10)
	}
	close(release)
	testkit.Eventually(t, 60*time.Second, "all 21 records processed", func() bool { return processed.Load() == 21 })
	testkit.Eventually(t, 30*time.Second, "both partitions resumed", func() bool { return a.Stats().Paused == 0 })
	r.waitCommitted(c.Group, 30*time.Second)
	if got := biggest.Load(); got != testkit.MaxRecordValue {
		t.Errorf("largest value handled: %d bytes, want the oversize record's %d", got, testkit.MaxRecordValue)
	}
	if got := started.Load(); got != 21 {
		t.Errorf("%d handler calls, want 21 (each record once)", got)
	}
}
