package pipeline

import (
	"strconv"
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

// TestRanReusesTheBatch: a batch its runner reported done holds no record
// any more (it would pin the record's memory), and the next Dispatch reuses
// it: a steady stream of records through one runner allocates only the
// report's list of finished records, which the caller keeps.
func TestRanReusesTheBatch(t *testing.T) {
	p := New[*benchRec](benchItem{}, 1, 256)
	var off int64
	cycle := func(n int) *Batch[*benchRec] {
		recs := make([]*benchRec, n)
		for i := range recs {
			recs[i] = &benchRec{unit: "k", epoch: 1, offset: off}
			off++
		}
		p.Add(1, recs)
		p.Dispatch()
		if len(p.Out().Runs) != 1 {
			t.Fatalf("%d runs dispatched, want 1", len(p.Out().Runs))
		}
		b := p.Out().Runs[0].Batch
		p.Reset()
		for {
			i, ok := b.Claim()
			if !ok {
				break
			}
			b.Finish(i, nil)
		}
		if got := p.Ran(0); got != n {
			t.Fatalf("Ran = %d finished, want %d", got, n)
		}
		p.Reset()
		p.Flush()
		return b
	}
	first := cycle(3)
	for i, r := range first.records[:cap(first.records)] {
		if r != nil {
			t.Fatalf("a batch reported done still holds record %d (offset %d)", i, r.offset)
		}
	}
	if again := cycle(2); again != first {
		t.Fatal("the next dispatch made a new batch rather than reuse the idle one")
	}
	recs := make([]*benchRec, 2)
	for i := range recs {
		recs[i] = &benchRec{unit: "k", epoch: 1}
	}
	allocs := testing.AllocsPerRun(100, func() {
		for _, r := range recs {
			r.offset = off
			off++
		}
		p.Add(1, recs)
		p.Dispatch()
		b := p.Out().Runs[0].Batch
		p.Reset()
		for i, ok := b.Claim(); ok; i, ok = b.Claim() {
			b.Finish(i, nil)
		}
		p.Ran(0)
		p.Reset()
		p.Flush()
	})
	if allocs != 1 {
		t.Fatalf("two records' trip through one runner allocated %.1f times, want 1 (Report.Done)", allocs)
	}
}

// TestQuotaBoundsDispatch: Dispatch gives out no more records than the
// quota (a run is cut short rather than passed over), Starved says when the
// quota alone holds work back, and -1 lifts the bound.
func TestQuotaBoundsDispatch(t *testing.T) {
	p := New[*benchRec](benchItem{}, 4, 256)
	p.SetBatchSize(64)
	recs := make([]*benchRec, 10)
	for i := range recs {
		recs[i] = &benchRec{unit: "k" + strconv.Itoa(i%2), epoch: 1, offset: int64(i)}
	}
	p.Add(1, recs)
	given := func() int {
		n := 0
		for _, r := range p.Out().Runs {
			n += r.Batch.Len()
		}
		return n
	}
	p.SetQuota(3)
	p.Dispatch()
	if n := given(); n != 3 || p.Quota() != 0 {
		t.Fatalf("quota 3: gave out %d records, %d left of the quota; want 3 and 0", n, p.Quota())
	}
	if !p.Starved() {
		t.Fatal("runnable records and free runners with no quota left: Starved = false")
	}
	p.Reset()
	p.SetQuota(0)
	p.Dispatch()
	if n := given(); n != 0 {
		t.Fatalf("quota 0: gave out %d records", n)
	}
	p.SetQuota(-1)
	p.Dispatch()
	if n := given(); n != 5 {
		// The first three were k0's (one run, cut at the quota); k1's five
		// may run now, k0's last two not while k0 runs.
		t.Fatalf("no bound: gave out %d records, want k1's 5", n)
	}
	if p.Starved() {
		t.Fatal("no bound: Starved = true")
	}
}

// retryItem judges every failure a Retry.
type retryItem struct{ benchItem }

func (retryItem) Judge(*benchRec, error) Verdict { return Retry }

// TestRetriesTakeTurnsWithFreshRecords: records that fail again every time
// their retry comes due, a storm of them, must not starve the records behind
// them. One runner; ten records that always fail, their retries due at once,
// then ten that succeed: due retries and fresh records take turns, so the
// twenty fresh records run within 40 dispatches.
func TestRetriesTakeTurnsWithFreshRecords(t *testing.T) {
	p := New[*benchRec](retryItem{}, 1, 256)
	recs := make([]*benchRec, 20)
	for i := range recs {
		recs[i] = &benchRec{unit: "k" + strconv.Itoa(i), epoch: 1, offset: int64(i)}
	}
	p.Add(1, recs)
	succeeded, dispatches := 0, 0
	for ; dispatches < 200 && succeeded < 10; dispatches++ {
		p.Dispatch()
		runs := p.Out().Runs
		if len(runs) != 1 {
			t.Fatalf("dispatch %d: %d runs for one idle runner, want 1", dispatches, len(runs))
		}
		b := runs[0].Batch
		p.Reset()
		for i, ok := b.Claim(); ok; i, ok = b.Claim() {
			if b.Item(i).offset < 10 {
				b.Finish(i, errFailed)
				break // a runner stops at a failure
			}
			b.Finish(i, nil)
		}
		p.Ran(runs[0].Runner)
		succeeded += p.Out().Succeeded
		for _, f := range p.Out().Park {
			if !p.RetryDue(f.Rec) { // the storm: every retry due at once
				t.Fatalf("offset %d parked but not due", f.Rec.offset)
			}
		}
		p.Reset()
		p.Flush()
	}
	if succeeded < 10 || dispatches > 40 {
		t.Fatalf("%d of the 10 fresh records went through in %d dispatches while 10 others failed again and again; want all 10 within 40", succeeded, dispatches)
	}
	if p.Retries()+len(p.parked) != 10 {
		t.Fatalf("%d retries due and %d parked, want the 10 failing records still there", p.Retries(), len(p.parked))
	}
}
