package supervisor

import "github.com/turbokafka/turbo/proto/swarmpb"

// restartCause is why a node was restarted, as
// turbo_swarm_node_restarts_total{cause} says it.
type restartCause int

const (
	// causeExit: the node exited (or died, or did not start) on its own:
	// the supervisor had not asked it to stop.
	causeExit restartCause = iota
	// causeHung: the supervisor stopped it after node_report_timeout of
	// silence (STATUS_SILENT).
	causeHung
	// causeMemory: stopped for resident memory over memory_limit.
	causeMemory
	// causeStuckHandler: stopped because the node reported a handler
	// stuck past max_handler_time.
	causeStuckHandler
	// causePollStalled: stopped because the node reported it had not
	// polled Kafka for too long.
	causePollStalled
	// causeReload: restarted by a rolling restart after SIGHUP, to run
	// the configuration as it is now (not counted against max_restarts).
	causeReload
	numCauses
)

var causeNames = [numCauses]string{"exit", "hung", "memory", "stuck_handler", "poll_stalled", "reload"}

func (c restartCause) String() string {
	if c < 0 || c >= numCauses {
		return "unknown"
	}
	return causeNames[c]
}

// causeOf is the restart cause of a node the supervisor stops with status
// st. STATUS_OK is a shutdown, never followed by a restart; an unknown
// status (a newer node) counts as the node's own exit.
func causeOf(st swarmpb.Status) restartCause {
	switch st {
	case swarmpb.Status_STATUS_SILENT:
		return causeHung
	case swarmpb.Status_STATUS_MEMORY:
		return causeMemory
	case swarmpb.Status_STATUS_HANDLER_STUCK:
		return causeStuckHandler
	case swarmpb.Status_STATUS_POLL_STALLED:
		return causePollStalled
	default:
		return causeExit
	}
}
