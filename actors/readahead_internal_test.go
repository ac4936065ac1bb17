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
