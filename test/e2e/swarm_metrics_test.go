//go:build linux

package e2e

import (
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil/promlint"
	dto "github.com/prometheus/client_model/go"
	"github.com/turbokafka/turbo/test/testkit"
	"github.com/turbokafka/turbo/test/testkit/scrape"
)

// scrapeSwarm returns the supervisor's /metrics, raw and parsed; empty
// while nothing listens yet.
func scrapeSwarm(t *testing.T, live string) (string, map[string]*dto.MetricFamily) {
	t.Helper()
	m, err := scrape.Get("http://" + live + "/metrics")
	if err != nil {
		if strings.Contains(err.Error(), "connection refused") {
			return "", nil // not listening yet
		}
		t.Fatal(err)
	}
	return string(m.Raw), m.Families
}

// nodeFamilies returns the names of the turbo_ families (the nodes' own,
// not the supervisor's turbo_swarm_) that carry a series of every node in
// nodes.
func nodeFamilies(fams map[string]*dto.MetricFamily, nodes ...string) []string {
	var out []string
	for name, f := range fams {
		if !strings.HasPrefix(name, "turbo_") || strings.HasPrefix(name, "turbo_swarm_") {
			continue
		}
		seen := nodesOf(f)
		all := true
		for _, n := range nodes {
			all = all && seen[n]
		}
		if all {
			out = append(out, name)
		}
	}
	return out
}

// nodesOf returns the node labels of f's series.
func nodesOf(f *dto.MetricFamily) map[string]bool {
	seen := map[string]bool{}
	for _, m := range f.GetMetric() {
		if v, ok := scrape.Label(m, "node"); ok {
			seen[v] = true
		}
	}
	return seen
}

func restartsOf(fams map[string]*dto.MetricFamily, node, cause string) (float64, bool) {
	for _, m := range fams["turbo_swarm_node_restarts_total"].GetMetric() {
		n, _ := scrape.Label(m, "node")
		c, _ := scrape.Label(m, "cause")
		if n == node && c == cause {
			return m.GetCounter().GetValue(), true
		}
	}
	return 0, false
}

// A real `turbo swarm` of two nodes with
// http.listen: its /metrics carries both nodes' turbo_* series with
// node="0" and node="1" (and every series has a node label, and the whole
// passes the linter); a node killed with SIGKILL increments
// turbo_swarm_node_restarts_total{node="1",cause="exit"} to 1; /status
// (what the console polls) lists both nodes and their consumers.
func TestSwarmMetricsCarryEveryNode(t *testing.T) {
	t.Parallel()
	topic := testkit.TopicName("orders")
	addr := testkit.Cluster(t, 4, topic)
	testkit.ProduceWithBinary(t, addr, topic, 200, 20)
	ledger := testkit.NewLedger(0)
	_, live := testkit.StartHTTP(t, nil, nil, "swarm", "--config", swarmConfig(t, addr, topic, ledger.Endpoint(t), ""))

	var fams map[string]*dto.MetricFamily
	var raw string
	testkit.Eventually(t, 60*time.Second, `a turbo_ family with series of node="0" and node="1" on the supervisor's /metrics`, func() bool {
		raw, fams = scrapeSwarm(t, live)
		return len(nodeFamilies(fams, "0", "1")) > 0
	})
	both := nodeFamilies(fams, "0", "1")
	t.Logf("families with both nodes' series: %d (e.g. %s)", len(both), both[0])
	for name, f := range fams {
		for _, m := range f.Metric {
			if _, ok := scrape.Label(m, "node"); !ok && name != "turbo_swarm_restart_budget_remaining" {
				t.Errorf("%s has a series without a node label: %v", name, m)
			}
		}
	}
	for _, node := range []string{"0", "1", "supervisor"} {
		if !nodesOf(fams["go_goroutines"])[node] {
			t.Errorf("no go_goroutines{node=%q}", node)
		}
	}
	problems, err := promlint.New(strings.NewReader(raw)).Lint()
	if err != nil {
		t.Errorf("promlint: %v", err)
	}
	for _, p := range problems {
		t.Errorf("promlint: %s: %s", p.Metric, p.Text)
	}

	var st swarmStatus
	testkit.Eventually(t, 30*time.Second, "/status listing both nodes running, with consumers of both", func() bool {
		st = readStatus(t, live)
		return st.Mode == "swarm" && len(st.Nodes) == 2 && st.Nodes[0].State == "running" && st.Nodes[1].State == "running" &&
			st.Nodes[0].Partitions != "" && st.Nodes[1].Partitions != ""
	})
	if v, ok := restartsOf(fams, "1", "exit"); !ok || v != 0 {
		t.Fatalf(`turbo_swarm_node_restarts_total{node="1",cause="exit"} = %v (present: %v) before the kill, want 0`, v, ok)
	}
	victim := st.Nodes[1].PID
	if err := syscall.Kill(victim, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	killed := time.Now()
	testkit.Eventually(t, 30*time.Second, `turbo_swarm_node_restarts_total{node="1",cause="exit"} = 1`, func() bool {
		_, fams = scrapeSwarm(t, live)
		v, _ := restartsOf(fams, "1", "exit")
		return v == 1
	})
	counted := time.Since(killed)
	for _, cause := range []string{"hung", "memory", "stuck_handler", "poll_stalled"} {
		if v, ok := restartsOf(fams, "1", cause); !ok || v != 0 {
			t.Errorf(`turbo_swarm_node_restarts_total{node="1",cause=%q} = %v (present: %v), want 0`, cause, v, ok)
		}
	}
	if v, _ := restartsOf(fams, "0", "exit"); v != 0 {
		t.Errorf(`turbo_swarm_node_restarts_total{node="0",cause="exit"} = %v, want 0`, v)
	}
	testkit.Eventually(t, 30*time.Second, "node 1 replaced and both nodes on /status again", func() bool {
		st = readStatus(t, live)
		return len(st.Nodes) == 2 && st.Nodes[1].PID != 0 && st.Nodes[1].PID != victim && st.Nodes[1].State == "running" && st.Nodes[1].Restarts == 1
	})
	t.Logf("FIGURES swarm-metrics: %d families on /metrics (%d with both nodes' series); kill -9 of node 1 → restarts_total{cause=exit} 1 after %s",
		len(fams), len(both), counted.Round(time.Millisecond))
}
