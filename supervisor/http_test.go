package supervisor

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/turbokafka/turbo/proto/swarmpb"
	"github.com/turbokafka/turbo/supervisor/web"
)

func TestReadyReasons(t *testing.T) {
	ready := &swarmpb.Report{Ready: true}
	waiting := func() *view {
		v := runningView(ready, ready)
		v.obs[1].state, v.obs[1].report, v.nodes[1].State, v.nodes[1].LastExit = slotWaiting, nil, "waiting", "signal: killed"
		return v
	}
	stopping := runningView(ready, ready)
	stopping.stopping = true
	frozen := runningView(ready, ready)
	frozen.obs[1].silent = "node 1 has not reported for 20s (node_report_timeout 3s)"
	for name, c := range map[string]struct {
		v    *view
		want web.Check
	}{
		"no view":      {nil, web.Check{Reason: "the supervisor's control loop has not run yet"}},
		"all ready":    {runningView(ready, ready), web.Check{OK: true}},
		"node waiting": {waiting(), web.Check{Reason: "node 1 is waiting (last exit: signal: killed)"}},
		"no report":    {runningView(ready, nil), web.Check{Reason: "node 1 has not reported yet"}},
		"not ready": {runningView(&swarmpb.Report{ReadyDetail: "consumer orders: Kafka unreachable"}, ready),
			web.Check{Reason: "node 0 is not ready: consumer orders: Kafka unreachable"}},
		"not ready, no detail":      {runningView(ready, &swarmpb.Report{}), web.Check{Reason: "node 1 is not ready: it gave no reason"}},
		"stopping":                  {stopping, web.Check{Reason: "the swarm is stopping"}},
		"silent, last report ready": {frozen, web.Check{Reason: "node 1 has not reported for 20s (node_report_timeout 3s)"}},
	} {
		if got := readyCheck(c.v); got != c.want {
			t.Errorf("%s: %+v, want %+v", name, got, c.want)
		}
	}
}

func TestLiveReasons(t *testing.T) {
	now := time.Now()
	s := fakeSupervisor(1, nil, &bytes.Buffer{})
	if got := s.live(now); got.OK || got.Reason != "the supervisor's control loop has not run yet" {
		t.Errorf("before the first view: %+v", got)
	}
	v := runningView(nil)
	s.view.Store(v)
	if got := s.live(v.at); !got.OK {
		t.Errorf("fresh healthy view: %+v", got)
	}
	if got := s.live(v.at.Add(5 * time.Second)); got.OK || !strings.Contains(got.Reason, "has not run for 5s (supervision_interval 1s)") {
		t.Errorf("a view 5 s old with supervision_interval 1 s: %+v", got)
	}
	v.healthy, v.why = false, "node 0 has not reported for 2s (node_report_timeout 1s)"
	if got := s.live(v.at); got.OK || got.Reason != v.why {
		t.Errorf("an overdue node: %+v", got)
	}
}

// /status in swarm mode: the nodes, and each node's consumers from its
// status document with Node set; a node whose document does not decode, or
// without one, contributes no consumer.
func TestSwarmStatus(t *testing.T) {
	doc := func(name string) []byte {
		b, err := json.Marshal(web.Status{Mode: web.ModeRun, Consumers: []web.Consumer{{Name: name, AssignedPartitions: 4,
			Partitions: []web.Partition{{Topic: "t", Partition: 1, Lag: 3}}}}})
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	var logs bytes.Buffer
	v := runningView(&swarmpb.Report{Ready: true, StatusJson: doc("a")}, &swarmpb.Report{StatusJson: []byte("{not json")},
		nil, &swarmpb.Report{Ready: true, StatusJson: doc("b")})
	s := fakeSupervisor(4, v, &logs)
	for range 2 { // decoded on every request, logged once per report
		st := httpSource{s}.Status()
		if st.Mode != web.ModeSwarm || len(st.Nodes) != 4 || st.Live.OK != true || st.Ready.OK {
			t.Fatalf("status = %+v", st)
		}
		if n := st.Nodes[3]; n.Index != 3 || n.PID != 103 || n.State != "running" || !n.Ready || st.Nodes[1].Ready {
			t.Errorf("nodes = %+v", st.Nodes)
		}
		if len(st.Consumers) != 2 {
			t.Fatalf("consumers = %+v, want a from node 0 and b from node 3", st.Consumers)
		}
		for i, want := range []struct {
			name string
			node int
		}{{"a", 0}, {"b", 3}} {
			c := st.Consumers[i]
			if c.Name != want.name || c.Node == nil || *c.Node != want.node || c.AssignedPartitions != 4 || len(c.Partitions) != 1 || c.Partitions[0].Lag != 3 {
				t.Errorf("consumer %d = %+v, want %s of node %d", i, c, want.name, want.node)
			}
		}
	}
	if n := strings.Count(logs.String(), `"part":"status"`); n != 1 || !strings.Contains(logs.String(), `"node":1`) {
		t.Errorf("logged %d times, want once naming node 1: %s", n, logs.String())
	}
}
