package supervisor

import (
	"bytes"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/rs/zerolog"
	"github.com/turbokafka/turbo/config"
	"github.com/turbokafka/turbo/proto/swarmpb"
	"github.com/turbokafka/turbo/test/testkit/scrape"
	"google.golang.org/protobuf/encoding/protowire"
)

// nodeMetrics encodes what a node sends: its registry (the Go collector,
// like a real node's, and a turbo counter at processed) as a delimited
// MetricFamily stream.
func nodeMetrics(t *testing.T, processed float64) []byte {
	t.Helper()
	reg := prometheus.NewRegistry()
	c := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "turbo_records_processed_total", Help: "Records handled."}, []string{"consumer"})
	c.WithLabelValues("orders").Add(processed)
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}), c)
	fams, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	enc := expfmt.NewEncoder(&buf, metricsFormat)
	for _, f := range fams {
		if err := enc.Encode(f); err != nil {
			t.Fatal(err)
		}
	}
	return buf.Bytes()
}

// fakeSupervisor is a Supervisor of n nodes with v published, as the
// control loop would publish it, and its log in logs.
func fakeSupervisor(n int, v *view, logs *bytes.Buffer) *Supervisor {
	log := zerolog.New(logs)
	s := &Supervisor{o: Options{Swarm: config.Swarm{Nodes: n, SupervisionInterval: time.Second}, Log: log}, badReports: &badReports{log: log}}
	if v != nil {
		s.view.Store(v)
	}
	return s
}

// runningView is a view of nodes all running, node i with report reports[i].
func runningView(reports ...*swarmpb.Report) *view {
	v := &view{at: time.Now(), healthy: true, budgetLeft: 10}
	for i, r := range reports {
		v.nodes = append(v.nodes, NodeStatus{Index: i, PID: 100 + i, State: "running", RSSBytes: uint64(1000 + i)})
		v.obs = append(v.obs, nodeView{state: slotRunning, report: r})
	}
	return v
}

func family(fams []*dto.MetricFamily, name string) *dto.MetricFamily {
	for _, f := range fams {
		if f.GetName() == name {
			return f
		}
	}
	return nil
}

func labelValue(m *dto.Metric, name string) string {
	v, _ := scrape.Label(m, name)
	return v
}

// The supervisor's /metrics: its own go_* and process_* with
// node="supervisor" and every node's, merged into one family per name,
// each node's series with its node label; the whole passes the linter.
func TestGathererMergesNodesFamilies(t *testing.T) {
	var logs bytes.Buffer
	s := fakeSupervisor(2, runningView(&swarmpb.Report{Metrics: nodeMetrics(t, 5)}, &swarmpb.Report{Metrics: nodeMetrics(t, 7)}), &logs)
	g := s.gatherer()
	fams, err := g.Gather()
	if err != nil {
		t.Fatalf("Gather: %v", err)
	}
	for _, name := range []string{"go_goroutines", "process_cpu_seconds_total"} {
		f := family(fams, name)
		if f == nil {
			t.Fatalf("no %s family", name)
		}
		var nodes []string
		for _, m := range f.Metric {
			nodes = append(nodes, labelValue(m, NodeLabel))
		}
		if got := strings.Join(nodes, ","); got != "0,1,supervisor" {
			t.Errorf("%s: node labels %s, want 0,1,supervisor (one family, one series each)", name, got)
		}
	}
	f := family(fams, "turbo_records_processed_total")
	if f == nil || len(f.Metric) != 2 {
		t.Fatalf("turbo_records_processed_total = %v, want a series per node", f)
	}
	for i, want := range []float64{5, 7} {
		m := f.Metric[i]
		if labelValue(m, NodeLabel) != []string{"0", "1"}[i] || labelValue(m, "consumer") != "orders" || m.GetCounter().GetValue() != want {
			t.Errorf("series %d = %v, want node %d consumer orders value %v", i, m, i, want)
		}
	}
	if problems, err := testutil.GatherAndLint(g); err != nil || len(problems) > 0 {
		t.Errorf("GatherAndLint: %v %v", problems, err)
	}
	if logs.Len() != 0 {
		t.Errorf("logged for good reports: %s", logs.String())
	}
}

