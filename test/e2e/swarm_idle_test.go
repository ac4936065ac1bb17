package e2e

import (
	"fmt"
	"syscall"
	"testing"
	"time"

	"github.com/turbokafka/turbo/test/testkit"
)

// TestSwarmExitOnIdle: turbo swarm --nodes 3 --exit-on-idle on 10,000
// records exits 0 once the group committed them all, every record handled
// once (ledger), within 3 s of the last delivery; with a
// node killed midway (kill -9), it is restarted, every record is still
// handled, and the swarm still exits 0.
func TestSwarmExitOnIdle(t *testing.T) {
	for _, kill := range []bool{false, true} {
		t.Run(fmt.Sprintf("kill=%v", kill), func(t *testing.T) {
			const records, keys, nodes, conc, work = 10_000, 500, 3, 8, time.Millisecond
			topic := testkit.TopicName("idle")
			addr := testkit.Cluster(t, 6, topic)
			testkit.ProduceWithBinary(t, addr, topic, records, keys)
			ledger := testkit.NewLedger(work)
			args := []string{"swarm", "--config", swarmConfig(t, addr, topic, ledger.Endpoint(t), ""), "--nodes", fmt.Sprint(nodes), "--exit-on-idle"}
			var sw *testkit.Proc
			if !kill {
				// Timed: a plain build, as the race detector would slow
				// three nodes on two cores several times over.
				sw = testkit.StartBinary(t, testkit.PerfBinary(t), nil, nil, args...)
			} else {
				var live string
				sw, live = testkit.StartHTTP(t, nil, nil, args...)
				testkit.Eventually(t, 90*time.Second, "a third of the records handled", func() bool { return ledger.Report().Distinct >= records/3 })
				victim := readStatus(t, live).Nodes[1]
				if err := syscall.Kill(victim.PID, syscall.SIGKILL); err != nil {
					t.Fatal(err)
				}
			}
			if code := sw.Wait(t, 3*time.Minute); code != 0 {
				t.Fatalf("turbo swarm --exit-on-idle exited %d, want 0", code)
			}
			rep := ledger.Report()
			if rep.Lost != 0 || rep.Distinct != records || rep.OrderViolations != 0 {
				t.Fatalf("%d lost, %d distinct of %d, %d order violations (%v)", rep.Lost, rep.Distinct, records, rep.OrderViolations, rep.Examples)
			}
			took := sw.Exited.Sub(rep.FirstBegin)
			ideal := time.Duration(records) * work / (nodes * conc)
			if !kill {
				if err := rep.Err(); err != nil || rep.Duplicates != 0 {
					t.Fatalf("%v; %d duplicates", err, rep.Duplicates)
				}
				// What --exit-on-idle adds to the work: judging the group
				// done, and the graceful stop of every node.
				if tail := sw.Exited.Sub(rep.LastBegin); tail > 3*time.Second {
					t.Fatalf("exit %s after the last delivery: judging idle and stopping took over 3 s", tail.Round(time.Millisecond))
				}
			}
			t.Logf("FIGURES swarm-exit-on-idle broker=%s kill=%v records=%d duplicates=%d first-delivery-to-exit=%s (deliveries over %s, the last to exit %s) ideal=%s",
				brokerKind(), kill, records, rep.Duplicates, took.Round(time.Millisecond), rep.LastBegin.Sub(rep.FirstBegin).Round(time.Millisecond),
				sw.Exited.Sub(rep.LastBegin).Round(time.Millisecond), ideal)
		})
	}
}
