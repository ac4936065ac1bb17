package actors

import "time"

// stopBudget divides shutdown_timeout, the hard bound of a graceful stop
// (Consumer.Stop), between the phases of a drain, so that each phase's
// deadline leaves room for the ones after it:
//
//	0 ─ revoke ─ drain ─ drain+abandon ─ total (= shutdown_timeout)
//
// Running records have until revoke to finish (a partition still draining
// then is released at its last watermark); the tree has until drain to have
// stopped intake, committed and left the group (after that it is torn down
// without its final commits: ErrUncommitted); cancelled handlers then have
// abandon to return (after that they are abandoned: ErrAbandoned); what
// remains is for the actors to stop.
//
// Before, the phases were laid end to end after shutdown_timeout instead of
// within it: against a broker that accepts connections and never answers,
// Stop returned shutdown_timeout + 1.5 s after it was called.
type stopBudget struct {
	revoke, drain, abandon, total time.Duration
}

// stopReserve is the most of shutdown_timeout kept from the records for the
// phases after theirs (commit and leave the group; tear down).
const stopReserve = 2 * time.Second

// newStopBudget keeps a quarter of shutdown_timeout, at most stopReserve,
// for the phases after the records' own: half of it to commit and leave the
// group, three eighths for the teardown, an eighth for the actors to stop.
func newStopBudget(shutdown time.Duration) stopBudget {
	reserve := min(stopReserve, shutdown/4)
	return stopBudget{
		revoke:  shutdown - reserve,
		drain:   shutdown - reserve/2,
		abandon: reserve * 3 / 8,
		total:   shutdown,
	}
}

// groupCloseWait bounds the teardown's wait for the consumer group's
// goroutine: below the abandon phase, so that a teardown is never taken for
// a hung handler because of the network.
func (b stopBudget) groupCloseWait() time.Duration { return min(drainGrace/2, b.abandon*2/3) }
