package schedule

import (
	"math/rand"
	"strconv"
	"testing"
)

// BenchmarkAddNextDone measures one record's trip through the scheduler
// (Add, then Next and Done of some record) with 1,000 keys, a standing
// backlog, and a number of records in flight as if that many runners were
// busy.
func BenchmarkAddNextDone(b *testing.B) {
	const nKeys = 1000
	keys := make([]string, nKeys)
	for i := range keys {
		keys[i] = "key-" + strconv.Itoa(i)
	}
	// A random but fixed key sequence, so that keys collide as they would in
	// a real topic and the heap is exercised.
	r := rand.New(rand.NewSource(1))
	seq := make([]string, 1<<16)
	for i := range seq {
		seq[i] = keys[r.Intn(nKeys)]
	}
	for _, inflight := range []int{1, 16, 256} {
		b.Run("inflight="+strconv.Itoa(inflight), func(b *testing.B) {
			s := New[int]()
			for i := range nKeys {
				s.Add(seq[i%len(seq)], i)
			}
			running := make([]string, 0, inflight)
			for len(running) < inflight {
				u, _, ok := s.Next()
				if !ok {
					b.Fatal("backlog not runnable")
				}
				running = append(running, u)
			}
			b.ReportAllocs()
			for i := 0; b.Loop(); i++ {
				slot := i % inflight
				if err := s.Done(running[slot]); err != nil {
					b.Fatal(err)
				}
				s.Add(seq[i&(len(seq)-1)], i)
				u, _, ok := s.Next()
				if !ok {
					b.Fatal("nothing runnable")
				}
				running[slot] = u
			}
		})
	}
}

// BenchmarkNextRun measures draining one unit that holds 10,000 items, as a
// partition does under partition ordering, in runs of 64: with NextRun, with
// NextRunAppend into a reused buffer, and, for comparison, with one Next and
// Done per item. ns/item is the cost per record.
func BenchmarkNextRun(b *testing.B) {
	const (
		backlog = 10_000
		run     = 64
	)
	modes := []struct {
		name string
		take func(s *Scheduler[int], buf []int) ([]int, int)
	}{
		{"NextRun", func(s *Scheduler[int], _ []int) ([]int, int) {
			u, items, ok := s.NextRun(run)
			if !ok || s.Done(u) != nil {
				panic("nothing runnable")
			}
			return nil, len(items)
		}},
		{"NextRunAppend", func(s *Scheduler[int], buf []int) ([]int, int) {
			u, items, ok := s.NextRunAppend(buf[:0], run)
			if !ok || s.Done(u) != nil {
				panic("nothing runnable")
			}
			return items, len(items)
		}},
		{"Next", func(s *Scheduler[int], _ []int) ([]int, int) {
			n := 0
			for ; n < run; n++ {
				u, _, ok := s.Next()
				if !ok {
					break
				}
				if s.Done(u) != nil {
					panic("Done failed")
				}
			}
			if n == 0 {
				panic("nothing runnable")
			}
			return nil, n
		}},
	}
	for _, m := range modes {
		b.Run(m.name, func(b *testing.B) {
			s := New[int]()
			fill := func() {
				for i := range backlog {
					s.Add("partition-0", i)
				}
			}
			fill()
			var buf []int
			items := 0
			b.ReportAllocs()
			for b.Loop() {
				if !s.Runnable() {
					b.StopTimer()
					fill()
					b.StartTimer()
				}
				var n int
				buf, n = m.take(s, buf)
				items += n
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(items), "ns/item")
		})
	}
}
