package actors_test

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/turbokafka/turbo/actors"
	"github.com/turbokafka/turbo/config"
	"github.com/turbokafka/turbo/test/testkit"
)

// The output ledger on Kafka, on every side: each record emits offset%3
// outputs keyed by its key, and the tree restarts once mid-run (a handler
// failure under on_failure: fail). Once everything is committed, every
// output is in the output topic (none missing: the commit never passed a
// record whose outputs were not acknowledged), the first occurrences of a
// key's outputs are in its records' order, and duplicates (at least once:
// the restart runs again what finished uncommitted) are counted.
func TestOutputsOnKafka(t *testing.T) {
	t.Parallel()
	testkit.EachSide(t, func(t *testing.T, _ testkit.Side) {
		const records, keys = 1200, 40
		topic := testkit.TopicName("t-out-in")
		out := testkit.TopicName("t-out")
		brokers := testkit.Broker(t, 4, topic, out)
		testkit.Produce(t, brokers, topic, records, keys)
		r := &run{t: t, brokers: brokers, topic: topic}
		var failed atomic.Bool
		h := actors.HandlerFunc(func(ctx context.Context, rec *actors.Record) error {
			if rec.Partition == 0 && rec.Offset == 100 && !failed.Swap(true) {
				return fmt.Errorf("once, to restart the tree: %w", actors.ErrPermanent)
			}
			for i := range int(rec.Offset % 3) {
				v := fmt.Sprintf("%d/%d/%d", rec.Partition, rec.Offset, i)
				if err := actors.Emit(ctx, rec, actors.Output{Key: rec.Key, Value: []byte(v)}); err != nil {
					return err
				}
			}
			return nil
		})
		c := r.consumer("out", func(c *config.Consumer) {
			c.Concurrency = 16
			c.Output.Topic = out
		})
		cons := r.start(c, h)
		r.waitCommitted(c.Group, 90*time.Second)

		want := map[string]bool{}
		for p, end := range testkit.EndOffsets(t, brokers, topic) {
			for off := int64(0); off < end; off++ {
				for i := range off % 3 {
					want[fmt.Sprintf("%d/%d/%d", p, off, i)] = true
				}
			}
		}
		var total int
		for _, end := range testkit.EndOffsets(t, brokers, out) {
			total += int(end)
		}
		msgs := testkit.ReadTopic(t, brokers, out, total, 30*time.Second)
		type place struct{ offset, i int64 }
		seen := map[string]int{}
		last := map[string]place{} // by output partition, input partition and key
		var missing, dup, disorder int
		for _, m := range msgs { // in each output partition's order
			v := string(m.Value)
			seen[v]++
			if seen[v] > 1 {
				dup++
				continue
			}
			var p, off, i int64
			if _, err := fmt.Sscanf(v, "%d/%d/%d", &p, &off, &i); err != nil {
				t.Fatalf("output %q: %v", v, err)
			}
			unit := fmt.Sprintf("%d/%d/%s", m.Partition, p, m.Key)
			if prev, ok := last[unit]; ok && (off < prev.offset || off == prev.offset && i <= prev.i) {
				disorder++
				t.Errorf("key %s: output %q after %d/%d", unit, v, prev.offset, prev.i)
			}
			last[unit] = place{off, i}
		}
		for v := range want {
			if seen[v] == 0 {
				missing++
			}
		}
		for v := range seen {
			if !want[v] {
				t.Errorf("output %q matches no input record", v)
			}
		}
		t.Logf("OUTPUT LEDGER: %d outputs expected, %d read: missing %d, duplicated %d, out of order %d; %d restart(s)",
			len(want), len(msgs), missing, dup, disorder, cons.Stats().Restarts)
		if missing > 0 {
			t.Errorf("%d of %d outputs missing", missing, len(want))
		}
		s := cons.Stats()
		if s.Restarts < 1 {
			t.Errorf("no restart: the ledger did not cross one")
		}
		if s.Outputs < int64(len(want)) || s.OutputErrors != 0 {
			t.Errorf("stats: %d outputs acknowledged, %d errors; want at least %d, 0", s.Outputs, s.OutputErrors, len(want))
		}
		if !errors.Is(actors.Emit(context.Background(), nil), actors.ErrNoOutput) {
			t.Errorf("Emit outside a handler call did not fail with ErrNoOutput")
		}
	})
}
