package chaos

import (
	"context"
	"fmt"
	mrand "math/rand/v2"
	"net/http/httptest"
	"os"
	"testing"
	"time"

	"github.com/turbokafka/turbo/test/testkit"
)

const (
	soakPartitions = 8
	soakKeys       = 200
	soakRate       = 150 // records per second, produced throughout the chaos
	soakWork       = 3 * time.Millisecond
	soakFailFirst  = 0.02 // of first deliveries answered 500
	soakMembers    = 3    // the group's usual size
	soakMinMembers = 2
	soakMaxMembers = 5
	// soakDrain bounds the drain (members.drain) once producing stopped: a
	// member killed just before must first time out of the group (session
	// 10 s), then a rebalance, then the backlog and a commit.
	soakDrain = 3 * time.Minute
)

// chaosCounts are the actions a soak took: to members, and on a cluster
// to its nodes.
type chaosCounts struct{ kills, restarts, joins, leaves, nodeKills, nodeStops int }

// TestChaosSoak keeps producing while it kill -9s, restarts (SIGTERM and
// start again), adds and removes members of a 3-member group at random
// (seeded) — a kill may hit a member still joining —, with 2 % of first
// deliveries failing, then stops producing, lets the group drain and stops
// it: nothing lost, no order violation, no overlap of a key nor of a
// partition's owners; duplicates are reported.
func TestChaosSoak(t *testing.T) {
	t.Parallel() // its own topic, group and members
	s := *seed
	if s == 0 {
		s = uint64(time.Now().UnixNano())
	}
	began := time.Now()
	t.Logf("chaos seed %d (replay with %s=%d), %s of chaos on the %s broker", s, SeedEnv, s, *soak, brokerKind())
	fmt.Printf("CHAOS: start seed=%d soak=%s broker=%s\n", s, *soak, brokerKind())

	topic := testkit.TopicName("chaos")
	brokers := []string{testkit.Cluster(t, soakPartitions, topic)} // on the embedded broker, `turbo dev` (a plain build)
	// On a three-node cluster the nodes take part too: every third step
	// from the fourth, one goes down (kill -9 or SIGTERM) or comes back,
	// never two at once.
	var nodes *nodeChaos
	if os.Getenv(testkit.NodesEnv) == "3" {
		nodes = &nodeChaos{c: testkit.ThreeNodes(t)}
		brokers = nodes.c.Brokers // members bootstrap from every node
	}
	ledger := testkit.NewLedgerWith(testkit.LedgerOptions{Work: soakWork, FailFirst: soakFailFirst, Seed: s})
	srv := httptest.NewServer(ledger)
	t.Cleanup(srv.Close) // after the members' cleanup (registered later, run first)
	group := testkit.TopicName("chaos-group")
	ms := newMembers(t, groupSpec{brokers: brokers, group: group, topic: topic, url: srv.URL, concurrency: 8})
	for range soakMembers {
		ms.start()
	}
	prod := ledger.Produce(t, brokers, topic, testkit.ProducerOptions{Keys: soakKeys, Rate: soakRate, Seed: s})

	rng := mrand.New(mrand.NewPCG(s, 0x63686173))
	var did chaosCounts
	steps := 0
	end := time.Now().Add(*soak)
	for {
		pause := 2*time.Second + time.Duration(rng.Int64N(int64(4*time.Second)))
		if time.Until(end) < pause {
			break
		}
		// Pacing the chaos, not waiting for a condition.
		tm := time.NewTimer(pause)
		<-tm.C
		if err := prod.Err(); err != nil {
			t.Fatalf("producing: %v", err)
		}
		if nodes != nil && steps >= 3 && steps%3 == 0 { // after act's first three
			nodes.act(t, rng, &did)
		} else {
			act(t, ms, rng, &did, steps)
		}
		steps++
	}
	if nodes != nil {
		nodes.heal(t) // the drain needs every node
	}

	// Drain: stop producing, then every record produced must finish.
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := prod.Stop(ctx); err != nil {
		t.Fatalf("stopping the producer: %v", err)
	}
	chaosEnded := time.Now()
	drainErr := ms.drain(ledger, brokers, soakPartitions, soakDrain)
	drained := time.Since(chaosEnded)
	if drainErr == nil {
		for _, m := range ms.live() {
			ms.stop(m)
		}
		// A graceful stop must not move a commit back.
		checkCommittedToTheEnd(t, brokers, group, topic)
	}

	rep := ledger.Report()
	assigned, released, failures := ms.counts()
	line := fmt.Sprintf("CHAOS: records=%d kills=%d restarts=%d joins=%d leaves=%d node_kills=%d node_stops=%d partition_moves=%d (assigned=%d released=%d) tree_failures=%d "+
		"lost=%d order_violations=%d overlaps=%d ownership_overlaps=%d duplicates=%d (%.2f%%) injected_failures=%d failed_attempts=%d "+
		"seed=%d broker=%s soak=%s drain=%s total=%s",
		rep.Produced, did.kills, did.restarts, did.joins, did.leaves, did.nodeKills, did.nodeStops, assigned-soakPartitions, assigned, released, failures,
		rep.Lost, rep.OrderViolations, rep.Overlaps, rep.OwnershipOverlaps, rep.Duplicates, rep.DuplicatePct, rep.Injected, rep.FailedAttempts,
		s, brokerKind(), *soak, drained.Round(time.Millisecond), time.Since(began).Round(time.Second))
	t.Log(line)
	fmt.Println(line)
	t.Logf("partition_moves: \"partition assigned\" log lines of every member process beyond the topic's %d first assignments; successful deliveries per member: %v",
		soakPartitions, rep.ByLabel)
	if drainErr != nil {
		t.Errorf("draining: %v", drainErr)
	}
	if err := rep.Err(); err != nil {
		t.Error(err)
	}
	if rep.NotProduced != 0 {
		t.Errorf("%d records were not acknowledged by the broker", rep.NotProduced)
	}
	if did.kills == 0 || did.restarts == 0 || did.joins == 0 || (nodes != nil && did.nodeKills+did.nodeStops == 0) {
		t.Errorf("the chaos did %+v: too short a soak (%s) to show anything", did, *soak)
	}
}

