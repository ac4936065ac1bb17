package observe

import (
	"fmt"
	"syscall"
	"testing"
	"time"

	"github.com/turbokafka/turbo/test/testkit"
)

// Done means 2: readiness answers 503 while the broker is down and 200
// again within seconds after it is back. The broker is `turbo dev` with a
// data directory, stopped and started again on the same address.
func TestReadinessFollowsTheBroker(t *testing.T) {
	dir := t.TempDir()
	// The first broker takes a port of its choosing; the second must come
	// back on the same one, which is free again only while nothing else
	// took it during the outage: an accepted, short window.
	addr, dev := testkit.DevOn(t, "127.0.0.1:0", "--data-dir", dir, "--partitions", "4")
	startDev := func() *testkit.Proc {
		_, p := testkit.DevOn(t, addr, "--data-dir", dir, "--partitions", "4")
		return p
	}
	topic := testkit.TopicName("ready")
	testkit.ProduceWithBinary(t, addr, topic, 200, 20)
	cfg := testkit.WriteConfig(t, fmt.Sprintf(`
kafka:
  brokers: [%q]
consumers:
  - name: ready
    group: %s
    topics: [%s]
    handler: {type: noop}
    commit_interval: 200ms
http: {listen: "127.0.0.1:0"}
shutdown_timeout: 10s
log: {level: info, format: json}
`, addr, topic, topic))
	run, listen := testkit.StartHTTP(t, nil, nil, "run", "--config", cfg)
	readyz := "http://" + listen + "/readyz"
	healthz := "http://" + listen + "/healthz"

	first, readyAt := waitProbe(t, readyz, 60*time.Second, "readiness at start", func(p probe) bool { return p.Code == 200 })
	t.Logf("FIGURES ready %s after the start: %v", readyAt.Sub(run.Started).Round(time.Millisecond), first)

	stoppedAt := dev.Signal(t, syscall.SIGKILL)
	dev.Wait(t, 10*time.Second)
	down, downAt := waitProbe(t, readyz, 60*time.Second, "readiness to fail with the broker down", func(p probe) bool { return p.Code == 503 })
	if down.OK || down.Reason == "" {
		t.Errorf("readiness with the broker down = %+v, want ok false and a reason", down)
	}
	// The consumer is alive all the same: a broker outage is not a reason
	// to restart it.
	if live := getProbe(healthz); live.Code != 200 {
		t.Errorf("liveness with the broker down = %v, want 200", live)
	}
	// Down stays down while the broker is.
	for range 5 {
		if p := getProbe(readyz); p.Code != 503 {
			t.Errorf("readiness went back to %v with the broker still down", p)
		}
		time.Sleep(200 * time.Millisecond)
	}

	backAt := time.Now()
	startDev()
	_, upAt := waitProbe(t, readyz, 90*time.Second, "readiness to come back with the broker", func(p probe) bool { return p.Code == 200 })
	t.Logf("FIGURES broker killed: /readyz 503 after %s (%v); broker back: 200 after %s",
		downAt.Sub(stoppedAt).Round(time.Millisecond), down, upAt.Sub(backAt).Round(time.Millisecond))
	if d := upAt.Sub(backAt); d > 30*time.Second {
		t.Errorf("readiness took %s to come back after the broker did, want seconds", d)
	}
	run.Signal(t, syscall.SIGTERM)
	run.Wait(t, 30*time.Second)
}
