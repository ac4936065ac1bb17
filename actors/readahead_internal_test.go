package actors

import (
	"testing"
	"time"
)

// The read-ahead follows the rate records finish at: a second's worth,
// between its bounds; it grows within a few ticks when the budget itself
// is what limits the rate, decays gradually, and moves only by a quarter.
func TestReadAheadFollowsTheWork(t *testing.T) {
	t.Parallel()
	start := time.Unix(1000, 0)
	run := func(r *readAhead, ticks int, perSec func(budget int) float64) (at time.Time, finished int64) {
		at = start
		r.sample(at, 0)
		for range ticks {
			finished += int64(perSec(r.budget()) * readAheadEvery.Seconds())
			at = at.Add(readAheadEvery)
			r.sample(at, finished)
		}
		return at, finished
	}

	r := newReadAhead(16, 20_000, 1)
	if got := r.budget(); got != 16+minReadAhead {
		t.Fatalf("starting budget %d, want %d", got, 16+minReadAhead)
	}
	// No-op work limited by the budget: a budget's worth per 10 ms round
	// trip. Within 8 ticks (2 s) it reaches max_buffered.
	run(r, 8, func(b int) float64 { return float64(b) * 100 })
	if got := r.budget(); got != 16+20_000 {
		t.Fatalf("budget-limited fast work: budget %d after 2 s, want %d", got, 16+20_000)
	}

	// Slow work (16 runners × 50 records/s): the floor.
	slow := newReadAhead(16, 20_000, 1)
	run(slow, 20, func(int) float64 { return 800 })
	if got := slow.budget(); got != 16+minReadAhead {
		t.Fatalf("800 records/s: budget %d, want %d", got, 16+minReadAhead)
	}
	// 5,000 records/s: a second's worth.
	mid := newReadAhead(16, 20_000, 1)
	run(mid, 20, func(int) float64 { return 5000 })
	if got := mid.target; got < 5000 || got > 5000*5/4 {
		t.Fatalf("5,000 records/s: read-ahead %d, want a second's worth (5,000 within a quarter)", got)
	}

	// After the work stops, it decays: not at once, and to the floor in the end.
	at, finished := run(r, 1, func(int) float64 { return 0 })
	if r.target == minReadAhead {
		t.Fatal("one idle tick dropped the read-ahead to its floor: a pause between bursts would starve the next")
	}
	for range 40 {
		at = at.Add(readAheadEvery)
		r.sample(at, finished)
	}
	if r.target != minReadAhead {
		t.Fatalf("10 s idle: read-ahead %d, want the floor %d", r.target, minReadAhead)
	}

	// Small moves are not made.
	steady := newReadAhead(16, 20_000, 1)
	at, finished = run(steady, 20, func(int) float64 { return 8000 })
	before := steady.target
	if steady.sample(at.Add(readAheadEvery), finished+int64(9000*readAheadEvery.Seconds())) || steady.target != before {
		t.Fatalf("a move from %d toward 9,000 (under a quarter) resized the gates (now %d)", before, steady.target)
	}

	// Bounds: max_buffered below the floor fixes it; a batch raises the floor.
	fixed := newReadAhead(4, 10, 1)
	run(fixed, 8, func(b int) float64 { return float64(b) * 100 })
	if fixed.budget() != 14 {
		t.Fatalf("max_buffered 10: budget %d, want 14 whatever the rate", fixed.budget())
	}
	batch := newReadAhead(4, 20_000, 5000)
	if batch.budget() != 5004 {
		t.Fatalf("batches of 5,000: starting budget %d, want 5,004 (a batch must be able to fill)", batch.budget())
	}
}

// The floor grows with the partitions owned (readAheadPerPartition each,
// within max_buffered): a budget of a thousand records over 512 partitions
// made every claim read one or two records at a time. A raised floor lifts
// the budget at once; a lowered one leaves a higher target to the rate.
func TestReadAheadFloorFollowsThePartitions(t *testing.T) {
	t.Parallel()
	r := newReadAhead(16, 20_000, 1)
	if r.setPartitions(8) || r.budget() != 16+minReadAhead {
		t.Fatalf("8 partitions: budget %d, want %d unchanged (their floor is below minReadAhead)", r.budget(), 16+minReadAhead)
	}
	if !r.setPartitions(512) || r.budget() != 16+512*readAheadPerPartition {
		t.Fatalf("512 partitions: budget %d, want %d, reported as changed", r.budget(), 16+512*readAheadPerPartition)
	}
	if !r.setPartitions(4096) || r.budget() != 16+20_000 {
		t.Fatalf("4,096 partitions: budget %d, want max_buffered's %d", r.budget(), 16+20_000)
	}
	if r.setPartitions(8) || r.budget() != 16+20_000 || r.floor != minReadAhead {
		t.Fatalf("back to 8 partitions: budget %d floor %d, want the budget kept (%d) and the floor %d", r.budget(), r.floor, 16+20_000, minReadAhead)
	}
	// The rate now decays the budget to the lower floor.
	at := time.Unix(1000, 0)
	r.sample(at, 0)
	for range 40 {
		at = at.Add(readAheadEvery)
		r.sample(at, 0)
	}
	if r.budget() != 16+minReadAhead {
		t.Fatalf("no work for 10 s after the partitions left: budget %d, want the floor's %d", r.budget(), 16+minReadAhead)
	}
	small := newReadAhead(16, 500, 1)
	if small.setPartitions(4096) || small.budget() != 16+500 {
		t.Fatalf("max_buffered 500: budget %d at 4,096 partitions, want %d (max_buffered bounds the floor)", small.budget(), 16+500)
	}
}
