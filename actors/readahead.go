package actors

import (
	"math"
	"time"
)

// The read-ahead: how many records are fetched ahead of the runners.
const (
	// readAheadWork is how much work the read-ahead aims to hold: a
	// second at the rate records finish. Enough to cover fetch round trips,
	// pauses and resumes at 4,096 partitions for a no-op handler (hundreds
	// of thousands of records a second), and no more than a second to
	// finish what a stopping member still runs for a slow one.
	readAheadWork = time.Second
	// readAheadEvery is how often the rate is sampled and the budget set.
	readAheadEvery = 250 * time.Millisecond
	// minReadAhead is the read-ahead below which it never goes (unless
	// max_buffered is lower): what a partition needs to start at full speed
	// before a rate is known.
	minReadAhead = 1000
	// readAheadPerPartition is the read-ahead's floor per partition owned,
	// where that is more than minReadAhead: at 512 partitions a thousand
	// records are two a partition, and until the rate was first sampled
	// every claim read its records one or two at a time (15,000 batches
	// for 100,000 records, against 1,100 at 8 partitions), each a wake-up,
	// a batch message and a credit round trip. Records are small beside the
	// fetches they came in, which max_buffered_bytes bounds.
	readAheadPerPartition = 32
)

// readAhead sizes the pipeline's record budget to the work: concurrency
// plus a second's worth of records at the rate they finish, at least
// minReadAhead (or a whole batch, if larger) and at most max_buffered. A
// budget that is too small limits the rate it is measured by, but only to
// about budget records per fetch round trip — far more than budget records
// a second — so it grows within a few ticks to what the work needs; when
// the work slows, it shrinks as the rate decays.
//
// The rate rises at once and decays by a quarter per tick, so a pause
// between bursts does not shrink the budget the next burst needs. The
// budget moves only by a quarter or more (or to a bound), since every move
// resizes every partition's gate.
//
// Pure: the caller passes the clock and the count of records finished.
type readAhead struct {
	concurrency int
	floor, ceil int // the read-ahead's bounds, in records beyond concurrency
	batch       int // a batch's max_records: the floor is never below it

	rate   float64 // records a second, smoothed
	count  int64   // records finished at the last sample
	at     time.Time
	target int // the read-ahead set, floor..ceil
}

// newReadAhead bounds the read-ahead by maxBuffered, and from below by
// minReadAhead or a batch's maxRecords, whichever is larger (a batch that
// cannot fill waits for its max_wait every time), or by the partitions'
// floor (setPartitions).
func newReadAhead(concurrency, maxBuffered, batchRecords int) *readAhead {
	r := &readAhead{concurrency: concurrency, ceil: maxBuffered, batch: batchRecords}
	r.floor = r.floorFor(0)
	r.target = r.floor
	return r
}

// floorFor is the floor with parts partitions owned.
func (r *readAhead) floorFor(parts int) int {
	return min(r.ceil, max(minReadAhead, r.batch, parts*readAheadPerPartition))
}

// setPartitions sets the floor to parts partitions' worth, and reports
// whether the budget changed: a target below the new floor is raised to it
// at once; one above it stays until the rate brings it down.
func (r *readAhead) setPartitions(parts int) bool {
	r.floor = r.floorFor(parts)
	if r.target >= r.floor {
		return false
	}
	r.target = r.floor
	return true
}

// budget is the record budget now: concurrency plus the read-ahead.
func (r *readAhead) budget() int { return r.concurrency + r.target }

// sample takes the count of records finished so far at now, and reports
// whether the budget changed.
func (r *readAhead) sample(now time.Time, finished int64) bool {
	if r.at.IsZero() || !now.After(r.at) {
		r.count, r.at = finished, now
		return false
	}
	rate := float64(finished-r.count) / now.Sub(r.at).Seconds()
	r.count, r.at = finished, now
	r.rate = max(rate, 0.75*r.rate+0.25*rate)
	want := min(r.ceil, max(r.floor, int(math.Ceil(r.rate*readAheadWork.Seconds()))))
	if want == r.target {
		return false
	}
	if want != r.floor && want != r.ceil && 4*abs(want-r.target) < r.target {
		return false // within a quarter: not worth resizing every gate
	}
	r.target = want
	return true
}

func abs(x int) int {
	if x < 0 {
		return -x
	}
	return x
}
