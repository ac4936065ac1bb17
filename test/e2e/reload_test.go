//go:build linux

package e2e

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/turbokafka/turbo/supervisor/web"
	"github.com/turbokafka/turbo/test/testkit"
)

// reloadConfig is a turbo run (or swarm) configuration whose consumer
// runs with the given concurrency; broken replaces it with a value that
// does not validate. The reload drains the consumers within
// shutdown_timeout, and a record still running then runs again (at least
// once): 30 s, because the tests want no record twice, and a loaded machine
// kept one ledger request of a 2 ms handler waiting more than the 8 s a
// 10 s shutdown_timeout gives the drain.
func reloadConfig(addr, topic, url string, concurrency int, swarm bool) string {
	nodes := ""
	if swarm {
		nodes = `
swarm:
  nodes: 2
  node_report_interval: 200ms
  node_report_timeout: 5s
  node_restart_timeout: 1s
  supervision_interval: 100ms`
	}
	return fmt.Sprintf(`
kafka:
  brokers: [%q]
consumers:
  - name: orders
    group: %s
    topics: [%s]
    concurrency: %d
    commit_interval: 100ms
    handler: {type: http, url: %q, timeout: 30s}
shutdown_timeout: 30s
log: {level: info, format: json}
http: {listen: "127.0.0.1:0"}%s
`, addr, topic, topic, concurrency, url, nodes)
}

// hupRefused writes content to path, sends p SIGHUP, and waits until
// /status (at live) shows the reload refused — the first refusal — with an
// error naming key and no reload applied.
func hupRefused(t *testing.T, p *testkit.Proc, live, path, content, key string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	p.Signal(t, syscall.SIGHUP)
	testkit.Eventually(t, 30*time.Second, "/status to show the refused reload", func() bool {
		s := getStatus(t, live)
		return s.Config != nil && s.Config.Refused == 1
	})
	if s := getStatus(t, live); s.Config.Reloads != 0 || !strings.Contains(s.Config.LastError, key) {
		t.Fatalf("config %+v: want no reload and the error naming %s", *s.Config, key)
	}
}

func getStatus(t *testing.T, live string) web.Status {
	t.Helper()
	var s web.Status
	resp, err := http.Get("http://" + live + "/status")
	if err != nil {
		return s
	}
	defer resp.Body.Close()
	if err := json.NewDecoder(resp.Body).Decode(&s); err != nil {
		t.Fatalf("GET /status: %v", err)
	}
	return s
}

// concurrencies is every consumer's concurrency in a /status document.
func concurrencies(s web.Status) []int {
	var out []int
	for _, c := range s.Consumers {
		out = append(out, c.Concurrency)
	}
	return out
}

func allEqual(xs []int, v, n int) bool {
	if len(xs) != n {
		return false
	}
	for _, x := range xs {
		if x != v {
			return false
		}
	}
	return true
}

// SIGHUP to turbo run: a file whose concurrency changed is applied (the
// consumers stop gracefully and start again with it: /status shows the new
// value), every record is handled, none twice; a file that does not
// validate is refused, logged, shown in /status, and the old configuration
// keeps running.
func TestSIGHUPReloadsRun(t *testing.T) {
	t.Parallel()
	const records, keys = 6_000, 200
	topic := testkit.TopicName("reload")
	addr := testkit.Cluster(t, 4, topic)
	testkit.ProduceWithBinary(t, addr, topic, records, keys)
	ledger := testkit.NewLedger(2 * time.Millisecond)
	url := ledger.Endpoint(t)
	path := testkit.WriteConfig(t, reloadConfig(addr, topic, url, 4, false))
	var stderr testkit.Buffer
	run, live := testkit.StartHTTP(t, nil, &stderr, "run", "--config", path)
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("turbo run's stderr (the end):\n%s", tail(stderr.String(), 32<<10))
		}
	})
	testkit.Eventually(t, time.Minute, "a sixth of the records handled", func() bool { return ledger.Report().Distinct >= records/6 })

	if err := os.WriteFile(path, []byte(reloadConfig(addr, topic, url, 16, false)), 0o600); err != nil {
		t.Fatal(err)
	}
	hup := run.Signal(t, syscall.SIGHUP)
	testkit.Eventually(t, time.Minute, "/status to show concurrency 16 after one reload", func() bool {
		s := getStatus(t, live)
		return s.Config != nil && s.Config.Reloads == 1 && allEqual(concurrencies(s), 16, 1) && s.Ready.OK
	})
	backIn := time.Since(hup)
	handledAtReload := ledger.Report().Distinct

	// A broken file: refused, the consumers keep going with concurrency 16.
	if err := os.WriteFile(path, []byte(strings.Replace(reloadConfig(addr, topic, url, 16, false), "concurrency: 16", "concurrency: many", 1)), 0o600); err != nil {
		t.Fatal(err)
	}
	run.Signal(t, syscall.SIGHUP)
	testkit.Eventually(t, 30*time.Second, "/status to show the refused reload", func() bool {
		s := getStatus(t, live)
		return s.Config != nil && s.Config.Refused == 1
	})
	s := getStatus(t, live)
	if s.Config.Reloads != 1 || !strings.Contains(s.Config.LastError, "consumers[0].concurrency") || !allEqual(concurrencies(s), 16, 1) {
		t.Fatalf("after a broken file: config %+v, concurrency %v; want 1 reload, the error naming consumers[0].concurrency, concurrency 16", *s.Config, concurrencies(s))
	}
	// /status may show the refusal before the test has read the log line
	// from turbo's stderr pipe: the line is awaited.
	testkit.Eventually(t, 10*time.Second, "the refused reload's log line", func() bool {
		return strings.Contains(stderr.String(), "SIGHUP: the configuration was not reloaded")
	})
	testkit.Eventually(t, 2*time.Minute, "every record handled", func() bool { return ledger.Report().Distinct == records })
	if !run.Alive() {
		t.Fatal("turbo run exited")
	}
	run.Signal(t, syscall.SIGTERM)
	if code := run.Wait(t, time.Minute); code != 0 {
		t.Fatalf("turbo run exited %d after SIGTERM", code)
	}
	rep := ledger.Report()
	if rep.Distinct != records || rep.Duplicates != 0 || rep.Overlaps != 0 || rep.OrderViolations != 0 {
		t.Fatalf("%d of %d records, %d duplicates, %d overlaps, %d order violations (%v)", rep.Distinct, records, rep.Duplicates, rep.Overlaps, rep.OrderViolations, rep.Examples)
	}
	t.Logf("FIGURES reload-run broker=%s records=%d handled-before-reload=%d back-ready-after=%s duplicates=%d",
		brokerKind(), records, handledAtReload, backIn.Round(time.Millisecond), rep.Duplicates)
}