// A node whose metrics do not decode contributes none (the others are
// served), and is logged once per report however often it is scraped; a
// node without a report, or whose process is gone, contributes none.
func TestGathererLeavesOutBadNodeMetrics(t *testing.T) {
	var logs bytes.Buffer
	good := nodeMetrics(t, 3)
	bad := &swarmpb.Report{Metrics: append(append([]byte{}, good...), 0x05, 0x0a)} // a family cut short
	v := runningView(&swarmpb.Report{Metrics: good}, bad, nil)
	s := fakeSupervisor(3, v, &logs)
	g := s.gatherer()
	for range 3 {
		fams, err := g.Gather()
		if err != nil {
			t.Fatalf("Gather: %v", err)
		}
		f := family(fams, "turbo_records_processed_total")
		if f == nil || len(f.Metric) != 1 || labelValue(f.Metric[0], NodeLabel) != "0" {
			t.Fatalf("turbo_records_processed_total = %v, want node 0's series only", f)
		}
	}
	if n := strings.Count(logs.String(), `"part":"metrics"`); n != 1 || !strings.Contains(logs.String(), `"node":1`) {
		t.Errorf("logged %d times, want once naming node 1: %s", n, logs.String())
	}
	// A new bad report is logged again.
	next := *runningView(&swarmpb.Report{Metrics: good}, &swarmpb.Report{Metrics: []byte{0xff}}, nil)
	s.view.Store(&next)
	if _, err := g.Gather(); err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(logs.String(), `"part":"metrics"`); n != 2 {
		t.Errorf("a second bad report logged %d lines in all, want 2", n)
	}
}

func TestDecodeFamilies(t *testing.T) {
	good := nodeMetrics(t, 1)
	fams, err := decodeFamilies(good, maxNodeFamilies)
	if err != nil || len(fams) < 3 {
		t.Fatalf("decodeFamilies(a registry's stream) = %d families, %v", len(fams), err)
	}
	if _, err := decodeFamilies(good, len(fams)-1); !errors.Is(err, errBadMetrics) || !strings.Contains(err.Error(), "more than") {
		t.Errorf("over the family bound: %v, want errBadMetrics", err)
	}
	if got, err := decodeFamilies(nil, maxNodeFamilies); err != nil || len(got) != 0 {
		t.Errorf("empty stream: %v, %v", got, err)
	}
	for name, in := range map[string][]byte{
		// Announces 2^62 bytes: refused before anything is allocated
		// (expfmt's decoder alone would try to).
		"huge length":  protowire.AppendVarint(nil, 1<<62),
		"bad varint":   bytes.Repeat([]byte{0xff}, 11),
		"truncated":    good[:len(good)-1],
		"not protobuf": {0x03, 0xff, 0xff, 0xff},
		"bad name":     append(protowire.AppendVarint(nil, 5), 0x0a, 0x03, '1', ' ', 'x'),
	} {
		if _, err := decodeFamilies(in, maxNodeFamilies); !errors.Is(err, errBadMetrics) {
			t.Errorf("%s: %v, want errBadMetrics", name, err)
		}
	}
}

// FuzzDecodeFamilies: any bytes give families or errBadMetrics, never a
// panic nor a huge allocation, and every family decoded has a name.
func FuzzDecodeFamilies(f *testing.F) {
	f.Add([]byte{})
	f.Add(protowire.AppendVarint(nil, 1<<62))
	reg := prometheus.NewRegistry()
	reg.MustRegister(prometheus.NewGauge(prometheus.GaugeOpts{Name: "g", Help: "h", ConstLabels: prometheus.Labels{"node": "x"}}))
	fams, _ := reg.Gather()
	var buf bytes.Buffer
	expfmt.NewEncoder(&buf, metricsFormat).Encode(fams[0])
	f.Add(buf.Bytes())
	f.Fuzz(func(t *testing.T, b []byte) {
		fams, err := decodeFamilies(b, 16)
		if err != nil {
			if !errors.Is(err, errBadMetrics) {
				t.Fatalf("error %v is not errBadMetrics", err)
			}
			return
		}
		for _, mf := range fams {
			if mf.GetName() == "" {
				t.Fatalf("a family without a name: %v", mf)
			}
			labelNode(mf, "3")
			for _, m := range mf.Metric {
				if labelValue(m, NodeLabel) != "3" {
					t.Fatalf("labelNode left %v without node=3", m)
				}
			}
		}
	})
}

// The node label replaces one the node set itself, and labels stay sorted.
func TestLabelNode(t *testing.T) {
	s := func(v string) *string { return &v }
	mf := &dto.MetricFamily{Name: s("x"), Metric: []*dto.Metric{{Label: []*dto.LabelPair{
		{Name: s("a"), Value: s("1")}, {Name: s("node"), Value: s("theirs")}, {Name: s("z"), Value: s("2")},
	}}}}
	labelNode(mf, "4")
	var got []string
	for _, l := range mf.Metric[0].Label {
		got = append(got, l.GetName()+"="+l.GetValue())
	}
	if strings.Join(got, ",") != "a=1,node=4,z=2" {
		t.Errorf("labels %v, want a=1,node=4,z=2", got)
	}
}

