package supervisor

import (
	"time"

	"github.com/turbokafka/turbo/proto/swarmpb"
)

// hooks are called on swarm events, each also logged as a structured line
// whose "event" field is the name below: this package's tests observe the
// supervisor through them. They run on the supervisor's control loop and
// must return quickly. Any may be nil.
type hooks struct {
	// AfterFork runs once node index runs as pid: swarm.manager.after_fork.
	AfterFork func(index, pid int)
	// Control runs on every supervision tick: swarm.manager.control.
	Control func(nodes []NodeStatus)
	// Stopping runs when the supervisor asks a node to stop, with the
	// status that made it (STATUS_OK on shutdown): swarm.manager.stopping.
	Stopping func(index, pid int, status swarmpb.Status, detail string)
	// Terminating runs when a node that did not stop in time is killed:
	// swarm.manager.terminating.
	Terminating func(index, pid int)
}

// NodeStatus is one node slot as the supervisor sees it (GET /status).
type NodeStatus struct {
	Index         int     `json:"index"`
	PID           int     `json:"pid"`
	State         string  `json:"state"`
	Status        int32   `json:"status"`
	StatusName    string  `json:"status_name"`
	Detail        string  `json:"detail,omitempty"`
	SinceReport   float64 `json:"seconds_since_report"`
	Restarts      int     `json:"restarts"`
	RSSBytes      uint64  `json:"rss_bytes"`
	HeapBytes     uint64  `json:"heap_bytes"`
	Processed     int64   `json:"processed"`
	InFlight      int64   `json:"in_flight"`
	Buffered      int64   `json:"buffered"`
	Assigned      int64   `json:"assigned_partitions"`
	PartitionMove int64   `json:"partition_moves"`
	Lag           int64   `json:"lag"`
	KafkaError    string  `json:"kafka_error,omitempty"`
	LastExit      string  `json:"last_exit,omitempty"`
}

func (s *slot) snapshot(now time.Time) NodeStatus {
	n := NodeStatus{
		Index: s.index, PID: s.pid, State: s.state.String(), Restarts: s.restarts,
		Status: int32(s.status), StatusName: s.status.String(), Detail: s.detail,
		RSSBytes: s.rss, LastExit: s.lastExit, SinceReport: -1,
	}
	if s.proc == nil {
		n.PID = 0
	}
	if !s.lastSeen.IsZero() && s.proc != nil {
		n.SinceReport = now.Sub(s.lastSeen).Seconds()
	}
	if r := s.report; r != nil {
		n.HeapBytes, n.Processed, n.InFlight, n.Buffered = r.HeapBytes, r.Processed, r.InFlight, r.Buffered
		n.Assigned, n.PartitionMove, n.Lag = r.AssignedPartitions, r.PartitionMoves, r.Lag
		n.KafkaError = r.KafkaError
	}
	return n
}
