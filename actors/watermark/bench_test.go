package watermark

import (
	"math/rand"
	"testing"
)

// BenchmarkTrackDone measures one record's Track and Done, with completions
// in order and shuffled within windows of 64 as parallel runners produce
// them. Committable is read once per window, as a commit loop would.
func BenchmarkTrackDone(b *testing.B) {
	const window = 64
	inOrder := make([]int64, window)
	for i := range inOrder {
		inOrder[i] = int64(i)
	}
	// A fixed set of shuffles, reused, so the benchmark measures the tracker
	// and not the random number generator.
	r := rand.New(rand.NewSource(1))
	shuffled := make([][]int64, 64)
	for i := range shuffled {
		p := make([]int64, window)
		for j, v := range r.Perm(window) {
			p[j] = int64(v)
		}
		shuffled[i] = p
	}
	for _, bc := range []struct {
		name   string
		stride int64 // 2 models a transactional topic, where markers take every other offset
		order  func(i int) []int64
	}{
		{"in-order", 1, func(int) []int64 { return inOrder }},
		{"shuffled-64", 1, func(i int) []int64 { return shuffled[i%len(shuffled)] }},
		{"shuffled-64-gaps", 2, func(i int) []int64 { return shuffled[i%len(shuffled)] }},
	} {
		b.Run(bc.name, func(b *testing.B) {
			tr := New()
			var base int64
			b.ReportAllocs()
			for i := 0; b.Loop(); i++ {
				// One iteration handles a window of records, so report per record.
				for o := range int64(window) {
					if err := tr.Track(base + o*bc.stride); err != nil {
						b.Fatal(err)
					}
				}
				for _, o := range bc.order(i) {
					if err := tr.Done(base + o*bc.stride); err != nil {
						b.Fatal(err)
					}
				}
				next := base + window*bc.stride
				if c, _ := tr.Committable(); c != next-bc.stride+1 {
					b.Fatalf("committable %d, want %d", c, next-bc.stride+1)
				}
				base = next
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*window), "ns/record")
		})
	}
}