// SIGHUP to turbo swarm: the supervisor checks the file, then restarts the
// nodes one at a time, each once the one before is back and ready; the new
// nodes read the new concurrency. A broken file leaves every node running.
func TestSIGHUPRollsTheSwarm(t *testing.T) {
	t.Parallel()
	const records, keys, nodes = 8_000, 200, 2
	topic := testkit.TopicName("reloadswarm")
	addr := testkit.Cluster(t, 4, topic)
	testkit.ProduceWithBinary(t, addr, topic, records, keys)
	ledger := testkit.NewLedger(2 * time.Millisecond)
	url := ledger.Endpoint(t)
	path := testkit.WriteConfig(t, reloadConfig(addr, topic, url, 4, true))
	var stderr testkit.Buffer
	sw, live := testkit.StartHTTP(t, nil, &stderr, "swarm", "--config", path)
	testkit.Eventually(t, time.Minute, "both nodes ready", func() bool { return getStatus(t, live).Ready.OK })
	before := readStatus(t, live)

	// Broken first: refused, nobody restarted.
	hupRefused(t, sw, live, path, strings.Replace(reloadConfig(addr, topic, url, 4, true), "concurrency: 4", "concurrency: 0", 1), "consumers[0].concurrency")

	if err := os.WriteFile(path, []byte(reloadConfig(addr, topic, url, 16, true)), 0o600); err != nil {
		t.Fatal(err)
	}
	hup := sw.Signal(t, syscall.SIGHUP)
	// One at a time: whenever the loop looks, at most one node is not
	// running and ready.
	maxDown := 0
	testkit.Eventually(t, 2*time.Minute, "every node restarted and running concurrency 16", func() bool {
		s := readStatus(t, live)
		down := 0
		for _, n := range s.Nodes {
			if n.State != "running" || !n.Ready {
				down++
			}
		}
		maxDown = max(maxDown, down)
		return s.Config != nil && s.Config.Reloads == 1 && allEqual(concurrencies(s.Status), 16, nodes) && s.Ready.OK
	})
	rolled := time.Since(hup)
	after := readStatus(t, live)
	for i, n := range after.Nodes {
		if n.PID == before.Nodes[i].PID || n.Restarts != 1 {
			t.Errorf("node %d: pid %d → %d, %d restarts; want a new process, restarted once", i, before.Nodes[i].PID, n.PID, n.Restarts)
		}
	}
	if maxDown > 1 {
		t.Errorf("%d nodes were down at once during the rolling restart, want at most 1", maxDown)
	}
	testkit.Eventually(t, 2*time.Minute, "every record handled", func() bool { return ledger.Report().Distinct == records })
	sw.Signal(t, syscall.SIGTERM)
	if code := sw.Wait(t, time.Minute); code != 0 {
		t.Fatalf("turbo swarm exited %d after SIGTERM", code)
	}
	rep := ledger.Report()
	if rep.Distinct != records || rep.Overlaps != 0 || rep.OrderViolations != 0 {
		t.Fatalf("%d of %d records, %d overlaps, %d order violations (%v)", rep.Distinct, records, rep.Overlaps, rep.OrderViolations, rep.Examples)
	}
	t.Logf("FIGURES reload-swarm broker=%s records=%d nodes=%d rolled-in=%s max-down-at-once=%d duplicates=%d",
		brokerKind(), records, nodes, rolled.Round(time.Millisecond), maxDown, rep.Duplicates)
}
