//go:build linux

package supervisor

import (
	"syscall"
	"testing"
	"time"

	"github.com/turbokafka/turbo/proto/swarmpb"
)

// reports returns the last report of every node slot's current process
// (nil for a slot without one), as last published.
func (r *swarmRun) reports() []*swarmpb.Report {
	v := r.sup.view.Load()
	if v == nil {
		return nil
	}
	out := make([]*swarmpb.Report, len(v.obs))
	for i, o := range v.obs {
		out[i] = o.report
	}
	return out
}

// started reports whether every node slot's process says it has started
// (mode gated).
func started(reps []*swarmpb.Report, nodes int) bool {
	if len(reps) != nodes {
		return false
	}
	for _, rep := range reps {
		if rep == nil || gatedOutcome(rep.Processed) == gatedWaiting {
			return false
		}
	}
	return true
}

// The nodes of a swarm's first start are held until every one of them has
// said hello, then let go together by the supervisor's Start frame; a
// node restarted later starts at once.
func TestFirstStartNodesStartTogether(t *testing.T) {
	const late = time.Second
	t.Setenv(envLateJoin, late.String())
	cfg := fastSwarm(3)
	cfg.NodeReportTimeout = 30 * time.Second // the gate's bound: not what opens it here
	r := startSwarm(t, "gated", cfg)
	eventually(t, 20*time.Second, "3 nodes started", func() bool { return started(r.reports(), 3) })
	reps := r.reports()
	first, last := reps[0].LastPollUnixNano, reps[0].LastPollUnixNano
	for i, rep := range reps {
		if o := gatedOutcome(rep.Processed); o != gatedByFrame {
			t.Errorf("node %d started with outcome %d, want %d (by the Start frame)", i, o, gatedByFrame)
		}
		first, last = min(first, rep.LastPollUnixNano), max(last, rep.LastPollUnixNano)
	}
	spread := time.Duration(last - first)
	t.Logf("node 2 joined %s after the others; the three started within %s of each other", late, spread)
	if spread >= late/2 {
		t.Errorf("the nodes started %s apart: the first did not wait for node 2, which joined %s late", spread, late)
	}

	pid := r.sup.Status()[0].PID
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	eventually(t, 20*time.Second, "node 0 restarted and started", func() bool {
		st := r.sup.Status()
		rep := r.reports()[0]
		return st[0].PID != pid && st[0].PID != 0 && rep != nil && gatedOutcome(rep.Processed) != gatedWaiting
	})
	if o := gatedOutcome(r.reports()[0].Processed); o != gatedNotAsked {
		t.Errorf("the restarted node 0 started with outcome %d, want %d (not asked to wait)", o, gatedNotAsked)
	}
}

// A node that does not say hello does not hold the others for ever: the
// gate opens once node_report_timeout has passed, and the nodes that joined
// get their Start frame then.
func TestStartGateOpensAtItsBound(t *testing.T) {
	t.Setenv(envLateJoin, time.Hour.String())
	cfg := fastSwarm(2)
	// Node 0 must say hello before the bound (fastSwarm's 4 s) for the
	// Start frame to be its way of starting.
	begin := time.Now()
	r := startSwarm(t, "gated", cfg)
	eventually(t, 20*time.Second, "node 0 started", func() bool {
		reps := r.reports()
		return len(reps) == 2 && reps[0] != nil && gatedOutcome(reps[0].Processed) != gatedWaiting
	})
	rep := r.reports()[0]
	took := time.Unix(0, rep.LastPollUnixNano).Sub(begin)
	t.Logf("node 0 started %s after the swarm (node_report_timeout %s), node 1 never having joined", took.Round(time.Millisecond), cfg.NodeReportTimeout)
	if o := gatedOutcome(rep.Processed); o != gatedByFrame {
		t.Errorf("node 0 started with outcome %d, want %d (by the Start frame)", o, gatedByFrame)
	}
	if took < cfg.NodeReportTimeout {
		t.Errorf("node 0 started %s after the swarm, before the gate's bound %s, though node 1 never joined", took, cfg.NodeReportTimeout)
	}
}
