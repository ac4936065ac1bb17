package e2e

import (
	"fmt"
	"os"
	osexec "os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/turbokafka/turbo/config"
	"github.com/turbokafka/turbo/supervisor/sdnotify/sdnotifytest"
	"github.com/turbokafka/turbo/test/testkit"
)

// fakeSystemd listens where $NOTIFY_SOCKET will point (with a watchdog of
// 600 ms asked for) and collects every message.
type fakeSystemd struct {
	msgs <-chan string
}

func newFakeSystemd(t *testing.T) *fakeSystemd {
	t.Helper()
	path := filepath.Join(t.TempDir(), "notify")
	f := &fakeSystemd{msgs: sdnotifytest.Listen(t, path)}
	testkit.Setenv(t, "NOTIFY_SOCKET", path)
	testkit.Setenv(t, "WATCHDOG_USEC", "600000") // WatchdogSec=600ms: a ping every 300 ms
	return f
}

// await returns the messages up to the first that has line, failing after
// timeout.
func (f *fakeSystemd) await(t *testing.T, line string, timeout time.Duration) []string {
	t.Helper()
	var seen []string
	deadline := time.After(timeout)
	for {
		select {
		case m := <-f.msgs:
			seen = append(seen, m)
			for _, l := range strings.Split(m, "\n") {
				if l == line {
					return seen
				}
			}
		case <-deadline:
			t.Fatalf("systemd heard no %q within %s (heard %q)", line, timeout, seen)
		}
	}
}

func count(msgs []string, line string) int {
	n := 0
	for _, m := range msgs {
		for _, l := range strings.Split(m, "\n") {
			if l == line {
				n++
			}
		}
	}
	return n
}

// TestSystemdNotify: turbo run as a Type=notify service with a watchdog:
// READY=1 once its consumer is in its group, WATCHDOG=1 pings with a
// status line, STOPPING=1 at SIGTERM, exit 0.
func TestSystemdNotify(t *testing.T) {
	t.Parallel()
	sd := newFakeSystemd(t)
	topic := testkit.TopicName("systemd")
	addr := testkit.Cluster(t, 2, topic)
	testkit.ProduceWithBinary(t, addr, topic, 100, 10)
	cfg := testkit.WriteConfig(t, fmt.Sprintf(`
kafka:
  brokers: [%q]
consumers:
  - name: notified
    group: %s
    topics: [%s]
    handler: {type: sleep, duration: 1ms}
log: {level: warn, format: json}
`, addr, topic, topic))
	run := testkit.Start(t, nil, "run", "--config", cfg)
	before := sd.await(t, "READY=1", 60*time.Second)
	pings := sd.await(t, "WATCHDOG=1", 5*time.Second)
	pings = append(pings, sd.await(t, "WATCHDOG=1", 5*time.Second)...)
	if !strings.Contains(strings.Join(pings, "\n"), "STATUS=1 consumers: processed") {
		t.Fatalf("no status line among %q", pings)
	}
	sent := run.Signal(t, syscall.SIGTERM)
	after := sd.await(t, "STOPPING=1", 5*time.Second)
	stopping := time.Since(sent)
	if code := run.Wait(t, 30*time.Second); code != 0 {
		t.Fatalf("turbo run exited %d after SIGTERM", code)
	}
	if n := count(append(append(before, pings...), after...), "READY=1"); n != 1 {
		t.Fatalf("READY=1 sent %d times", n)
	}
	t.Logf("FIGURES systemd run: READY after %d messages, STOPPING %s after SIGTERM", len(before), stopping.Round(time.Millisecond))
}

