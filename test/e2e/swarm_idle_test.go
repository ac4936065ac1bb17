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
// once (ledger), from the swarm's start to its exit close to the ideal time
// (10,000 × 20 ms of work over 3 × 8 runners, 8.3 s; see the bound).
func TestSwarmExitOnIdle(t *testing.T) {
	// Timed (it times the swarm against the ideal): it runs alone, after the rest (the Makefile's TIMED).
	swarmExitOnIdle(t, false)
}

// TestSwarmExitOnIdleAfterANodeIsKilled: the same run with a node killed
// midway (kill -9): it is restarted, every record is still handled, and the
// swarm still exits 0.
func TestSwarmExitOnIdleAfterANodeIsKilled(t *testing.T) {
	t.Parallel()
	testkit.EachSide(t, func(t *testing.T, _ testkit.Side) { swarmExitOnIdle(t, true) })
}

func swarmExitOnIdle(t *testing.T, kill bool) {
	const keys, nodes, conc, work = 500, 3, 8, 20 * time.Millisecond
	// The timed run measures against the ideal (8.3 s of work for the
	// three nodes); the killed one judges only what is handled.
	records := 10_000
	if kill {
		records = 5_000
	}
	topic := testkit.TopicName("idle")
	var addr string
	if !kill && testkit.SharedBrokers() == nil {
		// Timed: the broker too is a plain build.
		addr = testkit.Dev(t, "--partitions", "6")
	} else {
		addr = testkit.Cluster(t, 6, topic)
	}
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
	wall := sw.Exited.Sub(sw.Started)
	if !kill {
		if err := rep.Err(); err != nil || rep.Duplicates != 0 {
			t.Fatalf("%v; %d duplicates", err, rep.Duplicates)
		}
		// The target is the ideal + 3 s (11.3 s), met with the machine
		// to itself on a good day (10.1-10.9 s); which is why this test
		// runs alone. The ledger's endpoint, in this race-built test
		// process, answers every record on the same two cores, so the
		// wall time follows the machine's speed: alone, 11.5-13.5 s
		// on a slower day, 18.9 s in a CI run while the whole suite ran
		// at a third of its usual speed. The bound, 2.5× the ideal, leaves
		// room for a slow machine and still catches a swarm whose nodes
		// do not share the work (one node doing it all: 3× the ideal).
		// FIGURES has the measure.
		if bound := ideal * 5 / 2; wall > bound {
			t.Errorf("the swarm ran %s from its start to its exit, over 2.5× the ideal %s", wall.Round(time.Millisecond), ideal)
		}
		// What --exit-on-idle adds to the work: judging the group
		// done, and the graceful stop of every node.
		if tail := sw.Exited.Sub(rep.LastBegin); tail > 3*time.Second {
			t.Fatalf("exit %s after the last delivery: judging idle and stopping took over 3 s", tail.Round(time.Millisecond))
		}
	}
	t.Logf("FIGURES swarm-exit-on-idle broker=%s kill=%v records=%d duplicates=%d start-to-exit=%s first-delivery-to-exit=%s (deliveries over %s, the last to exit %s) ideal=%s",
		brokerKind(), kill, records, rep.Duplicates, wall.Round(time.Millisecond), took.Round(time.Millisecond), rep.LastBegin.Sub(rep.FirstBegin).Round(time.Millisecond),
		sw.Exited.Sub(rep.LastBegin).Round(time.Millisecond), ideal)
}
