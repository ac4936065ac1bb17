package actors_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/turbokafka/turbo/actors"
	"github.com/turbokafka/turbo/actors/harness"
	"github.com/turbokafka/turbo/config"
)

// flaky is a batch handler that fails the first attempt of every record
// whose offset is 5 mod 37, and every seventh call as a whole (once per
// record at most), so batches fail in part and in whole.
type flaky struct {
	mu     sync.Mutex
	calls  int
	failed map[string]bool
}

func (f *flaky) HandleBatch(_ context.Context, recs []*actors.Record) actors.BatchResult {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls++
	if f.calls%7 == 0 {
		fresh := true
		for _, r := range recs {
			fresh = fresh && !f.failed["whole"+id(r)]
		}
		if fresh {
			for _, r := range recs {
				f.failed["whole"+id(r)] = true
			}
			return actors.BatchFailed(errors.New("the downstream is down, once"))
		}
	}
	var res actors.BatchResult
	for i, r := range recs {
		if r.Offset%37 == 5 && !f.failed[id(r)] {
			f.failed[id(r)] = true
			if res.Failed == nil {
				res.Failed = map[int]error{}
			}
			res.Failed[i] = errors.New("this record, once")
		}
	}
	return res
}

func id(r *actors.Record) string { return fmt.Sprintf("%s/%d@%d", r.Topic, r.Partition, r.Offset) }

// TestBatchesLoseNothingAndKeepOrder: in every ordering, batches of up to
// 10 records with partial and whole failures: every record is handled
// exactly once, the harness sees no ordering violation (a unit's records in
// one batch count as one after the other, and never in two batches at
// once), batches do hold several records, every partition is committed to
// its end, and under key and partition ordering records after a failed one
// of their unit were counted as not run and ran again.
func TestBatchesLoseNothingAndKeepOrder(t *testing.T) {
	t.Parallel()
	for _, ordering := range []config.Ordering{config.OrderingKey, config.OrderingPartition, config.OrderingUnordered} {
		t.Run(string(ordering), func(t *testing.T) {
			const partitions, perPartition, maxRecords = 4, 300, 10
			c := harness.Consumer("batches", "t")
			c.Ordering = ordering
			c.Concurrency = 4
			c.Batch.MaxRecords = maxRecords
			c.Retry.MaxAttempts = 5
			hs := harness.NewBatch(t, harness.Config{Consumer: c}, &flaky{failed: map[string]bool{}})
			for p := range int32(partitions) {
				hs.Feed(harness.Seq("t", p, 0, perPartition, 20)...)
			}
			hs.Assign("t", 0, 1, 2, 3)
			hs.AwaitHandled(partitions * perPartition)
			hs.AwaitAllCommitted()

			for p := range int32(partitions) {
				for off := range int64(perPartition) {
					if n := hs.TimesHandled("t", p, off); n != 1 {
						t.Fatalf("t/%d@%d handled %d times, want 1", p, off, n)
					}
				}
			}
			sizes, notRun := map[int]int{}, 0
			for _, call := range hs.Calls() {
				if call.Batch == 0 {
					t.Fatalf("%s went to Handle, not HandleBatch", call)
				}
				sizes[call.Batch]++
				if errors.Is(call.Err, harness.ErrNotRun) {
					notRun++
				}
			}
			biggest := 0
			for _, n := range sizes {
				biggest = max(biggest, n)
			}
			if biggest < 2 || biggest > maxRecords {
				t.Fatalf("largest batch %d records, want 2 to %d", biggest, maxRecords)
			}
			if ordering != config.OrderingUnordered && notRun == 0 {
				t.Fatalf("no record was counted as not run after a failed one of its unit")
			}
			if ordering == config.OrderingKey {
				for k := range 20 {
					key := fmt.Sprintf("k%d", k)
					if offs := hs.HandledOffsets(key); !slices.IsSorted(offs) && len(offs) > 0 {
						// Offsets interleave across partitions; per partition they rise.
						checkPerPartition(t, hs, key)
					}
				}
			}
			t.Logf("FIGURES batches ordering=%s records=%d calls=%d largest=%d not-run=%d restarts=%d",
				ordering, partitions*perPartition, len(sizes), biggest, notRun, hs.Restarts())
			if hs.Restarts() != 0 {
				t.Fatalf("%d tree restarts, want 0 (every failure is retried)", hs.Restarts())
			}
		})
	}
}

// checkPerPartition fails when a key's records of one partition were
// handled out of offset order.
func checkPerPartition(t *testing.T, hs *harness.Harness, key string) {
	t.Helper()
	last := map[int32]int64{}
	for _, c := range hs.Handled() {
		if c.Key != key {
			continue
		}
		if l, ok := last[c.Partition]; ok && c.Offset < l {
			t.Fatalf("key %s: t/%d@%d handled after @%d", key, c.Partition, c.Offset, l)
		}
		last[c.Partition] = c.Offset
	}
}

