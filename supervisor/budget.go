package supervisor

import "time"

// restartBudget allows at most max restarts within any window of the given
// length, like an Erlang supervisor's intensity and period.
type restartBudget struct {
	max    int
	window time.Duration
	times  []time.Time // restarts within the window, oldest first
}

// allow records a restart at now and reports whether it fits the budget.
// A refused restart is not recorded.
func (b *restartBudget) allow(now time.Time) bool {
	b.times = append(b.times[:0], b.times[b.expired(now):]...)
	if len(b.times) >= b.max {
		return false
	}
	b.times = append(b.times, now)
	return true
}

// remaining is how many restarts allow would still grant at now, one after
// the other (turbo_swarm_restart_budget_remaining): max less the restarts
// within the window. It changes nothing.
func (b *restartBudget) remaining(now time.Time) int {
	return max(b.max-(len(b.times)-b.expired(now)), 0)
}

// expired is how many of the oldest restarts have left the window at now.
func (b *restartBudget) expired(now time.Time) int {
	cut := 0
	for cut < len(b.times) && now.Sub(b.times[cut]) >= b.window {
		cut++
	}
	return cut
}

// Retry delays of a node start that failed for want of the supervisor's own
// resources: short at first (a descriptor is often back at once), never so
// long that a node stays down for minutes once they are back.
const (
	startRetryMin = 100 * time.Millisecond
	startRetryMax = 5 * time.Second
)

// startRetryDelay is the wait before the next start after failures
// consecutive starts that failed for want of the supervisor's own
// resources: doubling from startRetryMin, capped at startRetryMax. Such
// failures are not the node's, so they never count against max_restarts.
func startRetryDelay(failures int) time.Duration {
	d := startRetryMin
	for i := 1; i < failures && d < startRetryMax; i++ {
		d *= 2
	}
	return min(d, startRetryMax)
}
