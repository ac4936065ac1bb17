// Package adaptive decides how many attempts a consumer keeps in flight
// toward its downstream (concurrency_mode: adaptive): the limit moves
// between a minimum and a maximum by an AIMD rule driven by what the
// downstream says and how fast it answers.
//
//   - Push-back (an HTTP 429 or 503, a Go handler's actors.ErrBackpressure)
//     cuts the limit by 20 % at once. Against a capacity that refuses
//     beyond it, the sawtooth's mean is what the cut leaves: in the model
//     test, halving held the steady state to about 0.65–0.7 of the
//     capacity, a 30 % cut to 0.90, a 20 % cut to 0.96 (at 160 refusals a
//     second instead of 60 at 200 in flight of 20 ms). Push-back from attempts that started
//     before the last cut is the same congestion, already answered: it cuts
//     nothing more, so a burst of 503s cuts once, not fifty times.
//   - Queueing: when the recent latency (a moving average) exceeds twice the
//     downstream's unloaded latency (the lowest of the last 5 to 10 s, so
//     that a downstream that became slower for good is learned again), the
//     limit is cut by a tenth, once per congestion episode as above.
//   - Otherwise each success while at least half the limit is in use grows
//     it: by one per success until the first cut (slow start: the limit
//     doubles every round trip), then by √limit per round trip (√limit/limit
//     per success): from 25 to 50 in five round trips, from 50 to 200 in
//     fifteen.
//
// A Limiter has no clock and no goroutine: the caller passes the times, so
// the model test can run minutes of traffic in milliseconds.
package adaptive

import (
	"fmt"
	"math"
	"time"
)

// Signal is what an attempt's outcome says about the downstream.
type Signal int8

const (
	// Done: the attempt ended without push-back (a success, or a failure of
	// the record's own).
	Done Signal = iota
	// Pushback: the downstream refused for lack of capacity.
	Pushback
)

// Tunables. They are constants, not settings: the rule is meant to need
// none beyond its bounds.
const (
	cutFactor      = 0.8 // on push-back
	queueCutFactor = 0.9 // on latency above queueTolerance × unloaded
	queueTolerance = 2.0
	recentWeight   = 0.1 // of each latency in the recent average
	baseWindow     = 5 * time.Second
)

// Limiter is the rule's state. It is not safe for concurrent use.
type Limiter struct {
	min, max  float64
	limit     float64
	slowStart bool
	lastCut   time.Time // attempts started before it are the congestion already answered
	// The downstream's unloaded latency: the lowest of the current window
	// (since winStart) and of the one before.
	winMin, prevMin time.Duration
	winStart        time.Time
	recent          float64 // moving average of latencies, in ns
}

// New returns a Limiter between min and max (1 ≤ min ≤ max), starting at
// min in slow start.
func New(min, max int) *Limiter {
	if min < 1 || max < min {
		panic(fmt.Sprintf("adaptive: bounds %d..%d", min, max))
	}
	return &Limiter{min: float64(min), max: float64(max), limit: float64(min), slowStart: true}
}

// SetMax moves the upper bound to n (at least 1; the lower bound comes
// down to it if it was above): a limit above it comes down to it at once,
// and from below the rule grows it as before.
func (l *Limiter) SetMax(n int) {
	l.max = float64(max(n, 1))
	l.min = min(l.min, l.max)
	l.limit = min(l.limit, l.max)
}

// Limit is how many attempts may be in flight now.
func (l *Limiter) Limit() int { return int(l.limit) }

// Observe takes the outcome of an attempt that started at start and ended
// at end, when inFlight attempts (this one included) were out.
func (l *Limiter) Observe(start, end time.Time, sig Signal, inFlight int) {
	lat := max(end.Sub(start), 0)
	fresh := !start.Before(l.lastCut) // started after the last cut
	if sig == Pushback {
		if fresh {
			l.cut(end, cutFactor)
		}
		return
	}
	l.note(end, max(lat, 1))
	if l.recent == 0 {
		l.recent = float64(lat)
	} else {
		l.recent += recentWeight * (float64(lat) - l.recent)
	}
	if fresh && l.recent > queueTolerance*float64(l.base()) {
		l.cut(end, queueCutFactor)
		return
	}
	if 2*inFlight < int(l.limit) {
		return // the limit is not what bounds the traffic: no evidence it could be higher
	}
	if l.slowStart {
		l.limit++
	} else {
		l.limit += math.Sqrt(l.limit) / l.limit
	}
	l.limit = min(l.limit, l.max)
}

// note folds a latency into the windowed minimum.
func (l *Limiter) note(now time.Time, lat time.Duration) {
	if now.Sub(l.winStart) >= baseWindow {
		l.prevMin, l.winMin, l.winStart = l.winMin, 0, now
	}
	if l.winMin == 0 || lat < l.winMin {
		l.winMin = lat
	}
}

// base is the downstream's unloaded latency as last seen.
func (l *Limiter) base() time.Duration {
	if l.prevMin != 0 && l.prevMin < l.winMin {
		return l.prevMin
	}
	return l.winMin
}

func (l *Limiter) cut(now time.Time, factor float64) {
	l.limit = max(l.min, l.limit*factor)
	l.lastCut = now
	l.slowStart = false
	// The latency average belongs to the load before the cut.
	l.recent = float64(l.base())
}
