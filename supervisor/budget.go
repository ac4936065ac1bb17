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
	cut := 0
	for cut < len(b.times) && now.Sub(b.times[cut]) >= b.window {
		cut++
	}
	b.times = append(b.times[:0], b.times[cut:]...)
	if len(b.times) >= b.max {
		return false
	}
	b.times = append(b.times, now)
	return true
}
