package pipeline

import (
	"sync"
	"testing"
)

// TestBatchEachRecordRunOrStolenOnce races a runner claiming records against
// a steal: every record is either run or taken back, never both, and the
// runner's part is a prefix.
func TestBatchEachRecordRunOrStolenOnce(t *testing.T) {
	for range 200 {
		recs := make([]int, 50)
		for i := range recs {
			recs[i] = i
		}
		b := NewBatch(recs)
		var ran []int
		var wg sync.WaitGroup
		wg.Go(func() {
			for {
				i, ok := b.Claim()
				if !ok {
					return
				}
				ran = append(ran, i)
				b.Finish(i, nil)
			}
		})
		stolen := b.steal()
		wg.Wait()
		if len(ran)+len(stolen) != 50 {
			t.Fatalf("ran %d + stole %d records of 50", len(ran), len(stolen))
		}
		for k, i := range ran {
			if i != k {
				t.Fatalf("runner ran index %d at position %d: not a prefix", i, k)
			}
		}
		if len(stolen) > 0 && stolen[0] != len(ran) {
			t.Fatalf("stolen records start at %d, runner stopped at %d", stolen[0], len(ran))
		}
		if d := b.Done(); d != len(ran) {
			t.Fatalf("done = %d, runner ran %d", d, len(ran))
		}
	}
}
