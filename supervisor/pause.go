package supervisor

import "time"

// pauseSlackFloor is the least delay beyond supervision_interval that counts
// as a pause of the control loop: scheduling jitter and a fork or two are
// not one.
const pauseSlackFloor = 250 * time.Millisecond

// pauseDetector tells the time the control loop could not run from the time
// it ran. The loop wakes at least every supervision_interval while the
// process runs (its ticker), so a longer gap between two wakes means the
// supervisor itself was stopped (SIGSTOP, a frozen cgroup, a suspended VM) or
// starved. During such a gap nothing read the nodes' reports — they wait on
// the health socket — so it must not count as the nodes' silence: measured
// before this rule, a supervisor stopped for 15 s judged both its healthy
// nodes silent ("no report for 15.37s") the moment it continued and
// restarted them. No clock helps here: CLOCK_MONOTONIC and CLOCK_BOOTTIME
// both advance while a process is stopped.
//
// It is pure: time is an input.
type pauseDetector struct {
	interval time.Duration // supervision_interval: the longest the loop waits while it runs
	last     time.Time     // the previous wake; zero before the first
}

// slack is how far past interval a wake may come without counting as a
// pause.
func (p *pauseDetector) slack() time.Duration { return max(p.interval, pauseSlackFloor) }

// wake is called each time the control loop wakes, before it judges
// anything. It returns the part of the time since the previous wake that
// the loop did not run: zero normally; after a gap longer than interval +
// slack, the gap less one interval (the loop's own normal wait), so that
// node silence restarts as if the loop had been waiting one tick.
func (p *pauseDetector) wake(now time.Time) time.Duration {
	prev := p.last
	p.last = now
	if prev.IsZero() {
		return 0
	}
	gap := now.Sub(prev)
	if gap <= p.interval+p.slack() {
		return 0
	}
	return gap - p.interval
}
