package supervisor

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/turbokafka/turbo/supervisor/web"
)

// maxHTTPConns is the most connections http.listen holds at once; fewer
// when the descriptor limit is tight (httpConnCap).
const maxHTTPConns = web.MaxConns

// What the supervisor needs in descriptors besides the HTTP connections, so
// that a crowd of clients cannot leave it unable to start a node
// (httpConnCap).
const (
	// fdsPerNode: a node's pidfd and health connection, and what starting
	// (fork's error pipe, the new pidfd) and measuring it (/proc/PID/status)
	// take for a moment.
	fdsPerNode = 5
	// fdReserve: everything else — the health listener, connections to
	// the health socket before they are refused, the runtime's own.
	fdReserve = 32
)

// httpConnCap is how many HTTP connections the supervisor may hold and
// still start every node: what the soft RLIMIT_NOFILE leaves after the
// descriptors open now, fdsPerNode per node and fdReserve, between 1 and
// maxHTTPConns. (Go raises the soft limit to the hard one at start and
// gives children the original back, so the soft limit here is usually the
// hard one; with `ulimit -n 1024` both are 1,024.) Measured before this cap:
// 1,000 idle keep-alive connections took the supervisor from 16 to 1,016
// open files, and every node restart then failed with EMFILE.
func httpConnCap(softLimit uint64, open, nodes int) int {
	need := uint64(max(open, 0)) + uint64(nodes)*fdsPerNode + fdReserve
	if softLimit <= need {
		return 1
	}
	return int(min(softLimit-need, maxHTTPConns))
}

// httpSource is the supervisor as web.Source: every answer is built from
// the last published view, so a probe never waits for the control loop.
type httpSource struct{ s *Supervisor }

func (h httpSource) Live() web.Check  { return h.s.live(time.Now()) }
func (h httpSource) Ready() web.Check { return readyCheck(h.s.view.Load()) }
func (h httpSource) Status() web.Status {
	now := time.Now()
	st := swarmStatus(h.s.view.Load(), h.s.live(now), now, h.s.badReports)
	st.Config = h.s.config.Load()
	return st
}

// live is GET /healthz: the control loop runs (it published within three
// supervision intervals and a second) and every node reported in time.
func (s *Supervisor) live(now time.Time) web.Check {
	v := s.view.Load()
	switch {
	case v == nil:
		return web.Check{Reason: "the supervisor's control loop has not run yet"}
	case now.Sub(v.at) > 3*s.o.Swarm.SupervisionInterval+time.Second:
		return web.Check{Reason: fmt.Sprintf("the supervisor's control loop has not run for %s (supervision_interval %s)",
			now.Sub(v.at).Round(time.Millisecond), s.o.Swarm.SupervisionInterval)}
	case !v.healthy:
		return web.Check{Reason: v.why}
	}
	return web.Check{OK: true}
}

// readyCheck is GET /readyz: every node runs, reported within
// node_report_timeout, and its last report says it is ready (every
// consumer in a group session, Kafka answering). The reason names the
// first node that is not, and why.
func readyCheck(v *view) web.Check {
	if v == nil {
		return web.Check{Reason: "the supervisor's control loop has not run yet"}
	}
	if v.stopping {
		return web.Check{Reason: "the swarm is stopping"}
	}
	for i, n := range v.nodes {
		o := v.obs[i]
		switch {
		case o.state != slotRunning:
			why := fmt.Sprintf("node %d is %s", n.Index, o.state)
			if n.LastExit != "" {
				why += " (last exit: " + n.LastExit + ")"
			}
			return web.Check{Reason: why}
		case o.report == nil:
			return web.Check{Reason: fmt.Sprintf("node %d has not reported yet", n.Index)}
		case o.silent != "":
			return web.Check{Reason: o.silent}
		case !o.report.Ready:
			detail := o.report.ReadyDetail
			if detail == "" {
				detail = "it gave no reason"
			}
			return web.Check{Reason: fmt.Sprintf("node %d is not ready: %s", n.Index, detail)}
		}
	}
	return web.Check{OK: true}
}

// swarmStatus is GET /status in swarm mode: the nodes, and every node's
// consumers from the /status document of its last report, each marked with
// its node. A node without a document (not reported yet, not running, or
// one that does not decode: logged through bad) contributes no consumer.
func swarmStatus(v *view, live web.Check, now time.Time, bad *badReports) web.Status {
	st := web.Status{Mode: web.ModeSwarm, Time: now, Live: live, Ready: readyCheck(v)}
	if v == nil {
		return st
	}
	for i, n := range v.nodes {
		o := v.obs[i]
		st.Nodes = append(st.Nodes, web.Node{
			Index: n.Index, PID: n.PID, State: n.State, Detail: n.Detail, Restarts: n.Restarts,
			RSSBytes: n.RSSBytes, HeapBytes: n.HeapBytes, SinceReportSeconds: n.SinceReport,
			Ready: o.state == slotRunning && o.report != nil && o.report.Ready, LastExit: n.LastExit,
			StatusName: n.StatusName, Processed: n.Processed, InFlight: n.InFlight, Buffered: n.Buffered,
			Assigned: n.Assigned, PartitionMoves: n.PartitionMove, Lag: n.Lag, KafkaError: n.KafkaError,
		})
		if o.report == nil || len(o.report.StatusJson) == 0 {
			continue
		}
		var doc web.Status
		if err := json.Unmarshal(o.report.StatusJson, &doc); err != nil {
			bad.note(n.Index, "status", o.report, fmt.Errorf("%w: %w", errBadStatus, err))
			continue
		}
		for _, c := range doc.Consumers {
			c.Node = &n.Index
			st.Consumers = append(st.Consumers, c)
		}
	}
	return st
}