// nodeChaos takes a test cluster's nodes down and up: at most one is down
// at a time, so that every partition keeps two in-sync replicas for the
// producer's writes.
type nodeChaos struct {
	c    *testkit.KafkaCluster
	down int32 // the node that is down, 0: none
}

func (n *nodeChaos) act(t *testing.T, rng *mrand.Rand, did *chaosCounts) {
	t.Helper()
	if n.down != 0 {
		n.heal(t)
		return
	}
	n.down = 1 + rng.Int32N(3)
	kill := rng.IntN(2) == 0
	n.c.Down(t, n.down, kill)
	if kill {
		did.nodeKills++
	} else {
		did.nodeStops++
	}
}

// heal brings the node that is down back.
func (n *nodeChaos) heal(t *testing.T) {
	t.Helper()
	if n.down != 0 {
		n.c.Up(t, n.down)
		n.down = 0
	}
}

// act does one random thing to the group, keeping between soakMinMembers
// and soakMaxMembers members alive. The first steps are a kill, a join and
// a restart, so that even a short soak does each.
func act(t *testing.T, ms *members, rng *mrand.Rand, did *chaosCounts, step int) {
	t.Helper()
	live := ms.live()
	pick := func() *member { return live[rng.IntN(len(live))] }
	// Kills go to any member, including one still joining (on the
	// embedded broker such kills once left the group rejoining for minutes;
	// see embedded.Broker's keepalive and the note on kfake in
	// test/README.md).
	victim := pick
	r := rng.IntN(100)
	switch step {
	case 0:
		r = 0 // kill; then the group is short of a member: a join
	case 2:
		r = 50 // restart
	}
	switch {
	case len(live) < soakMembers:
		ms.start()
		did.joins++
	case len(live) >= soakMaxMembers:
		ms.stop(pick())
		did.leaves++
	case r < 35 && len(live) > soakMinMembers:
		ms.kill(victim())
		did.kills++
	case r < 65:
		ms.stop(pick())
		ms.start()
		did.restarts++
	case r < 85:
		ms.start()
		did.joins++
	case len(live) > soakMembers:
		ms.stop(pick())
		did.leaves++
	default:
		ms.kill(victim())
		did.kills++
	}
}