// TestSystemdNotifySwarm: turbo swarm speaks for its nodes: READY=1 once,
// when both nodes are ready (the nodes never speak: they do not inherit
// $NOTIFY_SOCKET), watchdog pings, STOPPING=1 at SIGTERM.
func TestSystemdNotifySwarm(t *testing.T) {
	t.Parallel()
	sd := newFakeSystemd(t)
	topic := testkit.TopicName("systemd-swarm")
	addr := testkit.Cluster(t, 4, topic)
	ledger := testkit.NewLedger(0)
	sw := testkit.Start(t, nil, "swarm", "--config", swarmConfig(t, addr, topic, ledger.Endpoint(t), ""))
	msgs := sd.await(t, "READY=1", 90*time.Second)
	if !strings.Contains(strings.Join(msgs, "\n"), "STATUS=2 of 2 nodes running") {
		msgs = append(msgs, sd.await(t, "WATCHDOG=1", 5*time.Second)...)
	}
	msgs = append(msgs, sd.await(t, "WATCHDOG=1", 5*time.Second)...)
	if !strings.Contains(strings.Join(msgs, "\n"), "STATUS=2 of 2 nodes running") {
		t.Fatalf("no swarm status line among %q", msgs)
	}
	sw.Signal(t, syscall.SIGTERM)
	msgs = append(msgs, sd.await(t, "STOPPING=1", 5*time.Second)...)
	if code := sw.Wait(t, 60*time.Second); code != 0 {
		t.Fatalf("turbo swarm exited %d after SIGTERM", code)
	}
	for {
		select {
		case m := <-sd.msgs:
			msgs = append(msgs, m)
			continue
		default:
		}
		break
	}
	if n := count(msgs, "READY=1"); n != 1 {
		t.Fatalf("READY=1 sent %d times: the nodes spoke too (%q)", n, msgs)
	}
}

// TestSystemdUnit: examples/systemd/turbo.service is a Type=notify unit with
// a watchdog and a stop timeout above the default shutdown_timeout; with its
// binary and configuration paths pointed at this build and a test file,
// `systemd-analyze verify` finds nothing to say, and its ExecStart command
// line runs (to the end of an embedded demo, with --exit-on-idle).
func TestSystemdUnit(t *testing.T) {
	t.Parallel()
	raw, err := os.ReadFile(filepath.Join("..", "..", "examples", "systemd", "turbo.service"))
	if err != nil {
		t.Fatal(err)
	}
	unit := string(raw)
	keys := map[string]string{}
	for _, line := range strings.Split(unit, "\n") {
		if k, v, ok := strings.Cut(line, "="); ok && !strings.HasPrefix(line, "#") {
			keys[k] = v
		}
	}
	if keys["Type"] != "notify" || keys["WatchdogSec"] == "" || keys["NotifyAccess"] != "main" {
		t.Fatalf("Type=%q WatchdogSec=%q NotifyAccess=%q: want notify, a watchdog, main", keys["Type"], keys["WatchdogSec"], keys["NotifyAccess"])
	}
	stop, err := strconv.Atoi(keys["TimeoutStopSec"])
	if err != nil || time.Duration(stop)*time.Second <= config.Default().ShutdownTimeout {
		t.Fatalf("TimeoutStopSec=%q: want more than the default shutdown_timeout %s", keys["TimeoutStopSec"], config.Default().ShutdownTimeout)
	}
	exec := strings.Fields(keys["ExecStart"])
	if len(exec) < 4 || exec[1] != "run" || exec[2] != "--config" {
		t.Fatalf("ExecStart=%q: want <turbo> run --config <file>", keys["ExecStart"])
	}
	dir := t.TempDir()
	cfg := filepath.Join(dir, "app.yaml")
	if err := os.WriteFile(cfg, []byte("kafka:\n  brokers: [embedded]\n  embedded: {partitions: 2, seed: {topic: demo, records: 50, keys: 5}}\nconsumers:\n  - {name: demo, topics: [demo], handler: {type: noop}}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	bin := testkit.Binary(t)
	local := strings.NewReplacer(exec[0], bin, exec[3], cfg).Replace(unit)
	path := filepath.Join(dir, "turbo.service")
	if err := os.WriteFile(path, []byte(local), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := osexec.Command("systemd-analyze", "verify", path).CombinedOutput()
	if err != nil || len(out) != 0 {
		t.Fatalf("systemd-analyze verify: %v\n%s", err, out)
	}
	run := testkit.Start(t, nil, append(exec[1:3], cfg, "--exit-on-idle")...)
	if code := run.Wait(t, time.Minute); code != 0 {
		t.Fatalf("the unit's command line exited %d", code)
	}
}
