//go:build linux

package supervisor

import (
	"context"
	"encoding/json"
	"net/http"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/turbokafka/turbo/config"
	"github.com/turbokafka/turbo/supervisor/web"
	"github.com/turbokafka/turbo/test/testkit/scrape"
)

// startObserved runs a supervisor of fake nodes in mode with http.listen on
// a random port, and returns it once it listens.
func startObserved(t *testing.T, mode string, cfg config.Swarm) (*Supervisor, string) {
	t.Helper()
	sup, err := New(Options{
		Swarm:           cfg,
		HTTP:            config.HTTP{Listen: "127.0.0.1:0"},
		ShutdownTimeout: 2 * time.Second,
		Args:            []string{"-test.run=^$"},
		Env:             append(os.Environ(), envFakeNode+"="+mode),
		Log:             testLogger(t),
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- sup.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("Run: %v", err)
			}
		case <-time.After(10 * time.Second):
			sup.Kill()
			t.Error("the supervisor did not stop within 10 s of its context")
			<-done
		}
	})
	eventually(t, 10*time.Second, "the supervisor listening on http.listen", func() bool { return sup.HTTPAddr() != "" })
	return sup, "http://" + sup.HTTPAddr()
}

// scrapeAt returns base's /metrics parsed.
func scrapeAt(t *testing.T, base string) scrape.Metrics {
	t.Helper()
	m, err := scrape.Get(base + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func getJSON(t *testing.T, url string, v any) int {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	if err := json.NewDecoder(resp.Body).Decode(v); err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	return resp.StatusCode
}

// Two nodes that report metrics and status (only because the supervisor
// asked, through EnvObserve): the supervisor's /metrics serves both nodes'
// series with their node label next to its own, /status both nodes'
// consumers, /readyz 200; a node killed is restarted and counted under
// cause "exit", and while it is down /readyz says which node is not ready.
func TestSupervisorServesNodesMetricsAndStatus(t *testing.T) {
	// It counts restarts by cause: a node slow to send its first report
	// (a race-built process on a loaded machine once took over 1 s) must
	// not be judged hung here.
	cfg := fastSwarm(2)
	cfg.NodeReportTimeout = 10 * time.Second
	sup, base := startObserved(t, "observe", cfg)
	eventually(t, 10*time.Second, "both nodes' turbo_test_reports_total on /metrics", func() bool {
		fams := scrapeAt(t, base)
		_, ok0 := fams.Value("turbo_test_reports_total", map[string]string{"node": "0"})
		_, ok1 := fams.Value("turbo_test_reports_total", map[string]string{"node": "1"})
		return ok0 && ok1
	})
	fams := scrapeAt(t, base)
	for _, node := range []string{"0", "1", "supervisor"} {
		if _, ok := fams.Value("go_goroutines", map[string]string{"node": node}); !ok {
			t.Errorf("no go_goroutines{node=%q}", node)
		}
	}
	if v, ok := fams.Value("turbo_swarm_node_state", map[string]string{"node": "1", "state": "running"}); !ok || v != 1 {
		t.Errorf("turbo_swarm_node_state{node=1,state=running} = %v (%v), want 1", v, ok)
	}
	if v, ok := fams.Value("turbo_swarm_restart_budget_remaining", nil); !ok || v != 100 {
		t.Errorf("turbo_swarm_restart_budget_remaining = %v (%v), want 100 (max_restarts)", v, ok)
	}

	var st web.Status
	eventually(t, 10*time.Second, "/status with both nodes' consumers and /readyz 200", func() bool {
		var ready web.Check
		code := getJSON(t, base+"/readyz", &ready)
		getJSON(t, base+"/status", &st)
		return code == http.StatusOK && ready.OK && len(st.Consumers) == 2
	})
	if st.Mode != web.ModeSwarm || len(st.Nodes) != 2 {
		t.Fatalf("/status = %+v", st)
	}
	for i, c := range st.Consumers {
		if c.Node == nil || *c.Node != i || c.Name != "orders" || len(c.Partitions) != 1 || c.Partitions[0].Partition != int32(i) {
			t.Errorf("consumer %d = %+v, want orders of node %d", i, c, i)
		}
	}
	var live web.Check
	if code := getJSON(t, base+"/healthz", &live); code != http.StatusOK || !live.OK {
		t.Errorf("/healthz = %d %+v", code, live)
	}

	victim := st.Nodes[1].PID
	if err := syscall.Kill(victim, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	sawNotReady := ""
	eventually(t, 10*time.Second, `turbo_swarm_node_restarts_total{node="1",cause="exit"} 1 and node 1 running again`, func() bool {
		var ready web.Check
		if getJSON(t, base+"/readyz", &ready); !ready.OK && sawNotReady == "" {
			sawNotReady = ready.Reason
		}
		fams := scrapeAt(t, base)
		v, _ := fams.Value("turbo_swarm_node_restarts_total", map[string]string{"node": "1", "cause": "exit"})
		running, _ := fams.Value("turbo_swarm_node_state", map[string]string{"node": "1", "state": "running"})
		return v == 1 && running == 1
	})
	t.Logf("while node 1 was down, /readyz said: %q", sawNotReady)
	if sawNotReady != "" && !strings.Contains(sawNotReady, "node 1") {
		t.Errorf("/readyz reason %q does not name node 1", sawNotReady)
	}
	fams = scrapeAt(t, base)
	for _, c := range causeNames {
		want := 0.0
		if c == "exit" {
			want = 1
		}
		if v, ok := fams.Value("turbo_swarm_node_restarts_total", map[string]string{"node": "1", "cause": c}); !ok || v != want {
			t.Errorf("turbo_swarm_node_restarts_total{node=1,cause=%s} = %v (%v), want %v", c, v, ok, want)
		}
		if v, _ := fams.Value("turbo_swarm_node_restarts_total", map[string]string{"node": "0", "cause": c}); v != 0 {
			t.Errorf("turbo_swarm_node_restarts_total{node=0,cause=%s} = %v, want 0", c, v)
		}
	}
	if v, _ := fams.Value("turbo_swarm_restart_budget_remaining", nil); v != 99 {
		t.Errorf("turbo_swarm_restart_budget_remaining = %v after one restart, want 99", v)
	}
	if n := sup.Status()[1]; n.Restarts != 1 || n.PID == victim {
		t.Errorf("node 1 = %+v, want restarted once with a new pid", n)
	}
}

// Without http.listen the nodes are not asked for metrics: the fake node
// in mode observe then reports as a plain one (no status document).
func TestNodesNotAskedWithoutHTTP(t *testing.T) {
	r := startSwarm(t, "observe", fastSwarm(1))
	eventually(t, 10*time.Second, "a report from the node", func() bool {
		v := r.sup.view.Load()
		return v != nil && v.obs[0].report != nil
	})
	if rep := r.sup.view.Load().obs[0].report; len(rep.Metrics) != 0 || len(rep.StatusJson) != 0 || rep.Ready {
		t.Errorf("the node sent metrics (%d bytes) or status (%d bytes) though the supervisor serves none", len(rep.Metrics), len(rep.StatusJson))
	}
	if r.sup.HTTPAddr() != "" {
		t.Errorf("HTTPAddr() = %q without http.listen", r.sup.HTTPAddr())
	}
}
