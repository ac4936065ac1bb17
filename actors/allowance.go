package actors

import "time"

// commitAllowance decides when a partition that has just drained — every
// record read from it finished, up to the high watermark — may commit at
// once rather than at the next commit_interval tick.
//
// Waiting for the tick costs half an interval on average, at the moment it
// matters most: when a burst or a backlog has just been worked off, and a
// deploy, a rebalance or a benchmark is waiting for the commit. Committing
// at every drain would instead cost a commit per record for a partition fed
// a trickle (each record drains it). So the allowance is a token bucket in
// units of time: it fills at one commit per interval up to two, every tick
// commit spends one, and a drain commits at once only while one is left.
// Over any stretch of time T a partition therefore commits at most
// T/interval + 2 times: under steady traffic the ticks spend what fills, so
// drain commits stop after the first two; at the end of a backlog, which
// only the ticks were spending, one is always there.
//
// Pure: the caller passes the clock. The zero value is full.
type commitAllowance struct {
	credit time.Duration // what is left, in intervals' worth; up to burst
	at     time.Time     // when credit was last brought up to date; zero: never (full)
}

// allowanceBurst is how many commits the allowance holds at most.
const allowanceBurst = 2

// refill brings credit up to date at now.
func (a *commitAllowance) refill(now time.Time, interval time.Duration) {
	full := allowanceBurst * interval
	if a.at.IsZero() {
		a.credit, a.at = full, now
		return
	}
	if elapsed := now.Sub(a.at); elapsed > 0 {
		a.credit = min(full, a.credit+elapsed)
		a.at = now
	}
}

// ticked spends one commit for a commit the interval's tick sent. Ticks
// come once per interval, as fast as the allowance fills, so they are never
// refused: credit may go below zero for a while (a drain commit just before
// a tick), which only delays the next drain commit.
func (a *commitAllowance) ticked(now time.Time, interval time.Duration) {
	a.refill(now, interval)
	a.credit -= interval
}

// drained reports whether a partition that drained at now may commit at
// once, and spends the commit if so.
func (a *commitAllowance) drained(now time.Time, interval time.Duration) bool {
	a.refill(now, interval)
	if a.credit < interval {
		return false
	}
	a.credit -= interval
	return true
}
