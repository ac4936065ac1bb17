package web

import (
	"slices"
	"time"
)

// Check is a probe's verdict.
type Check struct {
	OK     bool   `json:"ok"`
	Reason string `json:"reason,omitempty"`
}

// Source is what the process shows. Its methods are called from HTTP
// handlers, once per request, concurrently: they must be safe for that and
// return promptly — a snapshot, or a round trip with a short deadline (a
// consumer's Live pings its actor tree for at most 2 s) — since a probe
// that blocks is a probe that fails.
type Source interface {
	Live() Check
	Ready() Check
	Status() Status
}

// Status is the document of GET /status, which the console polls. Times are
// in seconds (float64), counts are since the process started.
type Status struct {
	Mode      string     `json:"mode"` // "run" or "swarm"
	Time      time.Time  `json:"time"`
	Live      Check      `json:"live"`
	Ready     Check      `json:"ready"`
	Consumers []Consumer `json:"consumers"`       // swarm: every node's consumers, each with Node set
	Nodes     []Node     `json:"nodes,omitempty"` // swarm only
	// Config: when the configuration took effect, and its reloads
	// (SIGHUP); a turbo run's, and a swarm's own.
	Config *ConfigState `json:"config,omitempty"`
	// Commands are the last control commands (http.control), oldest first.
	Commands []CommandEntry `json:"commands,omitempty"`
	// Control says whether this listener takes control commands, and how
	// (the console offers its actions only then); absent when it does not.
	Control *ControlState `json:"control,omitempty"`
}

// ControlState is how the listener takes control commands.
type ControlState struct {
	// Token: a command needs the bearer token of http.control_token_file
	// (or a verified client certificate); else loopback clients need
	// nothing.
	Token bool `json:"token"`
}

// ConfigState is the life of a process's configuration: when the one
// running was loaded, how many reloads were applied and refused, and why the
// last refusal.
type ConfigState struct {
	LoadedAt  time.Time `json:"loaded_at"`
	Reloads   int64     `json:"reloads"`
	Refused   int64     `json:"refused"`
	LastError string    `json:"last_error,omitempty"`
}

// The modes of Status.Mode.
const (
	ModeRun   = "run"
	ModeSwarm = "swarm"
)

// Consumer is one consumer (of one node, in swarm).
type Consumer struct {
	Name  string `json:"name"`
	Group string `json:"group"`
	Node  *int   `json:"node,omitempty"`
	Ready Check  `json:"ready"`
	// Paused: paused by its operator (Consumer.Pause, POST
	// /consumers/{name}/pause), not by back-pressure (see PausedPartitions).
	Paused bool `json:"paused"`
	// Concurrency is the consumer's concurrency (adaptive: its ceiling),
	// RateLimit its rate limit in records a second (0: none), as they
	// stand: Retuned says a control command changed one of them.
	Concurrency int     `json:"concurrency"`
	RateLimit   float64 `json:"rate_limit"`
	Retuned     bool    `json:"retuned,omitempty"`
	// PausedTopics are the topics its operator paused (every partition of
	// them).
	PausedTopics []string `json:"paused_topics,omitempty"`

	Fetched      int64 `json:"fetched"`
	Processed    int64 `json:"processed"`
	Failed       int64 `json:"failed"` // failed attempts
	Retries      int64 `json:"retries"`
	Skipped      int64 `json:"skipped"`
	DeadLettered int64 `json:"dead_lettered"`
	Outputs      int64 `json:"outputs"`       // output records the brokers acknowledged
	OutputErrors int64 `json:"output_errors"` // output writes that failed
	// Transactions committed and aborted (output.exactly_once).
	Transactions        int64 `json:"transactions,omitempty"`
	TransactionsAborted int64 `json:"transactions_aborted,omitempty"`
	Inherited           int64 `json:"inherited"`
	Commits             int64 `json:"commits"`
	Committed           int64 `json:"committed"`
	Restarts            int64 `json:"restarts"`
	Seeks               int64 `json:"seeks"` // partitions moved by a seek

	InFlight           int64 `json:"in_flight"`
	Buffered           int64 `json:"buffered"`
	PausedPartitions   int64 `json:"paused_partitions"`
	AssignedPartitions int64 `json:"assigned_partitions"`
	Lag                int64 `json:"lag"`

	// StuckAfterSeconds: an unfinished record older than this is "stuck".
	StuckAfterSeconds float64     `json:"stuck_after_seconds"`
	KafkaError        string      `json:"kafka_error,omitempty"`
	Partitions        []Partition `json:"partitions"`
}

// Partition is one partition a consumer holds.
type Partition struct {
	Topic     string `json:"topic"`
	Partition int32  `json:"partition"`
	Owner     string `json:"owner,omitempty"`
	// Committed is the last committed offset; -1: nothing committed yet.
	Committed int64 `json:"committed"`
	// HighWatermark is the partition's high watermark; -1: unknown yet.
	HighWatermark int64 `json:"high_watermark"`
	Lag           int64 `json:"lag"`
	InFlight      int64 `json:"in_flight"`
	Buffered      int64 `json:"buffered"`
	Paused        bool  `json:"paused"`
	// Held: paused by its operator (the partition, or its topic).
	Held bool `json:"held"`
	// OldestUnfinishedSeconds is the age of the oldest record fetched and
	// not finished; 0: nothing unfinished.
	OldestUnfinishedSeconds float64 `json:"oldest_unfinished_seconds"`
	// OldestUnfinishedOffset is that record's offset, absent when nothing
	// is unfinished: the record to skip when the partition is stuck.
	OldestUnfinishedOffset *int64 `json:"oldest_unfinished_offset,omitempty"`
}

// Node is one node process of a swarm.
type Node struct {
	Index              int     `json:"index"`
	PID                int     `json:"pid"`
	State              string  `json:"state"`
	Detail             string  `json:"detail,omitempty"`
	Restarts           int     `json:"restarts"`
	RSSBytes           uint64  `json:"rss_bytes"`
	HeapBytes          uint64  `json:"heap_bytes"`
	SinceReportSeconds float64 `json:"seconds_since_report"`
	Ready              bool    `json:"ready"`
	LastExit           string  `json:"last_exit,omitempty"`
	// From the node's last health report, so that a node whose status
	// document is missing (over its size cap) still shows its progress.
	StatusName     string `json:"status_name"`
	Processed      int64  `json:"processed"`
	InFlight       int64  `json:"in_flight"`
	Buffered       int64  `json:"buffered"`
	Assigned       int64  `json:"assigned_partitions"`
	PartitionMoves int64  `json:"partition_moves"`
	Lag            int64  `json:"lag"`
	KafkaError     string `json:"kafka_error,omitempty"`
}

// normalized returns s as served: empty lists as [] rather than null (the
// console, and jq users, iterate without a check) and a time when the source
// gave none. The source's slices are copied before any write: they may be
// its own.
func (s Status) normalized(now time.Time) Status {
	if s.Time.IsZero() {
		s.Time = now
	}
	if s.Consumers == nil {
		s.Consumers = []Consumer{}
	}
	cloned := false
	for i := range s.Consumers {
		if s.Consumers[i].Partitions != nil {
			continue
		}
		if !cloned {
			s.Consumers = slices.Clone(s.Consumers)
			cloned = true
		}
		s.Consumers[i].Partitions = []Partition{}
	}
	return s
}