// TestBatchPartialFailure: one batch of a key-ordered partition, a@0..a@3
// then b@4, b@5, where a@1 fails once. a@0 and both b records are done at
// once; a@2 and a@3 are not run (the handler's word for them does not
// count) and run after a@1's retry, in order.
func TestBatchPartialFailure(t *testing.T) {
	t.Parallel()
	c := harness.Consumer("partial", "t")
	c.Batch.MaxRecords = 6
	c.Batch.MaxWait = 2 * time.Second // the six arrive together: one batch
	var once sync.Once
	h := actors.BatchHandlerFunc(func(_ context.Context, recs []*actors.Record) actors.BatchResult {
		var res actors.BatchResult
		for i, r := range recs {
			if r.Offset == 1 {
				once.Do(func() { res.Failed = map[int]error{i: errors.New("a@1 fails once")} })
			}
		}
		return res
	})
	hs := harness.NewBatch(t, harness.Config{Consumer: c}, h)
	hs.Feed(harness.Rec("t", 0, 0, "a", "0"), harness.Rec("t", 0, 1, "a", "1"), harness.Rec("t", 0, 2, "a", "2"),
		harness.Rec("t", 0, 3, "a", "3"), harness.Rec("t", 0, 4, "b", "4"), harness.Rec("t", 0, 5, "b", "5"))
	hs.Assign("t", 0)
	hs.AwaitHandled(6)
	hs.AwaitCommitted("t", 0, 6)

	calls := hs.Calls()
	if len(calls) < 6 || calls[0].Batch != calls[5].Batch {
		t.Fatalf("the six records were not one batch: %+v", calls)
	}
	want := []error{nil, errors.New("fails"), harness.ErrNotRun, harness.ErrNotRun, nil, nil}
	for i, w := range want {
		got := calls[i].Err
		if (w == nil) != (got == nil) || (errors.Is(w, harness.ErrNotRun) != errors.Is(got, harness.ErrNotRun)) {
			t.Fatalf("first batch, record %d: err %v, want %v", i, got, w)
		}
	}
	if got := hs.HandledOffsets("a"); !slices.Equal(got, []int64{0, 1, 2, 3}) {
		t.Fatalf("key a handled at %v, want [0 1 2 3]", got)
	}
	for _, off := range []int64{4, 5} {
		if n := hs.Attempts("t", 0, off); n != 1 {
			t.Fatalf("b@%d called %d times, want 1 (done in the first batch)", off, n)
		}
	}
	for _, off := range []int64{2, 3} {
		if n := hs.Attempts("t", 0, off); n != 2 {
			t.Fatalf("a@%d called %d times, want 2 (not run, then run)", off, n)
		}
	}
}

// TestBatchBounds: max_bytes cuts batches (a larger record goes alone),
// and max_wait lets a short batch start once it has waited.
func TestBatchBounds(t *testing.T) {
	t.Parallel()
	t.Run("max_bytes", func(t *testing.T) {
		c := harness.Consumer("bytes", "t")
		c.Batch.MaxRecords = 50
		c.Batch.MaxBytes = 100
		c.Batch.MaxWait = time.Second
		hs := harness.NewBatch(t, harness.Config{Consumer: c}, nil)
		var recs []harness.Record
		for off := range int64(40) {
			v := fmt.Sprintf("%030d", off) // key "k" + 30 bytes: 3 fit in 100
			if off == 20 {
				v = string(make([]byte, 500))
			}
			recs = append(recs, harness.Rec("t", 0, off, "k", v))
		}
		hs.Feed(recs...)
		hs.Assign("t", 0)
		hs.AwaitHandled(40)
		sizes := map[int]int{}
		var big int
		for _, call := range hs.Calls() {
			sizes[call.Batch]++
			if call.Offset == 20 {
				big = call.Batch
			}
		}
		for b, n := range sizes {
			if n > 3 {
				t.Fatalf("batch %d has %d records of 31 bytes, over max_bytes 100", b, n)
			}
		}
		if sizes[big] != 1 {
			t.Fatalf("the 500-byte record shared its batch with %d others", sizes[big]-1)
		}
	})
	t.Run("max_wait", func(t *testing.T) {
		const wait = 300 * time.Millisecond
		c := harness.Consumer("wait", "t")
		c.Batch.MaxRecords = 10
		c.Batch.MaxWait = wait
		var mu sync.Mutex
		var first time.Time
		h := actors.BatchHandlerFunc(func(_ context.Context, recs []*actors.Record) actors.BatchResult {
			mu.Lock()
			defer mu.Unlock()
			if first.IsZero() {
				first = time.Now()
			}
			return actors.BatchResult{}
		})
		hs := harness.NewBatch(t, harness.Config{Consumer: c}, h)
		hs.Assign("t", 0)
		hs.AwaitOwned("t", 0)
		fed := time.Now()
		hs.Feed(harness.Seq("t", 0, 0, 3, 3)...)
		hs.AwaitHandled(3)
		mu.Lock()
		waited := first.Sub(fed)
		mu.Unlock()
		calls := hs.Calls()
		if calls[0].Batch != calls[2].Batch {
			t.Fatalf("3 records in %d batches, want 1", calls[2].Batch-calls[0].Batch+1)
		}
		if waited < wait-50*time.Millisecond {
			t.Fatalf("the short batch started %s after the records came, before max_wait %s", waited, wait)
		}
		t.Logf("FIGURES max_wait=%s first call after %s", wait, waited.Round(time.Millisecond))
	})
}
