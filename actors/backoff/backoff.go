// Package backoff computes how long to wait before restarting or retrying
// something that failed.
//
// turbo's supervisors restart failed components and retry failed work;
// retrying at once turns one failure into a hot loop that hammers the broker
// or the downstream system, and retrying in lockstep across instances makes a
// thundering herd. The Policy here grows the delay exponentially and spreads
// it with jitter. It is pure: the caller passes the random value and the
// measured run time, so behaviour is reproducible in tests.
package backoff

import (
	"fmt"
	"math"
	"time"
)

// Policy is an exponential backoff with jitter. Attempt n (n >= 1) has the
// base delay Initial * Multiplier^(n-1), capped at Max, which is then scaled
// by a factor in [1-Jitter, 1] chosen by a random value the caller supplies.
type Policy struct {
	// Initial is the base delay of the first attempt.
	Initial time.Duration
	// Max caps the delay, so a long outage is still probed regularly.
	Max time.Duration
	// Multiplier is the growth of the base delay per attempt; 1 means a
	// constant delay.
	Multiplier float64
	// Jitter is the fraction of the delay that may be randomly taken off:
	// 0 gives exact delays, 1 gives anything between 0 and the base delay.
	Jitter float64
	// ResetAfter is how long something must have run for its earlier
	// failures to be forgiven; 0 disables forgiveness.
	ResetAfter time.Duration
}

// Default is the policy for supervised restarts: first retry after about a
// second, at most about 30s apart, and forgiven after a minute of stable
// running.
var Default = Policy{
	Initial:    time.Second,
	Max:        30 * time.Second,
	Multiplier: 2,
	Jitter:     0.2,
	ResetAfter: time.Minute,
}

// Validate reports the first field of p that is out of range: it needs
// Initial > 0, Max >= Initial, Multiplier >= 1, 0 <= Jitter <= 1 and
// ResetAfter >= 0. The error names the field so configuration mistakes are
// easy to find.
func (p Policy) Validate() error {
	switch {
	case p.Initial <= 0:
		return fmt.Errorf("backoff: Initial must be > 0, got %v", p.Initial)
	case p.Max < p.Initial:
		return fmt.Errorf("backoff: Max must be >= Initial (%v), got %v", p.Initial, p.Max)
	case !(p.Multiplier >= 1): // written negated so that NaN is rejected too
		return fmt.Errorf("backoff: Multiplier must be >= 1, got %v", p.Multiplier)
	case !(p.Jitter >= 0 && p.Jitter <= 1):
		return fmt.Errorf("backoff: Jitter must be between 0 and 1, got %v", p.Jitter)
	case p.ResetAfter < 0:
		return fmt.Errorf("backoff: ResetAfter must be >= 0, got %v", p.ResetAfter)
	}
	return nil
}

// Delay returns the wait before attempt, given a random u in [0, 1). u = 0
// gives the full base delay and u close to 1 takes off almost the whole
// Jitter fraction, so a caller without randomness gets the plain
// exponential. attempt < 1 is treated as 1. The result is never negative and
// never above Max, even for huge attempts or an invalid policy.
func (p Policy) Delay(attempt int, u float64) time.Duration {
	if p.Initial <= 0 || p.Max <= 0 {
		return 0 // an invalid policy must still not produce a negative wait
	}
	if attempt < 1 {
		attempt = 1
	}
	limit := float64(p.Max)
	// Work in float64, where an overflowing power becomes +Inf instead of
	// wrapping, and compare with Max before converting back.
	base := float64(p.Initial) * math.Pow(p.Multiplier, float64(attempt-1))
	if !(base < limit) { // also catches +Inf and NaN
		base = limit
	}
	d := base * (1 - clamp01(p.Jitter)*clamp01(u))
	if !(d > 0) {
		return 0
	}
	if d >= limit {
		return p.Max // float64(Max) may have rounded up; do not convert back
	}
	return time.Duration(d)
}

// State is what a supervisor remembers between failures of one thing.
type State struct {
	// Failures counts consecutive failures, the latest included; it is the
	// attempt number passed to Delay.
	Failures int
}

// Next records a failure of something that had been running for ranFor and
// returns the new state and how long to wait before restarting it, using the
// random u in [0, 1) for jitter. If it ran at least ResetAfter (and
// ResetAfter > 0), the count restarts at 1: a stable period forgives earlier
// failures, so an occasional crash does not inherit the delay of an old
// outage.
func (p Policy) Next(s State, ranFor time.Duration, u float64) (State, time.Duration) {
	n := 1
	switch {
	case p.ResetAfter > 0 && ranFor >= p.ResetAfter:
	case s.Failures >= math.MaxInt:
		n = math.MaxInt
	case s.Failures > 0:
		n = s.Failures + 1
	}
	return State{Failures: n}, p.Delay(n, u)
}

// clamp01 forces x into [0, 1], mapping NaN to 0, so that bad inputs cannot
// push a delay outside its documented bounds.
func clamp01(x float64) float64 {
	switch {
	case !(x > 0):
		return 0
	case x > 1:
		return 1
	}
	return x
}
