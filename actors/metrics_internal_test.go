package actors

import (
	"context"
	"sync/atomic"
	"testing"
	"time"
)

// runOne is one record through a runner's handle, as the tree runs it.
func runOne(r *runner, rec *envelope) {
	if _, err := r.handle(context.Background(), rec, time.Now()); err != nil {
		panic(err)
	}
}

func newBenchRunner(metrics bool) (*runner, *envelope) {
	s := &consumerStats{}
	if metrics {
		s.enableHistograms("bench")
	}
	r := &runner{handler: traced(HandlerFunc(func(context.Context, *Record) error { return nil }), "bench", nil), since: new(atomic.Int64)}
	if metrics {
		r.handlerTime, r.waitTime = s.handlerTime.shard(0), s.waitTime.shard(0)
	}
	g := newGate(1, 1)
	return r, &envelope{gate: g, arrived: 1}
}

// The histograms add no allocation to a record's run (and take no lock:
// prometheus histograms are atomic counters).
func TestHistogramsAllocateNothingPerRecord(t *testing.T) {
	for _, metrics := range []bool{false, true} {
		r, rec := newBenchRunner(metrics)
		if n := testing.AllocsPerRun(1000, func() { runOne(r, rec) }); n != 0 {
			t.Errorf("metrics %v: %v allocations per record, want 0", metrics, n)
		}
	}
}

// BenchmarkRunnerHandle: one record through a runner, histograms off and on.
func BenchmarkRunnerHandle(b *testing.B) {
	for _, metrics := range []bool{false, true} {
		name := "metrics-off"
		if metrics {
			name = "metrics-on"
		}
		b.Run(name, func(b *testing.B) {
			r, rec := newBenchRunner(metrics)
			b.ReportAllocs()
			for b.Loop() {
				runOne(r, rec)
			}
		})
	}
}

// BenchmarkRunnerHandleParallel: runners on every core sharing the
// consumer's histograms, off and on.
func BenchmarkRunnerHandleParallel(b *testing.B) {
	for _, metrics := range []bool{false, true} {
		name := "metrics-off"
		if metrics {
			name = "metrics-on"
		}
		b.Run(name, func(b *testing.B) {
			s := &consumerStats{}
			if metrics {
				s.enableHistograms("bench")
			}
			b.ReportAllocs()
			var ids atomic.Int64
			b.RunParallel(func(pb *testing.PB) {
				id := int(ids.Add(1))
				r := &runner{id: id, handler: traced(HandlerFunc(func(context.Context, *Record) error { return nil }), "bench", nil), since: new(atomic.Int64)}
				if metrics {
					r.handlerTime, r.waitTime = s.handlerTime.shard(id), s.waitTime.shard(id)
				}
				rec := &envelope{gate: newGate(1, 1), arrived: 1}
				for pb.Next() {
					runOne(r, rec)
				}
			})
		})
	}
}
