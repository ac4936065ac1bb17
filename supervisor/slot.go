package supervisor

import (
	"fmt"
	"time"

	"github.com/turbokafka/turbo/config"
	"github.com/turbokafka/turbo/proto/swarmpb"
)

// slotState is where a node slot is in its life.
type slotState int

const (
	slotWaiting  slotState = iota // no process: waiting to start (again)
	slotStarting                  // process started, no hello yet
	slotRunning                   // hello received, reporting
	slotStopping                  // asked to stop (TERM sent); KILL at killAt
)

// slotStates lists every state, for turbo_swarm_node_state (a gauge per
// state, 1 for the current one).
var slotStates = [...]slotState{slotWaiting, slotStarting, slotRunning, slotStopping}

func (s slotState) String() string {
	return [...]string{"waiting", "starting", "running", "stopping"}[s]
}

// memorySamples is how many consecutive samples over the limit make a node
// over its memory limit: one sample may catch a short peak before a GC.
const memorySamples = 3

// slot is one node index and the process currently filling it. Its methods
// hold the supervisor's judgement, free of processes and clocks, so they are
// tested directly.
type slot struct {
	index    int
	state    slotState
	proc     *process // nil while waiting
	pid      int
	started  time.Time // when the current process started
	lastSeen time.Time // last hello or report from the current process
	// missed is how much of the time since lastSeen (or started) the
	// supervisor itself did not run (pauseDetector): not the node's silence.
	missed   time.Duration
	report   *swarmpb.Report
	status   swarmpb.Status // last status: from a report, or set by the supervisor
	detail   string
	startAt  time.Time // when waiting: when to start
	killAt   time.Time // when stopping: when to KILL
	killed   bool      // SIGKILL sent: only the exit is awaited
	restarts int       // processes started after the first
	// awaitsStart: the process was asked to wait for its Start frame
	// (started before the start gate opened) and has not been sent it.
	awaitsStart bool
	// stopCause is why the supervisor asked the current process to stop
	// (causeExit while it has not: an exit is then the node's own).
	stopCause  restartCause
	restartsBy [numCauses]int // restarts by cause; they add up to restarts
	// startFails counts consecutive starts that failed for want of the
	// supervisor's own resources (retried, never counted as restarts).
	startFails int
	rss        uint64 // last resident size measured from /proc
	memOver    int    // consecutive samples over the memory limit
	lastExit   string
}

// judge returns the status a running or starting node has now, as the
// supervisor sees it: silence beats what the node last said about itself,
// and memory is measured from outside (a hung node is judged too).
func (s *slot) judge(now time.Time, cfg config.Swarm) (swarmpb.Status, string) {
	if silent := s.silence(now); silent > cfg.NodeReportTimeout {
		return swarmpb.Status_STATUS_SILENT, fmt.Sprintf("no report for %s (node_report_timeout %s)", silent.Round(time.Millisecond), cfg.NodeReportTimeout)
	}
	if cfg.MemoryLimit > 0 && s.memOver >= memorySamples {
		return swarmpb.Status_STATUS_MEMORY, fmt.Sprintf("resident memory %s over memory_limit %s for %d samples", config.ByteSize(s.rss), cfg.MemoryLimit, s.memOver)
	}
	if s.report != nil && s.report.Status != swarmpb.Status_STATUS_OK {
		return s.report.Status, s.report.Detail
	}
	return swarmpb.Status_STATUS_OK, ""
}

// sampleMemory records one resident-size measurement.
func (s *slot) sampleMemory(rss uint64, limit config.ByteSize) {
	s.rss = rss
	if limit > 0 && rss > uint64(limit) {
		s.memOver++
	} else {
		s.memOver = 0
	}
}

// silenceVerdict judges a reporting node's silence: past
// node_report_timeout it is overdue (not live: the supervisor stops it);
// past one and a half report intervals, a report is missing, and the node
// is not ready (its last report, however ready, no longer speaks for it)
// long before it is replaced. why is "" while neither holds.
func silenceVerdict(index int, silence time.Duration, cfg config.Swarm) (why string, overdue bool) {
	switch {
	case silence > cfg.NodeReportTimeout:
		return fmt.Sprintf("node %d has not reported for %s (node_report_timeout %s)", index, silence.Round(time.Millisecond), cfg.NodeReportTimeout), true
	case silence > cfg.NodeReportInterval+cfg.NodeReportInterval/2:
		return fmt.Sprintf("node %d has not reported for %s (it reports every %s; it is replaced after node_report_timeout %s)",
			index, silence.Round(time.Millisecond), cfg.NodeReportInterval, cfg.NodeReportTimeout), false
	}
	return "", false
}

// silence is how long the node has said nothing while the supervisor ran.
func (s *slot) silence(now time.Time) time.Duration {
	since := s.lastSeen
	if since.IsZero() {
		since = s.started
	}
	return max(now.Sub(since)-s.missed, 0)
}

// heard records a hello or report: silence starts again.
func (s *slot) heard(now time.Time) {
	s.lastSeen, s.missed = now, 0
}

// restarted records a restart decided after the current process exited,
// under the cause of its stop.
func (s *slot) restarted() {
	s.restarts++
	s.restartsBy[s.stopCause]++
	s.stopCause = causeExit
}

// forgive records that the supervisor did not run for d (a pause of its
// control loop), which the node's silence must not include.
func (s *slot) forgive(d time.Duration) {
	s.missed += d
}
