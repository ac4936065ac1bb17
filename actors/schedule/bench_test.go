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