// The swarm's own series: restarts by node and cause (every cause listed),
// the state gauge (1 for the current state only), readiness, memory and
// the budget left.
func TestSwarmSeries(t *testing.T) {
	v := runningView(&swarmpb.Report{Ready: true}, nil)
	v.obs[0].restartsBy[causeExit] = 2
	v.obs[0].restartsBy[causeMemory] = 1
	v.obs[1].state, v.nodes[1].State, v.nodes[1].PID = slotWaiting, "waiting", 0
	v.obs[1].restartsBy[causeHung] = 1
	v.budgetLeft = 6
	c := swarmCollector{fakeSupervisor(2, v, &bytes.Buffer{})}
	want := `
# HELP turbo_swarm_node_ready 1 when the node runs and its last report says it is ready (every consumer in a group session, Kafka answering).
# TYPE turbo_swarm_node_ready gauge
turbo_swarm_node_ready{node="0"} 1
turbo_swarm_node_ready{node="1"} 0
# HELP turbo_swarm_node_restarts_total Node processes restarted by the supervisor, by node and cause: exit (the node exited or died on its own), hung (no report within node_report_timeout), memory (over memory_limit), stuck_handler, poll_stalled, reload (a rolling restart after SIGHUP).
# TYPE turbo_swarm_node_restarts_total counter
turbo_swarm_node_restarts_total{cause="exit",node="0"} 2
turbo_swarm_node_restarts_total{cause="hung",node="0"} 0
turbo_swarm_node_restarts_total{cause="memory",node="0"} 1
turbo_swarm_node_restarts_total{cause="poll_stalled",node="0"} 0
turbo_swarm_node_restarts_total{cause="reload",node="0"} 0
turbo_swarm_node_restarts_total{cause="stuck_handler",node="0"} 0
turbo_swarm_node_restarts_total{cause="exit",node="1"} 0
turbo_swarm_node_restarts_total{cause="hung",node="1"} 1
turbo_swarm_node_restarts_total{cause="memory",node="1"} 0
turbo_swarm_node_restarts_total{cause="poll_stalled",node="1"} 0
turbo_swarm_node_restarts_total{cause="reload",node="1"} 0
turbo_swarm_node_restarts_total{cause="stuck_handler",node="1"} 0
# HELP turbo_swarm_node_rss_bytes The node process's resident memory, as last measured by the supervisor (0 while no process runs).
# TYPE turbo_swarm_node_rss_bytes gauge
turbo_swarm_node_rss_bytes{node="0"} 1000
turbo_swarm_node_rss_bytes{node="1"} 0
# HELP turbo_swarm_node_state 1 for the node slot's current state (waiting, starting, running, stopping), 0 for the others.
# TYPE turbo_swarm_node_state gauge
turbo_swarm_node_state{node="0",state="running"} 1
turbo_swarm_node_state{node="0",state="starting"} 0
turbo_swarm_node_state{node="0",state="stopping"} 0
turbo_swarm_node_state{node="0",state="waiting"} 0
turbo_swarm_node_state{node="1",state="running"} 0
turbo_swarm_node_state{node="1",state="starting"} 0
turbo_swarm_node_state{node="1",state="stopping"} 0
turbo_swarm_node_state{node="1",state="waiting"} 1
# HELP turbo_swarm_restart_budget_remaining Node restarts left within swarm.restart_window before the supervisor stops the swarm (swarm.max_restarts less the recent restarts).
# TYPE turbo_swarm_restart_budget_remaining gauge
turbo_swarm_restart_budget_remaining 6
`
	if err := testutil.CollectAndCompare(c, strings.NewReader(want)); err != nil {
		t.Error(err)
	}
	if problems, err := testutil.CollectAndLint(c); err != nil || len(problems) > 0 {
		t.Errorf("CollectAndLint: %v %v", problems, err)
	}
	// Before the control loop publishes anything: no series, no error.
	if n := testutil.CollectAndCount(swarmCollector{fakeSupervisor(2, nil, &bytes.Buffer{})}); n != 0 {
		t.Errorf("%d series before the first view, want 0", n)
	}
}

// A restart is counted under the cause of the stop that preceded it: the
// node's own exit unless the supervisor asked it to stop, and for what.
func TestRestartCauses(t *testing.T) {
	for st, want := range map[swarmpb.Status]restartCause{
		swarmpb.Status_STATUS_SILENT:        causeHung,
		swarmpb.Status_STATUS_MEMORY:        causeMemory,
		swarmpb.Status_STATUS_HANDLER_STUCK: causeStuckHandler,
		swarmpb.Status_STATUS_POLL_STALLED:  causePollStalled,
		swarmpb.Status(99):                  causeExit, // from a newer node
	} {
		if got := causeOf(st); got != want {
			t.Errorf("causeOf(%v) = %v, want %v", st, got, want)
		}
	}
	sl := &slot{}
	sl.restarted() // exited on its own
	sl.stopCause = causeOf(swarmpb.Status_STATUS_MEMORY)
	sl.restarted()
	sl.restarted() // the next process exited on its own: the cause was reset
	if sl.restarts != 3 || sl.restartsBy != [numCauses]int{causeExit: 2, causeMemory: 1} {
		t.Errorf("restarts %d by cause %v, want 3: exit 2, memory 1", sl.restarts, sl.restartsBy)
	}
	for c := range numCauses {
		if c.String() == "unknown" || strings.ContainsAny(c.String(), " -") {
			t.Errorf("cause %d has no label value (%q)", c, c.String())
		}
	}
}
